"""Inserts, upserts and deletes in the proxy (seed 000 §6.2, §6.6.1, §6.6.3).

The heavy, per-row work — schema checks, auto ids, hashing keys to vchannels, cutting
messages below the NATS server's limit and encoding them as Arrow IPC
(``channels/publisher.py``) — runs on the Flight thread that
received the request. Only the short, ordered part runs on the event loop: register the
task with the time ticker, take a TSO timestamp, place each message in a segment quota,
publish, and wait until JetStream acknowledged every message. Tasks run in parallel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from elanus.api.base import ACK, Ack
from elanus.api.datacoord import Flush, Flushing, TickReport
from elanus.api.proxy import ReleaseQuotas, ReportNow
from elanus.api.rootcoord import IdAlloc
from elanus.channels import subjects
from elanus.channels.dml import DmlMessage, MsgType, pchannel_of
from elanus.channels.handoff import Handoff, handoff_for
from elanus.channels.publisher import DmlPublisher, Piece
from elanus.channels.runtime.role import RoleHandler
from elanus.channels.syncpublish import Wire
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.metacache import CollectionInfo
from elanus.flight.partial import merge_partial
from elanus.flight.ports import LoopBridge
from elanus.flight.segalloc import SegmentAllocator
from elanus.flight.threadwrite import Outgoing, ThreadWrite
from elanus.flight.timeticker import DmlTracker, TimeTicker
from elanus.partitionkey import key_partition_ids, partition_name_refused, split_by_partition
from elanus.schema import DEFAULT_PARTITION
from elanus.validation import check_unique_across, conform_delete_keys, conform_insert

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.api.datacoord import DataCoordAPI, TimeTickAPI
    from elanus.channels.bus import Bus
    from elanus.flight.ddl import DdlService
    from elanus.flight.flowcontrol import FlowControl
    from elanus.flight.metacache import MetaCache
    from elanus.flight.search import QueryService
    from elanus.settings import Settings

ID_BLOCK = 100_000


class WriteHost(LoopBridge, Protocol):
    """What the write path uses of the proxy that holds it (``ProxyServer``): its loop and
    these; named here, so this module does not import the proxy, which imports it."""

    @property
    def node_id(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def cache(self) -> MetaCache: ...
    @property
    def coord(self) -> CoordAPI: ...
    @property
    def ddl(self) -> DdlService: ...
    @property
    def datacoord(self) -> DataCoordAPI: ...
    @property
    def timeticks(self) -> TimeTickAPI: ...
    @property
    def flow(self) -> FlowControl: ...
    @property
    def query(self) -> QueryService: ...
    @property
    def data_bus(self) -> Bus | None: ...

    async def open_data_bus(self) -> Bus:
        """The proxy's own connection for DML."""
        ...

    async def serve(self, prefix: str, handlers: Mapping[str, RoleHandler]) -> None:
        """Answer requests on ``<prefix>.<method>`` (``Role.serve``, of which the write
        path uses the prefix and the handlers)."""
        ...


@dataclass
class Prepared:
    """A checked, routed and encoded batch, ready to publish: each piece with the id of
    the partition it goes to (0: a delete that reaches every partition)."""

    pks: pa.Array
    pieces: list[tuple[int, Piece]]
    nbytes: int


@dataclass
class DmlResult:
    pks: pa.Array
    ts: int

    @property
    def count(self) -> int:
        return len(self.pks)


class IdCache:
    """Auto-id primary keys from blocks of the coord's ID allocator."""

    def __init__(self, coord: CoordAPI) -> None:
        self.coord = coord
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def take(self, n: int) -> int:
        async with self._lock:
            if self._end - self._next < n:
                count = max(n, ID_BLOCK)
                block = await self.coord.root.alloc_ids(IdAlloc(count=count))
                self._next, self._end = block.start, block.start + count
            start = self._next
            self._next += n
            return start


class DmlService:
    def __init__(self, host: WriteHost) -> None:
        self.host = host
        self.tracker = DmlTracker()
        self.ticker = TimeTicker(
            self.tracker,
            host.ddl.alloc_ts,
            self._send_report,
            host.settings.timetick_interval_ms / 1000,
            lease_s=host.settings.session_ttl_s * 0.8,
        )
        self.segments = SegmentAllocator(lambda req: host.datacoord.assign(req), host.node_id)
        self.ids = IdCache(host.coord)
        self._publisher: DmlPublisher | None = None
        self.handoff: Handoff | None = None
        """Consumers in this process take the payloads from here (``channels/handoff.py``)."""

    @property
    def subject_prefix(self) -> str:
        return subjects.node_prefix("proxy", self.host.node_id)

    def handlers(self) -> dict[str, RoleHandler]:
        return {"segments.release": self._release, "timetick.report": self._report_now}

    async def start(self) -> None:
        """Publishes on the proxy's data connection; the proxy role closes it on stop."""
        await self.host.open_data_bus()
        assert self.host.data_bus is not None
        self._publisher = DmlPublisher(
            self.host.data_bus.nc,
            self.host.data_bus.js,
            retry_window_s=self.host.settings.log_retry_window_s,
        )
        await self.host.serve(self.subject_prefix, self.handlers())
        await self.ticker.start()
        if self.host.data_bus.in_process:
            self.handoff = handoff_for(self.host.data_bus.url)
            self.handoff.publishers += 1

    async def stop(self) -> None:
        if self.handoff is not None:
            self.handoff.publishers -= 1
            self.handoff = None
        await self.ticker.stop()

    @property
    def publisher(self) -> DmlPublisher:
        assert self._publisher is not None, "the DML service is not started"
        return self._publisher

    async def _send_report(self, default_ts: int, pchannels: dict[str, int]) -> None:
        report = TickReport(proxy_id=self.host.node_id, default_ts=default_ts, pchannels=pchannels)
        await self.host.timeticks.report(report)

    async def _release(self, req: ReleaseQuotas) -> Ack:
        await self.segments.release(list(req.segment_ids))
        return ACK

    async def _report_now(self, req: ReportNow) -> Ack:
        await self.ticker.report_now()
        return ACK

    # -- DdRequests (on the loop) -----------------------------------------------------------
    async def flush(self, info: CollectionInfo) -> Flushing:
        """Flush is a DdRequest (seed 004): queued in timestamp order with the DDL."""

        async def task(ts: int) -> Flushing:
            return await self.host.datacoord.flush(Flush(collection_id=info.collection_id))

        done: Flushing = await self.host.ddl.queue.submit("flush", task)
        if done.segment_ids:
            # A tick past the seal now: the datanodes start writing at once, not at the
            # next tick (up to ``timetick_interval_ms`` later).
            await self.host.timeticks.now()
        return done

    # -- Flight-thread entry points ---------------------------------------------------------
    def collection(self, db: str, name: str) -> CollectionInfo:
        cached = self.host.cache.get(db, name)  # no hop to the loop when it is cached
        if cached is not None:
            return cached
        return self.host.run(self.host.ddl.collection(db, name))

    def partition_id(
        self, info: CollectionInfo, partition: str | None, doing: str = "a request"
    ) -> int:
        """The id of a named partition (``_default`` if None); refused, naming ``doing``,
        in a partition key collection, where the key decides the partition."""
        key = info.schema.partition_key
        if key is not None:
            raise partition_name_refused(info.name, key, doing)
        name = partition or DEFAULT_PARTITION
        pid = info.partition_id(name)
        if pid is None:
            raise ElanusError(
                ErrorCode.PARTITION_NOT_FOUND,
                f"partition {name!r} does not exist in collection {info.name!r}",
            )
        return pid

    def insert(
        self,
        info: CollectionInfo,
        partition: str | None,
        data: pa.Table | pa.RecordBatch,
        *,
        upsert: bool = False,
        partial: Mapping[str, str] | None = None,
    ) -> DmlResult:
        """Check and publish one batch; returns once JetStream acknowledged all of it."""
        return self.commit(
            info, self.prepare(info, partition, data, upsert=upsert, partial=partial)
        )

    def prepare(
        self,
        info: CollectionInfo,
        partition: str | None,
        data: pa.Table | pa.RecordBatch,
        *,
        upsert: bool = False,
        partial: Mapping[str, str] | None = None,
    ) -> Prepared:
        """Every check, auto ids, routing and encoding: all that can fail on bad input.
        ``partial`` (an upsert's ``field_ops``; empty: none) makes it a partial upsert:
        the stored rows fill in what ``data`` leaves out (``flight/partial.py``)."""
        key = info.schema.partition_key
        doing = "an upsert" if upsert else "an insert"
        pid = self.partition_id(info, partition, doing) if key is None or partition else 0
        limit = self.host.settings.max_request_bytes
        if partial is not None:
            assert upsert, "only an upsert is partial"
            table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
            data = merge_partial(self.host.query, info, partition, table, partial)
        table = conform_insert(data, info.schema, upsert=upsert, max_bytes=limit)
        pk = info.schema.primary
        if pk.auto_id and not upsert:
            start = self.host.run(self.ids.take(table.num_rows))
            ids = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
            position = [f.name for f in info.schema.fields].index(pk.name)
            table = table.add_column(position, pk.arrow_field(), ids)
        pks = table.column(pk.name).combine_chunks()
        if key is None:
            parts = [(pid, table)]
        else:  # each row to the partition its key hashes to (Milvus's partition key)
            parts = split_by_partition(table, key, key_partition_ids(info.partitions, info.name))
        pieces = [
            (p, piece)
            for p, rows in parts
            for piece in self.publisher.pieces(
                MsgType.INSERT, info.vchannels, rows.column(pk.name).combine_chunks(), rows
            )
        ]
        if upsert:  # with a partition key the old row may be in another partition: all
            deletes = self.publisher.pieces(MsgType.DELETE, info.vchannels, pks)
            pieces = [(pid, d) for d in deletes] + pieces
        return Prepared(pks, pieces, table.nbytes)

    def prepare_all(
        self,
        info: CollectionInfo,
        partition: str | None,
        batches: Iterable[pa.RecordBatch],
        upsert: bool,
        partial: Mapping[str, str] | None = None,
    ) -> list[Prepared]:
        """Check every batch (sizes and keys across all of them too) before any is published."""
        limit = self.host.settings.max_request_bytes
        prepared: list[Prepared] = []
        total = 0
        for batch in batches:
            total += batch.nbytes
            if total > limit:
                raise ElanusError(
                    ErrorCode.REQUEST_TOO_LARGE,
                    f"{'upsert' if upsert else 'insert'} request is at least {total} bytes; "
                    f"the limit is {limit} bytes "
                    "(max_request_bytes): send it in smaller requests",
                )
            prepared.append(self.prepare(info, partition, batch, upsert=upsert, partial=partial))
        if len(prepared) > 1:
            check_unique_across([p.pks for p in prepared], info.schema.primary.name)
        return prepared

    def commit(self, info: CollectionInfo, prepared: Prepared) -> DmlResult:
        """Publish a prepared batch; returns once JetStream acknowledged all of it."""
        return DmlResult(prepared.pks, self._write(info, prepared.pieces))

    def delete(self, info: CollectionInfo, partition: str | None, keys: Any) -> DmlResult:
        pid = self.partition_id(info, partition, "a delete") if partition else 0
        pks = conform_delete_keys(keys, info.schema)
        pieces = self.publisher.pieces(MsgType.DELETE, info.vchannels, pks)
        return DmlResult(pks, self._write(info, [(pid, p) for p in pieces]))

    def _write(self, info: CollectionInfo, pieces: list[tuple[int, Piece]]) -> int:
        """One request's messages, from this Flight thread (``flight/threadwrite.py``)."""
        writes = self.thread_write()
        try:
            return writes.finish(writes.start(info, pieces))
        finally:
            writes.close()

    # -- the event-loop part ----------------------------------------------------------------
    async def publish(self, info: CollectionInfo, pieces: list[tuple[int, Piece]]) -> int:
        """Place, stamp and publish, all on the loop (nats-py's way; Flight threads send
        from a connection of their own, ``flight/threadwrite.py``)."""
        out = await self.begin(info, pieces)
        return await self.end(out, out.wire)

    def thread_write(self) -> ThreadWrite:
        """A Flight thread's writes for one request, through this service's loop steps."""
        return ThreadWrite(self, self.host, self.host.data_bus)

    async def begin(self, info: CollectionInfo, pieces: list[tuple[int, Piece]]) -> Outgoing:
        """Register the write with the time ticker, take its timestamp and place every
        message in a segment quota: the messages, ready to go out. ``end`` must follow."""
        task = self.tracker.begin(pchannel_of(p.vchannel) for _, p in pieces)
        epoch = self.ticker.epoch
        used: list[int] = []
        try:
            ts = await self.host.ddl.alloc_ts()
            self.tracker.stamp(task, ts)
            # Place every message before publishing any: a coord that fails half way through
            # must leave nothing of this request in the log.
            placed: list[tuple[int, Piece, int]] = []
            for partition_id, piece in pieces:
                if piece.kind is not MsgType.INSERT:
                    placed.append((partition_id, piece, 0))
                    continue
                key = (info.collection_id, partition_id, piece.vchannel)
                where = await self.segments.place(key, piece.rows, ts)
                used += [segment_id for segment_id, _ in where]
                cuts = piece.cut([n for _, n in where])
                placed += [(partition_id, c, sid) for c, (sid, _) in zip(cuts, where, strict=True)]
            for _, piece, _ in placed:  # against the rate a lagging vchannel is held to
                self.host.flow.charge(piece.vchannel, piece.rows)
            wire = [
                self.publisher.wire(
                    DmlMessage(
                        piece.kind,
                        ts,
                        piece.vchannel,
                        info.collection_id,
                        partition_id,
                        segment_id,
                        source=self.host.node_id,
                        msg_id=f"{self.host.node_id}-{task.task_id}-{i}",
                    ),
                    piece.payload,
                )
                for i, (partition_id, piece, segment_id) in enumerate(placed)
            ]
            if self.handoff is not None:
                self.handoff.offer(wire)
        except BaseException:
            self.tracker.end(task)
            await self.segments.done(used)
            raise
        return Outgoing(task, epoch, ts, used, wire)

    async def end(self, out: Outgoing, unsent: list[Wire]) -> int:
        """Publish what did not reach the log yet (all of it, or what a Flight thread's
        connection could not), then let the time ticker pass the write: its timestamp."""
        try:
            if unsent:
                await self.publisher.publish_wire(unsent, "the write")
            if not self.ticker.lease_held(out.epoch):
                raise ElanusError(
                    ErrorCode.UNAVAILABLE,
                    "the proxy lost contact with the coord while writing; the write may be "
                    "incomplete: retry it (an upsert is safe to repeat)",
                )
            return out.ts
        finally:
            self.tracker.end(out.task)
            await self.segments.done(out.used)
