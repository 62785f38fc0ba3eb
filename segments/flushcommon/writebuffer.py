"""The write buffer of one vchannel (Milvus's ``flushcommon/writebuffer``): what was consumed
but is not on disk yet, and the policies that pick what to sync. It does no I/O but
reading a bulk import's small pk-stats file.

A pack is applied in timestamp order (deletes before inserts at equal timestamps: an upsert
deletes older rows, not its own), so the result does not depend on how publishes from
different proxies interleaved. Inserts go to the buffer of their growing segment with an
``_ts`` column; deletes become (pk, ts) records of every segment that may hold the key
(exact for buffers and for segments whose flush is in flight; for flushed segments the PK
oracle, over their bloom filters).

Sync policies (``flusher`` turns them into syncs):

- full buffer: a growing segment with ``SPILL_BYTES`` of unwritten rows spills them;
- sealed segment: the coord says a segment is complete; ``seal`` takes it out of the
  growing set (its flush writes the rest), and deletes keep reaching it exactly;
- deltas: deletes of flushed segments are written once ``DELTA_SYNC_ROWS`` wait or
  ``DELTA_SYNC_SECONDS`` passed (stale), at every flush, and before a compaction reads
  them; never those of a segment being compacted (they move to its target).

``oldest`` is the smallest stream position whose effect lives only here: the first
message of each growing segment (a replay rewrites the segment from its start) and of
each delete record not handed to a sync yet.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.channels.dml import DmlMessage, MsgType
from elanus.functions import fill_outputs
from elanus.schema import TIMESTAMP_FIELD, Schema
from elanus.segments import storage
from elanus.segments.storage.pkoracle import PkOracle
from elanus.segments.storage.pkstats import PkStats, bloom_bits
from elanus.states import SegmentState

log = logging.getLogger(__name__)

SPILL_BYTES = 64 << 20
"""A growing segment's rows are written to Lance in the background every this many bytes."""
GROWING_STATS_BITS = 1 << 25
"""The largest filter a growing segment builds as it spills (4 MB; 3.3M keys): a segment of
the default 1M rows needs 2**24."""
DELTA_SYNC_ROWS = 50_000
DELTA_SYNC_SECONDS = 5.0

Deletes = list[tuple[pa.Array, int]]
"""Delete records: (primary keys, timestamp) pairs."""


@dataclass
class SegmentBuffer:
    """A growing segment's rows and the deletes that hit them."""

    segment_id: int
    partition_id: int
    first_seq: int
    batches: list[pa.RecordBatch] = field(default_factory=list)
    pks: list[pa.Array] = field(default_factory=list)
    deletes: Deletes = field(default_factory=list)
    rows: int = 0
    pending_bytes: int = 0
    spilled_rows: int = 0
    """Rows handed to spills (written, or being written, to the segment's Lance dataset)."""
    min_ts: int | None = None
    max_ts: int | None = None
    stats: PkStats | None = None
    """Key stats of the spilled rows, added to on the spills' worker threads so the flush
    only folds them (``Flusher.spill``); None before the first spill, and for good once
    more rows came than the stats were sized for (the flush then builds them whole)."""
    _pk_cache: pa.Array | None = None

    def add(self, batch: pa.RecordBatch, pk: pa.Array, ts: int) -> None:
        self.batches.append(batch)
        self.pks.append(pk)
        self.rows += batch.num_rows
        self.pending_bytes += batch.nbytes
        self.min_ts = ts if self.min_ts is None else min(self.min_ts, ts)
        self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)
        self._pk_cache = None

    def take_pending(self) -> tuple[list[pa.RecordBatch], int]:
        """Batches not handed to a spill yet, and how many rows were before them (0: they
        start the dataset)."""
        batches, self.batches, self.pending_bytes = self.batches, [], 0
        before = self.spilled_rows
        self.spilled_rows += sum(b.num_rows for b in batches)
        return batches, before

    def spill_stats(
        self, batches: list[pa.RecordBatch], before: int, most: tuple[int, int]
    ) -> PkStats | None:
        """The key stats a spill of ``batches`` (``take_pending``) adds to: made at the
        first spill, with room for as many rows as a segment takes (``most``: rows, bytes)
        at these rows' size; dropped once the rows outgrow them. None when that size
        would pass ``GROWING_STATS_BITS`` (limits set far above the defaults): each spill
        then costs a pass over a filter that large, and the flush builds the stats."""
        if before == 0:
            rows = sum(b.num_rows for b in batches)
            nbytes = sum(b.nbytes for b in batches)
            keys = min(most[0], most[1] * rows // max(1, nbytes))
            self.stats = PkStats.sized_for(keys) if bloom_bits(keys) <= GROWING_STATS_BITS else None
        if self.stats is not None and not self.stats.has_room(self.spilled_rows):
            self.stats = None
        return self.stats

    def pk_array(self) -> pa.Array:
        if self._pk_cache is None:
            self._pk_cache = pa.concat_arrays(self.pks) if self.pks else pa.array([])
        return self._pk_cache


@dataclass
class FlushedSegment:
    """A segment on disk (or being flushed) and its deletes not handed to a sync yet."""

    partition_id: int
    pending: list[tuple[pa.Array, int, int]] = field(default_factory=list)  # pks, ts, seq
    keys: pa.Array | None = None
    """Its exact keys while its flush is in flight (no pk stats on disk yet)."""
    compacting: bool = False
    """A compaction reads it: its deletes wait here, then move to the target."""


@dataclass
class DeltaTake:
    """Deletes of one flushed segment, taken for a delta log."""

    segment_id: int
    partition_id: int
    deletes: Deletes
    first_seq: int
    last_seq: int

    @property
    def name(self) -> str:
        """The log's file name: a replay of the same messages writes the same file."""
        return f"{self.first_seq:012d}-{self.last_seq:012d}"


class WriteBuffer:
    def __init__(self, schema: Schema, seg_dir: Callable[[int, int], str]) -> None:
        self.schema = schema
        self.pk_field = schema.primary.name
        self.arrow_schema = storage.segment_schema(schema)
        self.defaults = storage.column_defaults(schema)
        self.seg_dir = seg_dir
        self.growing: dict[int, SegmentBuffer] = {}
        self.flushed: dict[int, FlushedSegment] = {}
        self.pk_oracle = PkOracle()
        """Key statistics of the flushed segments that have them (one without gets no
        deletes: there is nothing to tell which keys it holds)."""
        self.done: set[int] = set()
        """Segments whose inserts are ignored: on disk already, or sealed by us."""
        self.sealed: set[int] = set()
        """Segments this buffer sealed: rows for them now are an error, not a replay."""
        self.data_seq = -1
        """Stream position of the last non-tick message consumed (the coord saves
        checkpoints that would replay data at once, tick-only moves now and then)."""
        self._last_delta_sync = time.monotonic()

    # -- what the coord says exists ----------------------------------------------------------
    def learn(self, seg: dict[str, Any]) -> None:
        sid = int(seg["segment_id"])
        # An Importing segment with a timestamp is committed: its later deletes count.
        committed = seg["state"] == SegmentState.IMPORTING and seg.get("max_ts") is not None
        if seg["state"] in (SegmentState.FLUSHED, SegmentState.DROPPED) or committed:
            self.done.add(sid)
        if seg["state"] == SegmentState.FLUSHED or committed:
            stats = storage.load_pk_stats(self.seg_dir(seg["partition_id"], sid))
            self.add_flushed(sid, seg["partition_id"], stats)

    def add_flushed(self, segment_id: int, partition_id: int, stats: PkStats | None) -> None:
        self.flushed[segment_id] = FlushedSegment(partition_id)
        if stats is not None:
            self.pk_oracle.add(segment_id, stats)

    # -- applying a pack ---------------------------------------------------------------------
    def apply(self, pack: list[DmlMessage]) -> None:
        if pack:
            self.data_seq = max(self.data_seq, max(m.seq for m in pack))
        for m in pack:
            if m.type is MsgType.INSERT:
                self._insert(m)
            elif m.type is MsgType.DELETE:
                self._delete(m)
            elif m.type is MsgType.IMPORT:
                self._import(m)

    def _insert(self, m: DmlMessage) -> None:
        if m.segment_id in self.done or m.batch is None:
            if m.segment_id in self.sealed:  # flushed by us, earlier in this very stream
                log.error(
                    "%s: %d rows at ts %d arrived after segment %d was flushed; dropped",
                    m.vchannel,
                    m.batch.num_rows if m.batch else 0,
                    m.ts,
                    m.segment_id,
                )
            return  # replayed rows of a segment already on disk
        buf = self.growing.get(m.segment_id)
        if buf is None:
            buf = self.growing[m.segment_id] = SegmentBuffer(m.segment_id, m.partition_id, m.seq)
        buf.first_seq = min(buf.first_seq, m.seq)
        batch = m.batch
        ts_col = pa.array(np.full(batch.num_rows, m.ts, dtype=np.uint64))
        batch = pa.RecordBatch.from_arrays(
            [*batch.columns, ts_col], names=[*batch.schema.names, TIMESTAMP_FIELD]
        )
        # one schema for every batch; one sent before a field was added takes its default,
        # or a function's output, computed
        batch = fill_outputs(batch, self.schema)
        batch = storage.conform(batch, self.arrow_schema, self.defaults)
        buf.add(batch, m.batch.column(self.pk_field), m.ts)

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
        ids = []
        for sid, seg in self.flushed.items():
            if only and seg.partition_id != only:
                continue
            if seg.keys is not None:  # its flush is in flight: its keys are known exactly
                mask = pc.is_in(pks, value_set=seg.keys)
                if pc.any(mask).as_py():
                    seg.pending.append((pks.filter(mask), m.ts, m.seq))
            elif sid in self.pk_oracle:
                ids.append(sid)
        for sid, hit in self.pk_oracle.masks(pks, ids).items():
            self.flushed[sid].pending.append((pks.filter(pa.array(hit)), m.ts, m.seq))

    def _import(self, m: DmlMessage) -> None:
        """A bulk import's segment joins the channel: deletes after this one reach it."""
        if m.segment_id in self.done:  # known already (or compacted away since)
            return
        stats = storage.load_pk_stats(self.seg_dir(m.partition_id, m.segment_id))
        if stats is None:
            log.error("%s: imported segment %d has no pk stats", m.vchannel, m.segment_id)
        self.add_flushed(m.segment_id, m.partition_id, stats)
        self.done.add(m.segment_id)

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

    # -- policies ----------------------------------------------------------------------------
    def full(self) -> list[SegmentBuffer]:
        """Growing segments holding enough unwritten rows to spill them."""
        return [b for b in self.growing.values() if b.pending_bytes >= SPILL_BYTES]

    def deltas_due(self) -> bool:
        pending = sum(
            len(p[0]) for s in self.flushed.values() if not s.compacting for p in s.pending
        )
        if not pending:
            return False
        return (
            pending >= DELTA_SYNC_ROWS
            or time.monotonic() - self._last_delta_sync > DELTA_SYNC_SECONDS
        )

    def take_deltas(self, only: set[int] | None = None) -> list[DeltaTake]:
        """Pending deletes of flushed segments (of ``only``, when given), for delta logs;
        those of segments being compacted stay."""
        takes = []
        for sid, seg in self.flushed.items():
            if not seg.pending or seg.compacting or (only is not None and sid not in only):
                continue
            deletes = [(p[0], p[1]) for p in seg.pending]
            first, last = seg.pending[0][2], seg.pending[-1][2]
            takes.append(DeltaTake(sid, seg.partition_id, deletes, first, last))
            seg.pending = []
        if only is None:
            self._last_delta_sync = time.monotonic()
        return takes

    def seal(self, segment_id: int) -> SegmentBuffer | None:
        """The coord says the segment is complete: it leaves the growing set (its flush
        writes the rest); later deletes of its keys become delta records of it."""
        buf = self.growing.pop(segment_id, None)
        self.done.add(segment_id)
        self.sealed.add(segment_id)
        if buf is not None and buf.rows:
            self.flushed[segment_id] = FlushedSegment(buf.partition_id, keys=buf.pk_array())
        return buf

    def flushed_with(self, segment_id: int, stats: PkStats) -> None:
        """A sealed segment's files are written: its deletes are found by its pk stats."""
        seg = self.flushed.get(segment_id)
        if seg is not None:
            seg.keys = None
            self.pk_oracle.add(segment_id, stats)

    def compacting(self, sources: list[int], on: bool) -> None:
        for sid in sources:
            if sid in self.flushed:
                self.flushed[sid].compacting = on

    def compacted(
        self, sources: list[int], targets: list[tuple[int, PkStats | None]], pid: int
    ) -> None:
        """The sources are merged into ``targets`` (each with its pk stats; None: it is
        empty): deletes that reached the sources while the merge ran (not in what it read)
        now belong to the targets; with several (a clustering compaction), each keeps the
        keys its pk stats may hold."""
        carried: list[tuple[pa.Array, int, int]] = []
        for s in sources:
            seg = self.flushed.pop(s, None)
            if seg is not None:
                carried += seg.pending
            self.pk_oracle.remove(s)
        carried.sort(key=lambda p: p[2])
        kept = [(t, stats) for t, stats in targets if stats is not None]
        for target, stats in kept:
            self.add_flushed(target, pid, stats)
            mine = carried
            if len(kept) > 1:
                masks = [(p, stats.may_contain(p[0])) for p in carried]
                mine = [(p[0].filter(pa.array(m)), p[1], p[2]) for p, m in masks if m.any()]
            self.flushed[target].pending = mine
        if not kept and carried:  # every row was deleted: nothing left to delete from
            log.info("segments %s are empty: %d late delete batches dropped", targets, len(carried))
        self.done.update(t for t, _ in targets)

    def oldest(self) -> int | None:
        """The smallest stream position whose effect lives only in this buffer."""
        seqs = [b.first_seq for b in self.growing.values()]
        seqs += [p[2] for seg in self.flushed.values() for p in seg.pending]
        return min(seqs, default=None)
