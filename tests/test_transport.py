"""The bus's two transports, in-process and NATS, give the same answers, and messages of
any size cross a stock nats-server (1 MB ``max_payload``) as frame messages."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, own_stack

from elanus.channels import frames
from elanus.channels.bus import Bus, blocking
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.channels.transport import LocalTransport
from elanus.errors import ElanusError, ErrorCode
from elanus.searchrequest import SearchRequest

STOCK_MAX_PAYLOAD = 1024 * 1024
PREFIX = "elanus.test.echo"


# -- frames ------------------------------------------------------------------------------------
def test_frames_carry_arrays_tables_and_wire_types_as_themselves() -> None:
    req = SearchRequest(field="v", k=3, metric="L2", queries=np.ones((2, 4), np.float32))
    body = {
        "n": 1,
        "nested": [{"ids": np.arange(5, dtype=np.int64)}, None, "text"],
        "matrix": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],  # not contiguous
        "scalar": np.float64(2.5),
        "pks": pa.array(["a", None, "c"]),
        "table": pa.table({"x": [1, 2], "y": [[1.0], [2.0, 3.0]]}),
        "batch": pa.record_batch([pa.array([True])], names=["b"]),
        "request": req,
        "by_id": {7: "seven"},  # integer keys become strings, as in JSON
    }
    data = frames.encode(body)
    out = frames.decode(data)
    assert out["n"] == 1 and out["nested"][1:] == [None, "text"]
    assert out["by_id"] == {"7": "seven"}
    assert out["nested"][0]["ids"].tolist() == [0, 1, 2, 3, 4]
    assert out["matrix"].tolist() == body["matrix"].tolist()
    out["matrix"] *= 2  # decoded arrays are the receiver's to change
    assert out["scalar"] == 2.5
    assert out["pks"].equals(body["pks"])
    assert out["table"].equals(body["table"]) and out["batch"].equals(body["batch"])
    assert isinstance(out["request"], SearchRequest)
    assert out["request"].queries.tolist() == req.queries.tolist()
    assert (out["request"].k, out["request"].metric) == (3, "L2")
    # No number lists, no base64: the vectors are raw float32 bytes inside the message.
    assert body["matrix"].astype(np.float32).tobytes() in data
    assert b"[0.0," not in data


def test_a_malformed_frame_message_is_refused_by_name() -> None:
    with pytest.raises(ElanusError) as err:
        frames.decode(b"{}")
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "bus message" in err.value.message
    truncated = frames.encode({"a": np.zeros(1000)})[:-100]
    with pytest.raises(ElanusError, match="truncated"):
        frames.decode(truncated)


# -- the two transports --------------------------------------------------------------------------
class EchoRole:
    """Handlers whose answers a test can predict, one of each kind."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def handlers(self) -> dict[str, Any]:
        return {
            "sizes": self.sizes,
            "table": self.table,
            "fail": self.fail,
            "crash": self.crash,
            "sleep": self.sleep,
            "where": self.where,
            "b.sizes": blocking(lambda body: _run(self.sizes(body))),
            "b.table": blocking(lambda body: _run(self.table(body))),
            "b.fail": blocking(lambda body: _run(self.fail(body))),
            "b.crash": blocking(lambda body: _run(self.crash(body))),
            "b.sleep": blocking(lambda body: time.sleep(float(body["s"])) or {}),
        }

    async def sizes(self, body: dict[str, Any]) -> dict[str, Any]:
        blob = body["blob"]
        return {"nbytes": int(blob.nbytes), "sum": float(blob.sum()), "dtype": str(blob.dtype)}

    async def table(self, body: dict[str, Any]) -> dict[str, Any]:
        rows = int(body["rows"])
        vectors = np.random.default_rng(rows).random((rows, 128), dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 128)
        return {"rows": pa.table({"id": np.arange(rows), "vector": column})}

    async def fail(self, body: dict[str, Any]) -> None:
        raise ElanusError(ErrorCode.COLLECTION_NOT_FOUND, f"no collection {body['name']!r}")

    async def crash(self, body: dict[str, Any]) -> None:
        raise ValueError("boom")

    async def sleep(self, body: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        await asyncio.sleep(float(body["s"]))
        return {}

    @blocking
    def where(self, body: dict[str, Any]) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        return {"thread": threading.current_thread().name, "x": body["x"] * 2}


def _run(coro: Any) -> Any:
    """A coroutine handler's answer, for its blocking twin."""
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def stock_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    server = EmbeddedNats(tmp_path_factory.mktemp("stock") / "nats", max_payload_mb=None)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def buses(stock_nats: EmbeddedNats) -> Iterator[tuple[LoopThread, Bus, Bus, EchoRole]]:
    """A serving bus, and a caller bus of the same process: ``request`` goes in-process
    on the first and (with ``in_process`` off) over NATS on the second."""
    loop = LoopThread("transport").start()
    creds = stock_nats.credentials
    server = loop.call(Bus(stock_nats.url, "server", creds).connect())
    remote = loop.call(Bus(stock_nats.url, "remote", creds, in_process=False).connect())
    role = EchoRole()
    served = loop.call(server.serve(PREFIX, role.handlers()))
    try:
        yield loop, server, remote, role
    finally:
        loop.call(served.unsubscribe())
        loop.call(remote.close())
        loop.call(server.close())
        loop.stop()


def _ask(loop: LoopThread, bus: Bus, method: str, body: Any, timeout: float = 30) -> Any:
    return loop.call(bus.request(f"{PREFIX}.{method}", body, timeout), timeout=timeout + 10)


def test_the_server_has_stock_limits(buses: tuple[LoopThread, Bus, Bus, EchoRole]) -> None:
    _, server, remote, _ = buses
    assert server.nc.max_payload == remote.nc.max_payload == STOCK_MAX_PAYLOAD


@pytest.mark.parametrize("megabytes", [0.001, 3, 24])
def test_requests_of_any_size_cross_a_stock_server(
    buses: tuple[LoopThread, Bus, Bus, EchoRole], megabytes: float
) -> None:
    loop, server, remote, _ = buses
    blob = np.random.default_rng(1).random(int(megabytes * (1 << 20)) // 8)
    expected = {"nbytes": blob.nbytes, "sum": float(blob.sum()), "dtype": "float64"}
    assert _ask(loop, remote, "sizes", {"blob": blob}) == expected  # over NATS, in parts
    assert _ask(loop, server, "sizes", {"blob": blob}) == expected  # in-process


def test_a_10_mb_reply_crosses_a_stock_server(
    buses: tuple[LoopThread, Bus, Bus, EchoRole],
) -> None:
    loop, server, remote, _ = buses
    rows = 20_000  # 128-d float32: about 10 MB of vectors
    over_nats = _ask(loop, remote, "table", {"rows": rows})["rows"]
    local = _ask(loop, server, "table", {"rows": rows})["rows"]
    assert over_nats.nbytes > 10_000_000
    assert over_nats.equals(local)


@pytest.mark.parametrize(
    ("method", "body", "code", "words"),
    [
        ("fail", {"name": "c9"}, ErrorCode.COLLECTION_NOT_FOUND, "no collection 'c9'"),
        ("crash", {}, ErrorCode.INTERNAL, "crash: boom"),
        ("nosuch", {}, ErrorCode.UNKNOWN_ACTION, "unknown method 'nosuch'"),
        ("sleep", {"s": 2}, ErrorCode.TIMEOUT, "did not answer in 0.3s"),
    ],
)
def test_both_transports_fail_alike(
    buses: tuple[LoopThread, Bus, Bus, EchoRole],
    method: str,
    body: dict[str, Any],
    code: ErrorCode,
    words: str,
) -> None:
    loop, server, remote, _ = buses
    seen = []
    for bus in (server, remote):
        with pytest.raises(ElanusError) as err:
            _ask(loop, bus, method, body, timeout=0.3 if method == "sleep" else 10)
        seen.append((err.value.code, err.value.message))
    assert seen[0] == seen[1]
    assert seen[0][0] == code and words in seen[0][1]


def test_nobody_serving_is_unavailable(buses: tuple[LoopThread, Bus, Bus, EchoRole]) -> None:
    loop, _, remote, _ = buses
    with pytest.raises(ElanusError) as err:
        loop.call(remote.request("elanus.test.nobody.ping", {}, 5))
    assert err.value.code == ErrorCode.UNAVAILABLE and "elanus.test.nobody.ping" in str(err.value)


def test_blocking_handlers_run_on_the_callers_thread_in_process(
    buses: tuple[LoopThread, Bus, Bus, EchoRole],
) -> None:
    _, server, remote, _ = buses
    here = threading.current_thread().name
    local = server.request_sync(f"{PREFIX}.where", {"x": 2})
    assert local == {"thread": here, "x": 4}  # no hop to the loop, no encoding
    over_nats = remote.request_sync(f"{PREFIX}.where", {"x": 3})
    # (from a plain thread to another bus: its direct port's thread, ``channels/direct.py``)
    assert over_nats["x"] == 6 and over_nats["thread"] == "elanus-direct-conn"
    calls = [(f"{PREFIX}.where", {"x": i}) for i in range(4)]
    assert [r["x"] for r in server.request_many_sync(calls)] == [0, 2, 4, 6]
    assert [r["x"] for r in remote.request_many_sync(calls)] == [0, 2, 4, 6]
    with pytest.raises(ElanusError) as err:
        remote.request_many_sync([*calls, (f"{PREFIX}.fail", {"name": "z"})])
    assert err.value.code == ErrorCode.COLLECTION_NOT_FOUND


@pytest.mark.parametrize("way", ["direct", "nats"])
def test_a_threads_request_skips_the_loop_and_answers_alike(
    buses: tuple[LoopThread, Bus, Bus, EchoRole], monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """``request_sync`` to another process goes to its direct port (``channels/direct.py``)
    or, without one, out on the thread's own NATS connection while a blocking handler replies
    from its thread (``channels/syncnats.py``), with the answers of the loop's transport;
    only a request too large for one message takes the loop."""
    _, server, remote, _ = buses
    if way == "nats":
        monkeypatch.setattr(remote, "_direct", None)
    small = np.arange(100, dtype=np.float64)
    large = np.random.default_rng(2).random(3 * (1 << 20) // 8)

    def loop_for(what: str) -> Any:
        def on_loop(coro: Any, timeout: float) -> Any:
            if what == "nothing":
                coro.close()
                raise AssertionError("a small request took the loop")
            return original(coro, timeout)

        return on_loop

    original = remote._on_loop
    monkeypatch.setattr(remote, "_on_loop", loop_for("nothing"))
    sizes = remote.request_sync(f"{PREFIX}.b.sizes", {"blob": small})
    assert sizes == server.request_sync(f"{PREFIX}.b.sizes", {"blob": small})
    served_on = remote.request_sync(f"{PREFIX}.where", {"x": 1})["thread"]
    assert served_on.startswith("elanus-direct" if way == "direct" else "elanus-handler")
    reply = remote.request_sync(f"{PREFIX}.b.table", {"rows": 20_000})["rows"]  # in parts
    assert reply.nbytes > 10_000_000
    assert reply.equals(server.request_sync(f"{PREFIX}.b.table", {"rows": 20_000})["rows"])
    for method, body in (("b.fail", {"name": "c9"}), ("b.crash", {}), ("nosuch", {})):
        seen = []
        for bus in (server, remote):
            with pytest.raises(ElanusError) as err:
                bus.request_sync(f"{PREFIX}.{method}", body, 10)
            seen.append((err.value.code, err.value.message))
        assert seen[0] == seen[1], method
    with pytest.raises(ElanusError) as err:  # (in-process, a blocking handler has no timeout)
        remote.request_sync(f"{PREFIX}.b.sleep", {"s": 2}, 0.3)
    assert err.value.code == ErrorCode.TIMEOUT and "did not answer in 0.3s" in err.value.message
    with pytest.raises(ElanusError) as err:
        remote.request_sync("elanus.test.nobody.ping", {}, 5)
    assert err.value.code == ErrorCode.UNAVAILABLE and "elanus.test.nobody.ping" in str(err.value)
    monkeypatch.setattr(remote, "_on_loop", loop_for("large"))
    expected = {"nbytes": large.nbytes, "sum": float(large.sum()), "dtype": "float64"}
    assert remote.request_sync(f"{PREFIX}.b.sizes", {"blob": large}) == expected


# -- a whole stack on stock limits, every request over NATS ----------------------------------------
@pytest.fixture(scope="module")
def wire_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp: Path = tmp_path_factory.mktemp("wire")
    # Every role of this stack shares one event loop: a 100k-key delete's work on it can
    # hold the proxy's time-tick reports past a 2 s session's write lease (CI, loaded).
    with own_stack(
        tmp,
        "wire-loop",
        max_payload_mb=None,
        transport="nats",
        compaction_interval_s=0,
        session_ttl_s=10,
    ) as stack:
        yield stack


@pytest.mark.slow
def test_a_10_mb_query_result_and_a_100k_key_delete_over_stock_nats(wire_stack: Stack) -> None:
    client = wire_stack.client()
    dim, rows = 128, 24_000
    client.create_collection("big", dimension=dim, metric_type="L2", num_shards=1)
    vectors = np.random.default_rng(3).random((rows, dim), dtype=np.float32)
    client.insert("big", {"id": np.arange(rows), "vector": vectors})
    client.flush("big")
    client.load_collection("big")
    # One delegator answers with every row: ~12 MB of vectors in one reply over NATS.
    got = client.query("big", "id >= 0", ["id", "vector"], consistency_level="Strong")
    assert len(got) == rows
    by_id = {int(r["id"]): r["vector"] for r in got}
    assert np.allclose(by_id[rows - 1], vectors[rows - 1])
    # 100k keys (most never inserted) reach the flushed segment's worker as one array.
    keys = np.arange(0, 200_000, 2)
    assert client.delete("big", keys.tolist())["delete_count"] == len(keys)
    (left,) = client.query("big", "", ["count(*)"], consistency_level="Strong")
    assert left["count(*)"] == rows // 2
    hits = client.search("big", vectors[1:2], limit=1, consistency_level="Strong")
    assert hits[0][0]["id"] == 1


def test_the_local_transport_forgets_what_it_found_when_roles_come_and_go() -> None:
    """``LocalTransport.find`` remembers its answers; a role added or removed since makes
    them stale, so a stopped role's handler is never called from memory."""
    local = LocalTransport()
    first = {"echo": lambda body: ("first", body)}
    second = {"echo": lambda body: ("second", body)}

    async def add(handlers: dict[str, Any]) -> None:
        local.add("nats://x", "elanus.t.node1", handlers)

    assert local.find("nats://x", "elanus.t.node1.echo") is None
    asyncio.run(add(first))
    found = local.find("nats://x", "elanus.t.node1.echo")
    assert found is not None and found.handler is first["echo"]
    assert local.find("nats://x", "elanus.t.node1.echo") is found  # remembered
    asyncio.run(add(second))
    again = local.find("nats://x", "elanus.t.node1.echo")
    assert again is not None and again.handler is second["echo"]  # the newest serves
    local.remove("nats://x", "elanus.t.node1", second)
    local.remove("nats://x", "elanus.t.node1", first)
    assert local.find("nats://x", "elanus.t.node1.echo") is None
    assert local.find("nats://y", "elanus.t.node1.echo") is None  # another cluster's
