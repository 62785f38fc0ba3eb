"""The coord's compaction API (``meta/compaction.py``): start a compaction and follow it,
and the plans a datanode runs (they ride on its tick reply) and reports back.

The key names are the wire format (``compact`` and ``get_compaction_state`` pass the
replies on to Flight clients as docs/protocol.md shows them).
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus.api.base import Ack, Stub, record, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import Range, request


@reply
class PlanSource:
    segment_id: int
    path: str | None
    partition_id: int


@reply
class CompactionPlan:
    """Merge ``sources`` into ``targets``, dropping rows deleted at or before
    ``horizon_ts`` and, with a collection TTL of ``ttl`` ms, rows expired then. A mix
    compaction has one target; a clustering one (``clustering_key``: the field) orders
    the rows by that field and cuts them into up to ``len(targets)`` contiguous ranges of
    about ``target_rows`` rows each."""

    plan_id: int
    partition_id: int
    targets: list[int]
    horizon_ts: int
    sources: list[PlanSource]
    ttl: int = 0
    clustering_key: str | None = None
    target_rows: int = 0


@request("compaction.trigger")
class TriggerCompaction:
    collection_id: int
    target_size_mb: Annotated[int, Range(1)] | None = None
    """Milvus's ``target_size`` (a force merge): the segments of each partition and
    vchannel are merged into targets of up to this size (estimated from the schema) rather
    than up to the sources' row limit."""
    clustering: bool = False
    """Milvus's ``majorCompaction``: a clustering compaction (the collection needs a
    clustering key)."""


@reply
class CompactionStarted:
    compaction_id: int
    plans: int


@request("compaction.state")
class GetCompactionState:
    compaction_id: int


@reply
class CompactionProgress:
    """Plans per state (``CompactionState`` values); ``reason``: why the first failed plan
    failed (absent from the body when none did)."""

    compaction_id: int
    state: str
    pending: int
    executing: int
    completed: int
    failed: int
    reason: str | None = None

    def to_body(self) -> dict[str, Any]:
        body = {
            "compaction_id": self.compaction_id,
            "state": self.state,
            "pending": self.pending,
            "executing": self.executing,
            "completed": self.completed,
            "failed": self.failed,
        }
        if self.reason is not None:
            body["reason"] = self.reason
        return body


@request("compaction.list")
class ListCompactions:
    limit: Annotated[int, Range(1, 1000)] = 100
    """The most recent ones to list."""


@reply
class CompactionSummary:
    """One compaction as ``compaction.state`` counts its plans, with what it covers:
    ``collection_id`` (None: the automatic policy's round over every collection) and
    ``planned_ts`` (a hybrid timestamp: when it was planned)."""

    compaction_id: int
    collection_id: int | None
    collection_ids: list[int]
    """The collections its plans merge segments of."""
    planned_ts: int
    manual: bool
    progress: CompactionProgress


@reply
class CompactionList:
    compactions: list[CompactionSummary]
    """Newest first."""

    def to_body(self) -> dict[str, Any]:
        return {
            "compactions": [
                {
                    "compaction_id": c.compaction_id,
                    "collection_id": c.collection_id,
                    "collection_ids": c.collection_ids,
                    "planned_ts": c.planned_ts,
                    "manual": c.manual,
                    **c.progress.to_body(),
                }
                for c in self.compactions
            ]
        }


@request("compaction.plans")
class GetCompactionPlans:
    compaction_id: int


@reply
class PlanSummary:
    """One plan of a compaction as the coord holds it: ``sources`` merge into
    ``targets`` (those the result kept rows in, once it is done); ``state`` a
    ``CompactionState`` value; ``clustering``: a clustering compaction's plan."""

    plan_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    sources: list[int]
    targets: list[int]
    state: str
    reason: str | None = None
    clustering: bool = False


@reply
class CompactionPlans:
    """A compaction's progress and its plans (Milvus's ``GetCompactionStateWithPlans``)."""

    progress: CompactionProgress
    plans: list[PlanSummary]


@request("compaction.fail")
class CompactionFailed:
    plan_id: int
    reason: str
    node_id: str | None = None


@record
class Compacted:
    """One target as the merge wrote it; ``key_range``: a clustering compaction's target's
    lowest and highest clustering key (None: it holds only nulls of the key, or it is a
    mix compaction's)."""

    segment_id: int
    num_rows: Annotated[int, Range(0)]
    path: str | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    is_sorted: bool = False
    """Its rows are in primary-key order (the merge sorted them)."""
    key_range: list[Any] | None = None


@request("compaction.done")
class CompactionDone:
    plan_id: int
    targets: list[Compacted]
    """Every target of the plan, in the plan's order (an empty one: ``num_rows`` 0)."""
    node_id: str | None = None
    vchannel: str | None = None


@reply
class Recorded:
    """A report's answer (a compaction's result, a flushed segment); ``ignored``: it was
    about something the coord no longer holds (given up, dropped meanwhile, or from before
    a coord restart), so it is not to be retried."""

    ignored: bool = False


class CompactionAPI(Stub):
    """The coord's compaction calls (``elanus.coord.compaction.<call>``)."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def trigger(self, req: TriggerCompaction) -> CompactionStarted:
        return await self._ask("compaction.trigger", req, CompactionStarted)

    async def state(self, req: GetCompactionState) -> CompactionProgress:
        return await self._ask("compaction.state", req, CompactionProgress)

    async def recent(self, req: ListCompactions) -> CompactionList:
        return await self._ask("compaction.list", req, CompactionList)

    async def plans(self, req: GetCompactionPlans) -> CompactionPlans:
        return await self._ask("compaction.plans", req, CompactionPlans)

    async def fail(self, req: CompactionFailed, timeout: float | None = None) -> Ack:
        return await self._ask("compaction.fail", req, Ack, timeout)

    async def done(self, req: CompactionDone, timeout: float | None = None) -> Recorded:
        return await self._ask("compaction.done", req, Recorded, timeout)
