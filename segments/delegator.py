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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from elanus.channels import subjects
from elanus.channels.bus import as_table
from elanus.channels.consumer import ChannelConsumer
from elanus.channels.dml import DmlMessage, MsgType
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr
from elanus.schema import TIMESTAMP_FIELD, Schema
from elanus.segments.deletebuffer import DeleteBuffer
from elanus.segments.distribution import Distribution
from elanus.segments.memseg import MemSegment
from elanus.segments.pkoracle import PkOracle
from elanus.segments.worker import (
    SearchRequest,
    concat_or_empty,
    reduce_request,
    search_part,
)

if TYPE_CHECKING:
    from elanus.segments.querynode import QueryNode

log = logging.getLogger(__name__)
TSAFE_WAIT_S = 30.0
DIRECT_WAIT_S = 1.0
"""How long a direct search waits on its own thread for tsafe (a Strong read's forced tick
comes within milliseconds) before it leaves the read to the ordinary path."""
WorkerSearch = Callable[[list[int], SearchRequest], list[dict[str, Any]]]
DirectLayout = tuple[list[MemSegment], list[tuple[WorkerSearch, list[int]]]]
"""What a direct search reads: growing segments, and each worker's search with its segments."""
IMPORT_WAIT_S = 120.0
"""How long an IMPORT message may hold the channel back before it is passed regardless."""
IMPORT_POLL_S = 0.05


class Delegator:
    def __init__(self, node: QueryNode, spec: dict[str, Any]) -> None:
        self.node = node
        self.vchannel: str = spec["vchannel"]
        self.collection_id: int = int(spec["collection_id"])
        self.schema = Schema.from_dict(spec["schema"])
        self.pk_field = self.schema.primary.name
        partitions = spec.get("partition_ids")
        self.partitions: set[int] | None = set(partitions) if partitions else None
        self.growing: dict[int, MemSegment] = {}
        self.pk_oracle = PkOracle()
        self.distribution = Distribution(self.pk_oracle)
        self.delete_buffer = DeleteBuffer(self.schema.primary.arrow_type())
        self._persisted_ts = 0
        """Deletes stamped at or below this are on disk (``DeleteBuffer.persisted_ts``)."""
        self.layout = 0
        """Bumped after every change of ``growing`` or the sealed segments (direct reads
        cache by it)."""
        self._direct_layout: tuple[Any, DirectLayout] | None = None
        self._loop_thread = threading.get_ident()
        checkpoint = spec.get("checkpoint")
        assert node.data_bus is not None
        durable = f"qn_{node.node_id}_{self.vchannel}"
        self.consumer = ChannelConsumer(
            node.data_bus,
            spec["pchannel"],
            self.vchannel,
            durable,
            self._on_pack,
            supervisor=node.supervisor,
            start_seq=checkpoint["seq"] if checkpoint else None,
            start_ts=checkpoint["ts"] if checkpoint else 0,
        )
        self.distribution.add(spec.get("sealed", []))
        self.layout += 1
        self.ready_ts = int(spec.get("ready_ts") or 0)
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
            reply = await self.node.bus.request(
                subjects.coord("segment.info"), {"segment_ids": [segment_id]}, timeout=5
            )
        except ElanusError as exc:
            log.debug("segment.info for %d failed: %s", segment_id, exc)
            return True
        states = [s["state"] for s in reply["segments"]]
        return bool(states) and states[0] in ("Importing", "Flushed")

    def _insert(self, m: DmlMessage) -> None:
        if m.segment_id in self.distribution.sealed:
            return  # its rows are already on a worker
        if self.partitions is not None and m.partition_id not in self.partitions:
            return
        seg = self.growing.get(m.segment_id)
        if seg is None:
            seg = self.growing[m.segment_id] = MemSegment(m.segment_id, m.partition_id, self.schema)
            self.layout += 1
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
            await self.node.call(node, "worker.delete", delete_body(sids, pks, ts))

    # -- distribution -----------------------------------------------------------------------
    async def sync(
        self, add: list[dict[str, Any]], remove: list[int], checkpoint: dict[str, Any] | None
    ) -> None:
        """Handoff: sealed segments join (their growing copies leave in the same step),
        others leave. Buffered deletes are replayed into the newcomers first; then the
        buffer is trimmed to the datanode ``checkpoint`` the coord read before it loaded
        them (none: no trim; see ``deletebuffer``)."""
        await self._replay(add)
        self.distribution.add(add)
        for s in add:
            self.growing.pop(int(s["segment_id"]), None)
        hold_s = self.node.settings.gc_delay_s
        self.distribution.remove(remove, self.delete_buffer.floor, hold_s)
        self.layout += 1
        if checkpoint is not None:
            persisted = self.delete_buffer.persisted_ts(int(checkpoint["seq"]))
            self._persisted_ts = max(self._persisted_ts, persisted)
        self._trim()
        # Reads that began on the old distribution may still ask for the removed segments:
        # answer only once they are done, so the coord releases those segments after them.
        await self.distribution.advance()

    async def _replay(self, add: list[dict[str, Any]]) -> None:
        """Every buffered delete into the newcomers, one request per worker. Deletes that
        arrive during a request are sent after it, until none is left: the caller adds
        the newcomers without yielding, and the live path reaches them from then on."""
        by_node: dict[str, list[int]] = {}
        for s in add:
            by_node.setdefault(s["node_id"], []).append(int(s["segment_id"]))
        start = 0
        while by_node:
            batch = self.delete_buffer.batch(start=start)
            if not len(batch):
                return
            for node, sids in by_node.items():
                await self.node.call(node, "worker.delete", delete_body(sids, batch.pks, batch.ts))
            start = batch.end

    def _trim(self) -> None:
        hold = self.distribution.retired_hold()
        floor = self._persisted_ts if hold is None else min(self._persisted_ts, hold)
        self.delete_buffer.trim(floor)

    # -- reads ------------------------------------------------------------------------------
    async def read_ts(self, body: dict[str, Any]) -> int:
        """Wait until tsafe reaches the guarantee (and ``ready_ts``); the read timestamp:
        ``ts`` when the caller names one (time travel), else tsafe after the wait."""
        guarantee = max(int(body.get("guarantee_ts") or 0), self.ready_ts)
        if guarantee > self.tsafe and not await self.consumer.wait_tick(guarantee, TSAFE_WAIT_S):
            if self.consumer.stopped:
                raise ElanusError(
                    ErrorCode.COLLECTION_NOT_LOADED,
                    f"{self.vchannel} was released (collection released or dropped) "
                    "while the read waited for it",
                )
            raise ElanusError(
                ErrorCode.TIMEOUT,
                f"{self.vchannel} did not reach the guarantee timestamp in {TSAFE_WAIT_S}s",
            )
        ts = int(body.get("ts") or 0)
        return ts if ts else self.tsafe

    def _growing(self, partition_ids: list[int] | None) -> list[MemSegment]:
        wanted = set(partition_ids) if partition_ids else None
        return [
            s for s in list(self.growing.values()) if wanted is None or s.partition_id in wanted
        ]

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        ts = await self.read_ts(body)
        async with self.distribution.reading():
            return await self._search(body, ts)

    async def _search(self, body: dict[str, Any], ts: int) -> dict[str, Any]:
        body = {**body, "ts": ts}
        req = SearchRequest(body, self.schema)
        growing = self._growing(body.get("partition_ids"))
        parts = await asyncio.to_thread(lambda: [search_part(seg, req) for seg in growing])
        for node, sids in self.distribution.workers(body.get("partition_ids")).items():
            reply = await self.node.call(node, "worker.search", {**body, "segment_ids": sids})
            parts += [_part_from_wire(p) for p in reply["parts"]]
        merged = reduce_request(parts, req) if parts else _empty(req)
        return {**merged, "ts": ts}

    def search_direct(
        self,
        template: SearchRequest,
        queries: Any,
        guarantee: int,
        ts: int,
        worker_search: Callable[[str], WorkerSearch | None],
    ) -> dict[str, Any] | None:
        """The search of ``template`` for ``queries`` on the caller's thread, with no
        event-loop hop: for a proxy in this process. It waits here for tsafe to reach the
        guarantee, for up to DIRECT_WAIT_S. ``None`` when it must take the ordinary path
        instead: tsafe is still behind (the ordinary path waits longer), or a worker is
        elsewhere.

        Safe beside the loop thread: the distribution is read in one step (``version``
        keeps released segments alive until this read ends), growing segments lock
        themselves, and a delete arriving meanwhile has a timestamp above this read's
        (tsafe only moves once a pack is applied), so it changes nothing this read sees.
        """
        guarantee = max(guarantee, self.ready_ts)
        if guarantee > self.tsafe and (
            threading.get_ident() == self._loop_thread
            or not self.consumer.wait_tick_in_thread(guarantee, DIRECT_WAIT_S)
        ):
            return None
        req = template.at(queries, ts or self.tsafe)
        version = self.distribution.enter_read()
        try:
            layout = self._layout_for(req.partition_ids, worker_search)
            if layout is None:
                return None
            growing, searches = layout
            parts = [search_part(seg, req) for seg in growing]
            for search, sids in searches:
                parts += search(sids, req)
            merged = reduce_request(parts, req) if parts else _empty(req)
            return {**merged, "ts": req.ts}
        finally:
            self.distribution.exit_read(version)

    def _layout_for(
        self,
        partition_ids: list[int] | None,
        worker_search: Callable[[str], WorkerSearch | None],
    ) -> DirectLayout | None:
        """Growing segments and worker calls of a direct read, kept until ``layout`` moves.

        ``layout`` is read before the dicts, so an entry is never newer-keyed than what it
        holds: a change that lands meanwhile makes the next read look again."""
        key = (self.layout, None if partition_ids is None else tuple(partition_ids))
        cached = self._direct_layout
        if cached is not None and cached[0] == key:
            return cached[1]
        searches = []
        for node, sids in self.distribution.workers(partition_ids).items():
            search = worker_search(node)
            if search is None:
                return None
            searches.append((search, sids))
        layout = (self._growing(partition_ids), searches)
        self._direct_layout = (key, layout)
        return layout

    async def query(self, body: dict[str, Any], expr: Expr | None) -> dict[str, Any]:
        ts = await self.read_ts(body)
        async with self.distribution.reading():
            return await self._query(body, expr, ts)

    async def _query(self, body: dict[str, Any], expr: Expr | None, ts: int) -> dict[str, Any]:
        columns = list(body["output_fields"])
        limit = body.get("limit")
        tables = [
            s.query(ts, expr, columns, limit) for s in self._growing(body.get("partition_ids"))
        ]
        for node, sids in self.distribution.workers(body.get("partition_ids")).items():
            reply = await self.node.call(
                node, "worker.query", {**body, "ts": ts, "segment_ids": sids}
            )
            tables.append(as_table(reply["rows"]))
        return {"rows": concat_or_empty(tables, columns, list(self.growing.values())), "ts": ts}

    async def count(self, body: dict[str, Any], expr: Expr | None) -> dict[str, Any]:
        ts = await self.read_ts(body)
        async with self.distribution.reading():
            return await self._count(body, expr, ts)

    async def _count(self, body: dict[str, Any], expr: Expr | None, ts: int) -> dict[str, Any]:
        total = sum(s.count(ts, expr) for s in self._growing(body.get("partition_ids")))
        for node, sids in self.distribution.workers(body.get("partition_ids")).items():
            reply = await self.node.call(
                node, "worker.count", {**body, "ts": ts, "segment_ids": sids}
            )
            total += int(reply["count"])
        return {"count": total, "ts": ts}


def delete_body(segment_ids: list[int], pks: pa.Array, ts: np.ndarray | int) -> dict[str, Any]:
    """A ``worker.delete`` request: keys as Arrow, one timestamp per key or one for all."""
    return {"segment_ids": segment_ids, "pks": pks, "ts": ts}


def _part_from_wire(p: dict[str, Any]) -> dict[str, Any]:
    if p.get("outputs") is not None:
        p = {**p, "outputs": as_table(p["outputs"])}
    return p


def _empty(req: SearchRequest) -> dict[str, Any]:
    nq = len(req.queries)
    return {"distances": np.zeros((nq, 0), np.float32), "pks": np.zeros((nq, 0), np.int64)}
