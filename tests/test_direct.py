"""A plain thread's request to a blocking handler of another process goes to that process's
direct port (``channels/direct.py``): same answers as NATS, only for callers holding the
cluster's credentials, over NATS again when the port cannot take it, and a server that dies
holding a request fails it at once (UNAVAILABLE, so a read fails over)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_lost_requests import _pair

from elanus.channels import frames
from elanus.channels.bus import blocking
from elanus.channels.direct import DirectClient, DirectServer, NotDirect, direct_key
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.natsauth import NatsCredentials
from elanus.channels.runtime.loop import LoopThread
from elanus.channels.transport import unwrap
from elanus.errors import ElanusError, ErrorCode


def _where(body: dict[str, Any]) -> dict[str, Any]:
    return {"thread": threading.current_thread().name, "x": body["x"]}


def test_a_threads_request_goes_to_the_direct_port_until_it_no_longer_serves(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    server, client = _pair(nats_server, loop_thread)
    handlers: dict[str, Any] = {"where": blocking(_where), "later": _async_where}
    try:
        served = loop_thread.call(server.serve("elanus.node.d0", handlers))
        assert client.request_sync("elanus.node.d0.where", {"x": 1}) == {
            "thread": "elanus-direct-conn",
            "x": 1,
        }
        # a coroutine handler is not served there: over NATS, on the loop
        assert client.request_sync("elanus.node.d0.later", {"x": 2}) == {"x": 2}
        # the port stops serving the subject (its role stopping): the caller asks over NATS
        assert served.direct is not None
        served.direct.remove("elanus.node.d0", handlers)
        assert client.request_sync("elanus.node.d0.where", {"x": 3})["thread"].startswith(
            "elanus-handler"
        )
    finally:
        loop_thread.call(client.close())
        loop_thread.call(server.close())


async def _async_where(body: dict[str, Any]) -> dict[str, Any]:
    return {"x": body["x"]}


def test_the_direct_port_refuses_a_caller_without_the_credentials() -> None:
    key = direct_key(NatsCredentials("elanus", "right"))
    wrong = direct_key(NatsCredentials("elanus", "wrong"))
    assert key is not None and wrong is not None and key != wrong
    assert direct_key(None) is None  # no credentials: no port at all
    port = DirectServer("127.0.0.1", key)
    handlers = {"where": blocking(_where)}
    port.add("elanus.node.d1", handlers)
    described = port.describe("elanus.node.d1", handlers)
    try:
        outsider = DirectClient(wrong, lambda subject: described, lambda subject: True)
        with pytest.raises(NotDirect):
            outsider.request("elanus.node.d1.where", b"", 5)
        insider = DirectClient(key, lambda subject: described, lambda subject: True)
        raw = insider.request("elanus.node.d1.where", frames.encode({"x": 7}), 5)
        assert unwrap(raw) == {"thread": "elanus-direct-conn", "x": 7}
        outsider.close()
        insider.close()
    finally:
        port.close()


def test_a_direct_request_to_a_node_that_died_holding_it_fails_at_once(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    server, client = _pair(nats_server, loop_thread)
    started, release = threading.Event(), threading.Event()

    @blocking
    def hangs(body: object) -> dict[str, Any]:
        started.set()
        release.wait(30)
        return {}

    @blocking
    def slow(body: dict[str, int]) -> dict[str, int]:
        time.sleep(1.6)
        return {"n": body["n"] + 1}

    callers = ThreadPoolExecutor(2)
    try:
        loop_thread.call(server.serve("elanus.node.d2", {"search": hangs, "slow": slow}))
        # a slow server answers through the probes; the deadline still holds
        assert client.request_sync("elanus.node.d2.slow", {"n": 1}, 10) == {"n": 2}
        with pytest.raises(ElanusError) as timed_out:
            client.request_sync("elanus.node.d2.slow", {"n": 1}, 0.7)
        assert timed_out.value.code is ErrorCode.TIMEOUT
        pending = callers.submit(client.request_sync, "elanus.node.d2.search", {}, 60)
        assert started.wait(10)
        time.sleep(1.2)  # probed twice meanwhile, answered: still waiting
        assert not pending.done()
        gone = time.monotonic()
        loop_thread.call(server.close())  # its port and its connections go, as on kill -9
        with pytest.raises(ElanusError) as failed:
            pending.result(timeout=10)
        assert failed.value.code is ErrorCode.UNAVAILABLE
        assert time.monotonic() - gone < 2.0
    finally:
        release.set()
        callers.shutdown()
        loop_thread.call(client.close())
        loop_thread.call(server.close())


def test_a_fan_out_sends_to_every_direct_port_at_once(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    server, client = _pair(nats_server, loop_thread)

    @blocking
    def slow(body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.4)
        return _where(body)

    @blocking
    def fails(body: object) -> None:
        raise ElanusError(ErrorCode.COLLECTION_NOT_FOUND, "no collection 'z'")

    try:
        for n in range(3):
            handlers = {"slow": slow, "fails": fails, "later": _async_where}
            loop_thread.call(server.serve(f"elanus.node.f{n}", handlers))
        calls = [(f"elanus.node.f{n}.slow", {"x": n}) for n in range(3)]
        calls.append(("elanus.node.f0.later", {"x": 9}))  # a coroutine: on the loop
        client.request_many_sync(calls)  # (finds the ports)
        started = time.monotonic()
        got = client.request_many_sync(calls)
        assert time.monotonic() - started < 1.0  # all at once, not 3 x 0.4 s
        assert [g["x"] for g in got] == [0, 1, 2, 9]
        assert {g["thread"] for g in got[:3]} == {"elanus-direct-conn"}
        with pytest.raises(ElanusError) as err:
            client.request_many_sync([*calls, ("elanus.node.f1.fails", {})])
        assert err.value.code is ErrorCode.COLLECTION_NOT_FOUND
        assert client.request_many_sync(calls[:2]) == got[:2]  # the pool is still sound
    finally:
        loop_thread.call(client.close())
        loop_thread.call(server.close())
