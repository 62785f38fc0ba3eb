"""The coord's one task scheduler (``meta/scheduler.py``): leases that lapse, retries, and
failures with a reason, over fake queues and over the coord's own (real DuckDB catalog)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.meta import indexmeta
from elanus.meta.compaction import PLAN_TIMEOUT_S, Plan
from elanus.meta.coord import Coordinator
from elanus.meta.importmeta import ImportJob, save_job
from elanus.meta.indexmeta import IndexRecord, IndexTask
from elanus.meta.scheduler import Lapsed, TaskScheduler
from elanus.settings import Settings
from elanus.states import CompactionState, ImportJobState, IndexTaskState


@dataclass
class Job:
    label: str
    holder: str | None
    lease_expires: float = math.inf
    attempts: int = 1
    reason: str | None = None
    retryable: bool = True


@dataclass
class FakeQueue:
    name: str
    jobs: list[Job]
    live: set[str] | None
    retried: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dispatched: int = 0
    broken: bool = False

    def running(self) -> list[Job]:
        return self.jobs

    def live_holders(self) -> set[str] | None:
        return self.live

    def may_retry(self, task: Job) -> bool:
        return task.retryable

    async def retry(self, lapsed: Sequence[Lapsed[Job]]) -> None:
        self.retried += [x.task.label for x in lapsed]

    async def give_up(self, lapsed: Sequence[Lapsed[Job]]) -> None:
        for x in lapsed:
            x.task.reason = f"{x.holder} {'timed out' if x.expired else 'went away'}"
        self.failed += [x.task.label for x in lapsed]

    async def dispatch(self) -> None:
        if self.broken:
            raise RuntimeError("a bug in this kind")
        self.dispatched += 1


def test_one_round_retries_fails_and_dispatches_every_kind() -> None:
    past = time.monotonic() - 1
    jobs = [
        Job("kept", "a"),
        Job("holder gone", "b"),
        Job("unheld", None),
        Job("expired", "a", lease_expires=past, retryable=False),
        Job("gone for good", "c", retryable=False),
    ]
    first = FakeQueue("first", jobs, live={"a"}, broken=True)
    second = FakeQueue("second", [Job("timed", "x", lease_expires=past)], live=None)
    asyncio.run(TaskScheduler([first, second]).round())
    assert first.retried == ["holder gone", "unheld"]
    assert first.failed == ["expired", "gone for good"]
    assert jobs[3].reason == "a timed out" and jobs[4].reason == "c went away"
    # the first kind's dispatch raised: the second was scheduled all the same
    assert second.retried == ["timed"] and second.dispatched == 1


def test_a_lapse_is_acted_on_only_while_the_task_is_that_attempt() -> None:
    job = Job("j", "a", attempts=3)
    seen = Lapsed(job, "a", 3, expired=False)
    assert seen.current()
    job.attempts = 4  # issued again meanwhile
    assert not seen.current()
    job.attempts, job.holder = 3, "b"
    assert not seen.current()


@pytest.fixture
def coord(nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path) -> Iterator[Any]:
    bus = loop_thread.call(Bus(nats_server.url, credentials=nats_server.credentials).connect())
    settings = Settings(data_dir=str(tmp_path / "data"), session_ttl_s=2, gc_delay_s=3600)
    c = Coordinator(settings, bus)
    loop_thread.call(c.start())
    try:
        yield c
    finally:
        loop_thread.call(c.stop())
        loop_thread.call(bus.close())


def test_the_coord_retries_builds_fails_imports_and_plans_with_a_reason(
    coord: Coordinator, loop_thread: LoopThread
) -> None:
    async def scenario() -> dict[str, Any]:
        ids, tso = coord.ids, coord.tso
        spec = {"index_type": "FLAT", "metric": "L2", "params": {}}
        record = IndexRecord(ids.alloc(), 1, "v", "v", spec, tso.alloc())
        build = IndexTask(ids.alloc(), record.index_id, 1, 2, 3, 10, "/nowhere")
        coord.index.indexes[record.index_id] = record
        coord.index.tasks[build.build_id] = build
        coord.index._issue(build, "builder-that-died")
        await coord.db.run(indexmeta.save, [record], [build])

        def job(commit_ts: int | None) -> ImportJob:
            j = ImportJob(ids.alloc(), 1, "default", "c", 2, None, [], {})
            j.state, j.node_id, j.commit_ts = ImportJobState.IMPORTING, "datanode-gone", commit_ts
            coord.imports.jobs[j.job_id] = j
            return j

        running, committed = job(None), job(tso.alloc())
        for j in (running, committed):
            await coord.db.run(save_job(j))

        plan = Plan(ids.alloc(), ids.alloc(), 1, 2, "dml_0_1v0", [3], ids.alloc(), 0)
        coord.compaction.plans[plan.plan_id] = plan
        coord.compaction.take_for("dml_0_1v0", 0)  # not issued: its source is unknown
        stale = Plan(ids.alloc(), ids.alloc(), 1, 2, "dml_0_1v0", [], ids.alloc(), 0)
        stale.state, stale.attempts = CompactionState.EXECUTING, 1
        stale.issued_at = time.monotonic() - PLAN_TIMEOUT_S - 1
        coord.compaction.plans[stale.plan_id] = stale

        await coord.scheduler.round()
        rows = await coord.db.run(
            lambda con: (
                con.execute(
                    "SELECT state, version, node_id FROM index_tasks WHERE build_id = ?",
                    [build.build_id],
                ).fetchall()
                + con.execute(
                    "SELECT state, reason, reason_code FROM import_jobs WHERE job_id = ?",
                    [running.job_id],
                ).fetchall()
            )
        )
        return {"build": build, "running": running, "committed": committed, "plan": plan,
                "stale": stale, "rows": rows}  # fmt: skip

    out = loop_thread.call(scenario())
    build, running, committed = out["build"], out["running"], out["committed"]
    # an index build whose builder went is issued again (no builder now: Unissued), its
    # attempt counted by its version
    assert build.state is IndexTaskState.UNISSUED and build.node_id is None
    assert build.attempts == 1
    # an import that had not committed fails, saying why; a committed one is not failed
    assert running.state is ImportJobState.FAILED
    assert running.reason == (
        "data node datanode-gone went away during the import; nothing was imported"
    )
    assert running.reason_code == "UNAVAILABLE"
    assert committed.state is ImportJobState.IMPORTING
    # a plan whose lease ran out fails with its reason; one whose source went fails too
    assert out["stale"].state is CompactionState.FAILED
    assert (
        out["stale"].reason == f"no result from the datanode of dml_0_1v0 in {PLAN_TIMEOUT_S:.0f} s"
    )
    assert out["plan"].reason == "a source segment went away (collection dropped?)"
    # and the catalog says the same
    assert out["rows"] == [
        ("Unissued", 1, None),
        ("Failed", running.reason, "UNAVAILABLE"),
    ]
