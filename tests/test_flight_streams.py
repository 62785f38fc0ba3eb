"""Search through DoExchange and query through DoGet, with a bare pyarrow.flight client."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack
from stack_factory import shared_stack

from elanus import ElanusError, ErrorCode

DIM = 8


stack = shared_stack("streams", fixture="stack")
"""One stack for the file: every test reads the same collection ``s``, made once."""


@pytest.fixture(scope="module")
def vectors(stack: Stack) -> np.ndarray:
    """``s``'s vectors, the collection made, flushed and loaded (``loaded``)."""
    return loaded(stack)


def loaded(stack: Stack) -> np.ndarray:
    client = stack.client()
    client.create_collection("s", dimension=DIM, metric_type="L2", num_shards=2)
    vectors = np.random.default_rng(4).random((500, DIM), dtype=np.float32)
    client.insert(
        "s", {"id": np.arange(500), "vector": vectors, "tag": (np.arange(500) % 3).tolist()}
    )
    client.flush("s")
    client.load_collection("s")
    return vectors


def test_search_through_do_exchange_equals_brute_force(stack: Stack, vectors: np.ndarray) -> None:
    fc = flight.FlightClient(stack.uri)
    command = {
        "collection": "s",
        "limit": 4,
        "output_fields": ["id", "tag"],
        "consistency_level": "Strong",
        "filter": "id >= 100",
    }
    descriptor = flight.FlightDescriptor.for_command(json.dumps(command).encode())
    writer, reader = fc.do_exchange(descriptor)
    queries = np.random.default_rng(8).random((5, DIM), dtype=np.float32)
    schema = pa.schema([pa.field("vector", pa.list_(pa.float32(), DIM))])
    writer.begin(schema)
    for lo in (0, 3):  # two batches of queries
        block = queries[lo : lo + 3]
        arr = pa.FixedSizeListArray.from_arrays(pa.array(block.ravel()), DIM)
        writer.write_batch(pa.record_batch([arr], schema=schema))
    writer.done_writing()
    table = reader.read_all()
    writer.close()
    assert table.column_names[:4] == ["query_index", "rank", "id", "distance"]
    assert table.num_rows == 5 * 4
    d = ((vectors[None] - queries[:, None]) ** 2).sum(-1)
    d[:, :100] = np.inf
    want = np.argsort(d, axis=1)[:, :4]
    for q in range(5):
        rows = table.filter(pa.compute.equal(table["query_index"], q))
        assert rows["id"].to_pylist() == want[q].tolist()
        assert rows["rank"].to_pylist() == [0, 1, 2, 3]
        np.testing.assert_allclose(rows["distance"].to_numpy(), d[q, want[q]], rtol=1e-4)
    fc.close()


@pytest.mark.usefixtures("vectors")
def test_query_through_do_get(stack: Stack) -> None:
    fc = flight.FlightClient(stack.uri)
    ticket = {
        "collection": "s",
        "filter": "id < 10",
        "output_fields": ["id", "vector"],
        "consistency_level": "Strong",
    }
    table = fc.do_get(flight.Ticket(json.dumps(ticket).encode())).read_all()
    assert table["id"].to_pylist() == list(range(10))
    assert table.schema.field("vector").type == pa.list_(pa.float32(), DIM)
    count = {
        "collection": "s",
        "filter": "tag == 1",
        "output_fields": ["count(*)"],
        "consistency_level": "Strong",
    }
    table = fc.do_get(flight.Ticket(json.dumps(count).encode())).read_all()
    assert table["count(*)"].to_pylist() == [sum(1 for i in range(500) if i % 3 == 1)]
    with pytest.raises(flight.FlightServerError, match="BAD_EXPRESSION"):
        bad = {"collection": "s", "filter": "id <", "consistency_level": "Strong"}
        fc.do_get(flight.Ticket(json.dumps(bad).encode())).read_all()
    fc.close()


@pytest.mark.usefixtures("vectors")
def test_sdk_search_stream_answers_as_search_does_query_by_query(stack: Stack) -> None:
    """``Client.search_stream`` sends single queries over one DoExchange, batching those
    that are ready; each answer is the ``Hits`` that ``search`` gives for that query alone,
    in order, queries without hits included, from a lazy generator of any length."""
    client = stack.client()
    queries = np.random.default_rng(9).random((70, DIM), dtype=np.float32)
    options = {"limit": 3, "output_fields": ["tag"], "filter": "id >= 100 and tag == 1"}

    def lazily() -> Any:
        for i, q in enumerate(queries):
            yield q if i != 5 else q.tolist()  # lists and arrays alike

    streamed = list(
        client.search_stream("s", lazily(), consistency_level="Strong", max_batch=8, **options)
    )
    assert len(streamed) == len(queries)
    for q, hits in zip(queries, streamed, strict=True):
        (alone,) = client.search("s", [q], **options)
        assert hits.ids == alone.ids
        np.testing.assert_allclose(hits.distances, alone.distances, rtol=1e-5)
        assert [h["tag"] for h in hits] == [1, 1, 1]
    none = list(client.search_stream("s", queries[:3], filter="id < 0", limit=2))
    assert [list(h) for h in none] == [[], [], []]
    assert list(client.search_stream("s", [], limit=2)) == []


@pytest.mark.usefixtures("vectors")
def test_sdk_search_stream_refuses_bad_input_by_name(stack: Stack) -> None:
    client = stack.client()
    with pytest.raises(ElanusError) as err:
        list(client.search_stream("s", [np.zeros(DIM), np.zeros(DIM + 1)]))
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert "different lengths" in err.value.message
    with pytest.raises(ElanusError) as err:
        list(client.search_stream("s", [np.zeros(DIM + 1)]))
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(ElanusError) as err:
        list(client.search_stream("nope", [np.zeros(DIM)]))
    assert err.value.code == ErrorCode.COLLECTION_NOT_FOUND

    def broken() -> Any:
        yield np.zeros(DIM, np.float32)
        raise ValueError("the caller's own generator failed")

    with pytest.raises(ValueError, match="own generator"):
        list(client.search_stream("s", broken()))
    # the stream is closed: the client still works
    assert len(client.search("s", [np.zeros(DIM)], limit=1)[0]) == 1
