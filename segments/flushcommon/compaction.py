"""Running the coord's compaction plans for one vchannel, off the consumption path.

A plan's sources first get their pending deletes into delta logs (syncs of those segments,
which the merge waits for, as it names them); from then on until the merge is reported,
deletes that reach a source stay in the write buffer. When the merge is done they move to
the target, which keeps them (not logged, so the checkpoint stays before them) until the
coord knows of the target: no delete is lost whichever side of the merge it lands on.
A failed merge is reported to the coord; the channel goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elanus.api.compaction import CompactionDone, CompactionFailed, CompactionPlan
from elanus.channels.runtime.supervisor import describe
from elanus.schema import Schema
from elanus.segments import storage
from elanus.segments.flushcommon.coordreport import CoordReports
from elanus.segments.flushcommon.flusher import Flusher
from elanus.segments.flushcommon.syncmgr import SyncManager
from elanus.segments.flushcommon.writebuffer import WriteBuffer
from elanus.segments.storage.compactor import compact_segments
from elanus.segments.storage.pkstats import PkStats

log = logging.getLogger(__name__)


@dataclass
class Merge:
    """One plan's merge, on a worker thread; a failure comes back as its result."""

    sources: list[str]
    target: str
    schema: Schema
    horizon_ts: int
    ttl: int = 0
    schema_now: Callable[[], Schema] | None = None
    """The channel's schema when the merge ends: a field or function added meanwhile widens
    the target before it is reported (an index build reads the column from the files)."""

    def write(self, attempt: int) -> tuple[dict[str, Any], PkStats | None] | Exception:
        try:
            result = compact_segments(
                self.sources, self.target, self.schema, self.horizon_ts, self.ttl
            )
            now = self.schema_now() if self.schema_now is not None else self.schema
            if result["num_rows"] and now.version > self.schema.version:
                storage.widen_to(result["path"], now)
        except Exception as exc:  # noqa: BLE001 - the plan fails; the channel goes on
            log.exception("compaction into %s failed", self.target)
            storage.remove_segment(self.target)
            return exc
        return result, storage.load_pk_stats(self.target) if result["num_rows"] else None


class Compactions:
    def __init__(
        self,
        node_id: str,
        vchannel: str,
        buffer: WriteBuffer,
        syncs: SyncManager,
        flusher: Flusher,
        reports: CoordReports,
    ) -> None:
        self.node_id = node_id
        self.vchannel = vchannel
        self.buffer = buffer
        self.syncs = syncs
        self.flusher = flusher
        self.reports = reports

    def start(self, plan: CompactionPlan) -> None:
        sources = [s.segment_id for s in plan.sources]
        target, pid = plan.target_segment_id, plan.partition_id
        seg_dir = self.buffer.seg_dir
        self.flusher.sync_deltas(only=set(sources))  # the merge reads the sources' logs
        self.buffer.compacting(sources, True)
        merge = Merge(
            [seg_dir(pid, s) for s in sources],
            seg_dir(pid, target),
            self.buffer.schema,
            plan.horizon_ts,
            plan.ttl,
            lambda: self.buffer.schema,
        )

        async def merged(outcome: tuple[dict[str, Any], PkStats | None] | Exception) -> None:
            if isinstance(outcome, Exception):
                self.buffer.compacting(sources, False)
                await self.reports.compaction_failed(
                    CompactionFailed(
                        plan_id=plan.plan_id, node_id=self.node_id, reason=describe(outcome)
                    )
                )
                return
            result, stats = outcome
            self.buffer.compacted(sources, target, pid, stats)
            self.buffer.compacting([target], True)  # its deletes wait for the report
            report = CompactionDone(
                plan_id=plan.plan_id,
                node_id=self.node_id,
                vchannel=self.vchannel,
                target_segment_id=target,
                **result,
            )
            await self.reports.compaction_done(report)
            self.buffer.compacting([target], False)
            log.info(
                "%s: compacted %s into %s (%s rows)",
                self.vchannel,
                sources,
                target,
                result["num_rows"],
            )

        name = f"compaction plan {plan.plan_id}"
        self.syncs.submit(
            name, [*sources, target], merge.write, position=None, then=merged, attempts=1
        )
