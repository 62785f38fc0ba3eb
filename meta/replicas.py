"""In-memory replicas of a loaded collection (Milvus querycoordv2's replica model).

A replica is a full copy of the collection on query nodes of its own: one delegator per
vchannel and every sealed segment on one of its nodes. Replicas of one collection never
share a node, so a lost node takes at most one copy away; the others keep serving while
the coord places the lost one again on a free node. ``QueryCoord`` (``meta/querycoord.py``)
places and repairs; this module holds what a load is made of, how nodes are shared out,
and how it is written to DuckDB (read back after a coord restart).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from elanus.api.querynode import LOADED_MEMORY
from elanus.channels.runtime.sessions import SessionInfo
from elanus.errors import ElanusError, ErrorCode
from elanus.states import LoadState as Load
from elanus.states import transition


@dataclass
class Replica:
    replica_id: int
    nodes: list[str]
    """The query nodes of this copy (no other replica of the collection uses them)."""
    channels: dict[str, str] = field(default_factory=dict)  # vchannel -> delegator node
    segments: dict[int, str] = field(default_factory=dict)  # segment -> worker node
    placed: bool = False
    """Every vchannel has its delegator: the copy may serve reads."""

    def used(self) -> set[str]:
        return {*self.channels.values(), *self.segments.values()}

    def lost(self, live: set[str]) -> list[str]:
        """Nodes holding part of this copy that are gone."""
        return sorted(n for n in self.used() if n not in live)

    def serves(self, live: set[str]) -> bool:
        return self.placed and not self.lost(live)


@dataclass
class Loaded:
    collection_id: int
    partition_ids: list[int] | None
    replica_number: int = 1
    state: Load = Load.LOADING
    replicas: list[Replica] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"the load of collection {self.collection_id}"

    def unplaced(self) -> None:
        """No copy serves any more: Loading again, until keep_loaded places one."""
        if self.state is Load.LOADED:
            transition(self, Load.LOADING)

    def placed(self) -> list[Replica]:
        return [r for r in self.replicas if r.placed]

    def nodes(self) -> set[str]:
        """Every node holding or assigned part of the load."""
        return {n for r in self.replicas for n in (*r.nodes, *r.used())}

    def same_as(self, other: Loaded) -> bool:
        return (other.partition_ids, other.replica_number) == (
            self.partition_ids,
            self.replica_number,
        )


def too_many_replicas(label: str, wanted: int, nodes: int) -> ElanusError:
    """Milvus: "resource group node not enough" (current and expected node numbers)."""
    return ElanusError(
        ErrorCode.INVALID_ARGUMENT,
        f"cannot load {wanted} replicas of collection {label}: only {nodes} query "
        f"node{'s are' if nodes != 1 else ' is'} running, and each replica needs a query node "
        f"of its own; start more query nodes or ask for at most {nodes}",
    )


def split_nodes(nodes: list[str], n: int) -> list[list[str]]:
    """``nodes`` shared out into ``n`` non-empty groups of near equal size."""
    ordered = sorted(nodes)
    return [ordered[i::n] for i in range(n)]


def share_spare(replicas: list[Replica], live: set[str]) -> dict[int, list[str]]:
    """The nodes each broken replica is placed again on: its own live ones, and the live
    nodes no replica claims, dealt out (the replicas with the fewest nodes first)."""
    claimed = {n for r in replicas for n in r.nodes if n in live}
    spare = sorted(live - claimed)
    broken = sorted(
        (r for r in replicas if not r.placed),
        key=lambda r: (sum(n in live for n in r.nodes), r.replica_id),
    )
    shares = {r.replica_id: [n for n in r.nodes if n in live] for r in broken}
    for i, node in enumerate(spare):
        if broken:
            shares[broken[i % len(broken)].replica_id].append(node)
    return shares


# -- DuckDB -----------------------------------------------------------------------------------
TABLES = ("query_loads", "query_replicas", "query_distribution", "query_channels")


def write(con: Any, lo: Loaded) -> None:
    """The load and its distribution (which node of which replica serves what)."""
    cid = lo.collection_id
    con.execute("BEGIN TRANSACTION")
    con.execute(
        "INSERT INTO query_loads (collection_id, partitions, replica_number) VALUES (?, ?, ?) "
        "ON CONFLICT (collection_id) DO UPDATE SET partitions = excluded.partitions, "
        "replica_number = excluded.replica_number",
        [cid, json.dumps(lo.partition_ids) if lo.partition_ids else None, lo.replica_number],
    )
    for table in TABLES[1:]:
        con.execute(f"DELETE FROM {table} WHERE collection_id = ?", [cid])
    if lo.replicas:
        con.executemany(
            "INSERT INTO query_replicas VALUES (?, ?, ?)",
            [[r.replica_id, cid, json.dumps(r.nodes)] for r in lo.replicas],
        )
    rows = [[s, r.replica_id, cid, n] for r in lo.replicas for s, n in r.segments.items()]
    if rows:
        con.executemany("INSERT INTO query_distribution VALUES (?, ?, ?, ?)", rows)
    rows = [[v, r.replica_id, cid, n] for r in lo.replicas for v, n in r.channels.items()]
    if rows:
        con.executemany("INSERT INTO query_channels VALUES (?, ?, ?, ?)", rows)
    con.execute("COMMIT")


def forget(con: Any, cid: int) -> None:
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE collection_id = ?", [cid])


def read(con: Any) -> list[Loaded]:
    """The recorded loads, their replicas unplaced (each keeps its id and nodes, where it
    is placed again first)."""
    groups: dict[int, list[Replica]] = {}
    for rid, cid, nodes in con.execute(
        "SELECT replica_id, collection_id, nodes FROM query_replicas ORDER BY replica_id"
    ).fetchall():
        groups.setdefault(int(cid), []).append(Replica(int(rid), json.loads(nodes)))
    loads = con.execute(
        "SELECT collection_id, partitions, replica_number FROM query_loads"
    ).fetchall()
    return [
        Loaded(
            int(cid),
            json.loads(parts) if parts else None,
            int(number or 1),
            replicas=groups.get(int(cid), [])[: int(number or 1)],
        )
        for cid, parts, number in loads
    ]


def memory_held(nodes: list[SessionInfo], cid: int, key: str = LOADED_MEMORY) -> int:
    """Bytes the query nodes ``nodes`` hold of collection ``cid``, as their sessions say
    (``LOADED_MEMORY``, or ``LOADED_MAPPED``; refreshed at each keepalive)."""
    held = (s.meta.get(key) for s in nodes)
    return sum(int(m.get(str(cid), 0)) for m in held if isinstance(m, dict))
