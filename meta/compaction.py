"""Compaction planning: merge small flushed segments and drop deleted rows.

The coord plans, the datanode that consumes the segments' vchannel executes: a plan rides
on the reply to that datanode's next tick report, and the datanode runs it between two
packs, so no delete of the channel can slip past it. When the datanode reports the
result, the sources become Dropped and the target Flushed, in one catalog write.

Rows deleted at or before the *horizon* (now minus the time-travel retention) are
dropped; newer delete records are carried into the target, so reads at a timestamp inside
the retention window still see those rows. Likewise rows a collection TTL expired at the
horizon: a segment holding some (its oldest row older than the TTL's floor) is planned
even alone and whatever its size, as Milvus compacts a segment with expired entities.

A clustering compaction (``plan_clustering``, on request only) is a plan of the same kind
with several targets: the rows ordered by the collection's clustering key and cut into L2
segments of contiguous key ranges, which reads filtering on the key skip. The mix
compaction leaves L2 segments alone (unless their rows expire): it would lose their ranges.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elanus import tsutil
from elanus.api.base import ACK, Ack
from elanus.api.compaction import (
    Compacted,
    CompactionDone,
    CompactionFailed,
    CompactionList,
    CompactionPlan,
    CompactionPlans,
    CompactionProgress,
    CompactionStarted,
    CompactionSummary,
    GetCompactionPlans,
    GetCompactionState,
    ListCompactions,
    PlanSource,
    PlanSummary,
    Recorded,
    TriggerCompaction,
)
from elanus.channels import subjects
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta.scheduler import Lapsed
from elanus.meta.segmentmeta import Segment
from elanus.properties import expire_floor, ttl_ms
from elanus.states import COMPACTION_OPEN, CompactionState, SegmentLevel, SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import Handoff, SegmentIndexer, SegmentStore

log = logging.getLogger(__name__)

PLAN_TIMEOUT_S = 120.0
SMALL_FRACTION = 0.5
"""A flushed segment under this fraction of the row limit is 'small' for the auto policy."""


@dataclass
class Plan:
    plan_id: int
    compaction_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    sources: list[int]
    targets: list[int]
    """One for a mix compaction; a clustering one's cut of the rows, at most one each."""
    horizon_ts: int
    ttl: int = 0
    """The collection's TTL in ms when planned (0: none)."""
    planned_ts: int = 0
    """Every write acknowledged before the plan is older: the datanode runs the plan only
    once its channel passed this, so no delete of a source is left behind."""
    state: CompactionState = CompactionState.PENDING
    issued_at: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    """Why the plan failed."""
    attempts: int = 0
    """Times it was handed to its datanode (once: a plan that lapsed fails)."""
    clustering_key: str | None = None
    """A clustering compaction's: the field its targets are cut by."""
    target_rows: int = 0
    """A clustering compaction's rows per target."""

    def fail(self, reason: str) -> None:
        log.warning("compaction plan %s failed: %s", self.plan_id, reason)
        transition(self, CompactionState.FAILED)
        self.reason = reason

    @property
    def label(self) -> str:
        return f"compaction plan {self.plan_id}"

    @property
    def holder(self) -> str | None:
        executing = self.state is CompactionState.EXECUTING
        return f"the datanode of {self.vchannel}" if executing else None

    @property
    def lease_expires(self) -> float:
        return self.issued_at + PLAN_TIMEOUT_S

    def to_wire(self, segments: Mapping[int, Segment]) -> CompactionPlan:
        return CompactionPlan(
            plan_id=self.plan_id,
            partition_id=self.partition_id,
            targets=list(self.targets),
            horizon_ts=self.horizon_ts,
            ttl=self.ttl,
            clustering_key=self.clustering_key,
            target_rows=self.target_rows,
            sources=[
                PlanSource(segment_id=s, path=segments[s].path, partition_id=self.partition_id)
                for s in self.sources
            ],
        )


@dataclass(frozen=True)
class Started:
    """What a compaction id was handed out for."""

    collection_id: int | None
    planned_ts: int
    manual: bool


class CompactionManager:
    def __init__(
        self, ctx: CoordContext, data: SegmentStore, index: SegmentIndexer, query: Handoff
    ) -> None:
        self.ctx, self.data, self.index, self.query = ctx, data, index, query
        self.plans: dict[int, Plan] = {}
        self.known: dict[int, Started] = {}
        """Compaction ids handed out (a manual one may have no plan: nothing to merge)."""
        self._recording: dict[int, asyncio.Future[Recorded]] = {}
        """Plans whose result is being recorded, by plan id."""

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "compaction.trigger": self.trigger,
            "compaction.state": self.state,
            "compaction.list": self.recent,
            "compaction.plans": self.plans_of,
            "compaction.done": self.done,
            "compaction.fail": self.fail,
        }

    def background(self) -> list[Periodic]:
        """The automatic policy; plans that lapse are failed by the coord's scheduler."""
        interval = self.ctx.settings.compaction_interval_s
        return [Periodic(self.auto, interval, "auto compaction")] if interval > 0 else []

    # -- the scheduler's queue of plans (meta/scheduler.py) ----------------------------------
    name = "compaction plans"

    def running(self) -> list[Plan]:
        return [p for p in self.plans.values() if p.state is CompactionState.EXECUTING]

    def live_holders(self) -> None:
        return None  # a plan's lease is its timeout: the tick reply that carried it is gone

    def may_retry(self, plan: Plan) -> bool:
        return False  # the next round plans the sources again

    async def retry(self, lapsed: Sequence[Lapsed[Plan]]) -> None:
        """Never called (``may_retry``)."""

    async def give_up(self, lapsed: Sequence[Lapsed[Plan]]) -> None:
        """A plan nobody finished (its datanode died) fails; the next round replans."""
        for x in lapsed:
            if x.current() and x.task.state is CompactionState.EXECUTING:
                x.task.fail(
                    f"no result from the datanode of {x.task.vchannel} in {PLAN_TIMEOUT_S:.0f} s"
                )

    async def dispatch(self) -> None:
        """Nothing to push: plans ride on the replies to datanode ticks (``take_for``)."""

    # -- planning ---------------------------------------------------------------------------
    def _busy(self) -> set[int]:
        return {s for p in self.plans.values() if p.state in COMPACTION_OPEN for s in p.sources}

    def _horizon(self) -> int:
        retention_ms = int(self.ctx.settings.retention_s * 1000)
        return tsutil.compose(max(0, tsutil.now_ms() - retention_ms))

    async def _ttls(self) -> dict[int, int]:
        """Each live collection's TTL in ms (those with one)."""
        rows = await self.ctx.db.run(
            lambda con: con.execute(
                "SELECT collection_id, properties FROM collections WHERE dropped_ts IS NULL"
            ).fetchall()
        )
        ttls = {int(cid): ttl_ms(json.loads(props or "{}")) for cid, props in rows}
        return {cid: ttl for cid, ttl in ttls.items() if ttl}

    def _groups(
        self, segs: list[Segment], max_rows: int, *, merge_only: bool, expiring: set[int]
    ) -> list[list[Segment]]:
        """Pack segments of one partition and vchannel into groups within the row limit
        (``merge_only``: groups of one are left out, unless ``expiring`` holds it)."""
        segs = sorted(segs, key=lambda s: s.num_rows)
        groups: list[list[Segment]] = []
        current: list[Segment] = []
        rows = 0
        for s in segs:
            if current and rows + s.num_rows > max_rows:
                groups.append(current)
                current, rows = [], 0
            current.append(s)
            rows += s.num_rows
        if current:
            groups.append(current)
        return [g for g in groups if len(g) > 1 or not merge_only or g[0].segment_id in expiring]

    def plan(
        self,
        collection_id: int | None,
        *,
        manual: bool,
        ttls: Mapping[int, int] | None = None,
        target_rows: int | None = None,
    ) -> int:
        """Make plans for a collection (or every one); returns the compaction id.
        ``ttls``: the collections' TTLs in ms (``_ttls``). Targets hold up to
        ``target_rows`` (a force merge's size), else the sources' row limit."""
        data = self.data
        busy = self._busy()
        ttls = ttls or {}
        horizon = self._horizon()
        by_channel: dict[tuple[int, int, str], list[Segment]] = {}
        expiring: set[int] = set()
        for s in data.segments.values():
            if s.state is not SegmentState.FLUSHED or s.segment_id in busy or not s.path:
                continue
            if collection_id is not None and s.collection_id != collection_id:
                continue
            floor = expire_floor(horizon, ttls.get(s.collection_id, 0))
            if floor and s.min_ts is not None and s.min_ts < floor:
                expiring.add(s.segment_id)
            elif s.level is SegmentLevel.L2:
                continue  # a mix would lose its key range; a clustering compaction redoes it
            elif not manual and s.num_rows >= s.max_rows * SMALL_FRACTION:
                continue
            by_channel.setdefault((s.collection_id, s.partition_id, s.vchannel), []).append(s)
        compaction_id = self.ctx.ids.alloc()  # unique across coord restarts
        planned_ts = self.ctx.tso.alloc()
        for channel, segs in by_channel.items():
            max_rows = target_rows or max(s.max_rows for s in segs)
            groups = self._groups(segs, max_rows, merge_only=not manual, expiring=expiring)
            for group in groups:
                sources = [s.segment_id for s in group]
                self._add_plan(compaction_id, planned_ts, horizon, ttls, channel, sources)
        if manual or any(p.compaction_id == compaction_id for p in self.plans.values()):
            self.known[compaction_id] = Started(collection_id, planned_ts, manual)
        return compaction_id

    def plan_clustering(
        self, collection_id: int, key: str, ttls: Mapping[int, int], target_rows: int | None
    ) -> int:
        """A clustering compaction of a collection (Milvus's major compaction): per
        partition and vchannel, every flushed segment (L1 and L2) is rewritten into L2
        targets, each a contiguous range of ``key`` of about ``target_rows`` rows (else
        the sources' row limit); returns the compaction id."""
        busy, horizon = self._busy(), self._horizon()
        groups: dict[tuple[int, str], list[Segment]] = {}
        for s in self.data.segments.values():
            if s.collection_id != collection_id or s.segment_id in busy or not s.path:
                continue
            if s.state is SegmentState.FLUSHED:
                groups.setdefault((s.partition_id, s.vchannel), []).append(s)
        compaction_id = self.ctx.ids.alloc()
        planned_ts = self.ctx.tso.alloc()
        for (pid, vchannel), segs in groups.items():
            rows = target_rows or max(s.max_rows for s in segs)
            count = max(1, -(-sum(s.num_rows for s in segs) // rows))
            sources = sorted(s.segment_id for s in segs)
            channel = (collection_id, pid, vchannel)
            self._add_plan(
                compaction_id, planned_ts, horizon, ttls, channel, sources, count, key, rows
            )
        self.known[compaction_id] = Started(collection_id, planned_ts, manual=True)
        return compaction_id

    def _add_plan(
        self,
        compaction_id: int,
        planned_ts: int,
        horizon: int,
        ttls: Mapping[int, int],
        channel: tuple[int, int, str],
        sources: list[int],
        targets: int = 1,
        clustering_key: str | None = None,
        target_rows: int = 0,
    ) -> None:
        """Record a pending plan of ``compaction_id``: ``sources`` of ``channel``
        (collection, partition, vchannel) rewritten into ``targets`` new segments."""
        collection_id, partition_id, vchannel = channel
        plan = Plan(
            plan_id=self.ctx.ids.alloc(),
            compaction_id=compaction_id,
            collection_id=collection_id,
            partition_id=partition_id,
            vchannel=vchannel,
            sources=sources,
            targets=[self.ctx.ids.alloc() for _ in range(targets)],
            horizon_ts=horizon,
            ttl=ttls.get(collection_id, 0),
            planned_ts=planned_ts,
            clustering_key=clustering_key,
            target_rows=target_rows,
        )
        self.plans[plan.plan_id] = plan

    def cancel(self, collection_id: int, reason: str) -> None:
        """Fail the collection's open plans (it was truncated: their targets would hold
        removed rows); a datanode's later report of one is ignored."""
        for p in self.plans.values():
            if p.collection_id == collection_id and p.state in COMPACTION_OPEN:
                p.fail(reason)

    async def auto(self) -> None:
        self.plan(None, manual=False, ttls=await self._ttls())

    def open_targets(self) -> set[int]:
        """Target segments of plans still open: garbage collection keeps their files."""
        return {t for p in self.plans.values() if p.state in COMPACTION_OPEN for t in p.targets}

    def take_for(self, vchannel: str, tick_ts: int) -> list[CompactionPlan]:
        """Plans to hand to the datanode reporting ``vchannel`` consumed up to ``tick_ts``
        (the tick reply)."""
        out = []
        for p in self.plans.values():
            due = p.state is CompactionState.PENDING and p.planned_ts <= tick_ts
            if p.vchannel == vchannel and due:
                if any(s not in self.data.segments for s in p.sources):
                    p.fail("a source segment went away (collection dropped?)")
                    continue
                transition(p, CompactionState.EXECUTING)
                p.issued_at = time.monotonic()
                p.attempts += 1
                out.append(p.to_wire(self.data.segments))
        return out

    # -- handlers ---------------------------------------------------------------------------
    async def trigger(self, req: TriggerCompaction) -> CompactionStarted:
        target_rows = None
        if req.target_size_mb is not None:
            row_bytes = await self.data.row_bytes(req.collection_id)
            target_rows = max(1, req.target_size_mb * (1 << 20) // row_bytes)
        ttls = await self._ttls()
        if req.clustering:
            key = (await self.data.schema(req.collection_id)).clustering_key
            if key is None:
                raise invalid(
                    "clustering compaction needs a clustering key, and this collection has "
                    "none (is_clustering_key=True on a scalar field, when it is created)"
                )
            compaction_id = self.plan_clustering(req.collection_id, key.name, ttls, target_rows)
        else:
            compaction_id = self.plan(
                req.collection_id, manual=True, ttls=ttls, target_rows=target_rows
            )
        plans = [p for p in self.plans.values() if p.compaction_id == compaction_id]
        return CompactionStarted(compaction_id=compaction_id, plans=len(plans))

    async def state(self, req: GetCompactionState) -> CompactionProgress:
        return self._progress(req.compaction_id, self._plans_of(req.compaction_id))

    async def plans_of(self, req: GetCompactionPlans) -> CompactionPlans:
        """A compaction's progress with each plan's sources, target and state."""
        plans = self._plans_of(req.compaction_id)
        return CompactionPlans(
            progress=self._progress(req.compaction_id, plans),
            plans=[
                PlanSummary(
                    plan_id=p.plan_id,
                    collection_id=p.collection_id,
                    partition_id=p.partition_id,
                    vchannel=p.vchannel,
                    sources=list(p.sources),
                    targets=list(p.result.get("kept", p.targets)),
                    state=p.state.value,
                    reason=p.reason or None,
                    clustering=p.clustering_key is not None,
                )
                for p in plans
            ],
        )

    def _plans_of(self, compaction_id: int) -> list[Plan]:
        if compaction_id not in self.known:
            raise ElanusError(
                ErrorCode.COMPACTION_NOT_FOUND,
                f"compaction {compaction_id} does not exist (or was started before the "
                "coord restarted)",
            )
        return [p for p in self.plans.values() if p.compaction_id == compaction_id]

    async def recent(self, req: ListCompactions) -> CompactionList:
        """The latest compactions (since the coord started), newest first, each with its
        plans counted by state (the operator's console)."""
        plans: dict[int, list[Plan]] = {}
        for p in self.plans.values():
            plans.setdefault(p.compaction_id, []).append(p)
        latest = sorted(self.known, reverse=True)[: req.limit]  # ids grow with time
        return CompactionList(
            compactions=[
                CompactionSummary(
                    compaction_id=cid,
                    collection_id=self.known[cid].collection_id,
                    collection_ids=sorted({p.collection_id for p in plans.get(cid, [])}),
                    planned_ts=self.known[cid].planned_ts,
                    manual=self.known[cid].manual,
                    progress=self._progress(cid, plans.get(cid, [])),
                )
                for cid in latest
            ]
        )

    @staticmethod
    def _progress(compaction_id: int, plans: list[Plan]) -> CompactionProgress:
        counts = {s.value: sum(1 for p in plans if p.state is s) for s in CompactionState}
        reasons = [p.reason for p in plans if p.state is CompactionState.FAILED]
        if any(p.state in COMPACTION_OPEN for p in plans):
            state = CompactionState.EXECUTING
        else:
            state = CompactionState.FAILED if reasons else CompactionState.COMPLETED
        return CompactionProgress(
            compaction_id=compaction_id,
            state=state,
            **counts,
            reason=reasons[0] if reasons else None,
        )

    async def fail(self, req: CompactionFailed) -> Ack:
        """The datanode could not run a plan: the compaction fails with its reason (the
        sources stay; the next round may plan them again)."""
        plan = self.plans.get(req.plan_id)
        if plan is not None and plan.state in COMPACTION_OPEN:
            plan.fail(req.reason)
        return ACK

    async def done(self, req: CompactionDone) -> Recorded:
        """Record a plan's result. A datanode that timed out while the first report was
        being recorded (a busy coord) reports again: the repeat waits for that first one
        and gets its answer, instead of applying the result twice (its sources are already
        Dropped: an illegal state change, reported back as INTERNAL until the first ended)."""
        running = self._recording.get(req.plan_id)
        if running is None:
            running = asyncio.ensure_future(self._record(req))
            self._recording[req.plan_id] = running
            running.add_done_callback(lambda _: self._recording.pop(req.plan_id, None))
        return await asyncio.shield(running)

    async def _record(self, req: CompactionDone) -> Recorded:
        plan = self.plans.get(req.plan_id)
        if plan is None or plan.state not in COMPACTION_OPEN:
            # Planned before a coord restart, or given up: the sources stay, and garbage
            # collection removes the targets' files as orphans.
            log.info("ignoring the result of compaction plan %s", req.plan_id)
            return Recorded(ignored=True)
        outputs = {c.segment_id: c for c in req.targets}
        if sorted(outputs) != sorted(plan.targets):
            plan.fail("the datanode reported other targets than the plan's")
            return Recorded(ignored=True)
        data = self.data
        ts = self.ctx.tso.alloc()
        sources = [data.segments[s] for s in plan.sources if s in data.segments]
        targets = [self._target(plan, outputs[t], sources, ts) for t in plan.targets]
        for s in sources:
            transition(s, SegmentState.DROPPED)
            s.dropped_ts = ts
        await data.replace(sources, targets)
        kept = [t for t in targets if t.state is SegmentState.FLUSHED]
        for t in kept:
            await self.index.on_new_segment(t)
        if plan.state in COMPACTION_OPEN:  # else a truncate failed it meanwhile
            transition(plan, CompactionState.COMPLETED)
        plan.result = {
            "num_rows": sum(t.num_rows for t in targets),
            "kept": [t.segment_id for t in kept],
        }
        await self.ctx.bus.publish(
            subjects.SEGMENT_COMPACTED,
            {"targets": [t.to_dict() for t in targets], "sources": plan.sources, "ts": ts},
        )
        replaced = list(plan.sources)
        self.query.schedule(lambda: self.query.on_compacted(targets, replaced))
        return Recorded()

    @staticmethod
    def _target(plan: Plan, c: Compacted, sources: list[Segment], ts: int) -> Segment:
        """A target's record: Flushed, or Dropped when the merge left it empty; L2 with its
        key range when a clustering compaction wrote it."""
        clustering = plan.clustering_key is not None
        return Segment(
            segment_id=c.segment_id,
            collection_id=plan.collection_id,
            partition_id=plan.partition_id,
            vchannel=plan.vchannel,
            state=SegmentState.FLUSHED if c.num_rows else SegmentState.DROPPED,
            max_rows=max((s.max_rows for s in sources), default=c.num_rows),
            allocated_rows=c.num_rows,
            num_rows=c.num_rows,
            created_ts=ts,
            flushed_ts=ts,
            dropped_ts=None if c.num_rows else ts,
            min_ts=c.min_ts,
            max_ts=c.max_ts,
            path=c.path,
            level=SegmentLevel.L2 if clustering else SegmentLevel.L1,
            is_sorted=c.is_sorted,
            compacted_from=list(plan.sources),
            seal_ts=max((s.seal_ts or 0 for s in sources), default=0),
            key_range=c.key_range if clustering and c.num_rows else None,
        )
