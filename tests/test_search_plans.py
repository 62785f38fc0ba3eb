"""Checked search plans, reused by request shape (flight/search/plan.py).

A repeated ``search`` body with new vectors skips the static check; these tests hold the
proxy to the same answers and the same errors as a first request gets, and to dropping its
plans on any DDL.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack, wait_for
from stack_factory import shared_stack

from elanus.client.client import Client

DIM = 8


stack = shared_stack("plans", fixture="stack")


@pytest.fixture(scope="module")
def vectors(stack: Stack) -> np.ndarray:
    client = stack.client()
    data = np.random.default_rng(3).random((300, DIM), dtype=np.float32)
    client.create_collection("p", dimension=DIM, metric_type="L2")
    client.create_partition("p", "other")
    client.insert("p", {"id": np.arange(300), "vector": data})
    client.flush("p")
    client.load_collection("p")
    return data


def raw_search(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    """One ``search`` action with exactly this body (no SDK defaults)."""
    conn = flight.FlightClient(stack.uri)
    try:
        raw = json.dumps(body).encode()
        (result,) = list(conn.do_action(flight.Action("search", raw)))
        return dict(json.loads(result.body.to_pybytes()))
    finally:
        conn.close()


def exact_ids(data: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return np.argsort(((data - query) ** 2).sum(1), kind="stable")[:k].tolist()


def shape(**extra: Any) -> dict[str, Any]:
    return {"collection": "p", "limit": 5, "consistency_level": "Strong", **extra}


def test_one_shape_many_vectors_one_plan_right_answers(stack: Stack, vectors: np.ndarray) -> None:
    plans = stack.proxy.query.plans
    plans.clear()
    queries = np.random.default_rng(4).random((20, DIM), dtype=np.float32)
    for q in queries:
        reply = raw_search(stack, shape(data=[q.tolist()]))
        assert [h["id"] for h in reply["results"][0]] == exact_ids(vectors, q, 5)
    assert len(plans) == 1
    raw_search(stack, shape(data=[queries[0].tolist()], limit=3))  # another shape, another plan
    assert len(plans) == 2


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([[0.5] * (DIM - 1)], "has dim 8, the query vectors have 7"),
        ([], "'data' holds no query vectors"),
        ("not vectors", "'data' must be a JSON array"),
        (None, "missing required key 'data'"),
        ([["a"] * DIM], "'data' must be a list of 8-d vectors"),
        ([[0.5] * DIM, [0.5] * (DIM + 1)], "'data' must be a list of 8-d vectors"),
        ([[1e39] * DIM], "NaN or infinity"),
    ],
)
def test_bad_vectors_after_a_cached_plan_are_refused(
    stack: Stack, vectors: np.ndarray, data: Any, words: str
) -> None:
    good = np.random.default_rng(5).random(DIM).tolist()
    raw_search(stack, shape(data=[good]))  # the plan for this shape is cached now
    body = shape() if data is None else shape(data=data)
    with pytest.raises(flight.FlightError, match="INVALID_ARGUMENT") as err:
        raw_search(stack, body)
    assert words in str(err.value)


def test_a_repeated_key_after_a_cached_plan_is_refused(stack: Stack, vectors: np.ndarray) -> None:
    """A body parsed to an earlier one's shape takes that one's object count, but its text
    is still counted: a key given twice (parsed away by the JSON reader) is named."""
    good = np.random.default_rng(6).random(DIM).tolist()
    raw_search(stack, shape(data=[good]))  # the plan and its body's shape are cached now
    text = json.dumps(shape(data=[good]))
    raw = text.replace('"limit": 5', '"limit": 5, "limit": 5', 1).encode()
    conn = flight.FlightClient(stack.uri)
    try:
        with pytest.raises(flight.FlightError, match="the key 'limit' twice"):
            list(conn.do_action(flight.Action("search", raw)))
        deep: Any = [good]
        for _ in range(70):  # the data's lists count toward the nesting limit (64)
            deep = [deep]
        nested = json.dumps(shape(data=deep)).encode()
        with pytest.raises(flight.FlightError, match="nested more than 64 levels"):
            list(conn.do_action(flight.Action("search", nested)))
    finally:
        conn.close()


def test_nan_in_a_cached_shape_is_refused(stack: Stack, vectors: np.ndarray) -> None:
    """orjson refuses NaN, so such a body takes the full check (which reads it)."""
    raw_search(stack, shape(data=[[0.1] * DIM]))
    raw = json.dumps(shape(data=[[float("nan")] * DIM])).encode()
    conn = flight.FlightClient(stack.uri)
    with pytest.raises(flight.FlightError, match="NaN or infinity"):
        list(conn.do_action(flight.Action("search", raw)))
    conn.close()


def test_ddl_drops_the_plans(stack: Stack, vectors: np.ndarray) -> None:
    client = stack.client()
    client.create_collection("q", dimension=DIM, metric_type="L2")
    client.insert("q", {"id": np.arange(10), "vector": vectors[:10]})
    client.load_collection("q")
    body = {"collection": "q", "limit": 3, "consistency_level": "Strong"}
    assert raw_search(stack, {**body, "data": [vectors[0].tolist()]})["results"][0][0]["id"] == 0
    # the same name, now 4-d: a stale plan would check the vectors against dim 8
    client.release_collection("q")
    client.drop_collection("q")
    client.create_collection("q", dimension=4, metric_type="L2")
    client.insert("q", {"id": np.arange(10), "vector": vectors[:10, :4]})
    client.load_collection("q")
    reply = raw_search(stack, {**body, "data": [vectors[1, :4].tolist()]})
    assert reply["results"][0][0]["id"] == 1
    with pytest.raises(flight.FlightError, match="has dim 4, the query vectors have 8"):
        raw_search(stack, {**body, "data": [vectors[1].tolist()]})


def test_a_dropped_partition_is_not_searched_through_an_old_plan(
    stack: Stack, vectors: np.ndarray
) -> None:
    client = stack.client()
    client.create_partition("p", "gone")
    body = shape(partition_names=["gone"])
    assert raw_search(stack, {**body, "data": [vectors[0].tolist()]})["results"] == [[]]
    client.release_collection("p")
    client.drop_partition("p", "gone")
    client.load_collection("p")
    with pytest.raises(flight.FlightError, match="gone"):
        raw_search(stack, {**body, "data": [vectors[0].tolist()]})


def test_do_exchange_takes_arrow_vectors_as_they_come(stack: Stack, vectors: np.ndarray) -> None:
    """Float32, float64 and variable-size list columns all search; a ragged one is refused."""
    queries = np.random.default_rng(6).random((4, DIM), dtype=np.float32)
    want = [exact_ids(vectors, q, 5) for q in queries]
    columns = [
        pa.FixedSizeListArray.from_arrays(pa.array(queries.ravel()), DIM),
        pa.FixedSizeListArray.from_arrays(pa.array(queries.ravel().astype(np.float64)), DIM),
        pa.array(queries.tolist(), pa.list_(pa.float32())),
    ]
    for column in columns:
        table = exchange(stack, column)
        got = [
            table.filter(pa.compute.equal(table["query_index"], q))["id"].to_pylist()
            for q in range(len(queries))
        ]
        assert got == want, column.type
    ragged = pa.array([[0.5] * DIM, [0.5] * (DIM - 1)], pa.list_(pa.float32()))
    with pytest.raises(flight.FlightError, match="8-d vectors"):
        exchange(stack, ragged)


def exchange(stack: Stack, column: pa.Array) -> pa.Table:
    conn = flight.FlightClient(stack.uri)
    command = json.dumps(shape()).encode()
    writer, reader = conn.do_exchange(flight.FlightDescriptor.for_command(command))
    try:
        batch = pa.record_batch([column], names=["vector"])
        writer.begin(batch.schema)
        writer.write_batch(batch)
        writer.done_writing()
        return reader.read_all()
    finally:
        writer.close()
        conn.close()


def test_sdk_searches_still_agree_with_brute_force(stack: Stack, vectors: np.ndarray) -> None:
    client: Client = stack.client()
    queries = np.random.default_rng(7).random((3, DIM), dtype=np.float32)
    for _ in range(2):  # the second round runs on the cached plan
        hits = client.search("p", queries, limit=4, consistency_level="Strong")
        assert [[h["id"] for h in row] for row in hits] == [
            exact_ids(vectors, q, 4) for q in queries
        ]


def test_direct_reads_follow_new_growing_segments_and_handoffs(stack: Stack) -> None:
    """In-process searches run on the Flight thread, reading the delegator's segments as
    they are at each call: a new growing segment, and its handoff to a sealed one, must
    show in the next search."""
    client = stack.client()
    data = np.random.default_rng(9).random((101, DIM), dtype=np.float32)
    client.create_collection("lay", dimension=DIM, metric_type="L2")
    client.create_partition("lay", "empty")
    client.insert("lay", {"id": np.arange(100), "vector": data[:100]})
    client.flush("lay")
    client.load_collection("lay")
    target = data[100]

    def top(level: str, **extra: Any) -> list[int]:
        body = {"collection": "lay", "limit": 5, "consistency_level": level, **extra}
        return [
            h["id"] for h in raw_search(stack, {**body, "data": [target.tolist()]})["results"][0]
        ]

    delegator = next(
        d
        for qn in stack.querynodes
        for d in qn.delegators.values()
        if d.collection_id == client.describe_collection("lay")["collection_id"]
    )
    threads = record_search_threads(delegator)
    assert top("Eventually", partition_names=["empty"]) == []
    assert 100 not in top("Eventually")
    assert threads and all(flight_thread(t) for t in threads), threads
    client.insert("lay", {"id": [100], "vector": target[None]})  # a new growing segment
    assert top("Strong")[0] == 100
    assert top("Eventually")[0] == 100  # no wait: served from the delegator's layout
    assert top("Eventually", partition_names=["empty"]) == []
    client.flush("lay")  # the growing segment hands off to a sealed one
    wait_for(lambda: not delegator.growing, what="the growing segment to hand off")
    hits = top("Eventually")
    assert hits[0] == 100 and len(hits) == len(set(hits)) == 5


def test_strong_searches_wait_for_tsafe_on_the_direct_path(stack: Stack) -> None:
    """A Strong read's guarantee is ahead of tsafe when it starts; the in-process search
    waits on the Flight thread for the forced tick, with no hop to the event loop."""
    client = stack.client()
    data = np.random.default_rng(11).random((50, DIM), dtype=np.float32)
    client.create_collection("strong", dimension=DIM, metric_type="L2", num_shards=1)
    client.insert("strong", {"id": np.arange(40), "vector": data[:40]})
    client.flush("strong")
    client.load_collection("strong")
    cid = client.describe_collection("strong")["collection_id"]
    (delegator,) = [
        d for qn in stack.querynodes for d in qn.delegators.values() if d.collection_id == cid
    ]
    threads = record_search_threads(delegator)
    for i in range(40, 50):
        client.insert("strong", {"id": [i], "vector": data[i][None]})
        body = {"collection": "strong", "limit": 1, "consistency_level": "Strong"}
        reply = raw_search(stack, {**body, "data": [data[i].tolist()]})
        assert [h["id"] for h in reply["results"][0]] == [i]  # its own write, at once
    assert len(threads) == 10
    assert all(flight_thread(t) for t in threads), threads


def flight_thread(name: str) -> bool:
    """gRPC's own threads: Python names them ``Dummy-N`` (neither a loop nor a handler)."""
    return name.startswith("Dummy-")


def record_search_threads(delegator: Any) -> list[str]:
    """The names of the threads the delegator's searches run on, from now on."""
    names: list[str] = []
    search = delegator.search

    def recorded(req: Any) -> Any:
        names.append(threading.current_thread().name)
        return search(req)

    delegator.search = recorded
    return names
