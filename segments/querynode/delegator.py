"""The shard delegator of query node v2 (seed 001): one per vchannel of a loaded collection.

It consumes the vchannel from the channel checkpoint (everything before is in flushed
segments) and keeps growing segments in memory. Its named parts: the ``Distribution``
(which worker holds which sealed segment, and the read pinning of a handoff), the
``PkOracle`` (which sealed segments may hold a key) and the ``DeleteBuffer``. Deletes are
applied to growing data at once and forwarded to the workers whose segments may hold the
key; every delete is also buffered, and the buffer is replayed into a segment that joins
later (handoff after a flush, a compaction target) in one request per worker, so no
segment misses one. A handoff trims the buffer (see ``deletebuffer`` for what is safe).

Inserts into a segment that is already sealed are skipped: its rows are on a worker. A
handoff replaces a growing segment by its sealed copy in one step of the event loop, so
a search sees each row exactly once.

A bulk import's segment announces itself with an IMPORT message at the job's timestamp;
the delegator does not pass it (tsafe stays below) until the segment has been handed to
it, so a read at or after the import sees all of it — and, for an upsert, never the old
rows gone without the new ones there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from elanus.api.base import Call, as_body, ask_many_sync
from elanus.api.datacoord import DataCoordAPI, SegmentInfo
from elanus.api.datanode import Checkpoint
from elanus.api.querynode import (
    Count,
    DelegateChannel,
    DeleteInSegments,
    ReadShard,
    Rows,
    SealedSegment,
    SearchSegments,
    ShardHits,
    TermStats,
    WorkerAPI,
)
from elanus.channels.consumer import ChannelConsumer, querynode_durable
from elanus.channels.dml import DmlMessage, MsgType
from elanus.channels.runtime.metrics import NO_LABELS, WAIT_TSAFE
from elanus.channels.runtime.role import RoleHost
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr
from elanus.expr.keyranges import key_intervals
from elanus.reduce import add_term_stats
from elanus.schema import TIMESTAMP_FIELD, Schema
from elanus.searchrequest import SearchRequest
from elanus.segments.querynode.deletebuffer import DeleteBuffer
from elanus.segments.querynode.distribution import Distribution
from elanus.segments.querynode.memseg import MemSegment
from elanus.segments.querynode.worker import (
    concat_or_empty,
    reduce_request,
    search_part,
    segment_read,
    term_stats,
)
from elanus.segments.storage.pkoracle import PkOracle
from elanus.states import SegmentState

log = logging.getLogger(__name__)
R = TypeVar("R")
TSAFE_WAIT_S = 30.0
WORKER_CALL_S = 60.0
IMPORT_WAIT_S = 120.0
"""How long an IMPORT message may hold the channel back before it is passed regardless."""
IMPORT_POLL_S = 0.05


class DelegatorHost(RoleHost, Protocol):
    """What a delegator uses of its query node (``QueryNode``, which holds it)."""

    def worker_api(self, node_id: str) -> WorkerAPI: ...


class Delegator:
    def __init__(self, node: DelegatorHost, spec: DelegateChannel) -> None:
        self.node = node
        self.vchannel = spec.vchannel
        self.collection_id = spec.collection_id
        self.schema = Schema.from_dict(spec.schema)
        self.pk_field = self.schema.primary.name
        partitions = spec.partition_ids
        self.partitions: set[int] | None = set(partitions) if partitions else None
        self.growing: dict[int, MemSegment] = {}
        self.pk_oracle = PkOracle()
        self.distribution = Distribution(self.pk_oracle)
        self.delete_buffer = DeleteBuffer(self.schema.primary.arrow_type())
        self._persisted_ts = 0
        """Deletes stamped at or below this are on disk (``DeleteBuffer.persisted_ts``)."""
        self._loop_thread = threading.get_ident()
        self._view_lock = threading.Lock()
        """A handoff's one step and a read's view of growing and sealed segments exclude
        each other: reads run off the loop, and a view taken mid-step would hold a
        segment twice (growing and sealed) or not at all."""
        checkpoint = spec.checkpoint
        assert node.data_bus is not None
        durable = querynode_durable(node.node_id, self.vchannel)
        self.consumer = ChannelConsumer(
            node.data_bus,
            spec.pchannel,
            self.vchannel,
            durable,
            self._on_pack,
            supervisor=node.supervisor,
            start_seq=checkpoint.seq if checkpoint else None,
            start_ts=checkpoint.ts if checkpoint else 0,
        )
        self.distribution.add(spec.sealed)
        self.ready_ts = spec.ready_ts
        """The tsafe this delegator must reach before it answers a read: its sealed segments
        hold rows up to here, and the checkpoint it starts from may be older. Every read
        waits for it, whatever its level, so flushed data is never hidden."""

    @property
    def tsafe(self) -> int:
        return self.consumer.tick_ts

    async def catch_up(self, timeout: float = TSAFE_WAIT_S) -> bool:
        """Wait (up to ``timeout``) until tsafe reaches ``ready_ts``; reads wait anyway."""
        if await self.consumer.wait_tick(self.ready_ts, timeout):
            return True
        log.warning("%s: tsafe did not reach %d in %gs", self.vchannel, self.ready_ts, timeout)
        return False

    async def start(self) -> None:
        await self.consumer.start()

    def serves(self, spec: DelegateChannel) -> bool:
        """Whether this delegator already is what ``spec`` asks for: the same collection
        and partitions, still consuming. A coord that restarted places its replicas again
        with the same requests; such a delegator is kept, not replayed from the checkpoint
        (which would make reads wait and writes be throttled while it catches up)."""
        partitions = set(spec.partition_ids) if spec.partition_ids else None
        return (
            spec.collection_id == self.collection_id
            and partitions == self.partitions
            and self.consumer.running
        )

    async def keep_sealed(self, sealed: list[SealedSegment]) -> None:
        """Bring the sealed segments to ``sealed`` (a kept delegator's, see ``serves``)."""
        wanted = {s.segment_id for s in sealed}
        add = [s for s in sealed if self.distribution.sealed.get(s.segment_id) != s]
        remove = [sid for sid in self.distribution.sealed if sid not in wanted]
        if add or remove:
            await self.sync(add, remove, None)

    async def stop(self) -> None:
        await self.consumer.stop()

    # -- the channel ------------------------------------------------------------------------
    async def _on_pack(self, pack: list[DmlMessage], ts: int, seq: int) -> None:
        for m in pack:
            if m.batch is None:
                continue
            if m.type is MsgType.INSERT:
                self._insert(m)
            elif m.type is MsgType.DELETE:
                await self._delete(m.batch.column(0), m.ts, m.partition_id)
        self.delete_buffer.note_tick(seq, ts)
        if self._persisted_ts > self.delete_buffer.floor:  # a retired segment's hold ended?
            self._trim()
        for m in pack:
            if m.type is MsgType.IMPORT:
                await self._await_import(m)

    async def _await_import(self, m: DmlMessage) -> None:
        """Hold the pack (and tsafe) until an imported segment serves here, unless it will
        not: another partition, or the coord no longer has it (dropped, compacted)."""
        sid = m.segment_id
        if self.partitions is not None and m.partition_id not in self.partitions:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + IMPORT_WAIT_S
        next_check = loop.time()
        while sid not in self.distribution.sealed:
            now = loop.time()
            if now > deadline:
                log.warning("%s: imported segment %d did not arrive; going on", self.vchannel, sid)
                return
            if now >= next_check:
                next_check = now + 1.0
                if not await self._import_expected(sid):
                    return
            await asyncio.sleep(IMPORT_POLL_S)

    async def _import_expected(self, segment_id: int) -> bool:
        try:
            which = SegmentInfo(segment_ids=[segment_id])
            reply = await DataCoordAPI(self.node.bus).segment_info(which, timeout=5)
        except ElanusError as exc:
            log.debug("segment.info for %d failed: %s", segment_id, exc)
            return True
        states = [s.state for s in reply.segments]
        return bool(states) and states[0] in (SegmentState.IMPORTING, SegmentState.FLUSHED)

    def adopt(self, schema: Schema) -> None:
        """The collection's newer schema: growing segments widen, new ones start with it."""
        self.schema = schema
        for seg in self.growing.values():
            seg.adopt(schema)

    def _insert(self, m: DmlMessage) -> None:
        if m.segment_id in self.distribution.sealed:
            return  # its rows are already on a worker
        if self.partitions is not None and m.partition_id not in self.partitions:
            return
        seg = self.growing.get(m.segment_id)
        if seg is None:
            seg = self.growing[m.segment_id] = MemSegment(m.segment_id, m.partition_id, self.schema)
        assert m.batch is not None
        ts = pa.array(np.full(m.batch.num_rows, m.ts, dtype=np.uint64))
        seg.append(pa.Table.from_batches([m.batch]).append_column(TIMESTAMP_FIELD, ts))

    async def _delete(self, pks: pa.Array, ts: int, partition_id: int = 0) -> None:
        self.delete_buffer.put(pks, ts)
        for seg in self.growing.values():
            if not partition_id or seg.partition_id == partition_id:
                seg.delete(pks, ts)
        sealed = self.distribution.sealed
        by_node: dict[str, list[int]] = {}
        for sid in self.pk_oracle.candidates(pks, list(sealed)):
            by_node.setdefault(sealed[sid].node_id, []).append(sid)
        for node, sids in by_node.items():
            await self.node.worker_api(node).delete(delete_in(sids, pks, ts))

    # -- distribution -----------------------------------------------------------------------
    async def sync(
        self, add: list[SealedSegment], remove: list[int], checkpoint: Checkpoint | None
    ) -> None:
        """Handoff: sealed segments join (their growing copies leave in the same step),
        others leave. Buffered deletes are replayed into the newcomers first; then the
        buffer is trimmed to the datanode ``checkpoint`` the coord read before it loaded
        them (none: no trim; see ``deletebuffer``)."""
        await self._replay(add)
        hold_s = self.node.settings.gc_delay_s
        with self._view_lock:
            self.distribution.add(add)
            for sid in [*(s.segment_id for s in add), *remove]:  # removed: truncated
                self.growing.pop(sid, None)
            self.distribution.remove(remove, self.delete_buffer.floor, hold_s)
        if checkpoint is not None:
            persisted = self.delete_buffer.persisted_ts(checkpoint.seq)
            self._persisted_ts = max(self._persisted_ts, persisted)
        self._trim()
        # Reads that began on the old distribution may still ask for the removed segments:
        # answer only once they are done, so the coord releases those segments after them.
        await self.distribution.advance()

    async def _replay(self, add: list[SealedSegment]) -> None:
        """Every buffered delete into the newcomers, one request per worker. Deletes that
        arrive during a request are sent after it, until none is left: the caller adds
        the newcomers without yielding, and the live path reaches them from then on."""
        by_node: dict[str, list[int]] = {}
        for s in add:
            by_node.setdefault(s.node_id, []).append(s.segment_id)
        start = 0
        while by_node:
            batch = self.delete_buffer.batch(start=start)
            if not len(batch):
                return
            for node, sids in by_node.items():
                await self.node.worker_api(node).delete(delete_in(sids, batch.pks, batch.ts))
            start = batch.end

    def _trim(self) -> None:
        hold = self.distribution.retired_hold()
        floor = self._persisted_ts if hold is None else min(self._persisted_ts, hold)
        self.delete_buffer.trim(floor)

    # -- reads ------------------------------------------------------------------------------
    async def read_ts(self, guarantee_ts: int, ts: int) -> int:
        """Wait until tsafe reaches the guarantee (and ``ready_ts``); the read timestamp:
        ``ts`` when the caller names one (time travel), else tsafe after the wait."""
        guarantee = max(guarantee_ts, self.ready_ts)
        started = time.perf_counter()
        reached = guarantee <= self.tsafe or await self.consumer.wait_tick(guarantee, TSAFE_WAIT_S)
        WAIT_TSAFE.observe(NO_LABELS, time.perf_counter() - started)
        if not reached:
            raise self._not_readable()
        return ts if ts else self.tsafe

    def read_ts_blocking(self, guarantee: int, ts: int) -> int:
        """``read_ts`` for a thread other than the loop's (a search handler)."""
        guarantee = max(guarantee, self.ready_ts)
        started = time.perf_counter()
        reached = guarantee <= self.tsafe or self.consumer.wait_tick_in_thread(
            guarantee, TSAFE_WAIT_S
        )
        WAIT_TSAFE.observe(NO_LABELS, time.perf_counter() - started)
        if not reached:
            raise self._not_readable()
        return ts if ts else self.tsafe

    def _not_readable(self) -> ElanusError:
        if self.consumer.stopped:
            return ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED,
                f"{self.vchannel} was released (collection released or dropped) "
                "while the read waited for it",
            )
        return ElanusError(
            ErrorCode.TIMEOUT,
            f"{self.vchannel} did not reach the guarantee timestamp in {TSAFE_WAIT_S}s",
        )

    def growing_in(self, partition_ids: list[int] | None) -> list[MemSegment]:
        """The growing segments of ``partition_ids`` (None or empty: all), as a list taken
        at once (segments may be added meanwhile); searches, queries and snapshot reads."""
        wanted = set(partition_ids) if partition_ids else None
        return [
            s for s in list(self.growing.values()) if wanted is None or s.partition_id in wanted
        ]

    def _view(
        self, partition_ids: list[int] | None, expr: Expr | None = None
    ) -> tuple[list[MemSegment], dict[str, list[int]]]:
        """The growing segments and each worker's sealed ones (of ``partition_ids``), taken
        together, never halfway through a handoff; a read off the loop, once pinned. With
        a clustering key, sealed segments whose key range ``expr`` rules out are left out
        (Milvus's segment pruning)."""
        key = self.schema.clustering_key
        keys = key_intervals(expr, key) if key is not None else None
        with self._view_lock:
            return self.growing_in(partition_ids), self.distribution.workers(partition_ids, keys)

    def _ask_workers(
        self, workers: dict[str, list[int]], call: Callable[[WorkerAPI, list[int]], Call[R]]
    ) -> list[R]:
        """The one fan-out of a read (search, term statistics, query, count) to the workers
        of its view: all at once, ``WORKER_CALL_S`` for the whole fan-out, every reply or
        the first failure (``ask_many_sync``). Called on a thread other than the loop's,
        inside a pinned read."""
        calls = [call(self.node.worker_api(node), sids) for node, sids in workers.items()]
        return ask_many_sync(self.node.bus, calls, WORKER_CALL_S)

    def search(self, req: SearchRequest) -> ShardHits:
        """The delegator's one search path: wait for tsafe, search the growing segments,
        ask each worker for its sealed ones, reduce to the top ``k``.

        Blocking, as every read here: it runs on the caller's thread when the caller is in
        this process (a Flight thread) and on a handler thread when it came over NATS,
        never on the loop. Safe beside the loop thread: the distribution is pinned for the
        read (a sync keeps released segments alive until it ends) and seen whole
        (``_view``), growing segments lock themselves, and a delete arriving meanwhile has
        a timestamp above this read's (tsafe only moves once a pack is applied), so it
        changes nothing this read sees.
        """
        req = req.at(ts=self.read_ts_blocking(req.guarantee_ts, req.ts))
        version = self.distribution.enter_read()
        try:
            clustered = self.schema.clustering_key is not None  # else no parse here
            expr = req.expr(self.schema) if clustered else None
            growing, workers = self._view(req.partition_ids, expr)
            parts = [search_part(seg, req) for seg in growing]
            for hits in self._ask_workers(
                workers,
                lambda w, sids: w.search(SearchSegments(segment_ids=sids, request=req)),
            ):
                parts += hits.parts
            merged = reduce_request(parts, req) if parts else _empty(req)
            return ShardHits(part=merged, ts=req.ts)
        finally:
            self.distribution.exit_read(version)

    def term_stats(self, req: SearchRequest) -> TermStats:
        """BM25 statistics of this shard at the read timestamp (the first phase of a text
        search): growing segments here, sealed ones from their workers, as ``search``
        asks them. Every loaded partition counts, whatever the search names: the corpus
        is the collection, as in Milvus."""
        req = req.at(ts=self.read_ts_blocking(req.guarantee_ts, req.ts))
        version = self.distribution.enter_read()
        try:
            growing, workers = self._view(None)
            parts = [term_stats(growing, req)]
            parts += [
                as_body(stats)
                for stats in self._ask_workers(
                    workers,
                    lambda w, sids: w.term_stats(SearchSegments(segment_ids=sids, request=req)),
                )
            ]
            terms = 0 if req.queries is None else len(req.queries)
            return TermStats(**add_term_stats(parts, terms), ts=req.ts)
        finally:
            self.distribution.exit_read(version)

    def query(self, req: ReadShard, expr: Expr | None) -> Rows:
        ts = self.read_ts_blocking(req.guarantee_ts, req.ts)
        version = self.distribution.enter_read()
        try:
            columns = list(req.output_fields)
            growing, workers = self._view(req.partition_ids, expr)
            tables = [s.query(ts, expr, columns, req.limit, req.ttl) for s in growing]
            tables += [
                r.rows
                for r in self._ask_workers(
                    workers, lambda w, sids: w.query(segment_read(req, ts, sids))
                )
            ]
            every = list(self.growing.values())  # the columns' types, when no table has rows
            return Rows(rows=concat_or_empty(tables, columns, every), ts=ts)
        finally:
            self.distribution.exit_read(version)

    def count(self, req: ReadShard, expr: Expr | None) -> Count:
        ts = self.read_ts_blocking(req.guarantee_ts, req.ts)
        version = self.distribution.enter_read()
        try:
            growing, workers = self._view(req.partition_ids, expr)
            total = sum(s.count(ts, expr, req.ttl) for s in growing)
            total += sum(
                r.count
                for r in self._ask_workers(
                    workers, lambda w, sids: w.count(segment_read(req, ts, sids))
                )
            )
            return Count(count=total, ts=ts)
        finally:
            self.distribution.exit_read(version)


def delete_in(segment_ids: list[int], pks: pa.Array, ts: np.ndarray | int) -> DeleteInSegments:
    """A ``worker.delete`` request: keys as Arrow, one timestamp per key or one for all."""
    return DeleteInSegments(segment_ids=segment_ids, pks=pks, ts=ts)


def _empty(req: SearchRequest) -> dict[str, Any]:
    nq = 0 if req.queries is None else len(req.queries)
    return {"distances": np.zeros((nq, 0), np.float32), "pks": np.zeros((nq, 0), np.int64)}
