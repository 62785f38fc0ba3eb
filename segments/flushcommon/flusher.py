"""Turning what the write buffer's policies pick into syncs (Milvus's write buffer
``syncSegments``): spills of growing segments, delta logs of flushed ones, and flushes of
sealed ones, each reported to the coord once its files are written.

A flush is the segment's last rows (after its earlier spills), then its pk stats and the
log of its growing deletes; only then is the coord told, and until the coord has answered
the flush holds the segment's first stream position, so the checkpoint cannot pass rows
that no flushed segment the coord knows of holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from elanus import freemem, layout
from elanus.api.datacoord import SegmentFlushed
from elanus.segments.flushcommon.coordreport import CoordReports
from elanus.segments.flushcommon.syncmgr import SyncManager
from elanus.segments.flushcommon.syncpack import DeltaSync, RowsSync, SealSync
from elanus.segments.flushcommon.writebuffer import SegmentBuffer, WriteBuffer
from elanus.segments.storage.pkstats import PkStats

log = logging.getLogger(__name__)


def _nothing(attempt: int) -> None:
    """The write of a sync that only reports."""


class Flusher:
    def __init__(
        self,
        node_id: str,
        vchannel: str,
        buffer: WriteBuffer,
        syncs: SyncManager,
        reports: CoordReports,
        checkpoint: Callable[[], dict[str, int]],
        segment_max: tuple[int, int],
    ) -> None:
        self.node_id = node_id
        self.segment_max = segment_max
        """The most rows and bytes a segment takes (``segment_max_rows``/``_bytes``): what
        a growing segment's key stats are sized for at its first spill."""
        self.vchannel = vchannel
        self.buffer = buffer
        self.syncs = syncs
        self.reports = reports
        self.checkpoint = checkpoint
        self.flushing: set[int] = set()
        """Segments whose flush is under way (a repeated request for one waits for it)."""
        self.reported: dict[int, SegmentFlushed] = {}
        """What we said when we flushed them (said again when the coord asks again)."""

    def sync_due(self) -> None:
        """The policies after a pack: full buffers spill, stale or many deletes are logged."""
        for buf in self.buffer.full():
            self.spill(buf)
        if self.buffer.deltas_due():
            self.sync_deltas()

    def spill(self, buf: SegmentBuffer, *, tail: bool = False) -> None:
        """Write a growing segment's rows so far in the background, so a flush has only
        the ``tail`` left to write."""
        batches, before = buf.take_pending()
        if not batches:
            return
        wb = self.buffer
        stats = buf.spill_stats(batches, before, self.segment_max)
        rows = RowsSync(
            self._dir(buf),
            batches,
            wb.arrow_schema,
            wb.defaults,
            before,
            stats,
            wb.pk_field,
            whole=tail and before == 0,
        )
        name = f"spill segment {buf.segment_id}"
        self.syncs.submit(name, [buf.segment_id], rows.write, position=buf.first_seq)

    def sync_deltas(self, only: set[int] | None = None) -> None:
        """Pending deletes of flushed segments into delta logs, so the checkpoint can move."""
        for take in self.buffer.take_deltas(only):
            seg_dir = self.buffer.seg_dir(take.partition_id, take.segment_id)
            delta = DeltaSync(seg_dir, take.deletes, take.name)
            name = f"delta log of segment {take.segment_id}"
            self.syncs.submit(name, [take.segment_id], delta.write, position=take.first_seq)

    async def persist(self) -> None:
        """Every delete applied so far into delta logs, written (a files-only read plan's
        barrier, ``TickReply.persist_ts``). The first round also waits for running
        compactions, whose targets then hold the deletes that reached their sources during
        the merge: the second round writes those."""
        for _ in range(2):
            self.sync_deltas()
            running = self.syncs.running()
            if running:
                await asyncio.wait(running)
            if self.syncs.failure is not None or any(
                t.cancelled() or t.exception() is not None for t in running
            ):
                raise RuntimeError(f"{self.vchannel}: a sync failed; deletes are not all written")

    def flush(self, segment_ids: list[int]) -> None:
        for sid in segment_ids:
            if sid in self.flushing:
                continue  # asked again while it is written: its report is coming
            if sid in self.reported:  # asked again (the coord restarted): say the same
                self._report(sid, self.reported[sid])
                continue
            buf = self.buffer.seal(sid)
            empty = SegmentFlushed(
                node_id=self.node_id, vchannel=self.vchannel, segment_id=sid, num_rows=0
            )
            if buf is None or not buf.rows:
                report = dataclasses.replace(empty, checkpoint=self.checkpoint())
                self.reported[sid] = report
                self._report(sid, report)
                continue
            self.flushing.add(sid)
            self.spill(buf, tail=True)
            written = dataclasses.replace(
                empty,
                is_sorted=True,  # SealSync sorts the rows
                num_rows=buf.rows,
                path=str(layout.data_path(self._dir(buf))),
                min_ts=buf.min_ts,
                max_ts=buf.max_ts,
                start_seq=buf.first_seq,
            )
            seal = SealSync(
                self._dir(buf),
                buf.pk_array(),
                buf.deletes,
                buf.first_seq,
                self.buffer.pk_field,
                buf.stats,
                lambda: self.buffer.schema,
            )

            async def flushed(
                stats: PkStats, sid: int = sid, written: SegmentFlushed = written
            ) -> None:
                self.buffer.flushed_with(sid, stats)
                report = dataclasses.replace(written, checkpoint=self.checkpoint())
                self.reported[sid] = report
                self.flushing.discard(sid)
                await self.reports.flushed(report)
                rows = report.num_rows
                log.info("%s: flushed segment %s (%s rows)", self.vchannel, sid, rows)
                await asyncio.to_thread(freemem.release)  # the rows it wrote, buffered till now

            name = f"flush segment {sid}"
            self.syncs.submit(name, [sid], seal.write, position=buf.first_seq, then=flushed)
        self.sync_deltas()

    def _report(self, sid: int, report: SegmentFlushed) -> None:
        """A report with nothing to write, after whatever the segment's syncs still do."""

        async def tell(_: None) -> None:
            await self.reports.flushed(report)

        self.syncs.submit(f"report segment {sid}", [sid], _nothing, position=None, then=tell)

    def _dir(self, buf: SegmentBuffer) -> str:
        return self.buffer.seg_dir(buf.partition_id, buf.segment_id)
