"""The query coord's API (``meta/querycoord.py``): loading, releasing, load state, the
route of a loaded collection's vchannels to the query nodes serving them, and its replicas.

The key names are the wire format; the proxy hands ``LoadProgress`` to clients as the
result of ``load_collection`` and ``get_load_state``.
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus import states
from elanus.api.base import Ack, Stub, record, reply
from elanus.channels.bus import Bus
from elanus.channels.subjects import COORD
from elanus.ops.loads import MAX_REPLICAS
from elanus.requests import Range, request


@request("query.load")
class LoadCollection:
    collection_id: int
    partition_ids: list[int] | None = None
    """Load only these partitions (``None``: all of them)."""
    replica_number: Annotated[int, Range(1, MAX_REPLICAS)] = 1
    """In-memory copies, each on query nodes of its own (``docs/design-notes.md``)."""


@request("query.release")
class ReleaseCollection:
    collection_id: int


@request("query.state")
class LoadState:
    collection_id: int


@reply
class LoadProgress:
    """``state`` is a ``states.LoadState`` (NotLoad, Loading, Loaded); ``progress`` a
    percentage of the persisted rows. ``partition_ids`` (``None``: all) is only said of a
    collection being loaded; ``memory_bytes`` is what its query nodes hold of it in
    memory (every replica; as of their last keepalive), ``mapped_bytes`` what they map
    from disk besides (``mmap.enabled`` indexes: paged in as searches touch them)."""

    state: str
    progress: int
    persisted_rows: int
    loaded_rows: int
    partition_ids: list[int] | None = None
    memory_bytes: int = 0
    mapped_bytes: int = 0

    def to_body(self) -> dict[str, Any]:
        """The client's shape: no ``partition_ids`` for a collection that is not loaded."""
        out: dict[str, Any] = {
            "state": self.state,
            "progress": self.progress,
            "persisted_rows": self.persisted_rows,
            "loaded_rows": self.loaded_rows,
        }
        if self.state != states.LoadState.NOT_LOAD:
            out["partition_ids"] = self.partition_ids
            out["memory_bytes"] = self.memory_bytes
            out["mapped_bytes"] = self.mapped_bytes
        return out


@request("query.route")
class QueryRoute:
    collection_id: int


@reply
class Route:
    """Per serving replica, which query node's delegator serves each vchannel of a loaded
    collection (a proxy reads from one replica and fails over to the next), and the
    partitions loaded (``None``: all)."""

    replicas: list[dict[str, str]]
    partition_ids: list[int] | None


@request("query.replicas")
class GetReplicas:
    collection_id: int


@record
class ReplicaInfo:
    """One in-memory copy of a collection: its query nodes, and the node whose delegator
    leads each vchannel (``shard_leaders``; empty while the replica is being placed).
    ``serving``: every vchannel has its delegator on a live node."""

    replica_id: int
    collection_id: int
    partition_ids: list[int] | None
    node_ids: list[str]
    shard_leaders: dict[str, str]
    serving: bool


@reply
class Replicas:
    replicas: list[ReplicaInfo]


@request("query.node_unreachable")
class NodeUnreachable:
    """Query nodes a caller found gone (nobody serves their subjects): the coord probes
    them itself and, for those it finds gone too, places their replicas again now, not
    once their sessions expire; it answers when that is done."""

    node_ids: list[str]


@request("query.join_group")
class JoinGroup:
    """A query node of a node group (a standalone's serving process) that has just
    started: the coord copies onto it everything placed on the group, and answers when
    it holds it all, so the node's process serves reads only once it can answer them."""

    node_id: str
    group: str


class QueryCoordAPI(Stub):
    """The query coord's ``query.*`` calls."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, COORD, timeout)

    async def load(self, req: LoadCollection) -> LoadProgress:
        return await self._ask("query.load", req, LoadProgress)

    async def release(self, req: ReleaseCollection) -> Ack:
        return await self._ask("query.release", req, Ack)

    async def state(self, req: LoadState) -> LoadProgress:
        return await self._ask("query.state", req, LoadProgress)

    async def route(self, req: QueryRoute) -> Route:
        return await self._ask("query.route", req, Route)

    async def replicas(self, req: GetReplicas) -> Replicas:
        return await self._ask("query.replicas", req, Replicas)

    async def node_unreachable(self, req: NodeUnreachable, timeout: float | None = None) -> Ack:
        return await self._ask("query.node_unreachable", req, Ack, timeout)

    async def join_group(self, req: JoinGroup, timeout: float | None = None) -> Ack:
        return await self._ask("query.join_group", req, Ack, timeout)
