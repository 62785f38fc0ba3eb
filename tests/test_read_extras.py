"""Delete by filter expression, collection stats, and the query iterator."""

from __future__ import annotations

import time

import numpy as np
from conftest import Stack, wait_for

from elanus.errors import ElanusError, ErrorCode

DIM = 4


def fill(stack: Stack, n: int) -> tuple[object, np.ndarray]:
    client = stack.client()
    client.create_collection("x", dimension=DIM, metric_type="L2")
    ids = np.arange(n)[::-1].copy()  # stored out of key order
    client.insert(
        "x",
        {
            "id": ids,
            "vector": np.random.default_rng(1).random((n, DIM), "f4"),
            "n": (ids % 7).tolist(),
        },
    )
    return client, ids


def test_delete_by_filter_removes_exactly_the_matching_rows(stack: Stack) -> None:
    client, _ = fill(stack, 300)
    client.load_collection("x")
    with_ids = client.delete("x", filter="n == {k}", filter_params={"k": 3})
    assert with_ids["delete_count"] == sum(1 for i in range(300) if i % 7 == 3)
    rows = client.query("x", "id >= 0", ["id"], consistency_level="Strong")
    assert sorted(r["id"] for r in rows) == [i for i in range(300) if i % 7 != 3]
    assert client.delete("x", filter="id > 100000")["delete_count"] == 0
    try:
        client.delete("x", filter="nope ==")
        raise AssertionError("a bad filter was accepted")
    except ElanusError as exc:
        assert exc.code is ErrorCode.BAD_EXPRESSION


def test_collection_stats_count_flushed_rows(stack: Stack) -> None:
    client, _ = fill(stack, 120)
    assert client.get_collection_stats("x")["row_count"] == 0  # nothing flushed yet
    client.flush("x")
    assert client.get_collection_stats("x")["row_count"] == 120


def test_query_iterator_pages_in_key_order_at_one_snapshot(stack: Stack) -> None:
    client, _ = fill(stack, 2500)
    client.flush("x")
    client.load_collection("x")
    pages = []
    for page in client.query_iterator(
        "x", 1000, filter="n != 6", output_fields=["id", "n"], consistency_level="Strong"
    ):
        pages.append(page)
        if len(pages) == 1:  # written after the snapshot: never seen by this iteration
            client.insert("x", {"id": [100_000], "vector": [[0.0] * DIM], "n": [1]})
    ids = [r["id"] for p in pages for r in p]
    assert [len(p) for p in pages][:2] == [1000, 1000]
    assert ids == [i for i in range(2500) if i % 7 != 6]
    limited = [r["id"] for p in client.query_iterator("x", batch_size=300, limit=700) for r in p]
    assert limited == list(range(700))


def test_count_without_a_filter(stack: Stack) -> None:
    client, _ = fill(stack, 50)
    client.load_collection("x")
    assert client.query("x", "", ["count(*)"], consistency_level="Strong") == [{"count(*)": 50}]
    try:
        client.query("x", "", ["id"])
        raise AssertionError("a query without a filter was accepted")
    except ElanusError as exc:
        assert exc.code is ErrorCode.INVALID_ARGUMENT and "count(*)" in exc.message


def test_the_distribution_is_recorded_in_duckdb(stack: Stack) -> None:
    client, _ = fill(stack, 200)
    client.flush("x")
    client.load_collection("x")
    coord = stack.coord
    assert coord is not None

    def recorded() -> tuple[set[int], set[str]]:
        def read(con: object) -> tuple[set[int], set[str]]:
            segs = {
                r[0] for r in con.execute("SELECT segment_id FROM query_distribution").fetchall()
            }  # type: ignore[attr-defined]
            chans = {r[0] for r in con.execute("SELECT vchannel FROM query_channels").fetchall()}  # type: ignore[attr-defined]
            return segs, chans

        return stack.call(coord.db.run(read))

    flushed = {s["segment_id"] for s in client.get_segment_info("x") if s["state"] == "Flushed"}
    # quick setup loaded "x" before the flush: the flushed segments reach the workers by
    # handoff, which the load call does not wait for
    wait_for(lambda: recorded()[0] == flushed, 10, "the handoff recorded")
    segs, chans = recorded()
    assert segs == flushed and chans == set(client.describe_collection("x")["vchannels"])
    client.insert("x", {"id": [5000], "vector": [[0.0] * DIM], "n": [1]})
    client.flush("x")  # the new segment is handed to a worker: recorded too
    flushed = {s["segment_id"] for s in client.get_segment_info("x") if s["state"] == "Flushed"}
    deadline = time.monotonic() + 10
    while recorded()[0] != flushed:
        assert time.monotonic() < deadline, "the handoff was not recorded"
        time.sleep(0.05)
    client.release_collection("x")
    assert recorded() == (set(), set())
