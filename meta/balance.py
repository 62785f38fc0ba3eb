"""Balance: a query node that joins takes sealed segments of a loaded collection.

A live node no replica of the collection claims joins the placed replica with the fewest
live nodes; segments of that replica's busiest nodes move onto it until it holds its
share. A move has no gap: the segment is loaded on the new node first, handed to its
delegator (which replays buffered deletes into it and switches in one step, and answers
once reads of the old distribution are done), and only then released where it was.
Delegators do not move (a moved delegator would replay its channel). Repairs come first:
a collection with an unplaced replica is not balanced.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from elanus.api.querynode import (
    LoadSegments,
    QueryNodeAPI,
    ReleaseSegments,
    SealedSegment,
    SegmentSpec,
    SyncDistribution,
    WorkerAPI,
)
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.interfaces import CollectionLookup, SegmentTable
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.meta.replicas import Loaded, Replica


class Placement(Protocol):
    """What balancing uses of the query coord (``QueryCoord``, which calls it)."""

    @property
    def lookup(self) -> CollectionLookup: ...
    @property
    def data(self) -> SegmentTable: ...
    def node(self, node: str) -> QueryNodeAPI: ...
    def worker(self, node: str) -> WorkerAPI: ...
    def segment_spec(self, seg: Any, info: dict[str, Any]) -> SegmentSpec: ...


log = logging.getLogger(__name__)


async def balance(qc: Placement, lo: Loaded, live: set[str]) -> bool:
    """Give the nodes no replica of ``lo`` claims to its replicas; whether any moved."""
    if not lo.replicas or not all(r.serves(live) for r in lo.replicas):
        return False
    for r in lo.replicas:
        r.nodes = [n for n in r.nodes if n in live or n in r.used()]
    claimed = {n for r in lo.replicas for n in r.nodes}
    spare = sorted(live - claimed)
    if not spare:
        return False
    info = await qc.lookup.describe_by_id(lo.collection_id)
    for node in spare:
        r = min(lo.replicas, key=lambda r: (len(r.nodes), r.replica_id))
        r.nodes = sorted([*r.nodes, node])
        log.info(
            "query node %s joins replica %d of collection %d",
            node, r.replica_id, lo.collection_id,
        )  # fmt: skip
        try:
            await _fill(qc, lo, r, node, info)
        except ElanusError as exc:
            log.warning("balance of collection %d stopped: %s", lo.collection_id, exc)
    return True


async def _fill(qc: Placement, lo: Loaded, r: Replica, target: str, info: dict[str, Any]) -> None:
    """Move segments of ``r`` from its busiest nodes to ``target`` until it holds its share."""
    share = len(r.segments) // len(r.nodes)
    while sum(n == target for n in r.segments.values()) < share:
        counts: dict[str, int] = {}
        for n in r.segments.values():
            counts[n] = counts.get(n, 0) + 1
        busiest = max((n for n in counts if n != target), key=lambda n: (counts[n], n))
        if counts[busiest] <= share:
            return
        sid = min(s for s, n in r.segments.items() if n == busiest)
        await _move(qc, lo, r, sid, target, info)


async def _move(
    qc: Placement, lo: Loaded, r: Replica, sid: int, target: str, info: dict[str, Any]
) -> None:
    seg = qc.data.segments.get(sid)
    source = r.segments[sid]
    delegator = r.channels.get(seg.vchannel) if seg is not None else None
    if seg is None or seg.state is not SegmentState.FLUSHED or delegator is None:
        raise ElanusError(ErrorCode.INTERNAL, f"segment {sid} cannot move now")
    spec = qc.segment_spec(seg, info)
    await qc.worker(target).load(
        LoadSegments(collection_id=lo.collection_id, schema=info["schema"], segments=[spec])
    )
    moved = SealedSegment(
        segment_id=sid,
        node_id=target,
        partition_id=spec.partition_id,
        path=spec.path,
        key_range=spec.key_range,
    )
    await qc.node(delegator).sync(SyncDistribution(vchannel=seg.vchannel, add=[moved]))
    r.segments[sid] = target
    await qc.worker(source).release(ReleaseSegments(segment_ids=[sid]))
