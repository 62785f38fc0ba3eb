"""The querynode role: delegators (one per watched vchannel) and a worker, as in query
node v2 (seed 001). Both halves answer over the bus, whose transport calls them directly
when the caller is in this process; searches are blocking handlers, so an in-process
search runs on its caller's thread with no event-loop hop."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import numpy as np

from elanus import freemem
from elanus.api.base import ACK, Ack
from elanus.api.indexcoord import IndexCoordAPI, IndexLoadFailed
from elanus.api.querycoord import JoinGroup, QueryCoordAPI
from elanus.api.querynode import (
    LOADED_MAPPED,
    LOADED_MEMORY,
    Count,
    DelegateChannel,
    Deleted,
    DeleteInSegments,
    Deletes,
    DropIndexOnNode,
    IndexLoaded,
    LoadIndex,
    LoadSegments,
    ReadDeletes,
    ReadFiles,
    ReadPlan,
    ReadSegmentRows,
    ReadSegments,
    ReadShard,
    ReleaseOnNode,
    ReleaseSegments,
    Rows,
    SearchSegments,
    SearchShard,
    SegmentsLoaded,
    ServedIndex,
    ShardHits,
    SyncDistribution,
    TermStats,
    UnwatchChannel,
    Watched,
    WorkerAPI,
    WorkerHits,
)
from elanus.api.rootcoord import SchemaTaken, UpdateSchema
from elanus.channels import subjects
from elanus.channels.bus import Bus, blocking
from elanus.channels.runtime import metrics
from elanus.channels.runtime.metrics import (
    SEARCH_LATENCY,
    SEARCH_SCOPE_SEGMENTS,
    SEARCH_SCOPE_SHARD,
)
from elanus.channels.runtime.role import Role, RoleHandler
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr, parse_cached
from elanus.index.kernels import stop_faiss_interrupt_checks
from elanus.schema import Schema
from elanus.segments.querynode import snapshot_read
from elanus.segments.querynode.delegator import Delegator
from elanus.segments.querynode.worker import Worker
from elanus.segments.storage import snapshot_files
from elanus.settings import Settings

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 60.0
JOIN_TIMEOUT_S = 600.0
"""How long a group member waits for the coord to copy the group's loads onto it."""
MEMORY_FIGURES_S = 1.0
"""How stale the published memory figures may be (counting walks every segment)."""


class QueryNode(Role):
    role_name = "querynode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        group = settings.node_group
        if group and node_id is None:  # which serving process, and which start of it
            node_id = f"{group}-{settings.serving_index}-{uuid.uuid4().hex[:6]}"
        super().__init__(settings, bus, node_id)
        self.group = group
        """The node group this node is a member of (empty: none): the coord places on the
        group as on one node and copies it onto every member (``meta/nodegroups.py``)."""
        self.worker = Worker(
            self._index_failed,
            settings.data_path / "mmap",
            settings.query_memory_limit_bytes,
            self.node_id,
            always_mapped=bool(group),
        )
        self.delegators: dict[str, Delegator] = {}
        self.stopping = False
        """``stop`` began: a call for a delegator it no longer has is UNAVAILABLE, not
        COLLECTION_NOT_LOADED (the coord then knows the node is leaving, not misplaced)."""
        self.schemas: dict[int, Schema] = {}
        self._workers: dict[str, WorkerAPI] = {}
        self._memory: tuple[float, dict[int, int]] | None = None
        """When the figures were counted, and what they were (``memory_by_collection``)."""

    @property
    def address(self) -> str:
        return f"{subjects.PREFIX}.querynode.{self.node_id}"

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "watch": self.watch,
            "unwatch": self.unwatch,
            "sync": self.sync,
            "release_collection": self.release_collection,
            "schema": self.update_schema,
            "search": self.search,
            "term_stats": self.term_stats,
            "query": self.query,
            "count": self.count,
            "read.plan": self.read_plan,
            "read.segments": self.read_segments,
            "read.deletes": self.read_deletes,
            "read.files": self.read_files,
            "worker.load": self.worker_load,
            "worker.release": self.worker_release,
            "worker.delete": self.worker_delete,
            "worker.load_index": self.worker_load_index,
            "worker.drop_index": self.worker_drop_index,
            "worker.search": self.worker_search,
            "worker.term_stats": self.worker_term_stats,
            "worker.query": self.worker_query,
            "worker.count": self.worker_count,
        }

    def session_meta(self) -> dict[str, object]:
        return {"group": self.group} if self.group else {}

    async def start(self) -> None:
        stop_faiss_interrupt_checks()  # searches run on Flight threads beside the loop
        await self.open_data_bus()
        await self.serve()
        if self.group:  # callers of this process asking the group reach this member
            await self.serve(subjects.node_prefix("querynode", self.group), here_only=True)
        await self.register()
        metrics.report(self)
        if self.group:
            await self._join_group()

    async def _join_group(self) -> None:
        """Take the group's share of every load from the coord before the process's proxy
        serves: a read that reaches this process is answered here."""
        req = JoinGroup(node_id=self.node_id, group=self.group)
        await QueryCoordAPI(self.bus).join_group(req, JOIN_TIMEOUT_S)

    async def stop(self) -> None:
        self.stopping = True
        metrics.unreport(self)
        for d in list(self.delegators.values()):
            await d.stop()
        self.delegators.clear()
        await super().stop()

    def memory_by_collection(self) -> dict[int, int]:
        """Bytes held per collection: sealed segments on the worker, growing ones in the
        delegators. Counted at most every ``MEMORY_FIGURES_S`` (flow reports read them at
        each tick), and again after a load or a release."""
        now = time.monotonic()
        if self._memory is None or now - self._memory[0] >= MEMORY_FIGURES_S:
            self._memory = (now, self._count_memory())
        return self._memory[1]

    def _count_memory(self) -> dict[int, int]:
        out = self.worker.memory_by_collection()
        for d in list(self.delegators.values()):
            growing = sum(s.memory_bytes() for s in list(d.growing.values()))
            out[d.collection_id] = out.get(d.collection_id, 0) + growing
        return out

    def live_meta(self) -> dict[str, object]:
        memory = {str(c): n for c, n in self.memory_by_collection().items()}
        mapped = {str(c): n for c, n in self.worker.memory_by_collection(mapped=True).items()}
        return {**super().live_meta(), LOADED_MEMORY: memory, LOADED_MAPPED: mapped}

    def metric_samples(self) -> list[metrics.Sample]:
        mapped = self.worker.memory_by_collection(mapped=True)
        return [
            *(
                (metrics.LOADED_MEMORY, (self.node_id, str(c)), float(n))
                for c, n in self.memory_by_collection().items()
            ),
            *((metrics.LOADED_MAPPED, (self.node_id, str(c)), float(n)) for c, n in mapped.items()),
        ]

    def _memory_changed(self) -> None:
        """Publish the memory figures now (a load or release), not at the next keepalive."""
        self._memory = None
        self.supervisor.spawn("session update", self.meta_changed)

    def worker_api(self, node_id: str) -> WorkerAPI:
        """The worker of a query node (this one or another), by node id."""
        api = self._workers.get(node_id)
        if api is None:
            api = self._workers[node_id] = WorkerAPI(self.bus, node_id)
        return api

    # -- delegators -------------------------------------------------------------------------
    async def watch(self, req: DelegateChannel) -> Watched:
        self.schemas[req.collection_id] = Schema.from_dict(req.schema)
        kept = self.delegators.get(req.vchannel)
        if kept is not None and kept.serves(req):  # a restarted coord placing it again
            await kept.keep_sealed(req.sealed)
            return Watched(vchannel=req.vchannel, tsafe=kept.tsafe)
        old = self.delegators.pop(req.vchannel, None)
        if old is not None:
            await old.stop()
        delegator = Delegator(self, req)
        await delegator.start()
        self.delegators[req.vchannel] = delegator
        await delegator.catch_up()  # a load answers once its data is readable at any level
        return Watched(vchannel=req.vchannel, tsafe=delegator.tsafe)

    async def unwatch(self, req: UnwatchChannel) -> Ack:
        d = self.delegators.pop(req.vchannel, None)
        if d is not None:
            await d.stop()
        return ACK

    async def update_schema(self, req: UpdateSchema) -> SchemaTaken:
        """A field was added to a collection: what this node holds of it takes the new
        schema before any proxy lets clients use the field (a stale copy is ignored)."""
        schema = Schema.from_dict(req.schema)
        held = self.schemas.get(req.collection_id)
        if held is None or held.version >= schema.version:
            return SchemaTaken(version=held.version if held else None)
        self.schemas[req.collection_id] = schema
        for d in self.delegators.values():
            if d.collection_id == req.collection_id:
                d.adopt(schema)
        await asyncio.to_thread(self.worker.adopt, req.collection_id, schema)
        return SchemaTaken(version=schema.version)

    def _delegator(self, vchannel: str) -> Delegator:
        d = self.delegators.get(vchannel)
        if d is None:
            if self.stopping:  # its delegators went first; it still answers until it unsubscribes
                raise ElanusError(ErrorCode.UNAVAILABLE, "this query node is stopping")
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED, f"this query node does not serve {vchannel}"
            )
        return d

    async def sync(self, req: SyncDistribution) -> Ack:
        await self._delegator(req.vchannel).sync(req.add, req.remove, req.checkpoint)
        return ACK

    async def release_collection(self, req: ReleaseOnNode) -> Ack:
        for v, d in list(self.delegators.items()):
            if d.collection_id == req.collection_id:
                await d.stop()
                del self.delegators[v]
        self.worker.release_collection(req.collection_id)
        await asyncio.to_thread(freemem.release)
        self._memory_changed()
        return ACK

    def _expr(self, collection_id: int, text: str | None, params: Any) -> Expr | None:
        return parse_cached(text, self.schemas[collection_id], params) if text else None

    @blocking
    def search(self, req: SearchShard) -> ShardHits:
        started = time.perf_counter()
        hits = self._delegator(req.vchannel).search(req.request)
        SEARCH_LATENCY.observe(SEARCH_SCOPE_SHARD, time.perf_counter() - started)
        return hits

    @blocking
    def term_stats(self, req: SearchShard) -> TermStats:
        """BM25 statistics of a shard (``request.queries`` holds the term ids)."""
        return self._delegator(req.vchannel).term_stats(req.request)

    @blocking
    def query(self, req: ReadShard) -> Rows:
        d = self._delegator(req.vchannel)
        return d.query(req, self._expr(d.collection_id, req.filter, req.params))

    @blocking
    def count(self, req: ReadShard) -> Count:
        d = self._delegator(req.vchannel)
        return d.count(req, self._expr(d.collection_id, req.filter, req.params))

    async def read_plan(self, req: ReadShard) -> ReadPlan:
        return await snapshot_read.plan(self._delegator(req.vchannel), req)

    async def read_segments(self, req: ReadSegments) -> Rows:
        d = self._delegator(req.vchannel)
        expr = self._expr(d.collection_id, req.filter, req.params)
        return await snapshot_read.read_segments(d, req, expr)

    async def read_deletes(self, req: ReadDeletes) -> Deletes:
        return await snapshot_read.deletes(self._delegator(req.vchannel), req)

    @blocking
    def read_files(self, req: ReadFiles) -> Rows:
        read = snapshot_files.SegmentRead(
            segment_id=req.segment_id,
            path=req.path,
            ts=req.ts,
            columns=list(req.output_fields),
            filter=req.filter,
            filter_params=req.params or {},
            ttl=req.ttl,
        )
        page = snapshot_files.read_page(read, Schema.from_dict(req.schema), req.limit)
        return Rows(rows=page, ts=req.ts)

    # -- worker -----------------------------------------------------------------------------
    async def worker_load(self, req: LoadSegments) -> SegmentsLoaded:
        schema = Schema.from_dict(req.schema)
        held = self.schemas.get(req.collection_id)
        if held is not None and held.version >= schema.version:
            schema = held  # one schema object per collection; the newer one
        self.schemas[req.collection_id] = schema
        loaded = await self.worker.load(req.collection_id, schema, req.segments)
        self._memory_changed()
        return SegmentsLoaded(loaded=loaded, rows=self.worker.rows(loaded))

    async def worker_release(self, req: ReleaseSegments) -> Ack:
        self.worker.release(req.segment_ids)
        await asyncio.to_thread(freemem.release)
        self._memory_changed()
        return ACK

    async def worker_delete(self, req: DeleteInSegments) -> Deleted:
        ts = req.ts if isinstance(req.ts, np.ndarray) else int(req.ts)
        return Deleted(rows=self.worker.delete(req.segment_ids, req.pks, ts))

    async def worker_load_index(self, req: LoadIndex) -> IndexLoaded:
        loaded = await self.worker.load_index(req.segment_id, req.index)
        self._memory_changed()  # the index is in, the column it holds is out
        return IndexLoaded(loaded=loaded)

    def _index_failed(self, segment_id: int, index: ServedIndex) -> None:
        """Tell the coord (in the background: the load answers meanwhile) that a finished
        index did not load here; it checks the files and has them built again."""
        if index.build_id is None or index.version is None:
            return
        failed = IndexLoadFailed(
            build_id=index.build_id,
            version=index.version,
            segment_id=segment_id,
            node_id=self.node_id,
        )
        self.supervisor.spawn(
            f"report index {failed.build_id} not loaded",
            lambda: IndexCoordAPI(self.bus).load_failed(failed, CALL_TIMEOUT_S),
        )

    async def worker_drop_index(self, req: DropIndexOnNode) -> Ack:
        self.worker.drop_index(req.collection_id, req.index_id)
        return ACK

    def _collection_of(self, segment_ids: list[int]) -> int:
        for s in segment_ids:
            if s in self.worker.collection_of:
                return self.worker.collection_of[s]
        raise ElanusError(ErrorCode.SEGMENT_NOT_FOUND, f"segments {segment_ids} are not loaded")

    @blocking
    def worker_search(self, req: SearchSegments) -> WorkerHits:
        started = time.perf_counter()
        parts = self.worker.search(req.segment_ids, req.request)
        SEARCH_LATENCY.observe(SEARCH_SCOPE_SEGMENTS, time.perf_counter() - started)
        return WorkerHits(parts=parts)

    @blocking
    def worker_term_stats(self, req: SearchSegments) -> TermStats:
        return TermStats(**self.worker.term_stats(req.segment_ids, req.request))

    @blocking
    def worker_query(self, req: ReadSegmentRows) -> Rows:
        ids = req.segment_ids
        expr = self._expr(self._collection_of(ids), req.filter, req.params)
        rows = self.worker.query(ids, req.ts, expr, req.output_fields, req.limit, req.ttl)
        return Rows(rows=rows, ts=req.ts)

    @blocking
    def worker_count(self, req: ReadSegmentRows) -> Count:
        ids = req.segment_ids
        expr = self._expr(self._collection_of(ids), req.filter, req.params)
        return Count(count=self.worker.count(ids, req.ts, expr, req.ttl), ts=req.ts)
