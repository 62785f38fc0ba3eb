"""The query node's API: its delegators (``querynode.<id>.<method>``, one per watched
vchannel) and its worker (``querynode.<id>.worker.<method>``).

The coord sends the distribution calls (watch, sync, worker.load, ...); the proxy and
delegators send the reads. A search's result travels as a reduce *part*
(``elanus.reduce.reduce_parts`` says its keys), so the proxy can merge it again.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from elanus.api.base import Ack, Call, Stub, record, reply
from elanus.api.datanode import ChannelStart, Checkpoint
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import request
from elanus.searchrequest import SearchRequest

NODE_TIMEOUT_S = 120.0
"""The coord's distribution calls (a watch waits for its delegator to catch up)."""
WORKER_TIMEOUT_S = 60.0
LOADED_MEMORY = "loaded_memory"
"""A query node's session meta key: bytes each collection holds on it (its segments'
structures: rows, indexes, row versions), ``{collection id (a string): bytes}``, refreshed
at each keepalive and after each load or release; mapped index files not included."""
LOADED_MAPPED = "loaded_mapped"
"""... and bytes of index files each collection maps (``mmap.enabled``), in the same form."""

# -- what the calls carry --------------------------------------------------------------------


@record
class ServedIndex:
    """A finished index of a segment, as a worker loads it (``IndexCoord.served``);
    ``mmap``: its vectors or codes stay on disk, mapped (``elanus.mmapsettings``)."""

    field: str
    dir: str
    spec: dict[str, Any]
    index_id: int | None = None
    build_id: int | None = None
    version: int | None = None
    mmap: bool = False


@record
class SegmentSpec:
    """What a worker needs to load a flushed segment, with its finished indexes;
    ``mmap_fields``: the raw columns it keeps on disk, mapped (``elanus.mmapsettings``)."""

    segment_id: int
    partition_id: int
    path: str
    vchannel: str
    indexes: list[ServedIndex] = field(default_factory=list)
    mmap_fields: list[str] = field(default_factory=list)
    key_range: list[Any] | None = None
    """An L2 segment's clustering key range (``Segment.key_range``)."""


@record
class SealedSegment:
    """A sealed segment in a delegator's distribution: which worker serves it, where its
    files are (their key statistics feed the PK oracle)."""

    segment_id: int
    node_id: str
    partition_id: int = 0
    path: str | None = None
    key_range: list[Any] | None = None
    """Its lowest and highest clustering key (an L2 segment): reads whose filter rules
    the range out skip it."""


@record
class PlannedSealed:
    segment_id: int
    partition_id: int
    path: str | None


@record
class PlannedGrowing:
    segment_id: int
    partition_id: int
    rows: int


# -- delegators ----------------------------------------------------------------------------------


@request("querynode.watch")
class DelegateChannel(ChannelStart):
    """Start the vchannel's delegator at the channel checkpoint (seed 001)."""

    sealed: list[SealedSegment] = field(default_factory=list)
    partition_ids: list[int] | None = None
    ready_ts: int = 0


@reply
class Watched:
    vchannel: str
    tsafe: int


@request("querynode.unwatch")
class UnwatchChannel:
    vchannel: str


@request("querynode.sync")
class SyncDistribution:
    """A handoff: sealed segments join, others leave; ``checkpoint`` lets the delete
    buffer trim what is on disk."""

    vchannel: str
    add: list[SealedSegment] = field(default_factory=list)
    remove: list[int] = field(default_factory=list)
    checkpoint: Checkpoint | None = None


@request("querynode.release_collection")
class ReleaseOnNode:
    collection_id: int


@request("querynode.search")
class SearchShard:
    vchannel: str
    request: SearchRequest


@reply
class ShardHits:
    """A shard's top ``k`` (a reduce part: distances, pks, outputs, ...) at ``ts``."""

    part: dict[str, Any]
    ts: int


@reply
class TermStats:
    """BM25 statistics: visible ``rows``, their total length ``tokens``, ``df`` per term;
    ``ts`` the read timestamp (a shard's; 0 from a worker, which reads at the one given)."""

    rows: int
    tokens: float
    df: np.ndarray
    ts: int = 0


@record
class RowSelection:
    """Which rows a read returns and which of their fields: what the reads of a shard, of
    sealed segments, of a flushed segment's files and of a worker carry alike."""

    filter: str | None = None
    params: dict[str, Any] | None = None
    output_fields: list[str] = field(default_factory=list)
    limit: int | None = None
    ttl: int = 0
    """The collection's TTL in ms (0: none): rows expired at the read timestamp are not
    read (``elanus.properties.expire_floor``)."""


@request("querynode.read")
class ReadShard(RowSelection):
    """A query or a count on one vchannel (``query``, ``count``, ``read.plan``)."""

    vchannel: str
    guarantee_ts: int = 0
    ts: int = 0
    partition_ids: list[int] | None = None


@reply
class Rows:
    rows: pa.Table
    ts: int


@reply
class Count:
    count: int
    ts: int


@reply
class ReadPlan:
    """The segments of a vchannel a snapshot read at ``ts`` must cover."""

    vchannel: str
    ts: int
    sealed: list[PlannedSealed]
    growing: list[PlannedGrowing]


@request("querynode.read.segments")
class ReadSegments(RowSelection):
    """One page of a snapshot read: rows of sealed segments at ``ts``."""

    vchannel: str
    segment_ids: list[int]
    ts: int
    guarantee_ts: int = 0


@request("querynode.read.files")
class ReadFiles(RowSelection):
    """One page of a files-only read (``flight/search/fileplan.py``): rows at ``ts`` of one
    flushed segment, from its files and delta logs alone; any query node reads it, loaded
    or not, so the request carries the schema."""

    segment_id: int
    path: str
    ts: int
    schema: dict[str, Any]


@request("querynode.read.deletes")
class ReadDeletes:
    vchannel: str
    segment_id: int
    ts: int
    guarantee_ts: int = 0


@reply
class Deletes:
    """Buffered deletes (a table of pk, ts) that may touch a segment, at ``ts``."""

    deletes: pa.Table
    ts: int


SearchReq = TypeVar("SearchReq")
ReadReq = TypeVar("ReadReq")
Hits = TypeVar("Hits")


class ReadStub(Stub, Generic[SearchReq, ReadReq, Hits]):
    """The reads a delegator and a worker both serve, by the same names: each fanned out
    (to every shard, to every worker of a shard), so each returns a ``Call`` for
    ``ask_many_sync``."""

    hits: type[Hits]
    """What ``search`` answers: a shard's reduce part, or a worker's, one per segment."""

    def search(self, req: SearchReq) -> Call[Hits]:
        return self._call("search", req, self.hits)

    def term_stats(self, req: SearchReq) -> Call[TermStats]:
        return self._call("term_stats", req, TermStats)

    def query(self, req: ReadReq) -> Call[Rows]:
        return self._call("query", req, Rows)

    def count(self, req: ReadReq) -> Call[Count]:
        return self._call("count", req, Count)


class QueryNodeAPI(ReadStub[SearchShard, ReadShard, ShardHits]):
    """A query node's delegators. The reads a proxy fans out to every shard return a
    ``Call`` for ``ask_many_sync``."""

    hits = ShardHits

    def __init__(self, bus: Bus, node_id: str, timeout: float = NODE_TIMEOUT_S) -> None:
        super().__init__(bus, subjects.node_prefix("querynode", node_id), timeout)

    async def watch(self, req: DelegateChannel) -> Watched:
        return await self._ask("watch", req, Watched)

    async def unwatch(self, req: UnwatchChannel) -> Ack:
        return await self._ask("unwatch", req, Ack)

    async def sync(self, req: SyncDistribution) -> Ack:
        return await self._ask("sync", req, Ack)

    async def release_collection(self, req: ReleaseOnNode) -> Ack:
        return await self._ask("release_collection", req, Ack)

    def read_plan(self, req: ReadShard) -> Call[ReadPlan]:
        return self._call("read.plan", req, ReadPlan)

    async def read_segments(self, req: ReadSegments) -> Rows:
        return await self._ask("read.segments", req, Rows)

    async def read_deletes(self, req: ReadDeletes) -> Deletes:
        return await self._ask("read.deletes", req, Deletes)

    async def read_files(self, req: ReadFiles) -> Rows:
        return await self._ask("read.files", req, Rows)


# -- the worker ----------------------------------------------------------------------------------


@request("worker.load")
class LoadSegments:
    collection_id: int
    schema: dict[str, Any]
    segments: list[SegmentSpec]


@reply
class SegmentsLoaded:
    loaded: list[int]
    rows: int


@request("worker.release")
class ReleaseSegments:
    segment_ids: list[int]


@request("worker.delete")
class DeleteInSegments:
    """Keys as Arrow; ``ts`` one timestamp for all, or a uint64 array with one per key."""

    segment_ids: list[int]
    pks: pa.Array
    ts: Any


@reply
class Deleted:
    rows: int


@request("worker.load_index")
class LoadIndex:
    segment_id: int
    index: ServedIndex


@reply
class IndexLoaded:
    loaded: bool


@request("worker.drop_index")
class DropIndexOnNode:
    """One dropped index, by id: its field may keep other (JSON path) indexes."""

    collection_id: int
    index_id: int


@request("worker.search")
class SearchSegments:
    segment_ids: list[int]
    request: SearchRequest


@reply
class WorkerHits:
    """One reduce part per segment."""

    parts: list[dict[str, Any]]


@request("worker.read")
class ReadSegmentRows(RowSelection):
    """A query or a count of sealed segments at ``ts`` (``worker.query``/``worker.count``)."""

    segment_ids: list[int]
    ts: int


class WorkerAPI(ReadStub[SearchSegments, ReadSegmentRows, WorkerHits]):
    """A query node's worker: sealed segments, loaded and read on a delegator's behalf
    (its reads, fanned out to every worker of a shard, return a ``Call``)."""

    hits = WorkerHits

    def __init__(self, bus: Bus, node_id: str, timeout: float = WORKER_TIMEOUT_S) -> None:
        super().__init__(bus, subjects.node("querynode", node_id, "worker"), timeout)

    async def load(self, req: LoadSegments) -> SegmentsLoaded:
        return await self._ask("load", req, SegmentsLoaded)

    async def release(self, req: ReleaseSegments) -> Ack:
        return await self._ask("release", req, Ack)

    async def delete(self, req: DeleteInSegments) -> Deleted:
        return await self._ask("delete", req, Deleted)

    async def load_index(self, req: LoadIndex) -> IndexLoaded:
        return await self._ask("load_index", req, IndexLoaded)

    async def drop_index(self, req: DropIndexOnNode) -> Ack:
        return await self._ask("drop_index", req, Ack)
