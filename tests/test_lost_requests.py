"""A request whose server died holding it fails within about a second, not after its
timeout: a node's, when the probe finds nobody serving its subject any more
(``NatsTransport._probe``); the coordinator's, as soon as another coordinator holds the
lease (``channels/coordwatch.py``). A server that is only slow still answers."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from nats.js.api import KeyValueConfig

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.coordwatch import CoordWatch
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread, Periodic
from elanus.errors import ElanusError, ErrorCode


def test_requests_to_a_replaced_coordinator_fail_at_once(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    creds = nats_server.credentials
    server = Bus(nats_server.url, name="dead-coord", credentials=creds, in_process=False)
    client = Bus(nats_server.url, name="proxy", credentials=creds, in_process=False)
    call = loop_thread.call
    call(server.connect())
    call(client.connect())

    async def never_answers(body: object) -> None:
        await asyncio.sleep(3600)  # the coordinator "died" holding the request

    async def setup() -> Periodic:
        kv = await client.js.create_key_value(KeyValueConfig(subjects.COORD_LEASE_BUCKET))
        await kv.put(subjects.COORD_LEASE_KEY, b"coord-a 1")
        await server.serve(f"{subjects.COORD}.x", {"slow": never_answers})
        await server.serve("elanus.node.n1", {"slow": never_answers})
        watch = Periodic(CoordWatch(client).check, 0.1, "watch")
        return watch.start()

    watch = call(setup())
    try:
        time.sleep(0.5)  # the watch has read the first holder
        to_coord = loop_thread.submit(client.request(f"{subjects.COORD}.x.slow", {}, timeout=30))
        to_node = loop_thread.submit(client.request("elanus.node.n1.slow", {}, timeout=3))
        time.sleep(0.5)
        assert not to_coord.done()

        async def take_over() -> None:
            kv = await client.js.key_value(subjects.COORD_LEASE_BUCKET)
            await kv.put(subjects.COORD_LEASE_KEY, b"coord-b 2")

        replaced = time.monotonic()
        call(take_over())
        with pytest.raises(ElanusError) as failed:
            to_coord.result(timeout=5)
        assert failed.value.code is ErrorCode.UNAVAILABLE
        assert "another took over" in failed.value.message
        assert time.monotonic() - replaced < 2.0
        with pytest.raises(ElanusError) as timed_out:  # not a coordinator's: left to time out
            to_node.result(timeout=10)
        assert timed_out.value.code is ErrorCode.TIMEOUT
    finally:
        call(watch.stop())
        call(client.close())
        call(server.close())


WAYS = ["loop", "thread"]
"""A request from a coroutine goes through the loop's transport; one from a plain thread
(``request_sync``, a Flight handler's) on the thread's own connection (``channels/syncnats.py``):
both end early alike."""
_threads = ThreadPoolExecutor(4, thread_name_prefix="test-caller")


def _ask(
    loop_thread: LoopThread, bus: Bus, way: str, subject: str, body: Any, timeout: float
) -> Future[Any]:
    if way == "loop":
        return loop_thread.submit(bus.request(subject, body, timeout=timeout))
    return _threads.submit(bus.request_sync, subject, body, timeout)


def _pair(nats_server: EmbeddedNats, loop_thread: LoopThread) -> tuple[Bus, Bus]:
    creds = nats_server.credentials
    server = Bus(nats_server.url, name="node", credentials=creds, in_process=False)
    client = Bus(nats_server.url, name="proxy", credentials=creds, in_process=False)
    loop_thread.call(server.connect())
    loop_thread.call(client.connect())
    return server, client


@pytest.mark.serial
@pytest.mark.parametrize("way", WAYS)
def test_a_request_to_a_node_that_died_holding_it_fails_within_a_second(
    nats_server: EmbeddedNats, loop_thread: LoopThread, way: str
) -> None:
    server, client = _pair(nats_server, loop_thread)
    started = asyncio.Event()

    async def hangs(body: object) -> None:
        started.set()
        await asyncio.sleep(3600)

    try:
        loop_thread.call(server.serve("elanus.node.n1", {"search": hangs}))
        pending = _ask(loop_thread, client, way, "elanus.node.n1.search", {}, 60)
        loop_thread.call(asyncio.wait_for(started.wait(), 10))
        time.sleep(1.2)  # probed twice meanwhile, answered: still waiting
        assert not pending.done()
        gone = time.monotonic()
        loop_thread.call(server.close())  # its connection (and subscriptions) gone, as on kill -9
        with pytest.raises(ElanusError) as failed:
            pending.result(timeout=10)
        assert failed.value.code is ErrorCode.UNAVAILABLE
        assert "is gone" in failed.value.message
        assert time.monotonic() - gone < 2.0
    finally:
        loop_thread.call(client.close())
        loop_thread.call(server.close())


@pytest.mark.parametrize("way", WAYS)
def test_a_slow_server_still_answers_through_the_probes(
    nats_server: EmbeddedNats, loop_thread: LoopThread, way: str
) -> None:
    server, client = _pair(nats_server, loop_thread)

    async def slow(body: dict[str, int]) -> dict[str, int]:
        await asyncio.sleep(1.6)
        return {"n": body["n"] + 1}

    try:
        loop_thread.call(server.serve("elanus.node.n2", {"slow": slow}))
        answer = _ask(loop_thread, client, way, "elanus.node.n2.slow", {"n": 1}, 10)
        assert answer.result(timeout=20) == {"n": 2}
        with pytest.raises(ElanusError) as timed_out:  # the deadline still holds
            _ask(loop_thread, client, way, "elanus.node.n2.slow", {"n": 1}, 0.7).result(20)
        assert timed_out.value.code is ErrorCode.TIMEOUT
    finally:
        loop_thread.call(client.close())
        loop_thread.call(server.close())


@pytest.mark.chaos
@pytest.mark.serial
@pytest.mark.parametrize("way", WAYS)
def test_requests_waiting_when_the_nats_server_goes_fail_at_once(
    tmp_path: Path, loop_thread: LoopThread, way: str
) -> None:
    with EmbeddedNats(tmp_path / "nats") as nats:
        server, client = _pair(nats, loop_thread)

        async def hangs(body: object) -> None:
            await asyncio.sleep(3600)

        loop_thread.call(server.serve("elanus.node.n3", {"search": hangs}))
        pending = _ask(loop_thread, client, way, "elanus.node.n3.search", {}, 60)
        time.sleep(0.3)
        gone = time.monotonic()
        nats.stop()  # the server's process ends: every connection drops
        with pytest.raises(ElanusError) as failed:
            pending.result(timeout=10)
        assert failed.value.code is ErrorCode.UNAVAILABLE
        assert "connection to NATS was lost" in failed.value.message
        assert time.monotonic() - gone < 2.0
        for bus in (client, server):
            loop_thread.call(bus.close(), timeout=30)
