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

from elanus.api.compaction import Compacted, CompactionDone, CompactionFailed, CompactionPlan
from elanus.channels.runtime.supervisor import describe
from elanus.schema import Schema
from elanus.segments import storage
from elanus.segments.flushcommon.flusher import Flusher
from elanus.segments.storage.compactor import cluster_segments, compact_segments
from elanus.segments.storage.pkstats import PkStats

log = logging.getLogger(__name__)


Written = list[tuple[dict[str, Any], PkStats | None]]
"""Each target's result (what the coord records) and pk stats (None: it stayed empty)."""


@dataclass
class Merge:
    """One plan's merge, on a worker thread; a failure comes back as its result. A
    ``clustering_key`` makes it a clustering compaction into every target (``targets``,
    of about ``target_rows`` rows each), else a mix compaction into the one target."""

    sources: list[str]
    targets: list[str]
    schema: Schema
    horizon_ts: int
    ttl: int = 0
    schema_now: Callable[[], Schema] | None = None
    """The channel's schema when the merge ends: a field or function added meanwhile widens
    the target before it is reported (an index build reads the column from the files)."""
    clustering_key: str | None = None
    target_rows: int = 0

    def write(self, attempt: int) -> Written | Exception:
        try:
            if self.clustering_key is None:
                args = (self.sources, self.targets[0], self.schema, self.horizon_ts, self.ttl)
                results = [compact_segments(*args)]
            else:
                results = cluster_segments(
                    self.sources,
                    self.targets,
                    self.schema,
                    self.horizon_ts,
                    self.clustering_key,
                    self.target_rows,
                    self.ttl,
                )
            now = self.schema_now() if self.schema_now is not None else self.schema
            for result in results:
                if result["num_rows"] and now.version > self.schema.version:
                    storage.widen_to(result["path"], now)
        except Exception as exc:  # noqa: BLE001 - the plan fails; the channel goes on
            log.exception("compaction into %s failed", self.targets)
            for target in self.targets:
                storage.remove_segment(target)
            return exc
        return [
            (result, storage.load_pk_stats(target) if result["num_rows"] else None)
            for result, target in zip(results, self.targets, strict=True)
        ]


class Compactions:
    """A channel's compactions: they write through its flusher's buffer, syncs and reports."""

    def __init__(self, flusher: Flusher) -> None:
        self.node_id = flusher.node_id
        self.vchannel = flusher.vchannel
        self.buffer = flusher.buffer
        self.syncs = flusher.syncs
        self.flusher = flusher
        self.reports = flusher.reports

    def start(self, plan: CompactionPlan) -> None:
        sources = [s.segment_id for s in plan.sources]
        targets, pid = plan.targets, plan.partition_id
        seg_dir = self.buffer.seg_dir
        self.flusher.sync_deltas(only=set(sources))  # the merge reads the sources' logs
        self.buffer.compacting(sources, True)
        merge = Merge(
            [seg_dir(pid, s) for s in sources],
            [seg_dir(pid, t) for t in targets],
            self.buffer.schema,
            plan.horizon_ts,
            plan.ttl,
            lambda: self.buffer.schema,
            plan.clustering_key,
            plan.target_rows,
        )

        async def merged(outcome: Written | Exception) -> None:
            if isinstance(outcome, Exception):
                self.buffer.compacting(sources, False)
                await self.reports.compaction_failed(
                    CompactionFailed(
                        plan_id=plan.plan_id, node_id=self.node_id, reason=describe(outcome)
                    )
                )
                return
            written = [(t, stats) for t, (_, stats) in zip(targets, outcome, strict=True)]
            self.buffer.compacted(sources, written, pid)
            self.buffer.compacting(targets, True)  # their deletes wait for the report
            report = CompactionDone(
                plan_id=plan.plan_id,
                node_id=self.node_id,
                vchannel=self.vchannel,
                targets=[
                    Compacted(segment_id=t, **result)
                    for t, (result, _) in zip(targets, outcome, strict=True)
                ],
            )
            await self.reports.compaction_done(report)
            self.buffer.compacting(targets, False)
            log.info(
                "%s: compacted %s into %s (%s rows)",
                self.vchannel,
                sources,
                targets,
                [result["num_rows"] for result, _ in outcome],
            )

        name = f"compaction plan {plan.plan_id}"
        self.syncs.submit(
            name, [*sources, *targets], merge.write, position=None, then=merged, attempts=1
        )
