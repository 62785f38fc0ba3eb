"""The DML publisher (``channels/publisher.py``) on a nats-server with STOCK limits (1 MB
``max_payload``): writes of any size through the proxy are cut below the server's limit,
headers counted; a row that no message can carry is refused naming the limit, writing
nothing; a re-published message id is stored once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, own_stack
from segment_reader import data_counts, subject_counts

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.channels.dml import DmlMessage, MsgType, ensure_streams, stream_name
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.publisher import HEADER_RESERVE, SAFETY_MARGIN, DmlPublisher, header_bytes
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client

STOCK_MAX_PAYLOAD = 1024 * 1024
"""nats-server's default ``max_payload``."""


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack (coord, datanode, querynode, proxy) on a nats-server with its stock limits."""
    with own_stack(tmp_path_factory.mktemp("stock"), "stock", max_payload_mb=None) as stack:
        assert stack.bus.nc.max_payload == STOCK_MAX_PAYLOAD
        yield stack


def vectors(values: np.ndarray) -> pa.FixedSizeListArray:
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1])


def vector_schema(dim: int) -> Schema:
    return (
        Schema(enable_dynamic_field=False)
        .add_field("pk", DataType.INT64, is_primary=True)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
    )


def vector_table(pks: np.ndarray, dim: int) -> pa.Table:
    vecs = np.random.default_rng(7).random((len(pks), dim), dtype=np.float32)
    return pa.table({"pk": pa.array(pks, pa.int64()), "vec": vectors(vecs)})


def count(client: Client, collection: str) -> int:
    rows = client.query(collection, "", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def raw_messages(stack: Stack, pchannel: str) -> list[tuple[dict[str, str], bytes]]:
    """Every data message (not ticks) of the pchannel's stream as stored: headers, payload."""

    async def read() -> list[tuple[dict[str, str], bytes]]:
        js = stack.bus.js
        name = stream_name(pchannel)
        state = (await js.stream_info(name)).state
        out = []
        for seq in range(state.first_seq, state.last_seq + 1):
            try:
                m = await js.get_msg(name, seq)
            except nats.js.errors.NotFoundError:
                continue
            headers = dict(m.headers or {})
            if headers.get("Elanus-Type") != "tick":
                out.append((headers, m.data or b""))
        return out

    result: list[tuple[dict[str, str], bytes]] = stack.loop.call(read(), timeout=60)
    return result


def assert_under_stock_limit(messages: list[tuple[dict[str, str], bytes]]) -> None:
    for headers, payload in messages:
        size = header_bytes(headers) + len(payload)
        assert size < STOCK_MAX_PAYLOAD, f"a message of {size} bytes crossed the 1 MB limit"


# -- through the proxy ----------------------------------------------------------------------
def test_10k_by_64d_insert_on_stock_limits_lands_whole(stock: Stack) -> None:
    """Was ``[INTERNAL] DoPut: MaxPayloadError``: the messages were cut near 1 MB of
    payload, and the headers took them over the server's limit."""
    dim, n = 64, 10_000
    c = stock.client()
    desc = c.create_collection("wide10k", schema=vector_schema(dim), num_shards=2)
    table = vector_table(np.arange(n), dim)
    assert table.nbytes > 2 * STOCK_MAX_PAYLOAD
    reply = c.insert("wide10k", table)
    assert reply["insert_count"] == n
    c.flush("wide10k")
    assert c.get_collection_stats("wide10k")["row_count"] == n
    c.load_collection("wide10k")
    assert count(c, "wide10k") == n
    got = c.query("wide10k", "pk in [0, 4999, 9999]", output_fields=["vec"])
    by_pk = {r["pk"]: r["vec"] for r in got}
    expected = table.column("vec").to_pylist()
    for k in (0, 4999, 9999):
        assert np.allclose(by_pk[k], expected[k])
    messages = [m for p in desc["pchannels"] for m in raw_messages(stock, p)]
    assert_under_stock_limit(messages)
    assert sum(1 for h, _ in messages if h["Elanus-Type"] == "insert") >= 3


def test_100k_id_delete_on_stock_limits_deletes_them_all(stock: Stack) -> None:
    n, dim = 100_000, 4
    c = stock.client()
    schema = (
        Schema(enable_dynamic_field=False)
        .add_field("key", DataType.VARCHAR, is_primary=True, max_length=32)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
    )
    desc = c.create_collection("del100k", schema=schema)
    keys = [f"key-{i:06d}-padded" for i in range(n + 10)]  # 100k of them are ~1.7 MB
    vecs = vectors(np.random.default_rng(1).random((len(keys), dim), dtype=np.float32))
    c.insert("del100k", pa.table({"key": pa.array(keys), "vec": vecs}))
    c.flush("del100k")
    c.load_collection("del100k")
    assert count(c, "del100k") == n + 10
    reply = c.delete("del100k", ids=keys[:n])
    assert reply["delete_count"] == n
    assert count(c, "del100k") == 10
    rest = c.query("del100k", "", output_fields=["key"], limit=100)
    assert sorted(r["key"] for r in rest) == keys[n:]
    messages = raw_messages(stock, desc["pchannels"][0])
    deletes = [(h, p) for h, p in messages if h["Elanus-Type"] == "delete"]
    assert len(deletes) >= 2, "100k keys of ~17 bytes do not fit one stock message"
    assert_under_stock_limit(deletes)


def test_a_row_over_the_limit_is_refused_naming_it_and_nothing_is_written(
    stock: Stack,
) -> None:
    c = stock.client()
    schema = (
        Schema(enable_dynamic_field=False)
        .add_field("pk", DataType.INT64, is_primary=True)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    )
    docs = [f"doc{i}" for i in range(STOCK_MAX_PAYLOAD // 60_000 + 1)]
    for name in docs:  # each JSON value under Milvus's 64 KiB, the row over the payload
        schema.add_field(name, DataType.JSON)
    desc = c.create_collection("huge", schema=schema)
    small = json.dumps({"a": 1})
    big = json.dumps({"blob": "x" * 60_000})
    rows = pa.table(
        {
            "pk": pa.array([1, 2, 3], pa.int64()),
            "vec": vectors(np.ones((3, 4))),
            **{name: pa.array([small, big, small]) for name in docs},
        }
    )
    with pytest.raises(ElanusError) as err:
        c.insert("huge", rows)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    limit = STOCK_MAX_PAYLOAD - HEADER_RESERVE - SAFETY_MARGIN
    assert f"{limit} bytes" in err.value.message and "max_payload" in err.value.message
    for p in desc["pchannels"]:
        subjects = data_counts(stock.call(subject_counts(stock.bus.js, p)))
        assert not [s for s in subjects for v in desc["vchannels"] if s.endswith("." + v)]
    c.flush("huge")
    assert c.get_collection_stats("huge")["row_count"] == 0
    c.insert("huge", rows.filter(pa.array([True, False, True])))  # the others go in
    c.flush("huge")
    assert c.get_collection_stats("huge")["row_count"] == 2


# -- the publisher itself ----------------------------------------------------------------------
@pytest.fixture
def stock_nats(tmp_path: Path, loop_thread: LoopThread) -> Iterator[tuple[LoopThread, Any]]:
    server = EmbeddedNats(tmp_path / "nats", max_payload_mb=None).start()
    creds = server.credentials
    nc = loop_thread.call(nats.connect(server.url, user=creds.user, password=creds.password))
    try:
        yield loop_thread, nc
    finally:
        loop_thread.call(nc.close())
        server.stop()


def test_pieces_stay_under_the_servers_limit_and_a_repeated_id_is_stored_once(
    stock_nats: tuple[LoopThread, Any],
) -> None:
    loop, nc = stock_nats
    js = nc.jetstream()
    pchannel = "dml_0"
    vchannels = [f"{pchannel}_77v0", f"{pchannel}_77v1"]
    loop.call(ensure_streams(js, [pchannel]))
    publisher = DmlPublisher(nc, js)
    assert publisher.server_max_payload == STOCK_MAX_PAYLOAD
    # a run of wide rows among narrow ones: the size estimate is wrong for some slices
    n = 6_000
    text = ["y" * (9_000 if 2_000 <= i < 2_600 else 5) for i in range(n)]
    table = pa.table({"pk": pa.array(np.arange(n), pa.int64()), "s": pa.array(text)})
    assert table.nbytes > 5 * STOCK_MAX_PAYLOAD
    pieces = publisher.pieces(MsgType.INSERT, vchannels, table.column("pk").combine_chunks(), table)
    assert sum(p.rows for p in pieces) == n
    assert {p.vchannel for p in pieces} == set(vchannels)
    assert len(pieces) > 5

    def sends(ts: int) -> list[tuple[DmlMessage, bytes]]:
        return [
            (DmlMessage(MsgType.INSERT, ts, p.vchannel, 77, 1, 9, "t", None, f"t-{i}"), p.payload)
            for i, p in enumerate(pieces)
        ]

    loop.call(publisher.publish(sends(2**63), "the test write"), timeout=60)
    info = loop.call(js.stream_info(stream_name(pchannel)))
    assert info.state.messages == len(pieces)
    stored = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        m = loop.call(js.get_msg(stream_name(pchannel), seq))
        size = header_bytes(dict(m.headers or {})) + len(m.data or b"")
        assert size <= publisher.payload_limit + HEADER_RESERVE < STOCK_MAX_PAYLOAD
        stored.append(DmlMessage.decode(dict(m.headers or {}), m.data or b""))
    assert sorted(k for s in stored for k in s.batch.column("pk").to_pylist()) == list(range(n))
    # a whole re-publication (a retry after a lost ack) is deduplicated by the message ids
    loop.call(publisher.publish(sends(2**63), "the test write"), timeout=60)
    assert loop.call(js.stream_info(stream_name(pchannel))).state.messages == len(pieces)


def test_a_single_row_over_the_limit_is_refused_before_anything_is_published(
    stock_nats: tuple[LoopThread, Any],
) -> None:
    loop, nc = stock_nats
    publisher = DmlPublisher(nc, nc.jetstream())
    table = pa.table(
        {"pk": pa.array([1, 2], pa.int64()), "s": pa.array(["ok", "z" * STOCK_MAX_PAYLOAD])}
    )
    with pytest.raises(ElanusError) as err:
        publisher.pieces(MsgType.INSERT, ["dml_0_1v0"], table.column("pk").chunk(0), table)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert f"{publisher.payload_limit} bytes" in err.value.message
    # rows are cut near the preferred size, but one row alone may take up to the limit
    small = DmlPublisher(nc, nc.jetstream(), preferred_bytes=100_000)
    widths = [10_000] * 30 + [500_000] + [10_000] * 30
    table = pa.table(
        {"pk": pa.array(range(61), pa.int64()), "s": pa.array(["w" * k for k in widths])}
    )
    pieces = small.pieces(MsgType.INSERT, ["dml_0_1v0"], table.column("pk").chunk(0), table)
    assert [p.rows for p in pieces if len(p.payload) > 100_000] == [1]
    assert all(len(p.payload) <= small.payload_limit for p in pieces)
    assert len(pieces) >= 7
    rows = [
        k for p in pieces for k in pa.ipc.open_stream(bytes(p.payload)).read_all()["pk"].to_pylist()
    ]
    assert rows == list(range(61))


def test_a_write_the_log_never_takes_fails_unavailable_after_the_retries(
    stock_nats: tuple[LoopThread, Any],
) -> None:
    loop, nc = stock_nats
    publisher = DmlPublisher(nc, nc.jetstream(), retry_window_s=2.0)  # 15 s in a server
    msg = DmlMessage(MsgType.DELETE, 5, "dml_9_1v0", 1, 0, 0, "t", None, "t-lost")
    (piece,) = publisher.pieces(MsgType.DELETE, ["dml_9_1v0"], pa.array([1, 2], pa.int64()))
    with pytest.raises(ElanusError) as err:  # no stream holds dml_9's subjects
        loop.call(publisher.publish([(msg, piece.payload)], "the lost write"), timeout=60)
    assert err.value.code == ErrorCode.UNAVAILABLE
    assert "the lost write" in err.value.message and "within 2s" in err.value.message
