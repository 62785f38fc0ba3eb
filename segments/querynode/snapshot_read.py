"""Snapshot reads of one vchannel for bulk readers (Spark): the read plan, the rows of
listed segments at a timestamp, and the deletes a reader of a sealed segment's files needs.

A read plan at ``T`` (taken once tsafe >= T, so every message stamped <= T is applied)
lists the segments that exist: the sealed ones, each read on its own, and the growing
ones, read together. Readers then name segments by id, never "everything else", because
the distribution moves on between plan and read, and a listed id is still found:

- still growing here: from memory;
- flushed and handed off since (it keeps its id): from the worker that now holds it;
- compacted away since: from its own files (kept ``gc_delay_s``) plus the delete buffer,
  while the compaction target, which is not listed, is never read, so no row comes twice.

A segment created after the plan holds only rows stamped after tsafe, so none at ``T``.

Deletes: a sealed segment's files hold the deletes persisted by the datanode (delta logs);
newer ones are in the delegator's delete buffer, which holds every delete since the
channel checkpoint it started from that is not yet on disk (``deletebuffer`` says when it
may be trimmed, and how a retired segment holds it). A reader that asks for the buffer
first and reads the delta logs second therefore misses none.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from elanus import layout, objstore
from elanus.api.base import ask_many_sync
from elanus.api.querynode import (
    Deletes,
    PlannedGrowing,
    PlannedSealed,
    ReadDeletes,
    ReadPlan,
    ReadSegments,
    ReadShard,
    Rows,
    SegmentSpec,
)
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr
from elanus.schema import PK_COLUMN
from elanus.segments import storage
from elanus.segments.querynode.delegator import WORKER_CALL_S
from elanus.segments.querynode.deletebuffer import DeleteSnapshot
from elanus.segments.querynode.memseg import MemSegment
from elanus.segments.querynode.worker import concat_or_empty, load_segment, segment_read

if TYPE_CHECKING:
    from elanus.segments.querynode.delegator import Delegator


def _wanted(partition_ids: list[int] | None) -> set[int] | None:
    return set(partition_ids) if partition_ids else None


async def plan(d: Delegator, req: ReadShard) -> ReadPlan:
    """The segments of this vchannel a read at ``ts`` must cover (after tsafe reaches it)."""
    ts = await d.read_ts(req.guarantee_ts, req.ts)
    wanted = _wanted(req.partition_ids)
    segs = d.distribution.sealed
    sealed = [
        PlannedSealed(segment_id=sid, partition_id=segs[sid].partition_id, path=segs[sid].path)
        for sid in sorted(segs)
        if wanted is None or segs[sid].partition_id in wanted
    ]
    growing = [
        PlannedGrowing(segment_id=s.segment_id, partition_id=s.partition_id, rows=s.num_rows)
        for s in sorted(d.growing_in(req.partition_ids), key=lambda s: s.segment_id)
    ]
    return ReadPlan(vchannel=d.vchannel, ts=ts, sealed=sealed, growing=growing)


async def read_segments(d: Delegator, req: ReadSegments, expr: Expr | None) -> Rows:
    """Rows at ``ts`` of the listed segments (``output_fields``; at most ``limit`` per
    segment, the smallest keys, for paging by primary key)."""
    ts = await d.read_ts(req.guarantee_ts, req.ts)
    columns = list(req.output_fields)
    limit = req.limit
    tables: list[pa.Table] = []
    dist = d.distribution
    async with dist.reading():
        by_node: dict[str, list[int]] = {}
        retired: list[dict[str, Any]] = []
        for sid in req.segment_ids:
            if sid in d.growing:
                tables.append(d.growing[sid].query(ts, expr, columns, limit, req.ttl))
            elif sid in dist.sealed:
                by_node.setdefault(dist.sealed[sid].node_id, []).append(sid)
            elif sid in dist.retired:
                retired.append(dist.retired[sid])
            else:
                raise ElanusError(
                    ErrorCode.SEGMENT_NOT_FOUND,
                    f"segment {sid} is not known to the delegator of {d.vchannel}; "
                    "plan the read again",
                )
        calls = [
            d.node.worker_api(node).query(segment_read(req, ts, sids))
            for node, sids in by_node.items()
        ]
        if calls:  # the one fan-out, off the loop
            replies = await asyncio.to_thread(ask_many_sync, d.node.bus, calls, WORKER_CALL_S)
            tables += [r.rows for r in replies]
        buffer, complete_until = d.delete_buffer.snapshot(), d.tsafe  # one step: consistent
        for spec in retired:
            tables.append(
                await asyncio.to_thread(
                    _read_retired,
                    d,
                    spec,
                    (buffer, complete_until),
                    ts,
                    expr,
                    columns,
                    limit,
                    req.ttl,
                )
            )
        if retired:
            asyncio.get_running_loop().call_later(RETIRED.ttl_s + 1, RETIRED.sweep)
    return Rows(rows=concat_or_empty(tables, columns, list(d.growing.values())), ts=ts)


class _RetiredCache:
    """A few retired segments kept loaded for a while: a paged read asks for the same one
    page after page. Keyed by path (unique per storage); used from worker threads."""

    def __init__(self, size: int = 2, ttl_s: float = 30.0) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[MemSegment, int, float]] = OrderedDict()

    def get(self, path: str, ts: int) -> MemSegment | None:
        """The loaded segment if it holds every delete a read at ``ts`` needs."""
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or ts > entry[1]:
                return None
            self._entries[path] = (entry[0], entry[1], time.monotonic())
            self._entries.move_to_end(path)
            return entry[0]

    def put(self, path: str, seg: MemSegment, complete_until: int) -> None:
        with self._lock:
            self._entries[path] = (seg, complete_until, time.monotonic())
            self._entries.move_to_end(path)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def sweep(self) -> None:
        """Drop what was not used for ``ttl_s`` (called some time after each use)."""
        now = time.monotonic()
        with self._lock:
            for path, (_, _, used) in list(self._entries.items()):
                if now - used > self.ttl_s:
                    del self._entries[path]


RETIRED = _RetiredCache()


def _read_retired(
    d: Delegator,
    spec: dict[str, Any],
    deletes: tuple[DeleteSnapshot, int],
    ts: int,
    expr: Expr | None,
    columns: list[str],
    limit: int | None,
    ttl: int,
) -> pa.Table:
    """A compacted-away segment from its files, with every buffered delete applied.

    ``deletes`` is the buffer and the tsafe it is complete up to; the loaded copy is kept
    and answers later reads at or below that timestamp."""
    buffer, complete_until = deletes
    cached = RETIRED.get(spec["path"], ts)
    if cached is not None:
        return cached.query(ts, expr, columns, limit, ttl)
    if not objstore.exists(layout.data_path(layout.parent(spec["path"]))):
        raise _files_gone(spec)
    _check_held(spec, buffer)
    seg = load_segment(
        SegmentSpec(
            segment_id=spec["segment_id"],
            partition_id=spec["partition_id"],
            path=spec["path"],
            vchannel=d.vchannel,
        ),
        d.schema,
    )
    batch = buffer.batch()
    if len(batch):
        seg.delete(batch.pks, batch.ts)
    RETIRED.put(spec["path"], seg, complete_until)
    return seg.query(ts, expr, columns, limit, ttl)


def _files_gone(spec: dict[str, Any]) -> ElanusError:
    return ElanusError(
        ErrorCode.SEGMENT_NOT_FOUND,
        f"segment {spec['segment_id']} was compacted away after the read plan and its "
        "files are gone (older than gc_delay_s); plan the read again",
    )


def _check_held(spec: dict[str, Any], buffer: DeleteSnapshot) -> None:
    """A retired segment's files miss the deletes after its compaction; the buffer kept
    them for ``gc_delay_s`` (``Distribution.remove``), after which its files are due for
    collection: the read is refused as if they were gone already."""
    if buffer.floor > int(spec.get("hold_ts", 0)):
        raise _files_gone(spec)


async def deletes(d: Delegator, req: ReadDeletes) -> Deletes:
    """Buffered deletes stamped <= ``ts`` that may touch ``segment_id`` (bloom filter when
    the segment is known), as a table (pk, ts)."""
    ts = await d.read_ts(req.guarantee_ts, req.ts)
    sid = req.segment_id
    dist = d.distribution
    if sid not in dist.sealed and sid not in dist.retired:
        # A delegator that never held the segment (it started after the segment was
        # compacted away) may lack deletes that went to the compaction target's logs.
        raise ElanusError(
            ErrorCode.SEGMENT_NOT_FOUND,
            f"segment {sid} is not known to the delegator of {d.vchannel}; plan the read again",
        )
    buffer = d.delete_buffer.snapshot()
    if sid in dist.retired:
        _check_held(dist.retired[sid], buffer)
    batch = buffer.batch()
    keep = batch.ts <= np.uint64(ts)
    stats = d.pk_oracle.get(sid)
    if stats is None and sid in dist.retired:
        stats = storage.load_pk_stats(layout.parent(dist.retired[sid]["path"]))
    if stats is not None and len(batch):
        keep &= stats.may_contain(batch.pks)
    pks, del_ts = batch.pks.filter(pa.array(keep)), batch.ts[keep]
    return Deletes(deletes=pa.table({PK_COLUMN: pks, "ts": pa.array(del_ts, pa.uint64())}), ts=ts)
