"""The delegator's named parts (seed 001): the PK oracle over real key statistics, the
delete buffer (one-batch reads, snapshots, trimming), the distribution's read pinning, and,
through a real stack, the one-batch replay into a handed-off segment and the trim after
later flushes."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, wait_for

from elanus.api.querynode import SealedSegment
from elanus.segments import storage
from elanus.segments.querynode.delegator import Delegator
from elanus.segments.querynode.deletebuffer import DeleteBuffer
from elanus.segments.querynode.distribution import Distribution
from elanus.segments.storage.pkoracle import PkOracle

DIM = 8
STRONG = "Strong"


# -- PkOracle ---------------------------------------------------------------------------------


def _segments(tmp_path: Path, keys: dict[int, pa.Array]) -> PkOracle:
    """Key statistics written and read back as the datanode and the delegator do."""
    oracle = PkOracle()
    for sid, pks in keys.items():
        seg_dir = tmp_path / str(sid)
        seg_dir.mkdir()
        storage.write_pk_stats(seg_dir, pks)
        oracle.add(sid, storage.load_pk_stats(seg_dir))
    return oracle


@pytest.mark.parametrize("kind", ["int", "str"])
def test_oracle_matches_each_segments_filter_and_misses_no_key(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(3)
    ranges = {1: (0, 5000), 2: (5000, 10_000), 3: (20_000, 20_500)}

    def arr(values: np.ndarray) -> pa.Array:
        return pa.array(values) if kind == "int" else pa.array([f"k{v:06d}" for v in values])

    held = {
        sid: rng.choice(np.arange(lo, hi), (hi - lo) // 2, replace=False)
        for sid, (lo, hi) in ranges.items()
    }
    oracle = _segments(tmp_path, {sid: arr(v) for sid, v in held.items()})
    asked = np.concatenate([rng.integers(0, 12_000, 3000), held[3][:5]])
    pks = arr(asked)

    masks = oracle.masks(pks)
    for sid, values in held.items():
        stats = oracle.get(sid)
        assert stats is not None
        want = stats.may_contain(pks)  # the per-segment loop the oracle replaces
        got = masks.get(sid, np.zeros(len(pks), bool))
        assert np.array_equal(got, want), sid
        assert got[np.isin(asked, values)].all()  # no key a segment holds is ever missed
    # Segment 3's range covers only the five keys asked from it (and no other): its mask
    # is those five, and a question with no key in its range leaves it out.
    assert masks[3].sum() >= 5 and masks[3][-5:].all()
    assert 3 not in oracle.masks(arr(np.arange(100, 200)))
    assert oracle.candidates(arr(np.array([20_000 + 10**6])), [1, 2, 3]) == []


def test_oracle_segment_without_stats_may_hold_anything(tmp_path: Path) -> None:
    oracle = _segments(tmp_path, {1: pa.array(np.arange(100))})
    oracle.add(2, None)  # a segment whose stats file is missing
    pks = pa.array([10**9, 10**9 + 1])
    assert oracle.candidates(pks) == [2]
    assert oracle.masks(pks)[2].all()
    assert oracle.candidates(pks, [1, 7]) == [7]  # unknown: no grounds to skip it
    assert oracle.masks(pa.array([], pa.int64())) == {}


# -- DeleteBuffer -----------------------------------------------------------------------------


def test_delete_buffer_reads_one_batch_and_trims() -> None:
    buf = DeleteBuffer(pa.int64())
    buf.put(pa.array([1, 2, 3], pa.int32()), 10)  # cast to the key type once
    buf.put(pa.array([4]), 20)
    buf.note_tick(seq=50, ts=25)
    buf.put(pa.array([5, 6]), 30)
    buf.note_tick(seq=60, ts=35)
    buf.note_tick(seq=70, ts=45)  # no delete since the last: not noted

    batch = buf.batch()
    assert batch.pks.type == pa.int64() and batch.pks.to_pylist() == [1, 2, 3, 4, 5, 6]
    assert batch.ts.dtype == np.uint64 and batch.ts.tolist() == [10, 10, 10, 20, 30, 30]
    assert buf.batch(after_ts=10).pks.to_pylist() == [4, 5, 6]
    assert buf.batch(start=batch.end).pks.to_pylist() == []
    buf.put(pa.array([7]), 40)
    assert buf.batch(start=batch.end).pks.to_pylist() == [7]  # only what came since

    snap = buf.snapshot()
    assert buf.persisted_ts(checkpoint_seq=55) == 25  # ticks below the checkpoint
    assert buf.trim(25) == 2 and buf.floor == 25
    assert buf.batch().pks.to_pylist() == [5, 6, 7] and buf.num_keys == 3
    assert snap.batch().pks.to_pylist() == [1, 2, 3, 4, 5, 6, 7]  # a snapshot stays whole
    assert snap.floor == 0
    assert buf.trim(20) == 0 and buf.floor == 25  # never backwards
    assert buf.persisted_ts(checkpoint_seq=55) == 0  # each tick is used once
    assert buf.persisted_ts(checkpoint_seq=10**6) == 35


# -- Distribution -----------------------------------------------------------------------------


def test_sync_waits_for_a_read_pinned_on_the_old_distribution(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        oracle = PkOracle()
        dist = Distribution(oracle)
        seg_dir = tmp_path / "seg"
        seg_dir.mkdir()
        storage.write_pk_stats(seg_dir, pa.array(np.arange(10)))
        path = str(seg_dir / "data.lance")
        dist.add([SealedSegment(segment_id=1, node_id="n1", partition_id=7, path=path)])
        assert dist.workers(None) == {"n1": [1]} and dist.workers([8]) == {}
        assert oracle.candidates(pa.array([3])) == [1]

        events: list[str] = []
        entered, release = threading.Event(), threading.Event()

        def reader() -> None:  # a Flight thread's read
            version = dist.enter_read()
            entered.set()
            release.wait(10)
            events.append("read done")
            dist.exit_read(version)

        thread = threading.Thread(target=reader)
        thread.start()
        await asyncio.to_thread(entered.wait, 10)
        dist.remove([1], hold_ts=5, hold_s=60)
        sync = asyncio.ensure_future(dist.advance())
        await asyncio.sleep(0.2)
        assert not sync.done()  # the pinned read still runs
        async with dist.reading():  # a read on the new version does not hold the sync
            pass
        assert not sync.done()
        release.set()
        await asyncio.wait_for(sync, 10)
        events.append("sync done")
        thread.join()
        assert 1 not in oracle and dist.retired[1]["hold_ts"] == 5
        assert dist.retired_hold() == 5
        return events

    assert asyncio.run(scenario()) == ["read done", "sync done"]


# -- end to end -------------------------------------------------------------------------------


def _rows(lo: int, hi: int) -> dict[str, Any]:
    rng = np.random.default_rng(lo)
    return {"id": np.arange(lo, hi), "vector": rng.random((hi - lo, DIM), np.float32)}


def _ids(client: Any) -> set[int]:
    return {r["id"] for r in client.query("c", "id >= 0", ["id"], consistency_level=STRONG)}


def test_handoff_replays_buffered_deletes_in_one_batch_and_later_flushes_trim(
    stack: Stack,
) -> None:
    client = stack.client()
    client.create_collection("c", dimension=DIM, num_shards=1)
    client.load_collection("c")
    qn = stack.querynodes[0]
    (d,) = qn.delegators.values()
    assert isinstance(d, Delegator)
    calls: list[tuple[list[int], pa.Array, Any]] = []
    plain_delete = qn.worker.delete

    def recording_delete(segment_ids: list[int], pks: pa.Array, ts: Any) -> int:
        calls.append((list(segment_ids), pks, ts))
        return plain_delete(segment_ids, pks, ts)

    qn.worker.delete = recording_delete  # type: ignore[method-assign]

    def flush_and_wait() -> set[int]:
        client.flush("c", timeout=30)
        flushed = {s["segment_id"] for s in client.get_segment_info("c") if s["state"] == "Flushed"}
        wait_for(lambda: flushed <= set(d.distribution.sealed), what="handoff")
        return flushed

    client.insert("c", _rows(0, 200))
    first = flush_and_wait()
    client.insert("c", _rows(200, 400))
    client.delete("c", [5])
    client.delete("c", [250, 260])
    client.delete("c", [270])
    assert _ids(client) == set(range(400)) - {5, 250, 260, 270}
    assert len(d.delete_buffer) == 3
    calls.clear()
    second = flush_and_wait() - first
    assert len(second) == 1
    replays = [c for c in calls if set(c[0]) & second]
    assert len(replays) == 1  # one request for every buffered delete
    sids, pks, ts = replays[0]
    assert set(pks.to_pylist()) >= {5, 250, 260, 270}
    assert isinstance(ts, np.ndarray) and ts.dtype == np.uint64 and len(ts) == len(pks)
    assert _ids(client) == set(range(400)) - {5, 250, 260, 270}

    # Once the datanode checkpoint is past the deletes, the next handoff trims them.
    client.insert("c", _rows(400, 450))
    flush_and_wait()
    wait_for(lambda: len(d.delete_buffer) == 0, what="the delete buffer trimmed")
    assert d.delete_buffer.floor > 0
    assert _ids(client) == set(range(450)) - {5, 250, 260, 270}
