"""The write path end to end on real components: SDK -> Flight DoPut -> JetStream -> datanode
-> Lance segments, checked against the artefacts themselves (``data.lance``, delta logs, the
pchannel streams) rather than through Elanus's own read path.

Seeds: proxy §6 (insert, hashing to vchannels), 003 (time ticks), 004 (flush).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
from column_edits import edited_table
from conftest import Stack, both_transports, own_stack
from segment_reader import (
    SEGMENT_COLUMN,
    data_counts,
    read_deltas,
    read_pk_stats_meta,
    read_rows,
    read_stream,
    stream_state,
    subject_counts,
)
from stack_factory import stack_fixture

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.channels.dml import MsgType
from elanus.client.client import Client
from elanus.meta.lease import LeaseState
from elanus.pkhash import shard_of
from elanus.segments import storage
from elanus.segments.storage.pkstats import bloom_bits
from elanus.wire.codec import encode_json, from_flight_error
from elanus.wire.putresult import PutAck

WAIT_S = 20.0


# =============================================================================================
# helpers
# =============================================================================================


make_stack = stack_fixture()


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def vectors(values: np.ndarray) -> pa.FixedSizeListArray:
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1])


def bulk_schema(dim: int = 32) -> Schema:
    return (
        Schema(enable_dynamic_field=False)
        .add_field("pk", DataType.INT64, is_primary=True)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
        .add_field("name", DataType.VARCHAR, max_length=64)
        .add_field("n", DataType.INT32)
    )


def bulk_table(pks: np.ndarray, dim: int, seed: int) -> pa.Table:
    """Rows whose vectors come from ``seed`` and whose scalars derive from the key."""
    pks = np.asarray(pks, dtype=np.int64)
    vecs = np.random.default_rng(seed).random((len(pks), dim), dtype=np.float32)
    return pa.table(
        {
            "pk": pa.array(pks),
            "vec": vectors(vecs),
            "name": pa.array([f"name-{k}" for k in pks.tolist()]),
            "n": pa.array((pks * 7 % 100_003).astype(np.int32)),
        }
    )


def flushed_segments(client: Client, collection: str) -> list[dict[str, Any]]:
    """All segments of the collection, which must all be Flushed by now."""
    segs = client.get_segment_info(collection)
    states = Counter(s["state"] for s in segs)
    assert set(states) <= {"Flushed"}, f"not every segment is Flushed: {dict(states)}"
    return segs


def storage_of(stack: Stack) -> Path:
    return stack.settings.storage_path


def pk_list(rows: pa.Table, column: str = "pk") -> list[int]:
    return rows.column(column).to_pylist()


def assert_exactly_once(rows: pa.Table, expected: Any, column: str = "pk") -> None:
    """``rows`` hold every key of ``expected`` (an iterable of ints) once, and no other."""
    keys = np.asarray(rows.column(column).to_numpy())
    expected = np.sort(np.fromiter(expected, dtype=np.int64))
    uniq, counts = np.unique(keys, return_counts=True)
    dups = uniq[counts > 1]
    assert len(dups) == 0, f"{len(dups)} keys stored more than once, e.g. {dups[:5].tolist()}"
    missing = np.setdiff1d(expected, uniq)
    extra = np.setdiff1d(uniq, expected)
    assert len(missing) == 0, f"{len(missing)} acknowledged keys missing, e.g. {missing[:5]}"
    assert len(extra) == 0, f"{len(extra)} keys stored that were never acknowledged: {extra[:5]}"
    assert rows.num_rows == len(expected)


def hold_stream_purges(stack: Stack) -> None:
    """Stop the coord's periodic stream purge (every 5 s), so a test can audit the whole log
    (and, in the purge test, purge exactly when it means to)."""
    coord = stack.coord
    assert coord is not None
    purges = [p for p in coord._background if getattr(p.fn, "__name__", "") == "purge_streams"]
    assert purges, "the coord no longer runs purge_streams as a Periodic: update this helper"
    for p in purges:
        stack.call(p.stop())


def stream_data_messages(stack: Stack, pchannel: str, collection_id: int) -> list[Any]:
    msgs = stack.call(read_stream(stack.bus.js, pchannel))
    return [m for m in msgs if not m.is_tick and m.msg.collection_id == collection_id]


# =============================================================================================
# 1. bulk insert, two shards
# =============================================================================================


def test_bulk_insert_100k_rows_two_shards_lands_exactly_in_lance(stack: Stack) -> None:
    dim, total, batch = 32, 100_000, 5_000
    c = stack.client()
    desc = c.create_collection("bulk", schema=bulk_schema(dim), num_shards=2)
    vchannels = desc["vchannels"]
    assert len(vchannels) == 2

    sent: list[pa.Table] = []
    ts_of_batch: list[int] = []
    for i, start in enumerate(range(0, total, batch)):
        table = bulk_table(np.arange(start, start + batch), dim, seed=i)
        reply = c.insert("bulk", table)
        assert reply["insert_count"] == batch
        assert reply["ids"] == list(range(start, start + batch))
        assert reply["ts"] > (ts_of_batch[-1] if ts_of_batch else 0)
        sent.append(table)
        ts_of_batch.append(reply["ts"])
    flushed_ids = c.flush("bulk")
    assert flushed_ids

    segs = flushed_segments(c, "bulk")
    assert set(flushed_ids) <= {s["segment_id"] for s in segs}
    assert {s["vchannel"] for s in segs} == set(vchannels)
    assert sum(s["num_rows"] for s in segs) == total
    rows = read_rows(storage_of(stack), segs)
    assert rows.schema.names == ["pk", "vec", "name", "n", "_ts", SEGMENT_COLUMN]

    # Same key set, no duplicates, the count equals.
    assert_exactly_once(rows, np.arange(total))

    # Every row's _ts is the timestamp acknowledged for the insert that carried it.
    pks = rows.column("pk").to_numpy()
    row_ts = rows.column("_ts").to_numpy()
    assert pc.all(
        pc.is_in(rows.column("_ts"), value_set=pa.array(ts_of_batch, pa.uint64()))
    ).as_py()
    expected_ts = np.asarray(ts_of_batch, dtype=np.uint64)[pks // batch]
    assert np.array_equal(row_ts, expected_ts)

    # Rows were hashed to the vchannels by key, and each segment's min/max ts is reported.
    by_segment = {s["segment_id"]: s for s in segs}
    seg_of_row = rows.column(SEGMENT_COLUMN).to_numpy()
    shard = shard_of(rows.column("pk"), 2)
    vch_of_row = np.array([vchannels.index(by_segment[s]["vchannel"]) for s in seg_of_row])
    assert np.array_equal(shard, vch_of_row)
    for sid, seg in by_segment.items():
        ts = row_ts[seg_of_row == sid]
        assert seg["num_rows"] == len(ts)
        assert seg["min_ts"] == int(ts.min()) and seg["max_ts"] == int(ts.max())
        assert seg["seal_ts"] is not None and int(ts.max()) <= seg["seal_ts"]
        keys = pks[seg_of_row == sid]
        stats = read_pk_stats_meta(storage_of(stack), seg)
        assert (stats["min"], stats["max"], stats["num_keys"]) == (
            int(keys.min()),
            int(keys.max()),
            len(keys),
        )

    # Column values of a sample match what was sent.
    all_sent = pa.concat_tables(sent)
    sample = np.random.default_rng(7).choice(total, size=500, replace=False)
    order = np.argsort(pks)
    got = rows.take(pa.array(order[sample]))
    want = all_sent.take(pa.array(sample))
    assert got.column("pk").to_pylist() == want.column("pk").to_pylist()
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("n").to_pylist() == want.column("n").to_pylist()
    got_vec = np.stack(got.column("vec").to_numpy(zero_copy_only=False))
    want_vec = np.stack(want.column("vec").to_numpy(zero_copy_only=False))
    assert got_vec.dtype == np.float32 and np.array_equal(got_vec, want_vec)


# =============================================================================================
# 2. auto id
# =============================================================================================


@both_transports
def test_auto_id_keys_are_unique_and_stored(stack: Stack) -> None:
    c = stack.client()
    c.create_collection("auto", dimension=8, auto_id=True, num_shards=2)
    rng = np.random.default_rng(3)
    ids: list[int] = []
    vec_of: dict[int, np.ndarray] = {}
    for _ in range(2):
        vecs = rng.random((5_000, 8), dtype=np.float32)
        reply = c.insert("auto", pa.table({"vector": vectors(vecs)}))
        assert reply["insert_count"] == 5_000 and len(reply["ids"]) == 5_000
        ids.extend(reply["ids"])
        vec_of.update(zip(reply["ids"], vecs, strict=True))
    assert len(set(ids)) == 10_000, "auto ids repeat"
    assert all(isinstance(i, int) for i in ids)
    c.flush("auto")

    rows = read_rows(storage_of(stack), flushed_segments(c, "auto"))
    assert_exactly_once(rows, set(ids), column="id")
    # Each returned id belongs to the row that was sent at its position.
    for pk, vec in zip(
        pk_list(rows, "id")[:200], rows.column("vector").to_pylist()[:200], strict=True
    ):
        assert np.array_equal(np.asarray(vec, dtype=np.float32), vec_of[pk])


def test_the_sdk_sends_a_write_again_while_the_coords_lease_is_lapsed(stack: Stack) -> None:
    """A write refused because the coord's lease is lapsed (its bucket electing a leader
    after a NATS server died, a standby taking over) did nothing: its timestamp comes first.
    The SDK sends it again until the coord holds the lease again (its own renewal takes it
    back here, as after a real lapse; test_flow_control: a write of several requests is
    not sent again)."""
    assert stack.coord is not None
    lease = stack.coord.lease
    c = stack.client()
    c.create_collection("lapse", dimension=8)
    lease.state = LeaseState.LAPSED  # what a failed renewal sets (meta/lease.py ``_keep``)
    vecs = np.random.default_rng(5).random((10, 8), dtype=np.float32)
    reply = c.insert("lapse", pa.table({"id": pa.array(range(10)), "vector": vectors(vecs)}))
    assert reply["insert_count"] == 10
    assert lease.state is LeaseState.HELD
    counted = c.query("lapse", "", ["count(*)"], consistency_level="Strong")
    assert counted[0]["count(*)"] == 10


# =============================================================================================
# 3. upsert and delete
# =============================================================================================


@both_transports
def test_upsert_and_delete_are_persisted_as_rows_and_delta_logs(stack: Stack) -> None:
    dim = 8
    c = stack.client()
    c.create_collection("ud", schema=bulk_schema(dim), num_shards=2)
    ins = c.insert("ud", bulk_table(np.arange(1000), dim, seed=1))
    deleted = c.delete("ud", list(range(100)))
    assert deleted["delete_count"] == 100
    new_rows = bulk_table(np.arange(100, 200), dim, seed=2)
    up = c.upsert("ud", new_rows)
    assert up["upsert_count"] == 100 and up["ids"] == list(range(100, 200))
    assert ins["ts"] < deleted["ts"] < up["ts"]
    c.flush("ud")

    segs = flushed_segments(c, "ud")
    rows = read_rows(storage_of(stack), segs)
    assert rows.num_rows == 1100
    keys = Counter(pk_list(rows))
    assert set(keys) == set(range(1000))
    assert {k for k, n in keys.items() if n == 2} == set(range(100, 200))
    assert all(n == 1 for k, n in keys.items() if not 100 <= k < 200)

    ts = rows.column("_ts").to_numpy()
    pks = rows.column("pk").to_numpy()
    assert set(ts[(pks < 100) | (pks >= 200)].tolist()) == {ins["ts"]}
    upserted = (pks >= 100) & (pks < 200)
    assert Counter(ts[upserted].tolist()) == {ins["ts"]: 100, up["ts"]: 100}
    # The newer copy carries the upsert's vectors.
    newer = rows.filter(pa.array(upserted & (ts == up["ts"])))
    want = {
        k: v for k, v in zip(pk_list(new_rows), new_rows.column("vec").to_pylist(), strict=True)
    }
    for k, v in zip(pk_list(newer), newer.column("vec").to_pylist(), strict=True):
        assert v == want[k]

    deltas = read_deltas(storage_of(stack), segs)
    records = Counter(
        zip(deltas.column("pk").to_pylist(), deltas.column("ts").to_pylist(), strict=True)
    )
    expected = {(k, deleted["ts"]): 1 for k in range(100)}
    expected.update({(k, up["ts"]): 1 for k in range(100, 200)})
    assert records == expected
    # A delete record sits in a segment that holds the key it deletes.
    segs_of_pk: dict[int, set[int]] = {}
    for k, sid in zip(pk_list(rows), rows.column(SEGMENT_COLUMN).to_pylist(), strict=True):
        segs_of_pk.setdefault(k, set()).add(sid)
    for k, sid in zip(pk_list(deltas), deltas.column(SEGMENT_COLUMN).to_pylist(), strict=True):
        assert sid in segs_of_pk[k], f"delete of {k} logged in segment {sid}"


def test_upsert_and_delete_of_flushed_rows_go_to_the_flushed_segments_delta_logs(
    stack: Stack,
) -> None:
    dim = 8
    c = stack.client()
    c.create_collection("ud2", schema=bulk_schema(dim), num_shards=2)
    ins = c.insert("ud2", bulk_table(np.arange(1000), dim, seed=1))
    c.flush("ud2")
    first = {s["segment_id"] for s in flushed_segments(c, "ud2")}
    up = c.upsert("ud2", bulk_table(np.arange(300, 400), dim, seed=2))
    deleted = c.delete("ud2", list(range(500, 550)))
    # A key upserted twice after the flush: the second upsert also deletes the first's row.
    up2 = c.upsert("ud2", bulk_table(np.arange(390, 410), dim, seed=3))
    assert ins["ts"] < up["ts"] < deleted["ts"] < up2["ts"]
    c.flush("ud2")

    segs = flushed_segments(c, "ud2")
    rows = read_rows(storage_of(stack), segs)
    newer = [s for s in segs if s["segment_id"] not in first]
    assert newer and all(s["min_ts"] >= up["ts"] for s in newer)
    stored = Counter(zip(pk_list(rows), rows.column("_ts").to_pylist(), strict=True))
    expected_rows = Counter({(k, ins["ts"]): 1 for k in range(1000)})
    expected_rows.update({(k, up["ts"]): 1 for k in range(300, 400)})
    expected_rows.update({(k, up2["ts"]): 1 for k in range(390, 410)})
    assert stored == expected_rows

    deltas = read_deltas(storage_of(stack), segs)
    delta_pks = deltas.column("pk").to_pylist()
    seg_of = dict(zip(delta_pks, deltas.column(SEGMENT_COLUMN).to_pylist(), strict=True))
    records = Counter(
        zip(deltas.column("pk").to_pylist(), deltas.column("ts").to_pylist(), strict=True)
    )
    expected = Counter({(k, up["ts"]): 1 for k in range(300, 400)})
    expected.update({(k, deleted["ts"]): 1 for k in range(500, 550)})
    # up2 deletes 390..409: the first copies in the flushed segments, and 390..399's copies
    # from `up` in the new (then growing) segments.
    expected.update({(k, up2["ts"]): 1 for k in range(390, 410)})
    expected.update({(k, up2["ts"]): 1 for k in range(390, 400)})
    assert records == expected
    for k in range(500, 550):
        assert seg_of[k] in first


@both_transports
def test_delete_in_a_partition_only_deletes_in_that_partition(stack: Stack) -> None:
    """Regression: the datanode used to apply a delete to every partition."""
    dim = 8
    c = stack.client()
    desc = c.create_collection("parts", schema=bulk_schema(dim))
    c.create_partition("parts", "p1")
    pids = {p["name"]: p["partition_id"] for p in desc["partitions"]}
    pids.update(
        {p["name"]: p["partition_id"] for p in c.describe_collection("parts")["partitions"]}
    )
    c.insert("parts", bulk_table(np.arange(10), dim, seed=1))
    c.insert("parts", bulk_table(np.arange(5, 15), dim, seed=2), partition_name="p1")
    deleted = c.delete("parts", [5, 6, 7], partition_name="p1")
    assert deleted["delete_count"] == 3
    c.flush("parts")
    segs = flushed_segments(c, "parts")
    assert {s["partition_id"] for s in segs} == {pids["_default"], pids["p1"]}
    deltas = read_deltas(storage_of(stack), segs)
    part_of = {s["segment_id"]: s["partition_id"] for s in segs}
    logged = {
        (k, part_of[sid])
        for k, sid in zip(
            deltas.column("pk").to_pylist(), deltas.column(SEGMENT_COLUMN).to_pylist(), strict=True
        )
    }
    assert logged == {(k, pids["p1"]) for k in (5, 6, 7)}


# =============================================================================================
# 4. two proxies, time-tick invariant
# =============================================================================================


@pytest.mark.slow
@pytest.mark.parametrize("flush_while_writing", [False, True], ids=["size-seals", "and-flushes"])
def test_two_proxies_concurrent_inserts_keep_the_time_tick_invariant(
    make_stack: Callable[..., Stack], flush_while_writing: bool
) -> None:
    """Two proxies (each on its own NATS connection), two writer threads on each, one
    pchannel; segments seal by size (and, in the second variant, by explicit flushes from
    another client) while the writes go on."""
    dim, rows_per_insert, inserts_per_thread, writers = 8, 500, 15, 4
    # ticks between the writes are what it checks: a few every second at 50 ms
    stack = make_stack(segment_max_rows=3000, timetick_interval_ms=50)
    hold_stream_purges(stack)
    stack.add_proxy(own_bus=True)
    admin = stack.client()
    desc = admin.create_collection("tt", schema=bulk_schema(dim), num_shards=1)
    cid, pchannel = desc["collection_id"], desc["pchannels"][0]
    assert len({p.node_id for p in stack.proxies}) == 2
    clients = [stack.client(uri=stack.proxies[k % 2].uri) for k in range(writers)]

    acked: list[list[tuple[int, int]]] = [[] for _ in range(writers)]  # (first pk, ts)
    errors: list[BaseException] = []
    writing = threading.Event()
    writing.set()

    def write(k: int) -> None:
        try:
            for i in range(inserts_per_thread):
                start = k * 1_000_000 + i * rows_per_insert
                table = bulk_table(np.arange(start, start + rows_per_insert), dim, seed=k * 100 + i)
                reply = clients[k].insert("tt", table)
                assert reply["insert_count"] == rows_per_insert
                acked[k].append((start, reply["ts"]))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def flush_now_and_then() -> None:
        flusher = stack.client(uri=stack.proxies[1].uri)
        try:
            while writing.is_set():
                flusher.flush("tt", wait=False)
                time.sleep(0.07)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,), daemon=True) for k in range(writers)]
    if flush_while_writing:
        extra = threading.Thread(target=flush_now_and_then, daemon=True)
        extra.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    writing.clear()
    if flush_while_writing:
        extra.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "writers hung"
    assert not errors, errors
    last_ack = max(ts for per in acked for _, ts in per)
    admin.flush("tt")

    # -- the stream, in stream order -----------------------------------------------------
    msgs = stack.call(read_stream(stack.bus.js, pchannel))
    assert msgs and [m.seq for m in msgs] == sorted(m.seq for m in msgs)
    last_tick, ticks, data = 0, 0, []
    for m in msgs:
        if m.is_tick:
            assert m.msg.ts > last_tick, f"tick at seq {m.seq} does not increase: {m.msg.ts}"
            last_tick, ticks = m.msg.ts, ticks + 1
        else:
            assert m.msg.ts > last_tick, (
                f"data message at seq {m.seq} (ts {m.msg.ts}, from {m.msg.source}) comes after "
                f"tick {last_tick} but is not newer than it"
            )
            data.append(m)
    assert ticks > 3
    assert all(m.msg.collection_id == cid and m.msg.type is MsgType.INSERT for m in data)
    assert {m.msg.source for m in data} == {p.node_id for p in stack.proxies}
    acked_ts = {ts for per in acked for _, ts in per}
    assert {m.msg.ts for m in data} == acked_ts
    # Each acknowledged row is in the log exactly once.
    expected = np.concatenate(
        [np.arange(s, s + rows_per_insert) for per in acked for s, _ in per]
    ).astype(np.int64)
    logged = np.concatenate([m.msg.batch.column("pk").to_numpy() for m in data])
    assert len(logged) == len(expected) and np.array_equal(np.sort(logged), np.sort(expected))

    # -- the segments ---------------------------------------------------------------------
    segs = flushed_segments(admin, "tt")
    assert len(segs) >= 8, f"expected size-sealed segments, got {len(segs)}"
    assert any(s["seal_ts"] < last_ack for s in segs), "no segment was sealed while writing"
    rows = read_rows(storage_of(stack), segs)
    assert_exactly_once(rows, expected)
    seg_rows = {
        s["segment_id"]: rows.filter(pc.equal(rows[SEGMENT_COLUMN], s["segment_id"])) for s in segs
    }
    for s in segs:
        part = seg_rows[s["segment_id"]]
        assert part.num_rows == s["num_rows"] <= 3000
        max_ts = pc.max(part["_ts"]).as_py()
        assert s["seal_ts"] is not None and max_ts <= s["seal_ts"], (
            f"segment {s['segment_id']} holds a row at {max_ts} after its seal_ts {s['seal_ts']}"
        )
        # The segment holds exactly the rows the proxies published into it.
        published = [
            k
            for m in data
            if m.msg.segment_id == s["segment_id"]
            for k in m.msg.batch.column("pk").to_pylist()
        ]
        assert sorted(pk_list(part)) == sorted(published)


def test_a_request_over_1mb_is_split_into_messages_at_one_timestamp(
    make_stack: Callable[..., Stack],
) -> None:
    dim, n = 64, 20_000  # ~5.5 MB in one DoPut batch
    stack = make_stack(segment_max_rows=3000)
    hold_stream_purges(stack)
    c = stack.client()
    desc = c.create_collection("split", schema=bulk_schema(dim))
    table = bulk_table(np.arange(n), dim, seed=4)
    assert table.nbytes > 4 << 20
    reply = c.insert("split", table, batch_bytes=table.nbytes * 2)  # one batch
    assert reply["insert_count"] == n
    data = stream_data_messages(stack, desc["pchannels"][0], desc["collection_id"])
    assert len(data) >= 5, "a 5 MB request should travel as several messages"
    assert {m.msg.ts for m in data} == {reply["ts"]}
    assert all(m.msg.batch.nbytes <= (1 << 20) * 1.05 for m in data)
    assert sum(m.rows for m in data) == n
    c.flush("split")
    segs = flushed_segments(c, "split")
    rows = read_rows(storage_of(stack), segs)
    assert_exactly_once(rows, np.arange(n))
    assert set(rows.column("_ts").to_pylist()) == {reply["ts"]}


def test_segments_keep_segment_max_rows_when_a_message_is_larger(
    make_stack: Callable[..., Stack],
) -> None:
    """Regression: a ~1 MB message used to go whole into the first granted segment, so
    segments grew past segment_max_rows and the rest of the grant was left in empty ones."""
    dim, n = 64, 20_000
    stack = make_stack(segment_max_rows=3000)
    c = stack.client()
    c.create_collection("cap", schema=bulk_schema(dim))
    c.insert("cap", bulk_table(np.arange(n), dim, seed=4))
    c.flush("cap")
    segs = flushed_segments(c, "cap")
    assert sum(s["num_rows"] for s in segs) == n
    over = {s["segment_id"]: s["num_rows"] for s in segs if s["num_rows"] > s["max_rows"]}
    assert not over, f"segments over segment_max_rows=3000: {over}"
    assert len(segs) == -(-n // 3000), "rows are spread over more segments than needed"
    assert_exactly_once(read_rows(storage_of(stack), segs), np.arange(n))


# =============================================================================================
# 5. bad input through DoPut changes nothing
# =============================================================================================

BAD_MAX_REQUEST_BYTES = 256 * 1024
BAD_DIM = 8


def bad_schema() -> Schema:
    return (
        Schema(enable_dynamic_field=False)
        .add_field("pk", DataType.INT64, is_primary=True)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=BAD_DIM)
        .add_field("title", DataType.VARCHAR, max_length=16)
        .add_field("tiny", DataType.INT8)
        .add_field("tags", DataType.ARRAY, element_type=DataType.INT32, max_capacity=4)
        .add_field("doc", DataType.JSON)
        .add_field("n", DataType.INT32)
        .add_field("score", DataType.FLOAT)
    )


def good_columns(n: int = 3, start: int = 0) -> dict[str, pa.Array]:
    pks = np.arange(start, start + n, dtype=np.int64)
    return {
        "pk": pa.array(pks),
        "vec": vectors(np.random.default_rng(start).random((n, BAD_DIM), dtype=np.float32)),
        "title": pa.array([f"t{k}" for k in pks.tolist()]),
        "tiny": pa.array([k % 100 for k in pks.tolist()], pa.int8()),
        "tags": pa.array([[1, 2]] * n, pa.list_(pa.int32())),
        "doc": pa.array([json.dumps({"k": int(k)}) for k in pks], pa.string()),
        "n": pa.array(np.arange(n, dtype=np.int32)),
        "score": pa.array(np.linspace(0, 1, n, dtype=np.float32)),
    }


def table_with(**changes: Any) -> pa.Table:
    """Three good rows with some columns replaced (an array) or removed (None)."""
    return edited_table(good_columns(), changes)


def vec_with(value: float, row: int = 1) -> pa.Array:
    v = np.random.default_rng(0).random((3, BAD_DIM), dtype=np.float32)
    v[row, 3] = value
    return vectors(v)


def command(op: str = "insert", collection: str = "bad", **extra: Any) -> bytes:
    return encode_json({"op": op, "collection": collection, **extra})


class BadInputEnv:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.descs = {
            "bad": self.client.create_collection("bad", schema=bad_schema()),
            "bad_auto": self.client.create_collection("bad_auto", dimension=BAD_DIM, auto_id=True),
        }
        self.client.create_partition("bad", "p1")
        for name in self.descs:
            self.descs[name] = self.client.describe_collection(name)

    def pchannels(self) -> set[str]:
        return {p for d in self.descs.values() for p in d["pchannels"]}

    def snapshot(self) -> tuple[dict[str, list[int]], dict[str, int]]:
        segs = {
            name: sorted(s["segment_id"] for s in self.client.get_segment_info(name))
            for name in self.descs
        }
        vchannels = {v for d in self.descs.values() for v in d["vchannels"]}
        counts: dict[str, int] = {}
        for p in self.pchannels():
            held = data_counts(self.stack.call(subject_counts(self.stack.bus.js, p)))
            counts.update({s: n for s, n in held.items() if s.rsplit(".", 1)[1] in vchannels})
        return segs, counts

    def put(
        self, cmd: bytes, data: pa.Table | list[pa.RecordBatch], schema: pa.Schema | None = None
    ) -> list[PutAck]:
        """A bare Flight DoPut of ``data``'s batches; the server's error as an ElanusError."""
        acks, error = self.put_collect(cmd, data, schema)
        if error is not None:
            raise error
        return acks

    def put_collect(
        self, cmd: bytes, data: pa.Table | list[pa.RecordBatch], schema: pa.Schema | None = None
    ) -> tuple[list[PutAck], ElanusError | None]:
        """A bare Flight DoPut: the PutResults that arrived, and the error that ended it."""
        if isinstance(data, pa.Table):
            batches, schema = data.to_batches(), data.schema
        else:
            batches = data
            schema = schema or batches[0].schema
        fc = flight.FlightClient(self.stack.uri)
        acks: list[PutAck] = []
        error: ElanusError | None = None
        try:
            writer, reader = fc.do_put(flight.FlightDescriptor.for_command(cmd), schema)
            try:
                for b in batches:
                    writer.write_batch(b)
                writer.done_writing()
                while (buf := reader.read()) is not None:
                    acks.append(PutAck.decode(buf))
            finally:
                writer.close()
        except (flight.FlightError, pa.ArrowException) as exc:
            error = from_flight_error(exc)
        finally:
            fc.close()
        return acks, error


@pytest.fixture(scope="module")
def bad_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BadInputEnv]:
    tmp = tmp_path_factory.mktemp("bad_input")
    limit = BAD_MAX_REQUEST_BYTES
    with own_stack(tmp, "bad-input-loop", max_request_bytes=limit) as stack:
        hold_stream_purges(stack)
        yield BadInputEnv(stack)


def _oversized() -> pa.Table:
    n = 12_000  # ~12k * (8 * 4 + ...) bytes: well over 256 KiB
    cols = good_columns(n)
    return pa.table(cols)


# (case id, how to send it, expected code, substrings the message must name)
# "how": ("raw", command bytes, table) for a bare Flight client, ("sdk", op, collection,
# data, kwargs) for the SDK's insert/upsert, or ("delete", collection, ids, kwargs).
BAD_CASES: list[tuple[str, tuple[Any, ...], ErrorCode, tuple[str, ...]]] = [
    (
        "wrong-dim-fixed",
        ("raw", command(), table_with(vec=vectors(np.zeros((3, 4))))),
        ErrorCode.SCHEMA_MISMATCH,
        ("'vec'", "dim 8", "got 4"),
    ),
    (
        "wrong-dim-list-row",
        (
            "raw",
            command(),
            table_with(vec=pa.array([[0.1] * 8, [0.1] * 7, [0.1] * 8], pa.list_(pa.float32()))),
        ),
        ErrorCode.SCHEMA_MISMATCH,
        ("'vec'", "dim 8", "got 7", "row 1"),
    ),
    (
        "nan-vector",
        ("raw", command(), table_with(vec=vec_with(float("nan")))),
        ErrorCode.INVALID_ARGUMENT,
        ("'vec'", "nan", "row 1"),
    ),
    (
        "inf-vector",
        ("raw", command(), table_with(vec=vec_with(float("inf"), row=2))),
        ErrorCode.INVALID_ARGUMENT,
        ("'vec'", "inf", "row 2"),
    ),
    (
        "nan-vector-sdk",
        (
            "sdk",
            "insert",
            "bad",
            [
                {
                    **{k: v[0].as_py() for k, v in good_columns(1, 50).items()},
                    "vec": [float("nan")] * 8,
                }
            ],
            {},
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("'vec'", "nan"),
    ),
    (
        "vector-overflows-float32",
        (
            "raw",
            command(),
            table_with(
                vec=pa.array([[0.5] * 8, [0.5] * 7 + [1e39], [0.5] * 8], pa.list_(pa.float64()))
            ),
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("'vec'", "row 1"),
    ),
    (
        "vector-of-strings",
        ("raw", command(), table_with(vec=pa.array([["a"] * 8] * 3, pa.list_(pa.string(), 8)))),
        ErrorCode.SCHEMA_MISMATCH,
        ("'vec'", "numbers"),
    ),
    (
        "nan-in-float-field",
        ("raw", command(), table_with(score=pa.array([0.5, float("nan"), 0.5], pa.float32()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'score'", "nan", "row 1"),
    ),
    (
        "inf-in-float-field",
        ("raw", command(), table_with(score=pa.array([0.5, 0.5, float("-inf")], pa.float64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'score'", "inf", "row 2"),
    ),
    (
        "missing-field",
        ("raw", command(), table_with(n=None)),
        ErrorCode.SCHEMA_MISMATCH,
        ("'n'", "missing"),
    ),
    (
        "unknown-field",
        ("raw", command(), table_with(extra=pa.array([1, 2, 3]))),
        ErrorCode.SCHEMA_MISMATCH,
        ("'extra'", "not in the collection schema"),
    ),
    (
        "duplicate-column",
        (
            "raw",
            command(),
            pa.Table.from_arrays(
                [*good_columns().values(), pa.array([1, 2, 3], pa.int32())],
                names=[*good_columns(), "n"],
            ),
        ),
        ErrorCode.SCHEMA_MISMATCH,
        ("'n'", "more than once"),
    ),
    (
        "string-for-int64",
        ("raw", command(), table_with(pk=pa.array(["a", "b", "c"]))),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'", "Int64", "string"),
    ),
    (
        "string-for-int64-sdk",
        (
            "sdk",
            "insert",
            "bad",
            [{**{k: v[0].as_py() for k, v in good_columns(1, 60).items()}, "pk": "sixty"}],
            {},
        ),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'",),
    ),
    (
        "int-for-varchar",
        ("raw", command(), table_with(title=pa.array([1, 2, 3]))),
        ErrorCode.SCHEMA_MISMATCH,
        ("'title'", "VarChar", "int64"),
    ),
    (
        "varchar-too-long",
        ("raw", command(), table_with(title=pa.array(["ok", "x" * 17, "ok"]))),
        ErrorCode.INVALID_ARGUMENT,
        ("'title'", "row 1", "17 bytes", "max_length is 16"),
    ),
    (
        "varchar-too-long-utf8",
        ("raw", command(), table_with(title=pa.array(["ok", "ok", "é" * 9]))),
        ErrorCode.INVALID_ARGUMENT,
        ("'title'", "row 2", "18 bytes", "max_length is 16"),
    ),
    (
        "null-in-non-nullable",
        ("raw", command(), table_with(n=pa.array([1, None, 3], pa.int32()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'n'", "null", "row 1"),
    ),
    (
        "null-primary-key",
        ("raw", command(), table_with(pk=pa.array([1, 2, None], pa.int64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'pk'", "null", "row 2"),
    ),
    (
        "null-vector",
        (
            "raw",
            command(),
            table_with(vec=pa.array([[0.5] * 8, None, [0.5] * 8], pa.list_(pa.float32(), BAD_DIM))),
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("'vec'", "null", "row 1"),
    ),
    (
        "duplicate-pks",
        ("raw", command(), table_with(pk=pa.array([5, 6, 5], pa.int64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("duplicate primary key 5", "'pk'", "rows 0 and 2"),
    ),
    (
        "duplicate-pks-upsert",
        ("raw", command("upsert"), table_with(pk=pa.array([7, 7, 8], pa.int64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("duplicate primary key 7",),
    ),
    (
        "pk-given-for-auto-id",
        (
            "raw",
            command(collection="bad_auto"),
            pa.table({"id": pa.array([1, 2, 3]), "vector": vectors(np.ones((3, BAD_DIM)))}),
        ),
        ErrorCode.SCHEMA_MISMATCH,
        ("'id'", "auto_id"),
    ),
    (
        "upsert-without-pk-auto-id",
        (
            "raw",
            command("upsert", collection="bad_auto"),
            pa.table({"vector": vectors(np.ones((3, BAD_DIM)))}),
        ),
        ErrorCode.SCHEMA_MISMATCH,
        ("upsert needs the primary key field 'id'",),
    ),
    (
        "upsert-without-pk",
        ("raw", command("upsert"), table_with(pk=None)),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'", "missing from the upsert"),
    ),
    (
        "int8-out-of-range",
        ("raw", command(), table_with(tiny=pa.array([1, 200, 3], pa.int64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'tiny'", "200", "row 1", "out of range for Int8"),
    ),
    (
        "int32-out-of-range",
        ("raw", command(), table_with(n=pa.array([1, 2, 2**31], pa.int64()))),
        ErrorCode.INVALID_ARGUMENT,
        ("'n'", str(2**31), "out of range for Int32"),
    ),
    (
        "array-over-capacity",
        (
            "raw",
            command(),
            table_with(tags=pa.array([[1], [1, 2, 3, 4, 5], []], pa.list_(pa.int32()))),
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("'tags'", "row 1", "5 elements", "max_capacity is 4"),
    ),
    (
        "array-element-out-of-range",
        ("raw", command(), table_with(tags=pa.array([[1], [2**40], []], pa.list_(pa.int64())))),
        ErrorCode.INVALID_ARGUMENT,
        ("'tags'", "row 1, element 0", "out of range for Int32"),
    ),
    (
        "bad-json",
        ("raw", command(), table_with(doc=pa.array(['{"a": 1}', '{"a": ', "[]"]))),
        ErrorCode.INVALID_ARGUMENT,
        ("'doc'", "row 1", "not valid JSON"),
    ),
    (
        "json-with-nan",
        ("raw", command(), table_with(doc=pa.array(['{"a": 1}', "{}", '{"a": NaN}']))),
        ErrorCode.INVALID_ARGUMENT,
        ("'doc'", "row 2", "not valid JSON"),
    ),
    (
        "unknown-collection",
        ("raw", command(collection="nope"), table_with()),
        ErrorCode.COLLECTION_NOT_FOUND,
        ("'nope'",),
    ),
    (
        "unknown-collection-sdk",
        ("sdk", "insert", "nope", table_with(), {}),
        ErrorCode.COLLECTION_NOT_FOUND,
        ("'nope'",),
    ),
    (
        "unknown-partition",
        ("raw", command(partition="p_missing"), table_with()),
        ErrorCode.PARTITION_NOT_FOUND,
        ("'p_missing'", "'bad'"),
    ),
    (
        "unknown-partition-sdk",
        ("sdk", "insert", "bad", table_with(), {"partition_name": "p_missing"}),
        ErrorCode.PARTITION_NOT_FOUND,
        ("'p_missing'",),
    ),
    (
        "bad-op",
        ("raw", command("replace"), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("'op'", "'replace'", "insert", "upsert"),
    ),
    (
        "malformed-command-json",
        ("raw", b'{"op": "insert", "collection": "bad"', table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("malformed JSON", "DoPut command"),
    ),
    (
        "command-not-an-object",
        ("raw", b'["insert", "bad"]', table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("DoPut command", "JSON object", "array"),
    ),
    (
        "unknown-command-key",
        ("raw", command(colection="bad"), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("DoPut command", "unknown key", "'colection'"),
    ),
    (
        "command-without-collection",
        ("raw", encode_json({"op": "insert"}), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("'collection'", "missing"),
    ),
    (
        "oversized-request",
        ("raw", command(), _oversized()),
        ErrorCode.REQUEST_TOO_LARGE,
        ("insert request", f"limit is {BAD_MAX_REQUEST_BYTES} bytes"),
    ),
    (
        "oversized-request-sdk",
        ("sdk", "upsert", "bad", _oversized(), {}),
        ErrorCode.REQUEST_TOO_LARGE,
        ("upsert request", f"limit is {BAD_MAX_REQUEST_BYTES} bytes"),
    ),
    (
        "unknown-database",
        ("raw", command(db="nodb"), table_with()),
        ErrorCode.DATABASE_NOT_FOUND,
        ("'nodb'",),
    ),
    (
        "invalid-partition-name",
        ("raw", command(partition="no such!"), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("partition", "'no such!'"),
    ),
    (
        "collection-not-a-string",
        ("raw", encode_json({"op": "insert", "collection": 5}), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("'collection'", "string"),
    ),
    (
        "atomic-not-a-bool",
        ("raw", command(atomic="yes"), table_with()),
        ErrorCode.INVALID_ARGUMENT,
        ("'atomic'", "true or false"),
    ),
    (
        "atomic-stream-bad-last-batch",
        (
            "raw",
            command(atomic=True),
            [
                *pa.table(good_columns(3, start=100)).to_batches(),
                *pa.table(good_columns(3, start=200)).to_batches(),
                *table_with(n=pa.array([1, None, 3], pa.int32())).to_batches(),
            ],
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("'n'", "null", "row 1"),
    ),
    (
        "atomic-stream-duplicate-key-across-batches",
        (
            "raw",
            command("upsert", atomic=True),
            [
                *pa.table(good_columns(3, start=300)).to_batches(),
                *pa.table(good_columns(3, start=302)).to_batches(),
            ],
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("duplicate primary key 302", "'pk'"),
    ),
    (
        "sdk-duplicate-key-across-batches",
        (
            "sdk",
            "insert",
            "bad",
            pa.concat_tables([pa.table(good_columns(100, 400)), pa.table(good_columns(100, 450))]),
            {"batch_bytes": 4_000},
        ),
        ErrorCode.INVALID_ARGUMENT,
        ("duplicate primary key 450", "'pk'"),
    ),
    (
        "sdk-over-the-limit-across-batches",
        ("sdk", "insert", "bad", pa.table(good_columns(6000, 500)), {"batch_bytes": 100_000}),
        ErrorCode.REQUEST_TOO_LARGE,
        ("insert request", "bytes"),
    ),
    # Deletes (DoAction) that must be refused before anything reaches the log.
    (
        "delete-string-keys-for-int64",
        ("delete", "bad", ["a", "b"], {}),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'", "Int64", "string"),
    ),
    (
        "delete-mixed-key-types",
        ("delete", "bad", [1, "b"], {}),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'",),
    ),
    (
        "delete-float-keys",
        ("delete", "bad", [1.5, 2.0], {}),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'", "double"),
    ),
    (
        "delete-key-out-of-int64-range",
        ("delete", "bad", [1, 2**70], {}),
        ErrorCode.SCHEMA_MISMATCH,
        ("'pk'",),
    ),
    (
        "delete-null-key",
        ("delete", "bad", [1, None], {}),
        ErrorCode.INVALID_ARGUMENT,
        ("'pk'", "null", "position 1"),
    ),
    (
        "delete-no-keys",
        ("delete", "bad", [], {}),
        ErrorCode.INVALID_ARGUMENT,
        ("'ids'", "empty"),
    ),
    (
        "delete-unknown-collection",
        ("delete", "nope", [1], {}),
        ErrorCode.COLLECTION_NOT_FOUND,
        ("'nope'",),
    ),
    (
        "delete-unknown-partition",
        ("delete", "bad", [1], {"partition_name": "p_missing"}),
        ErrorCode.PARTITION_NOT_FOUND,
        ("'p_missing'",),
    ),
]


@pytest.mark.parametrize(
    ("how", "code", "names"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_bad_input_is_refused_and_writes_nothing(
    bad_env: BadInputEnv, how: tuple[Any, ...], code: ErrorCode, names: tuple[str, ...]
) -> None:
    before = bad_env.snapshot()
    with pytest.raises(ElanusError) as err:
        if how[0] == "raw":
            bad_env.put(how[1], how[2])
        elif how[0] == "delete":
            _, collection, ids, kwargs = how
            bad_env.client.delete(collection, ids, **kwargs)
        else:
            _, op, collection, data, kwargs = how
            getattr(bad_env.client, op)(collection, data, **kwargs)
    assert err.value.code == code, err.value
    message = err.value.message
    for name in names:
        assert name.lower() in message.lower(), f"{name!r} not named in {message!r}"
    assert "Traceback" not in message and "Detail:" not in message
    assert_nothing_written(bad_env, before)


def assert_nothing_written(env: BadInputEnv, before: Any) -> None:
    segs, counts = env.snapshot()
    assert segs == before[0] == {name: [] for name in env.descs}, f"segments appeared: {segs}"
    assert counts == before[1] == {}, f"data messages appeared in the log: {counts}"


def test_bad_input_stream_holds_no_data_and_flush_finds_nothing(bad_env: BadInputEnv) -> None:
    """After all the refused writes (and the empty ones): nothing for either collection."""
    for name, desc in bad_env.descs.items():
        assert bad_env.client.flush(name) == []
        assert bad_env.client.get_segment_info(name) == []
        for p in desc["pchannels"]:
            msgs = bad_env.stack.call(read_stream(bad_env.stack.bus.js, p))
            assert msgs, "the coord should have ticked this pchannel"
            data = [m for m in msgs if not m.is_tick]
            assert not [m for m in data if m.msg.collection_id == desc["collection_id"]]
    storage = bad_env.stack.settings.storage_path / "collections"
    assert not storage.exists() or not any(storage.rglob("data.lance"))


def test_empty_batches_are_accepted_and_write_nothing(bad_env: BadInputEnv) -> None:
    """What the server does with 0-row batches: it skips them (no error, no PutResult)."""
    before = bad_env.snapshot()
    schema = pa.table(good_columns()).schema
    empty = pa.RecordBatch.from_pylist([], schema)
    assert bad_env.put(command(), [empty]) == []
    assert bad_env.put(command("upsert"), [empty]) == []
    assert bad_env.put(command(), [empty] * 3) == []
    assert bad_env.put(command(), [], schema=schema) == []  # a schema and no batch at all
    # Empty batches around a bad one: the bad one is still refused.
    with pytest.raises(ElanusError) as err:
        bad = table_with(n=pa.array([1, None, 3], pa.int32()))
        bad_env.put(command(), [empty, *bad.to_batches(), empty])
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "'n'" in err.value.message
    # Through the SDK an empty table: zero rows acknowledged, timestamp 0.
    reply = bad_env.client.insert("bad", pa.Table.from_batches([empty]))
    assert reply == {"insert_count": 0, "ids": [], "ts": 0}
    assert bad_env.client.insert("bad", []) == {"insert_count": 0, "ids": [], "ts": 0}
    assert bad_env.client.upsert("bad", []) == {"upsert_count": 0, "ids": [], "ts": 0}
    assert_nothing_written(bad_env, before)


def test_bad_row_in_a_later_batch_of_one_insert_writes_nothing(bad_env: BadInputEnv) -> None:
    """Regression: DoPut published each batch as it came, so an SDK insert split into
    batches wrote the batches before a bad one and still reported an error."""
    c = bad_env.client
    desc = c.create_collection("multi", schema=bad_schema())
    try:
        n = 3_000
        cols = good_columns(n, start=10_000)
        v = np.random.default_rng(1).random((n, BAD_DIM), dtype=np.float32)
        v[-1, 0] = np.nan  # in the last of the batches the SDK sends
        cols["vec"] = vectors(v)
        table = pa.table(cols)
        with pytest.raises(ElanusError) as err:
            c.insert("multi", table, batch_bytes=table.nbytes // 4)
        assert err.value.code == ErrorCode.INVALID_ARGUMENT and "nan" in err.value.message
        counts = data_counts(
            bad_env.stack.call(subject_counts(bad_env.stack.bus.js, desc["pchannels"][0]))
        )
        written = {s: n for s, n in counts.items() if s.endswith(desc["vchannels"][0])}
        assert c.get_segment_info("multi") == [] and written == {}, (
            f"a refused insert left {written} in the log"
        )
    finally:
        c.drop_collection("multi")


# =============================================================================================
# 6. deleting keys that were never inserted
# =============================================================================================


def test_delete_of_keys_never_inserted_is_accepted_and_changes_nothing(stack: Stack) -> None:
    dim = 8
    hold_stream_purges(stack)
    c = stack.client()
    desc = c.create_collection("ghost", schema=bulk_schema(dim), num_shards=1)
    evens = np.arange(0, 2000, 2)
    ins = c.insert("ghost", bulk_table(evens, dim, seed=5))

    # While the rows are in a growing segment: absent keys inside and outside the key range.
    absent = [1, 3, 999, 1999, 10**9, -5]
    first = c.delete("ghost", absent)
    assert first["delete_count"] == len(absent) and first["ts"] > ins["ts"]
    c.flush("ghost")
    segs = flushed_segments(c, "ghost")
    rows = read_rows(storage_of(stack), segs)
    assert_exactly_once(rows, evens)
    assert read_deltas(storage_of(stack), segs).num_rows == 0, "deletes of absent keys logged"

    # Now the rows are flushed: more absent keys (the bloom filter may say "maybe" for some
    # odd keys inside the range; a logged delete must then name a key the segment lacks).
    odd = list(range(1, 400, 2))
    second = c.delete("ghost", odd + [5_000_000, 5_000_001])
    assert second["delete_count"] == len(odd) + 2
    # Deletes given twice in one request count once (they are deduplicated).
    assert c.delete("ghost", [7, 7, 7])["delete_count"] == 1
    # One more row and a flush make the datanode write the flushed segments' pending deletes.
    more = c.insert("ghost", bulk_table(np.array([4001]), dim, seed=6))
    c.flush("ghost")
    segs = flushed_segments(c, "ghost")
    rows = read_rows(storage_of(stack), segs)
    assert_exactly_once(rows, np.append(evens, 4001))
    stored = set(pk_list(rows))
    deltas = read_deltas(storage_of(stack), segs)
    assert not stored & set(pk_list(deltas)), "a delete of an absent key hit a stored key"
    assert set(pk_list(deltas)) <= set(odd) | {7}
    assert set(rows.column("_ts").to_pylist()) == {ins["ts"], more["ts"]}
    # The log holds the deletes as they were acknowledged.
    data = stream_data_messages(stack, desc["pchannels"][0], desc["collection_id"])
    deletes = [m for m in data if m.msg.type is MsgType.DELETE]
    assert [m.msg.ts for m in deletes] == sorted(m.msg.ts for m in deletes)
    assert sorted(k for m in deletes for k in m.msg.batch.column("pk").to_pylist()) == sorted(
        absent + odd + [5_000_000, 5_000_001, 7]
    )


# =============================================================================================
# 7. stream purge and a datanode restart
# =============================================================================================


def test_purge_below_checkpoint_then_datanode_restart_keeps_every_acknowledged_row(
    stack: Stack,
) -> None:
    dim = 8
    hold_stream_purges(stack)
    c = stack.client()
    desc = c.create_collection("pg", schema=bulk_schema(dim), num_shards=1)
    vchannel, pchannel = desc["vchannels"][0], desc["pchannels"][0]
    coord = stack.coord
    assert coord is not None
    acked: dict[int, int] = {}  # pk -> ts of the insert that carried it

    def insert(start: int, n: int, seed: int) -> int:
        reply = c.insert("pg", bulk_table(np.arange(start, start + n), dim, seed=seed))
        assert reply["insert_count"] == n
        acked.update(dict.fromkeys(range(start, start + n), reply["ts"]))
        return int(reply["ts"])

    def checkpoint() -> tuple[int, int] | None:
        return coord.data.checkpoints.get(vchannel)

    for i in range(4):
        insert(i * 500, 500, seed=i)
    c.flush("pg")
    # Rows that stay in a growing segment across the restart, and deletes of flushed rows
    # that the datanode keeps in memory (not yet in a delta log) when it stops.
    growing_ts = insert(2_000, 1_000, seed=10)
    deleted = c.delete("pg", list(range(50)))
    wait_for(
        lambda: (cp := checkpoint()) is not None and cp[1] >= deleted["ts"],
        "the channel checkpoint to pass the delete",
    )
    seq, _ = checkpoint()  # type: ignore[misc]
    msgs = stack.call(read_stream(stack.bus.js, pchannel))
    unflushed = [m.seq for m in msgs if not m.is_tick and m.msg.ts in (growing_ts, deleted["ts"])]
    assert len(unflushed) == 2 and 1 < seq <= min(unflushed), (
        f"the checkpoint {seq} must stay at or below the unflushed messages {unflushed}"
    )

    purged = stack.call(coord.data.purge_streams())
    assert purged.get(pchannel) == seq
    first_seq, _, _ = stack.call(stream_state(stack.bus.js, pchannel))
    assert first_seq == seq > 1, "purge did not remove the stream below the checkpoint"

    # Stop the datanode; write and seal while no datanode runs; then start another one.
    old = stack.datanodes.pop()
    stack.call(old.stop())
    insert(3_000, 700, seed=11)
    sealed = c.flush("pg", wait=False)
    assert sealed and not c.get_flush_state(sealed)
    new = stack.add_datanode()
    wait_for(
        lambda: coord.channels.watchers.get(vchannel) == new.node_id and vchannel in new.channels,
        "the vchannel to move to the new datanode",
    )
    wait_for(lambda: c.get_flush_state(sealed), "the sealed segment to be flushed")
    insert(3_700, 300, seed=12)
    c.flush("pg")

    segs = flushed_segments(c, "pg")
    rows = read_rows(storage_of(stack), segs)
    assert_exactly_once(rows, np.fromiter(acked, dtype=np.int64))
    got_ts = dict(zip(pk_list(rows), rows.column("_ts").to_pylist(), strict=True))
    assert got_ts == acked
    deltas = read_deltas(storage_of(stack), segs)
    assert Counter(zip(pk_list(deltas), deltas.column("ts").to_pylist(), strict=True)) == {
        (k, deleted["ts"]): 1 for k in range(50)
    }
    # Purging again after the final flush moves the stream's start further on.
    wait_for(lambda: (cp := checkpoint()) is not None and cp[0] > seq, "the checkpoint to move on")
    stack.call(coord.data.purge_streams())
    assert stack.call(stream_state(stack.bus.js, pchannel))[0] > first_seq


def test_request_too_large_across_batches_names_the_configured_limit(
    bad_env: BadInputEnv,
) -> None:
    table = pa.table(good_columns(6000, 500))
    assert table.nbytes > BAD_MAX_REQUEST_BYTES
    with pytest.raises(ElanusError) as err:
        bad_env.client.insert("bad", table, batch_bytes=100_000)
    assert err.value.code == ErrorCode.REQUEST_TOO_LARGE
    assert f"limit is {BAD_MAX_REQUEST_BYTES} bytes" in err.value.message, err.value.message


def test_streaming_doput_acknowledges_what_it_wrote_before_a_bad_batch(
    bad_env: BadInputEnv,
) -> None:
    """Without ``atomic`` a DoPut is a stream: batches are written one by one. A bad batch
    ends it, and every batch written before it has reached the client as a PutResult."""
    c = bad_env.client
    desc = c.create_collection("streamed", schema=bad_schema())
    try:
        first = pa.table(good_columns(3, start=0))
        second = pa.table(good_columns(3, start=3))
        bad = table_with(n=pa.array([1, None, 3], pa.int32()))
        acks, error = bad_env.put_collect(
            command(collection="streamed"),
            [*first.to_batches(), *second.to_batches(), *bad.to_batches()],
        )
        assert error is not None and error.code == ErrorCode.INVALID_ARGUMENT
        assert [a.pks.to_pylist() for a in acks] == [[0, 1, 2], [3, 4, 5]]
        data = stream_data_messages(bad_env.stack, desc["pchannels"][0], desc["collection_id"])
        assert sorted(m.msg.ts for m in data) == sorted(a.ts for a in acks)
        assert sorted(k for m in data for k in m.msg.batch.column("pk").to_pylist()) == list(
            range(6)
        )
    finally:
        c.drop_collection("streamed")


@pytest.mark.slow
def test_growing_segments_spill_to_lance_while_ingest_runs(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are written in the background as a segment grows; the flushed segment holds
    each row exactly once, across several Lance fragments."""
    from elanus.segments.flushcommon import writebuffer

    monkeypatch.setattr(writebuffer, "SPILL_BYTES", 20_000)
    c = stack.client()
    c.create_collection("spill", dimension=8)
    rng = np.random.default_rng(9)
    acked: list[int] = []

    def fragments() -> int:
        data = Path(stack.settings.data_dir) / "storage" / "collections"
        found = [p.parent for p in data.glob("*/*/*/data.lance/_versions/*.manifest")]
        return len(lance.dataset(str(found[0].parent)).get_fragments()) if found else 0

    for k in range(10):
        ids = np.arange(k * 300, (k + 1) * 300)
        acked += c.insert("spill", {"id": ids, "vector": rng.random((300, 8), "f4")})["ids"]
        if k % 2 == 1:  # two inserts pass SPILL_BYTES: wait for their spill, so the
            # consumer cannot take all ten in one pack on a busy machine
            want = (k + 1) // 2
            wait_for(lambda want=want: fragments() >= want, f"spill {want} of the growing segment")
    c.flush("spill")
    (seg,) = [s for s in c.get_segment_info("spill") if s["state"] == "Flushed"]
    ds = lance.dataset(seg["path"])
    assert len(ds.get_fragments()) > 1
    assert sorted(ds.to_table(columns=["id"]).column("id").to_pylist()) == sorted(acked)
    assert seg["num_rows"] == len(acked)
    # its key stats were built by the spills, then folded to the segment's size
    stats = storage.load_pk_stats(Path(seg["path"]).parent)
    assert stats is not None and stats.num_keys == len(acked)
    assert stats.num_bits == bloom_bits(len(acked))
    assert stats.may_contain(pa.array(acked, pa.int64())).all()
