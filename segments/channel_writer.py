"""One vchannel on a datanode: consume, buffer growing segments, write them when told.

Messages are consumed in packs between time ticks. A pack is applied in timestamp order
(deletes before inserts at equal timestamps: an upsert deletes older rows, not its own), so
the result does not depend on how publishes from different proxies interleaved. Inserts
go to the growing buffer of their segment with an ``_ts`` column; deletes become (pk, ts)
records of every segment that may hold the key (exact for buffers; for flushed segments
the PK oracle, over their bloom filters).

The checkpoint is the stream position of the oldest message whose effect is not yet on
disk; after a restart the channel is consumed again from there, skipping inserts into
segments that are already flushed, so nothing is lost and no row is written twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout
from elanus.channels import subjects
from elanus.channels.consumer import ChannelConsumer
from elanus.channels.dml import DmlMessage, MsgType
from elanus.channels.supervisor import describe
from elanus.errors import ElanusError
from elanus.schema import TIMESTAMP_FIELD, Schema
from elanus.segments import storage
from elanus.segments.compactor import compact_segments
from elanus.segments.pkoracle import PkOracle
from elanus.segments.pkstats import PkStats
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.segments.datanode import DataNode

log = logging.getLogger(__name__)

DELTA_SYNC_ROWS = 50_000
SPILL_BYTES = 64 << 20
"""A growing segment's rows are written to Lance in the background every this many bytes."""
DELTA_SYNC_SECONDS = 5.0


@dataclass
class GrowingBuffer:
    segment_id: int
    partition_id: int
    first_seq: int
    batches: list[pa.RecordBatch] = field(default_factory=list)
    pks: list[pa.Array] = field(default_factory=list)
    deletes: list[tuple[pa.Array, int]] = field(default_factory=list)
    rows: int = 0
    pending_bytes: int = 0
    spilled_rows: int = 0
    """Rows already in the segment's Lance dataset (written while the segment grows)."""
    spill: asyncio.Task[None] | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    _pk_cache: pa.Array | None = None

    def add(self, batch: pa.RecordBatch, pk: pa.Array, ts: int) -> None:
        self.batches.append(batch)
        self.pks.append(pk)
        self.rows += batch.num_rows
        self.pending_bytes += batch.nbytes
        self.min_ts = ts if self.min_ts is None else min(self.min_ts, ts)
        self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)
        self._pk_cache = None

    def take_pending(self) -> tuple[list[pa.RecordBatch], bool]:
        """Batches not written yet, and whether they start the dataset."""
        batches, self.batches, self.pending_bytes = self.batches, [], 0
        first = self.spilled_rows == 0
        self.spilled_rows += sum(b.num_rows for b in batches)
        return batches, first

    def pk_array(self) -> pa.Array:
        if self._pk_cache is None:
            self._pk_cache = pa.concat_arrays(self.pks) if self.pks else pa.array([])
        return self._pk_cache


@dataclass
class FlushedSegment:
    partition_id: int
    pending: list[tuple[pa.Array, int, int]] = field(default_factory=list)  # pks, ts, seq


class ChannelWriter:
    def __init__(self, node: DataNode, spec: dict[str, Any]) -> None:
        self.node = node
        self.vchannel: str = spec["vchannel"]
        self.pchannel: str = spec["pchannel"]
        self.collection_id: int = spec["collection_id"]
        self.schema = Schema.from_dict(spec["schema"])
        self.pk_field = self.schema.primary.name
        self.arrow_schema = storage.segment_schema(self.schema)
        self.defaults = storage.column_defaults(self.schema)
        checkpoint = spec.get("checkpoint")
        assert node.data_bus is not None
        self.consumer = ChannelConsumer(
            node.data_bus,
            self.pchannel,
            self.vchannel,
            f"dn_{self.vchannel}",
            self._on_pack,
            supervisor=node.supervisor,
            on_failure=self._channel_failed,
            start_seq=checkpoint["seq"] if checkpoint else None,
            start_ts=checkpoint["ts"] if checkpoint else 0,
        )
        self.growing: dict[int, GrowingBuffer] = {}
        self.flushed: dict[int, FlushedSegment] = {}
        self.pk_oracle = PkOracle()
        """Key statistics of the flushed segments that have them (one without gets no
        deletes: there is nothing to tell which keys it holds)."""
        self.done: set[int] = set()
        self.reports: dict[int, dict[str, Any]] = {}  # what we said when we flushed them
        self.data_seq = -1
        """Stream position of the last non-tick message consumed (the coord saves
        checkpoints that would replay data at once, tick-only moves now and then)."""
        self._last_delta_sync = time.monotonic()
        self._stopping = False
        self.storage = node.settings.storage_path
        for seg in spec.get("segments", []):
            self._learn_segment(seg)

    def _learn_segment(self, seg: dict[str, Any]) -> None:
        sid = int(seg["segment_id"])
        # An Importing segment with a timestamp is committed: its later deletes count.
        committed = seg["state"] == SegmentState.IMPORTING and seg.get("max_ts") is not None
        if seg["state"] in (SegmentState.FLUSHED, SegmentState.DROPPED) or committed:
            self.done.add(sid)
        if seg["state"] == SegmentState.FLUSHED or committed:
            seg_dir = self._seg_dir(seg["partition_id"], sid)
            self._add_flushed(sid, seg["partition_id"], storage.load_pk_stats(seg_dir))

    def _add_flushed(self, segment_id: int, partition_id: int, stats: PkStats | None) -> None:
        self.flushed[segment_id] = FlushedSegment(partition_id)
        if stats is not None:
            self.pk_oracle.add(segment_id, stats)

    def _seg_dir(self, partition_id: int, segment_id: int) -> Path:
        return layout.segment_dir(self.storage, self.collection_id, partition_id, segment_id)

    # -- consuming ---------------------------------------------------------------------------
    @property
    def tick_ts(self) -> int:
        return self.consumer.tick_ts

    async def start(self) -> None:
        await self.consumer.start()

    def _channel_failed(self, exc: BaseException) -> None:
        """The consuming task died (logged with its traceback already): tell the coord,
        which fails the flushes waiting on this channel and has it watched again."""
        body = {"node_id": self.node.node_id, "vchannel": self.vchannel}
        body["reason"] = self.consumer.failure or describe(exc)
        self.node.supervisor.spawn(
            f"report {self.vchannel} failure",
            lambda: self._tell_coord("datanode.channel_failed", body),
        )

    async def stop(self) -> None:
        self._stopping = True
        await self.consumer.stop()
        spills = [b.spill for b in self.growing.values() if b.spill is not None]
        if spills:  # let background writes end before the files may go away
            await asyncio.wait(spills, timeout=30)

    # -- applying a pack ---------------------------------------------------------------------
    async def _on_pack(self, pack: list[DmlMessage], ts: int, seq: int) -> None:
        if pack:
            self.data_seq = max(self.data_seq, max(m.seq for m in pack))
        for m in pack:
            if m.type is MsgType.INSERT:
                self._insert(m)
            elif m.type is MsgType.DELETE:
                self._delete(m)
            elif m.type is MsgType.IMPORT:
                self._import(m)
        if self._deltas_due():
            await self._sync_deltas()
        report = {
            "node_id": self.node.node_id,
            "vchannel": self.vchannel,
            "ts": ts,
            "checkpoint": self.checkpoint(),
            "data_seq": self.data_seq,
        }
        try:
            reply = await self.node.bus.request(subjects.coord("datanode.tt"), report, timeout=10)
        except ElanusError as exc:  # the coord is away; the next tick reports again
            log.warning("%s: tick report failed: %s", self.vchannel, exc)
            return
        if reply["flush"]:
            await self._flush(reply["flush"])
        for plan in reply.get("compact", []):
            await self._compact(plan)

    def _insert(self, m: DmlMessage) -> None:
        if m.segment_id in self.done or m.batch is None:
            if m.segment_id in self.reports:  # flushed by us, earlier in this very stream
                log.error(
                    "%s: %d rows at ts %d arrived after segment %d was flushed; dropped",
                    self.vchannel,
                    m.batch.num_rows if m.batch else 0,
                    m.ts,
                    m.segment_id,
                )
            return  # replayed rows of a segment already on disk
        buf = self.growing.get(m.segment_id)
        if buf is None:
            buf = self.growing[m.segment_id] = GrowingBuffer(m.segment_id, m.partition_id, m.seq)
        buf.first_seq = min(buf.first_seq, m.seq)
        batch = m.batch
        ts_col = pa.array(np.full(batch.num_rows, m.ts, dtype=np.uint64))
        batch = pa.RecordBatch.from_arrays(
            [*batch.columns, ts_col], names=[*batch.schema.names, TIMESTAMP_FIELD]
        )
        # one schema for every batch; one sent before a field was added takes its default
        batch = storage.conform(batch, self.arrow_schema, self.defaults)
        buf.add(batch, m.batch.column(self.pk_field), m.ts)
        if buf.pending_bytes >= SPILL_BYTES:
            self._start_spill(buf)

    def adopt(self, schema: Schema) -> None:
        """The collection's newer schema (a field was added): buffered rows widen now,
        rows already spilled to Lance when the next fragment is appended."""
        if schema.version <= self.schema.version:
            return
        self.schema = schema
        self.arrow_schema = storage.segment_schema(schema)
        self.defaults = storage.column_defaults(schema)
        for buf in self.growing.values():
            buf.batches = [
                storage.conform(b, self.arrow_schema, self.defaults) for b in buf.batches
            ]

    def _delete(self, m: DmlMessage) -> None:
        if m.batch is None:
            return
        pks = m.batch.column(0)
        only = m.partition_id  # 0: every partition (a delete without a partition)
        for buf in self.growing.values():
            if only and buf.partition_id != only:
                continue
            mask = pc.is_in(pks, value_set=buf.pk_array())
            if pc.any(mask).as_py():
                buf.deletes.append((pks.filter(mask), m.ts))
        ids = [
            sid
            for sid, seg in self.flushed.items()
            if sid in self.pk_oracle and (not only or seg.partition_id == only)
        ]
        for sid, mask in self.pk_oracle.masks(pks, ids).items():
            self.flushed[sid].pending.append((pks.filter(pa.array(mask)), m.ts, m.seq))

    def _import(self, m: DmlMessage) -> None:
        """A bulk import's segment joins the channel: deletes after this one reach it."""
        if m.segment_id in self.done:  # known already (or compacted away since)
            return
        stats = storage.load_pk_stats(self._seg_dir(m.partition_id, m.segment_id))
        if stats is None:
            log.error("%s: imported segment %d has no pk stats", self.vchannel, m.segment_id)
        self._add_flushed(m.segment_id, m.partition_id, stats)
        self.done.add(m.segment_id)

    async def _compact(self, plan: dict[str, Any]) -> None:
        """Run a compaction plan between two packs, so no delete can slip past it."""
        await self._sync_deltas()  # deletes of the sources must be in their delta logs
        sources = [s["segment_id"] for s in plan["sources"]]
        target = int(plan["target_segment_id"])
        pid = int(plan["partition_id"])
        dirs = [self._seg_dir(pid, s) for s in sources]
        try:
            result = await asyncio.to_thread(
                compact_segments,
                dirs,
                self._seg_dir(pid, target),
                self.schema,
                int(plan["horizon_ts"]),
            )
        except Exception as exc:  # noqa: BLE001 - the plan fails; the channel goes on
            log.exception("%s: compaction plan %s failed", self.vchannel, plan["plan_id"])
            await asyncio.to_thread(storage.remove_segment, self._seg_dir(pid, target))
            body = {"node_id": self.node.node_id, "plan_id": plan["plan_id"]}
            await self._tell_coord("compaction.fail", {**body, "reason": describe(exc)})
            return
        for s in sources:
            self.flushed.pop(s, None)
            self.pk_oracle.remove(s)
        if result["num_rows"]:
            self._add_flushed(target, pid, storage.load_pk_stats(self._seg_dir(pid, target)))
        self.done.add(target)
        report = {
            "node_id": self.node.node_id,
            "vchannel": self.vchannel,
            "plan_id": plan["plan_id"],
            "target_segment_id": target,
            **result,
        }
        await self._tell_coord("compaction.done", report)
        log.info(
            "%s: compacted %s into %s (%s rows)", self.vchannel, sources, target, result["num_rows"]
        )

    def _start_spill(self, buf: GrowingBuffer) -> None:
        """Write a growing segment's rows so far in the background (Lance leaves the GIL),
        so a flush has only the tail left to write. Spills of one segment run in order."""
        batches, first = buf.take_pending()
        seg_dir = self._seg_dir(buf.partition_id, buf.segment_id)
        previous = buf.spill
        target, defaults = self.arrow_schema, self.defaults

        async def spill() -> None:
            if previous is not None:
                await previous
            table = pa.Table.from_batches(batches, schema=target)
            await asyncio.to_thread(
                storage.write_rows, seg_dir, table, target, first=first, defaults=defaults
            )

        name = f"spill segment {buf.segment_id}"
        buf.spill = self.node.supervisor.spawn(name, spill)  # a failure fails the flush

    async def _report_flushed(self, report: dict[str, Any]) -> None:
        await self._tell_coord("segment.flushed", report)

    async def _tell_coord(self, method: str, report: dict[str, Any]) -> None:
        """Report, retrying while the coord is away: the files are on disk either way."""
        delay = 0.1
        while not self._stopping:
            try:
                await self.node.bus.request(subjects.coord(method), report, timeout=10)
                return
            except ElanusError as exc:
                log.warning("%s: %s report failed, retrying: %s", self.vchannel, method, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def checkpoint(self) -> dict[str, int]:
        seqs = [b.first_seq for b in self.growing.values()]
        seqs += [p[2] for seg in self.flushed.values() for p in seg.pending]
        return {"seq": min(seqs, default=self.consumer.next_seq), "ts": self.tick_ts}

    # -- writing -----------------------------------------------------------------------------
    def _deltas_due(self) -> bool:
        pending = sum(len(p[0]) for s in self.flushed.values() for p in s.pending)
        if not pending:
            return False
        return (
            pending >= DELTA_SYNC_ROWS
            or time.monotonic() - self._last_delta_sync > DELTA_SYNC_SECONDS
        )

    async def _sync_deltas(self) -> None:
        """Persist pending deletes of flushed segments so the checkpoint can move on."""
        jobs = []
        for sid, seg in self.flushed.items():
            if not seg.pending:
                continue
            pks = pa.concat_arrays([p[0] for p in seg.pending])
            ts = pa.concat_arrays(
                [pa.array(np.full(len(p[0]), p[1], dtype=np.uint64)) for p in seg.pending]
            )
            name = f"{seg.pending[0][2]:012d}-{seg.pending[-1][2]:012d}"
            jobs.append((self._seg_dir(seg.partition_id, sid), pks, ts, name))
            seg.pending = []
        for seg_dir, pks, ts, name in jobs:
            await asyncio.to_thread(storage.write_deltas, seg_dir, pks, ts, name)
        self._last_delta_sync = time.monotonic()

    async def _flush(self, segment_ids: list[int]) -> None:
        for sid in segment_ids:
            if sid in self.reports:  # asked again (the coord restarted): say the same
                await self._report_flushed(self.reports[sid])
                continue
            buf = self.growing.pop(sid, None)
            report: dict[str, Any] = {
                "node_id": self.node.node_id,
                "vchannel": self.vchannel,
                "segment_id": sid,
                "num_rows": 0,
            }
            if buf is not None and buf.rows:
                seg_dir = self._seg_dir(buf.partition_id, sid)
                if buf.batches:
                    self._start_spill(buf)  # the tail
                assert buf.spill is not None
                await buf.spill
                path = layout.data_path(seg_dir)
                stats = await asyncio.to_thread(storage.write_pk_stats, seg_dir, buf.pk_array())
                if buf.deletes:
                    pks = pa.concat_arrays([d[0] for d in buf.deletes])
                    ts = pa.concat_arrays(
                        [pa.array(np.full(len(d[0]), d[1], dtype=np.uint64)) for d in buf.deletes]
                    )
                    await asyncio.to_thread(
                        storage.write_deltas, seg_dir, pks, ts, f"{buf.first_seq:012d}-flush"
                    )
                report.update(
                    num_rows=buf.rows,
                    path=str(path),
                    min_ts=buf.min_ts,
                    max_ts=buf.max_ts,
                    start_seq=buf.first_seq,
                )
                self._add_flushed(sid, buf.partition_id, stats)
            self.done.add(sid)
            await self._sync_deltas()
            report["checkpoint"] = self.checkpoint()
            self.reports[sid] = report
            await self._report_flushed(report)
            log.info("%s: flushed segment %s (%s rows)", self.vchannel, sid, report["num_rows"])
