"""Compaction merges small flushed segments and drops deleted rows; GC removes the files."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pytest
from stack_factory import stack_factory_fixture  # noqa: F401  (the stack_factory fixture)

from elanus.api.compaction import CompactionDone, Recorded
from elanus.client.client import Client
from elanus.segments import storage
from elanus.segments.flushcommon.coordreport import CoordReports

DIM = 8


@pytest.fixture
def stack_settings() -> dict[str, Any]:
    """``stack_factory``'s base: large segments, no background compaction, garbage goes at once."""
    return {
        "segment_max_rows": 10_000,
        "compaction_interval_s": 0,
        "gc_delay_s": 0,
        "orphan_grace_s": 0,
        "retention_s": 0,
    }


def insert_range(client: Client, start: int, n: int) -> None:
    rng = np.random.default_rng(start)
    client.insert(
        "c", {"id": np.arange(start, start + n), "vector": rng.random((n, DIM), dtype=np.float32)}
    )


def three_flushed_batches(client: Client) -> None:
    client.create_collection("c", dimension=DIM)
    for k in range(3):
        insert_range(client, k * 100, 100)
        client.flush("c", timeout=30)


def flushed(client: Client) -> list[dict[str, Any]]:
    return [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]


def stored_ids(client: Client) -> list[int]:
    ids = []
    for s in flushed(client):
        ids += lance.dataset(s["path"]).to_table(columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def wait_compacted(client: Client, job: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while client.get_compaction_state(job) != "Completed":
        assert time.monotonic() < deadline, "compaction did not complete"
        time.sleep(0.05)


def test_compact_merges_segments_drops_deleted_rows_and_gc_removes_sources(
    stack_factory: Any,
) -> None:
    stack = stack_factory()
    client = stack.client()
    three_flushed_batches(client)
    before = flushed(client)
    assert len(before) == 3
    client.delete("c", list(range(0, 300, 3)))  # 100 keys, spread over all three
    job = client.compact("c")
    wait_compacted(client, job)
    after = flushed(client)
    assert len(after) == 1
    target = after[0]
    assert target["level"] == 2 and target["is_sorted"]  # L1, rows in key order
    target_ids = lance.dataset(target["path"]).to_table(columns=["id"]).column("id")
    assert target_ids.to_pylist() == [i for i in range(300) if i % 3]
    assert sorted(target["compacted_from"]) == sorted(s["segment_id"] for s in before)
    assert target["num_rows"] == 200
    assert stored_ids(client) == [i for i in range(300) if i % 3]
    assert storage.read_deltas(Path(target["path"]).parent) is None  # nothing left to carry
    # The sources are Dropped; garbage collection removes their files.
    info = {
        s["segment_id"]: s for s in client.get_segment_info(segment_ids=target["compacted_from"])
    }
    assert {s["state"] for s in info.values()} == {"Dropped"}
    stack.call(stack.coord.gc.collect())
    removed = stack.coord.gc.removed  # this round's and the background rounds'
    for s in before:
        assert not Path(s["path"]).exists()
        assert str(Path(s["path"]).parent) in removed
    assert Path(target["path"]).exists()
    # Deletes after the compaction still land on the new segment.
    client.delete("c", [1, 2])
    insert_range(client, 1000, 10)
    client.flush("c", timeout=30)
    job = client.compact("c")
    wait_compacted(client, job)
    ids = stored_ids(client)
    assert 1 not in ids and 2 not in ids and 1000 in ids and len(ids) == 208


def test_retention_keeps_recently_deleted_rows_with_their_delete_records(
    stack_factory: Any,
) -> None:
    stack = stack_factory(retention_s=3600)
    client = stack.client()
    three_flushed_batches(client)
    deleted = client.delete("c", [5, 150, 250])
    job = client.compact("c")
    wait_compacted(client, job)
    (target,) = flushed(client)
    assert target["num_rows"] == 300  # inside the time-travel window: rows stay
    deltas = storage.read_deltas(Path(target["path"]).parent)
    assert deltas is not None
    assert sorted(deltas.column("pk").to_pylist()) == [5, 150, 250]
    assert set(deltas.column("ts").to_pylist()) == {deleted["ts"]}


def test_automatic_policy_merges_small_segments(stack_factory: Any) -> None:
    stack = stack_factory(compaction_interval_s=0.3)
    client = stack.client()
    three_flushed_batches(client)
    deadline = time.monotonic() + 30
    while len(flushed(client)) > 1:
        assert time.monotonic() < deadline, "the automatic policy never merged"
        time.sleep(0.1)
    assert stored_ids(client) == list(range(300))


def test_gc_removes_orphan_segment_directories(stack_factory: Any) -> None:
    stack = stack_factory()
    client = stack.client()
    three_flushed_batches(client)
    live = flushed(client)
    orphan = Path(live[0]["path"]).parent.parent / "987654321"
    orphan.mkdir()
    (orphan / "data.lance").mkdir()
    old = time.time() - 10
    os.utime(orphan, (old, old))
    stack.call(stack.coord.gc.collect())
    assert str(orphan) in stack.coord.gc.removed and not orphan.exists()
    assert all(Path(s["path"]).exists() for s in live)


def test_dropping_a_collection_removes_its_files(stack_factory: Any) -> None:
    stack = stack_factory()
    client = stack.client()
    three_flushed_batches(client)
    coll_dir = Path(flushed(client)[0]["path"]).parents[2]
    assert coll_dir.exists()
    client.drop_collection("c")
    stack.call(stack.coord.gc.collect())
    assert not coll_dir.exists()


def test_a_repeated_result_report_waits_for_the_first_and_applies_once(
    stack_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A datanode whose report timed out on a busy coord reports again while the first is
    still being recorded: both get the first one's answer, the result is applied once (the
    repeat used to fail as an illegal Dropped -> Dropped change, retried until the first
    ended), and the compaction completes with the right rows."""
    stack = stack_factory()
    client = stack.client()
    three_flushed_batches(client)
    store = stack.coord.compaction.data
    replace = store.replace

    async def slow_replace(sources: list[Any], targets: list[Any]) -> None:
        await asyncio.sleep(0.3)  # a busy coord: the repeat arrives meanwhile
        await replace(sources, targets)

    monkeypatch.setattr(store, "replace", slow_replace)
    answers: list[Recorded] = []

    async def report_twice(self: CoordReports, report: CompactionDone) -> None:
        first = asyncio.ensure_future(self.compaction.done(report))
        await asyncio.sleep(0.05)
        answers.extend(await asyncio.gather(first, self.compaction.done(report)))

    monkeypatch.setattr(CoordReports, "compaction_done", report_twice)
    wait_compacted(client, client.compact("c"))
    assert answers == [Recorded(), Recorded()]
    assert len(flushed(client)) == 1
    assert stored_ids(client) == list(range(300))
