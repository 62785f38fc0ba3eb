"""The datanode write path's parts (segments/flushcommon): the sync manager's ordering,
bound and held positions, the write buffer's routing of deletes around a flush, and, on a
real stack, a channel that keeps being consumed while a flush is held back."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from elanus import layout
from elanus.channels.dml import DmlMessage, MsgType
from elanus.channels.runtime.supervisor import Supervisor
from elanus.schema import Schema
from elanus.segments import storage
from elanus.segments.datanode.channel_writer import ChannelWriter
from elanus.segments.flushcommon import syncpack
from elanus.segments.flushcommon.syncmgr import SyncAbandoned, SyncManager
from elanus.segments.flushcommon.writebuffer import WriteBuffer
from elanus.segments.storage.pkstats import PkStats, bloom_bits
from tests.conftest import Stack, wait_for
from tests.test_recovery import stored_pks

DIM = 8


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def until(pred: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


# -- the sync manager ------------------------------------------------------------------------
def test_syncs_in_flight_never_exceed_the_bound_and_the_rest_wait_for_a_slot() -> None:
    async def main() -> None:
        syncs = SyncManager(Supervisor("test"), "ch", limit=2)
        gate = threading.Event()
        started: list[int] = []

        def write(i: int) -> Callable[[int], None]:
            def go(attempt: int) -> None:
                started.append(i)
                gate.wait(10)

            return go

        tasks = [syncs.submit(f"s{i}", [i], write(i), position=None) for i in range(5)]
        await until(lambda: syncs.in_flight == 2, "two syncs writing")
        await asyncio.sleep(0.2)  # the others stay queued, however long the writes take
        assert syncs.in_flight == 2 and len(started) == 2 and syncs.pending == 5
        gate.set()
        await asyncio.wait(tasks)
        assert sorted(started) == list(range(5))
        assert syncs.peak == 2 and syncs.in_flight == 0 and syncs.pending == 0

    run(main())


def test_syncs_of_one_segment_run_in_order_while_other_segments_overlap() -> None:
    async def main() -> None:
        syncs = SyncManager(Supervisor("test"), "ch", limit=4)
        order: list[str] = []
        slow = threading.Event()

        def write(tag: str, wait: bool = False) -> Callable[[int], None]:
            def go(attempt: int) -> None:
                if wait:
                    slow.wait(10)
                order.append(tag)

            return go

        a1 = syncs.submit("a1", [1], write("a1", wait=True), position=None)
        a2 = syncs.submit("a2", [1], write("a2"), position=None)
        b1 = syncs.submit("b1", [2], write("b1"), position=None)
        both = syncs.submit("merge", [1, 2], write("merge"), position=None)
        await asyncio.wait([b1])
        assert order == ["b1"] and not a2.done()  # b overlaps a's slow write; a2 waits
        slow.set()
        await asyncio.wait([a1, a2, both])
        assert order == ["b1", "a1", "a2", "merge"]

    run(main())


def test_a_sync_holds_its_position_until_its_report_returns() -> None:
    async def main() -> None:
        syncs = SyncManager(Supervisor("test"), "ch", limit=2)
        reported = asyncio.Event()
        written: list[int] = []

        async def then(_: None) -> None:
            await reported.wait()

        task = syncs.submit("flush", [7], written.append, position=40, then=then)
        syncs.submit("delta", [8], lambda a: None, position=55)
        await until(lambda: written == [0], "the write")
        await asyncio.sleep(0.05)
        assert syncs.oldest() == 40  # written, not yet reported
        reported.set()
        await asyncio.wait([task])
        assert syncs.oldest() is None

    run(main())


def test_a_failing_write_is_retried_then_no_sync_starts_any_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> SyncManager:
        syncs = SyncManager(Supervisor("test"), "ch", limit=2)
        attempts: list[int] = []
        ran: list[str] = []

        def broken(attempt: int) -> None:
            attempts.append(attempt)
            raise OSError("disk gone")

        bad = syncs.submit("bad", [1], broken, position=10)
        later = syncs.submit("later", [1], lambda a: ran.append("later"), position=12)
        other = syncs.submit("other", [2], lambda a: ran.append("other"), position=11)
        await asyncio.wait([bad, later, other])
        assert attempts == [0, 1, 2]
        assert ran == ["other"]  # the later sync of segment 1 builds on the failed one
        assert isinstance(bad.exception(), OSError) and later.exception() is not None
        assert syncs.oldest() == 10  # the failed syncs keep theirs: the checkpoint stays
        after = syncs.submit("after", [3], lambda a: ran.append("after"), position=20)
        await asyncio.wait([after])
        assert isinstance(after.exception(), SyncAbandoned) and ran == ["other"]
        return syncs

    with caplog.at_level(logging.WARNING):
        syncs = run(main())
    assert isinstance(syncs.failure, OSError) and "disk gone" in str(syncs.failure)
    failed = [r for r in caplog.records if r.levelno >= logging.ERROR and "ch: bad" in r.message]
    assert failed and failed[0].exc_info is not None  # at once, with its traceback


# -- the write buffer ------------------------------------------------------------------------
def _schema() -> Schema:
    return Schema.from_dict(
        {
            "fields": [
                {"name": "id", "dtype": "Int64", "is_primary": True},
                {"name": "vector", "dtype": "FloatVector", "dim": DIM},
            ]
        }
    )


def _insert(seg: int, pks: list[int], ts: int, seq: int) -> DmlMessage:
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(len(pks) * DIM, "f4")), DIM)
    batch = pa.record_batch([pa.array(pks, pa.int64()), vectors], names=["id", "vector"])
    return DmlMessage(MsgType.INSERT, ts, "v", 1, 5, seg, batch=batch, seq=seq)


def _delete(pks: list[int], ts: int, seq: int) -> DmlMessage:
    batch = pa.record_batch([pa.array(pks, pa.int64())], names=["id"])
    return DmlMessage(MsgType.DELETE, ts, "v", 1, 0, 0, batch=batch, seq=seq)


def test_deletes_reach_a_segment_whose_flush_is_in_flight_and_hold_the_position(
    tmp_path: Path,
) -> None:
    wb = WriteBuffer(_schema(), lambda p, s: tmp_path / f"{p}-{s}")
    wb.apply([_insert(3, [1, 2, 3], ts=100, seq=10), _insert(4, [7], ts=101, seq=11)])
    buf = wb.seal(3)
    assert buf is not None and buf.rows == 3 and 3 not in wb.growing
    assert wb.oldest() == 11  # the sealed rows are the flush's now (it holds seq 10)
    wb.apply([_delete([2, 7, 99], ts=105, seq=14)])
    (rec,) = wb.flushed[3].pending
    assert rec[0].to_pylist() == [2] and rec[1:] == (105, 14)
    assert [d[0].to_pylist() for d in wb.growing[4].deletes] == [[7]]
    assert wb.oldest() == 11
    wb.flushed_with(3, PkStats.build(pa.array([1, 2, 3], pa.int64())))
    wb.apply([_delete([1], ts=106, seq=15)])  # now found through the pk stats
    assert [p[2] for p in wb.flushed[3].pending] == [14, 15]
    (take,) = wb.take_deltas()
    assert take.segment_id == 3 and take.name == f"{14:012d}-{15:012d}"
    assert not wb.flushed[3].pending and wb.oldest() == 11


def test_deletes_that_reach_sources_during_a_compaction_move_to_its_target(
    tmp_path: Path,
) -> None:
    wb = WriteBuffer(_schema(), lambda p, s: tmp_path / f"{p}-{s}")
    for sid, keys in ((1, [1, 2]), (2, [3, 4])):
        wb.add_flushed(sid, 5, PkStats.build(pa.array(keys, pa.int64())))
    wb.compacting([1, 2], True)
    wb.apply([_delete([2, 3], ts=200, seq=30)])
    assert not wb.take_deltas() and not wb.deltas_due()  # the merge may have read them
    assert wb.oldest() == 30
    wb.compacted([1, 2], [(9, PkStats.build(pa.array([1, 2, 3, 4], pa.int64())))], 5)
    assert set(wb.flushed) == {9} and 9 in wb.done
    assert sorted(k for p in wb.flushed[9].pending for k in p[0].to_pylist()) == [2, 3]
    assert wb.oldest() == 30


def test_a_repeated_spill_appends_its_rows_once(tmp_path: Path) -> None:
    """A retried append whose first attempt committed after all does not write twice."""
    wb = WriteBuffer(_schema(), lambda p, s: tmp_path / f"{p}-{s}")
    wb.apply([_insert(3, [1, 2, 3], ts=100, seq=10)])
    buf = wb.growing[3]
    seg_dir = tmp_path / "seg"
    batches, before = buf.take_pending()
    first = syncpack.RowsSync(seg_dir, batches, wb.arrow_schema, wb.defaults, before)
    first.write(0)
    first.write(1)  # the start of the dataset is simply written again
    wb.apply([_insert(3, [4, 5], ts=101, seq=11)])
    batches, before = buf.take_pending()
    assert before == 3
    more = syncpack.RowsSync(seg_dir, batches, wb.arrow_schema, wb.defaults, before)
    more.write(0)
    more.write(1)
    rows = storage.read_segment(seg_dir, wb.schema)
    assert sorted(rows.column("id").to_pylist()) == [1, 2, 3, 4, 5]


def test_spills_build_the_key_stats_that_the_flush_folds(tmp_path: Path) -> None:
    """Each spill adds its keys once (a retried one too); the flush saves them folded to
    the segment's size, the same filter as one built from every key. Stats that missed
    keys, or were outgrown, are built from the keys instead."""
    wb = WriteBuffer(_schema(), lambda p, s: tmp_path / f"{p}-{s}")
    most = (1_000_000, 1 << 30)
    seg_dir = tmp_path / "seg"
    wb.apply([_insert(3, list(range(100)), ts=100, seq=10)])
    buf = wb.growing[3]
    spills = []
    for k in range(3):
        if k:
            wb.apply([_insert(3, list(range(100 * k, 100 * k + 100)), ts=100 + k, seq=10 + k)])
        batches, before = buf.take_pending()
        stats = buf.spill_stats(batches, before, most)
        spill = syncpack.RowsSync(
            seg_dir, batches, wb.arrow_schema, wb.defaults, before, stats, wb.pk_field
        )
        spill.write(0)
        spill.write(1)  # retried: its keys are not counted twice
        spills.append(stats)
    assert spills[0] is spills[2] is buf.stats
    assert buf.stats is not None and buf.stats.num_bits == bloom_bits(1_000_000)
    assert buf.stats.num_keys == 300
    seal = syncpack.SealSync(seg_dir, buf.pk_array(), [], 10, wb.pk_field, buf.stats)
    saved = seal.write(0)
    direct = PkStats.build(buf.pk_array())
    assert saved.num_bits == direct.num_bits == bloom_bits(300)
    assert np.array_equal(saved.bits, direct.bits)
    loaded = storage.load_pk_stats(seg_dir)
    assert loaded is not None and np.array_equal(loaded.bits, direct.bits)

    # stats that missed a spill's keys are not used
    partial = PkStats.sized_for(1_000)
    partial.add(pa.array(range(100), pa.int64()))
    built = syncpack.SealSync(seg_dir, buf.pk_array(), [], 10, wb.pk_field, partial).write(0)
    assert built.num_keys == 300 and np.array_equal(built.bits, direct.bits)
    # rows that outgrow the stats drop them (the flush builds them whole)
    assert buf.spill_stats([], 1, most) is buf.stats
    buf.spilled_rows = 2_000_000
    assert buf.spill_stats([], 1, most) is None and buf.stats is None
    # limits far above the defaults: no filter that large is kept while growing
    assert buf.spill_stats(batches, 0, (100_000_000, 1 << 40)) is None


def test_a_flush_leaves_its_rows_in_key_order(tmp_path: Path) -> None:
    """Spills land in arrival order; the flush rewrites the dataset in key order (rows of
    one key, an upsert's, in timestamp order) and keeps no older version's files. A flush
    with no spill before it writes its rows in order at once."""
    wb = WriteBuffer(_schema(), lambda p, s: tmp_path / f"{p}-{s}")
    seg_dir = tmp_path / "seg"
    wb.apply([_insert(3, [9, 3, 7], ts=100, seq=10)])
    buf = wb.growing[3]
    for extra in ([_insert(3, [1, 3], ts=102, seq=11)], []):
        wb.apply(extra)
        batches, before = buf.take_pending()
        if batches:
            syncpack.RowsSync(
                seg_dir, batches, wb.arrow_schema, wb.defaults, before, None, wb.pk_field
            ).write(0)
    spilled = storage.read_segment(seg_dir, wb.schema)
    assert spilled.column("id").to_pylist() == [9, 3, 7, 1, 3]
    syncpack.SealSync(seg_dir, buf.pk_array(), [], 10, wb.pk_field).write(0)
    rows = storage.read_segment(seg_dir, wb.schema)
    assert rows.column("id").to_pylist() == [1, 3, 3, 7, 9]
    assert rows.column("_ts").to_pylist() == [102, 100, 102, 100, 100]
    ds = storage.dataset(layout.data_path(seg_dir))
    assert len(ds.versions()) == 1

    whole_dir = tmp_path / "whole"
    wb.apply([_insert(4, [8, 2, 5], ts=103, seq=12)])
    batches, before = wb.growing[4].take_pending()
    syncpack.RowsSync(
        whole_dir, batches, wb.arrow_schema, wb.defaults, before, None, wb.pk_field, whole=True
    ).write(0)
    syncpack.SealSync(whole_dir, pa.array([8, 2, 5]), [], 12, wb.pk_field).write(0)
    assert storage.read_segment(whole_dir, wb.schema).column("id").to_pylist() == [2, 5, 8]
    assert len(storage.dataset(layout.data_path(whole_dir)).versions()) == 1  # no rewrite


# -- on a stack --------------------------------------------------------------------------------
@pytest.fixture
def held_flushes(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Flushes (pk stats and growing deletes) wait for this event before they write."""
    gate = threading.Event()
    write = syncpack.SealSync.write

    def held(self: syncpack.SealSync, attempt: int) -> PkStats:
        gate.wait(60)
        return write(self, attempt)

    monkeypatch.setattr(syncpack.SealSync, "write", held)
    try:
        yield gate
    finally:
        gate.set()


def _rows(start: int, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(start)
    return {"id": np.arange(start, start + n), "vector": rng.random((n, DIM), "f4")}


def test_the_channel_is_consumed_while_a_flush_is_held_and_the_checkpoint_waits_for_it(
    stack: Stack, held_flushes: threading.Event
) -> None:
    client = stack.client()
    desc = client.create_collection("held", dimension=DIM, num_shards=1)
    client.load_collection("held")
    vchannel = desc["vchannels"][0]
    coord = stack.coord
    assert coord is not None
    client.insert("held", _rows(0, 200))
    writer: ChannelWriter = wait_for(
        lambda: (w := stack.datanodes[0].channels.get(vchannel)) and w.growing and w,
        what="the first rows in the datanode's buffer",
    )
    (first_seq,) = [b.first_seq for b in writer.growing.values()]
    sealed = client.flush("held", wait=False)
    wait_for(lambda: writer.syncs.oldest() == first_seq, what="the flush to hold its rows")

    # Inserts go on; the channel is consumed, the tick reported, the rows readable.
    reply = client.insert("held", _rows(200, 300))
    wait_for(lambda: writer.tick_ts > reply["ts"], what="the datanode to consume past them")
    wait_for(
        lambda: sum(b.rows for b in writer.growing.values()) == 300,
        what="the new rows in a growing buffer",
    )
    wait_for(lambda: coord.data.channel_ticks.get(vchannel, 0) > reply["ts"], what="a tick")
    count = client.query("held", "id >= 0", ["count(*)"], consistency_level="Strong")
    assert count == [{"count(*)": 500}]
    # The held flush is neither done nor passed by the checkpoint.
    assert not client.get_flush_state(sealed)
    cp = coord.data.checkpoints[vchannel]
    assert cp[0] <= first_seq, f"checkpoint {cp} passed the unflushed rows at {first_seq}"

    held_flushes.set()
    wait_for(lambda: client.get_flush_state(sealed), what="the flush once released")
    wait_for(lambda: coord.data.checkpoints[vchannel][0] > first_seq, what="the checkpoint")
    client.flush("held")
    assert stored_pks(client, "held") == list(range(500))


def test_the_checkpoint_waits_for_a_delta_log_being_written(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    held_from: list[int] = []
    write = syncpack.DeltaSync.write

    def held(self: syncpack.DeltaSync, attempt: int) -> None:
        held_from.append(int(self.name[:12]))  # the log's first stream position
        gate.wait(60)
        write(self, attempt)

    client = stack.client()
    desc = client.create_collection("deltas", dimension=DIM, num_shards=1)
    vchannel = desc["vchannels"][0]
    coord = stack.coord
    assert coord is not None
    client.insert("deltas", _rows(0, 100))
    client.flush("deltas")
    monkeypatch.setattr(syncpack.DeltaSync, "write", held)
    try:
        writer: ChannelWriter = stack.datanodes[0].channels[vchannel]
        deleted = client.delete("deltas", [1, 2, 3])
        wait_for(lambda: writer.tick_ts > deleted["ts"], what="the delete consumed")
        client.insert("deltas", _rows(100, 10))
        sealed = client.flush("deltas", wait=False)  # a flush logs pending deletes
        wait_for(lambda: held_from, what="the delta log to be held")
        later = client.insert("deltas", _rows(200, 10))
        wait_for(lambda: writer.tick_ts > later["ts"], what="the channel consumed past it")
        wait_for(lambda: coord.data.channel_ticks.get(vchannel, 0) > later["ts"], what="a tick")
        wait_for(lambda: client.get_flush_state(sealed), what="the other segment's flush")
        cp = coord.data.checkpoints[vchannel]
        assert cp[0] <= held_from[0], f"checkpoint {cp} passed the unlogged delete"
    finally:
        gate.set()
    wait_for(lambda: coord.data.checkpoints[vchannel][0] > held_from[0], what="the checkpoint")
    client.flush("deltas")
    assert stored_pks(client, "deltas") == [*range(110), *range(200, 210)]
    logged = [
        t.column(0).to_pylist()
        for seg in client.get_segment_info("deltas")
        if (t := storage.read_deltas(Path(seg["path"]).parent)) is not None
    ]
    assert sorted(k for keys in logged for k in keys) == [1, 2, 3]
