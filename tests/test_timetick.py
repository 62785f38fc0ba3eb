"""Time ticks: a proxy holds a pchannel's tick below its unfinished writes; a dead proxy
stops holding ticks back once the coord finds it gone (seed 003, seed 000 §6.6.3)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import ElanusProcess, Stack, own_stack
from role_processes import proxy_process

from elanus import tsutil
from elanus.api.datacoord import TickNow, TickReport
from elanus.channels import consumer as consumer_module
from elanus.channels import dml
from elanus.channels.bus import Bus
from elanus.channels.consumer import ChannelConsumer
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.channels.runtime.supervisor import Supervisor
from elanus.errors import ElanusError, ErrorCode, coord_lapsed
from elanus.flight.timeticker import DmlTracker, TimeTicker
from elanus.meta import timetick
from elanus.settings import Settings


def test_tracker_reports_below_unfinished_writes() -> None:
    tracker = DmlTracker()
    waiting = tracker.begin(["p1"])  # registered, no timestamp yet
    assert tracker.report(100) == (100, {"p1": 0})  # nothing reported before: hold at 0
    tracker.stamp(waiting, 150)
    writing = tracker.begin(["p1", "p2"])
    tracker.stamp(writing, 160)
    assert tracker.report(200) == (200, {"p1": 149, "p2": 159})
    tracker.end(waiting)
    assert tracker.report(210) == (210, {"p1": 159, "p2": 159})
    pending = tracker.begin(["p2"])
    tracker.end(writing)
    assert tracker.report(220) == (220, {"p2": 159})  # repeats its last value while pending
    tracker.end(pending)
    assert tracker.report(230) == (230, {})


def test_a_coord_that_answers_lapsed_keeps_the_proxys_writes_trusted() -> None:
    """A write's end checks the proxy's lease: reports taken without a break longer than
    the lease. A coord whose own lease lapsed (NATS electing) refuses the reports, but it
    answers, and counts no proxy's silence until it serves again: such answers keep the
    writes in flight trusted. A coord that does not answer at all breaks the lease."""
    answers: list[BaseException | None] = []

    async def alloc() -> int:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return 1

    async def send(default: int, pchannels: dict[str, int]) -> None:
        return None

    async def run() -> None:
        ticker = TimeTicker(DmlTracker(), alloc, send, interval_s=0.01, lease_s=0.4)
        answers[:] = [None]
        await ticker.report_now()
        epoch = ticker.epoch
        for _ in range(4):  # 0.6 s of lapsed answers: past the lease
            answers.append(coord_lapsed("lapsed"))
            with pytest.raises(ElanusError):
                await ticker.report_now()
            await asyncio.sleep(0.15)
            assert ticker.lease_held(epoch)
        answers.append(ElanusError(ErrorCode.TIMEOUT, "no answer"))
        with pytest.raises(ElanusError):
            await ticker.report_now()
        await asyncio.sleep(0.5)
        assert not ticker.lease_held(epoch)  # silence past the lease: writes may be lost
        answers.append(None)
        await ticker.report_now()
        assert ticker.epoch == epoch + 1 and not ticker.lease_held(epoch)

    asyncio.run(run())


@pytest.mark.chaos
def test_a_killed_proxy_stops_holding_ticks_back(
    tmp_path: Path, elanus_processes: Callable[[ElanusProcess], ElanusProcess]
) -> None:
    """Within a few tick intervals of a kill -9, well before the dead proxy's session
    expires (30 s here): the coord probes a late proxy, and nobody serving its subjects
    any more means it is gone."""
    with own_stack(tmp_path, "ticks", session_ttl_s=30) as stack:
        _killed_proxy_releases_ticks(stack, elanus_processes)


def _killed_proxy_releases_ticks(
    stack: Stack, elanus_processes: Callable[[ElanusProcess], ElanusProcess]
) -> None:
    client = stack.client()
    info = client.create_collection("ticks", dimension=4)
    pchannel = info["pchannels"][0]
    proxy = proxy_process(
        stack.settings.nats_url or "",
        stack.settings.data_dir,
        stack.settings.data_path / "proxy2.log",
        stack.role_env(ELANUS_SESSION_TTL_S="30", ELANUS_TIMETICK_INTERVAL_MS="50"),
    )
    elanus_processes(proxy).start().wait_ready()
    ticks = stack.coord.timeticks  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while len(ticks.reports) < 2:  # both proxies report
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # killing it leaves a report that would stay the minimum until its session expired
    proxy.send(signal.SIGKILL)
    assert proxy.wait(10) == -signal.SIGKILL
    killed_at = tsutil.now_ms()
    deadline = time.monotonic() + 2.0
    while True:
        tick = ticks.last_tick.get(pchannel, 0)
        if tsutil.physical_ms(tick) > killed_at + 500:
            break
        assert time.monotonic() < deadline, "ticks stayed held back by the dead proxy"
        time.sleep(0.1)
    assert len(ticks.reports) == 1  # only the live proxy still counts


def test_a_read_waiting_for_tsafe_ends_when_its_channel_stops(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """A read waits for tsafe to reach its guarantee; when the channel is released
    meanwhile (the collection dropped), the wait ends at once instead of running out its
    timeout (30 s: longer than a client's deadline, so the client saw no code)."""

    async def on_pack(messages: Any, tick_ts: int, tick_seq: int) -> None:
        return None

    async def scenario() -> tuple[bool, bool, float]:
        bus = await Bus(
            nats_server.url, name="test-consumer", credentials=nats_server.credentials
        ).connect()
        consumer = ChannelConsumer(
            bus, "p0", "p0v0", "test-durable", on_pack, supervisor=Supervisor("test")
        )
        future = tsutil.compose(tsutil.now_ms() + 3_600_000)
        waiting = asyncio.ensure_future(consumer.wait_tick(future, 30))
        in_thread = asyncio.get_running_loop().run_in_executor(
            None, consumer.wait_tick_in_thread, future, 30
        )
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await consumer.stop()
        reached = await asyncio.wait_for(waiting, 5), await asyncio.wait_for(in_thread, 5)
        await bus.close()
        return reached[0], reached[1], time.monotonic() - started

    reached, reached_in_thread, seconds = loop_thread.call(scenario(), timeout=30)
    assert (reached, reached_in_thread) == (False, False)
    assert seconds < 5


def test_tick_now_asks_a_proxy_that_reports_before_its_session_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy just started reports at once, but the coord's session watch sees it up to a
    second later: a Strong read's ``tick_now`` must still ask it for a fresh report, or its
    last periodic one holds the tick below the read for the rest of the interval."""
    asked: list[str] = []

    class Asked:
        def __init__(self, bus: Any, node_id: str) -> None:
            self.node_id = node_id

        async def report_now(self) -> None:
            asked.append(self.node_id)

    monkeypatch.setattr(timetick, "ProxyAPI", Asked)
    seen = [SimpleNamespace(node_id="old")]
    ctx = SimpleNamespace(
        settings=Settings(), bus=None, sessions=SimpleNamespace(of_role=lambda role: seen)
    )
    sync = timetick.TimeTickSync(ctx)  # type: ignore[arg-type]

    async def run() -> None:
        await sync.report(TickReport(proxy_id="old", default_ts=1))
        await sync.report(TickReport(proxy_id="new", default_ts=1))  # no session seen yet
        await sync.tick_now(TickNow())

    asyncio.run(run())
    assert sorted(asked) == ["new", "old"]


@pytest.mark.serial  # a lag bound while catching up: another test's load breaks it
def test_a_restarted_consumer_counts_its_lag_for_flow_control_from_its_restart(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """A consumer restarted at a checkpoint 20 s old (the channel moved between datanodes
    while NATS failed over) is 20 s behind by its tsafe; flow control counts its lag from
    the restart until it has caught up, then its tick lag as it is (here 10 s: nothing
    ticked since)."""
    now = tsutil.now_ms()
    ticks = [tsutil.compose(now - 20_000 + 500 * i) for i in range(21)]  # -20 s .. -10 s
    seen: list[tuple[float | None, float | None]] = []

    async def scenario() -> tuple[float | None, float | None]:
        bus = await Bus(
            nats_server.url, name="test-lag", credentials=nats_server.credentials
        ).connect()
        await dml.ensure_streams(bus.js, ["lag0"])
        for ts in ticks:
            subject, headers, payload = dml.DmlMessage(dml.MsgType.TICK, ts).encode("lag0")
            await bus.js.publish(subject, payload, headers=headers)

        async def on_pack(messages: Any, tick_ts: int, tick_seq: int) -> None:
            seen.append((consumer.tick_lag_s, consumer.flow_lag_s))
            await asyncio.sleep(0.05)  # catching up takes a second

        consumer = ChannelConsumer(
            bus, "lag0", "lag0_1v0", "test-lag", on_pack, supervisor=Supervisor("test"),
            start_seq=1, start_ts=ticks[0],
        )  # fmt: skip
        await consumer.start()
        deadline = time.monotonic() + 10
        while consumer.tick_ts < ticks[-1] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # past the pull that finds nothing more
        out = consumer.tick_lag_s, consumer.flow_lag_s
        await consumer.stop()
        await bus.close()
        return out

    tick_lag, flow_lag = loop_thread.call(scenario(), timeout=30)
    assert len(seen) == 20
    for lag, counted in seen[:-1]:  # while catching up (the last tick is the log's end)
        assert lag is not None and counted is not None
        assert lag > 11 and counted < 3, seen
    assert tick_lag is not None and flow_lag is not None
    assert 10 < tick_lag < 15 and flow_lag == pytest.approx(tick_lag, abs=0.1)


@pytest.mark.serial  # a lag bound while catching up: another test's load breaks it
def test_a_held_consumer_counts_its_lag_for_flow_control_from_its_resume(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """A datanode that lost NATS holds its consumers until the coord confirms its
    channels (``DataNode._confirm_held``); a confirmation that took 20 s (NATS failing
    over) left a 20 s backlog that is not the writers' doing. Flow control counts the
    lag from the resume while the consumer catches up, the tick lag once it has."""
    now = tsutil.now_ms()
    ticks = [tsutil.compose(now - 20_000 + 500 * i) for i in range(21)]  # -20 s .. -10 s
    seen: list[tuple[float | None, float | None]] = []

    async def scenario() -> tuple[float | None, float | None, float | None]:
        bus, publish = await _tick_stream(nats_server, "held0")

        await publish(ticks[0])

        async def on_pack(messages: Any, tick_ts: int, tick_seq: int) -> None:
            seen.append((consumer.tick_lag_s, consumer.flow_lag_s))
            await asyncio.sleep(0.05)

        consumer = ChannelConsumer(
            bus, "held0", "held0_1v0", "test-held", on_pack, supervisor=Supervisor("test"),
            start_seq=1,
        )  # fmt: skip
        await consumer.start()
        deadline = time.monotonic() + 10
        while consumer.tick_ts < ticks[0] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # at the log's end: the lag is the tick lag, 20 s
        before = consumer.flow_lag_s
        consumer.hold()
        held = consumer.flow_lag_s
        for ts in ticks[1:]:
            await publish(ts)
        seen.clear()
        consumer.resume()
        while consumer.tick_ts < ticks[-1] and time.monotonic() < deadline + 10:
            await asyncio.sleep(0.05)
        await consumer.stop()
        await bus.close()
        return before, held, consumer.tick_lag_s

    before, held, tick_lag = loop_thread.call(scenario(), timeout=40)
    assert before is not None and before > 19
    assert held is not None and held < 1
    assert len(seen) >= 18 and tick_lag is not None and tick_lag > 9  # a fetch under way ends
    for lag, counted in seen[:-1]:  # while catching up (the last tick is the log's end)
        assert lag is not None and counted is not None
        assert lag > 10 and counted < 3, seen


def test_a_consumer_whose_server_side_is_gone_reads_on_from_its_position(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """A nats-server that dies under a durable pull consumer can leave it gone or stale:
    pulls end with a status and no error, so the consumer saw an empty log while ticks went
    on (CI's NATS chaos phase: a query node's tsafe stood still 20 s after the restart, and
    writes were refused for its lag). Nothing delivered for ``STUCK_AFTER_S`` while the
    stream moved past its position: the consumer makes the durable anew from there."""
    now = tsutil.now_ms()
    ticks = [tsutil.compose(now + 100 * i) for i in range(6)]

    async def scenario() -> tuple[int, int, float]:
        bus, publish = await _tick_stream(nats_server, "stuck0")

        async def on_pack(messages: Any, tick_ts: int, tick_seq: int) -> None:
            return None

        consumer = ChannelConsumer(
            bus, "stuck0", "stuck0_1v0", "test-stuck", on_pack, supervisor=Supervisor("test"),
            start_seq=1,
        )  # fmt: skip
        await publish(ticks[0])
        await consumer.start()
        deadline = time.monotonic() + 10
        while consumer.tick_ts < ticks[0] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        first = consumer.tick_ts
        await bus.js.delete_consumer(dml.stream_name("stuck0"), consumer.durable)
        started = time.monotonic()
        for ts in ticks[1:]:
            await publish(ts)
        while consumer.tick_ts < ticks[-1] and time.monotonic() < started + 15:
            await asyncio.sleep(0.05)
        took = time.monotonic() - started
        last = consumer.tick_ts
        await consumer.stop()
        await bus.close()
        return first, last, took

    first, last, took = loop_thread.call(scenario(), timeout=40)
    assert first == ticks[0]
    assert last == ticks[-1], f"tsafe stood at {last} after {took:.1f} s"
    assert took < consumer_module.STUCK_AFTER_S + 4


async def _tick_stream(
    nats_server: EmbeddedNats, pchannel: str
) -> tuple[Bus, Callable[[int], Awaitable[None]]]:
    """A bus with ``pchannel``'s stream, and a publisher of time ticks into it."""
    bus = await Bus(
        nats_server.url, name=f"test-{pchannel}", credentials=nats_server.credentials
    ).connect()
    await dml.ensure_streams(bus.js, [pchannel])

    async def publish(ts: int) -> None:
        subject, headers, payload = dml.DmlMessage(dml.MsgType.TICK, ts).encode(pchannel)
        await bus.js.publish(subject, payload, headers=headers)

    return bus, publish
