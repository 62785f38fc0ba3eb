"""Flow control (channels/flow.py, flight/flowcontrol.py, flight/flowrate.py): the verdict
drawn from each table of figures, the rate a lagging vchannel's writes are held to (it
falls with the lag, comes back after it), the SDK's retries of RATE_LIMITED, and, on a real
stack, the unthrottled-writer case of issue 22: writers as fast as they can go, Strong
reads every 0.2 s all succeed with p99 under 1 s, and no acknowledged row is lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import own_stack

from elanus.channels.consumer import ChannelConsumer
from elanus.channels.flow import (
    ChannelFigures,
    FlowLimits,
    FlowReport,
    Level,
    MemoryFigure,
    judge,
)
from elanus.channels.runtime import metrics
from elanus.client import retry
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode, coord_lapsed, is_coord_lapse
from elanus.flight.flowcontrol import FlowControl
from elanus.settings import Settings

LIMITS = FlowLimits(
    tick_lag_soft_s=1.0,
    tick_lag_hard_s=3.0,
    pending_soft=100,
    pending_hard=300,
    memory_low=0.8,
    memory_high=0.9,
)


def ch(lag: float | None, pending: float = 0, vchannel: str = "dml_0_1v0") -> ChannelFigures:
    return ChannelFigures(vchannel, "querynode q1", lag, pending)


@pytest.mark.parametrize(
    ("channels", "memory", "level", "pressure", "words"),
    [
        ([], [], Level.NORMAL, 0.0, ""),
        ([ch(0.2, 5)], [MemoryFigure("datanode d1", 0.5)], Level.NORMAL, 0.0, ""),
        ([ch(None, 0)], [], Level.NORMAL, 0.0, ""),  # no tick yet: no lag figure
        ([ch(2.0)], [], Level.THROTTLED, 0.5, "dml_0_1v0 is 2.0 s behind (querynode q1)"),
        ([ch(0.1, 250)], [], Level.THROTTLED, 0.75, "250 messages not consumed"),
        ([ch(4.2)], [], Level.REFUSING, 1.0, "is 4.2 s behind"),
        ([ch(0.1, 300)], [], Level.REFUSING, 1.0, "300 messages"),
        ([], [MemoryFigure("datanode d1", 0.85)], Level.THROTTLED, 0.5, "uses 85%"),
        ([], [MemoryFigure("datanode d1", 0.97)], Level.REFUSING, 1.0, "datanode d1 uses 97%"),
        # the worst figure decides, and names itself
        ([ch(1.5), ch(2.5, vchannel="dml_1_1v1")], [], Level.THROTTLED, 0.75, "dml_1_1v1"),
        ([ch(2.9), ch(0.1, 400, "dml_1_1v1")], [], Level.REFUSING, 1.0, "400 messages"),
    ],
)
def test_judge(
    channels: list[ChannelFigures],
    memory: list[MemoryFigure],
    level: Level,
    pressure: float,
    words: str,
) -> None:
    verdict = judge(channels, memory, LIMITS)
    assert verdict.level is level
    assert verdict.pressure == pytest.approx(pressure)
    assert words in verdict.reason
    if level is not Level.NORMAL:
        assert "limits" in verdict.reason  # the limits it was judged against
    assert verdict.describe().startswith(
        {Level.NORMAL: "normal", Level.THROTTLED: "throttled", Level.REFUSING: "refusing"}[level]
    )


def test_hard_limit_zero_turns_a_figure_off() -> None:
    off = FlowLimits(1.0, 0.0, 100, 0, 0.8, 0.0)
    assert judge([ch(99.0, 10**6)], [MemoryFigure("x", 0.99)], off).level is Level.NORMAL


def test_settings_refuse_soft_above_hard() -> None:
    with pytest.raises(ValueError, match="flow_tick_lag_soft_s"):
        Settings(flow_tick_lag_soft_s=2.0, flow_tick_lag_hard_s=1.0)


def test_proxy_verdict_per_collection_and_staleness() -> None:
    now = [0.0]
    slept: list[float] = []
    settings = Settings(timetick_interval_ms=100, flow_max_delay_s=0.4, **_limits(LIMITS))
    flow = FlowControl(settings, clock=lambda: now[0], sleep=slept.append)
    live = {"rss_bytes": 1, "channels": {"a_v0": {"tick_lag_s": 5.0, "pending": 1}}}
    flow.hear(FlowReport.from_doc(FlowReport.of("querynode q1", live, 1 << 40).to_doc()))
    flow.hear(FlowReport("datanode d1", (ch(2.0, vchannel="b_v0"),)))
    assert flow.describe().startswith("refusing: vchannel a_v0 is 5.0 s behind")
    with pytest.raises(ElanusError) as refused:
        flow.admit(["a_v0"], "insert into a")
    assert refused.value.code == ErrorCode.RATE_LIMITED and refused.value.retryable
    assert "insert into a" in refused.value.message and "retry later" in refused.value.message
    flow.admit(["a_v0"], "insert into a", refuse=False)  # a stream's later batch: waits
    flow.admit(["b_v0"], "insert into b")  # the other collection is only slowed down
    flow.admit(["c_v0"], "insert into c")  # and a third one is not held at all
    assert slept == pytest.approx([0.4, 0.2])
    flow.hear(FlowReport("querynode q1", gone=True))  # a role that leaves is forgotten
    assert flow.verdict(["a_v0"]).level is Level.NORMAL
    now[0] += 1.1  # ten tick intervals without a report: the datanode's figures go stale
    assert flow.describe() == "normal"


class Writers:
    """A proxy's flow control on a clock of our own, a consumer's reports of vchannel v0,
    and writers as fast as the proxy lets them: each write of ``batch_rows`` takes 10 ms,
    a refused one is sent again after the SDK's first backoff."""

    def __init__(self, **settings: float) -> None:
        self.batch_rows = 5000
        self.now = 0.0
        self.consumed = 0.0
        self.reported = 0.0
        self.flow = FlowControl(
            Settings(**settings),  # type: ignore[arg-type]
            clock=lambda: self.now,
            sleep=self._sleep,
        )
        self.refused = 0

    def _sleep(self, seconds: float) -> None:
        self.now += seconds

    def report(self, lag: float, rows_per_s: float, times: int = 5, who: str = "q1") -> None:
        """The consumer's reports, one per 200 ms tick: its lag, and the rows it took in
        (since its last report, at ``rows_per_s``)."""
        for _ in range(times):
            self.now += 0.2
            self.consumed += rows_per_s * (self.now - self.reported)
            self.reported = self.now
            figures = ChannelFigures("v0", f"querynode {who}", lag, 0, self.consumed)
            self.flow.hear(FlowReport(f"querynode {who}", (figures,), at=self.now))

    def write(self, seconds: float, vchannel: str = "v0") -> float:
        """Write for ``seconds``: the rows per second admitted."""
        rows, end = 0, self.now + seconds
        while self.now < end:
            try:
                self.flow.admit([vchannel], "insert into c")
            except ElanusError as exc:
                assert exc.code == ErrorCode.RATE_LIMITED and "held to" in exc.message
                self.refused += 1
                self.now += retry.backoff(0, rng=lambda: 0.0)
                continue
            self.flow.charge(vchannel, self.batch_rows)
            rows += self.batch_rows
            self.now += 0.01
        return rows / seconds


def test_a_lagging_vchannel_is_held_to_what_its_consumer_takes_in() -> None:
    w = Writers()  # defaults: tick lag soft 1 s + two 200 ms ticks
    w.report(lag=0.3, rows_per_s=50_000)
    free = w.write(1.0)
    assert w.flow.held() == {} and free > 200_000  # keeping up: nothing held
    w.report(lag=1.9, rows_per_s=50_000)  # half a second past soft: drain it in about 1 s
    assert w.flow.held()["v0"] == pytest.approx(25_000, rel=0.01)
    assert "writes held to rows/s: v0 25,000" in w.flow.describe()
    assert 20_000 <= w.write(2.0) <= 35_000 and w.refused == 0  # each write waits its turn
    w.batch_rows = 20_000  # a turn further off than flow_max_delay_s (0.5 s): refused
    assert 20_000 <= w.write(2.0) <= 45_000 and w.refused > 0
    w.batch_rows = 5000
    assert w.write(1.0, vchannel="v1") > 200_000  # another collection's vchannel: free
    w.report(lag=2.3, rows_per_s=50_000)  # further behind: less again
    assert w.flow.held()["v0"] < 10_000
    assert w.write(2.0) < 15_000
    w.report(lag=0.5, rows_per_s=50_000, times=3)  # caught up: back to the consumer's rate,
    assert w.flow.held()["v0"] >= 50_000  # and growing from there
    assert w.write(1.0) >= 50_000
    w.report(lag=0.5, rows_per_s=50_000, times=25)  # the writers no longer press: lifted
    assert w.flow.held() == {}
    assert w.write(1.0) > 200_000


def test_a_hold_of_a_stalled_consumer_is_lifted_once_it_caught_up() -> None:
    """A consumer stalled (a NATS server died): its writes are held at the nothing it takes
    in. Once its lag is back under the soft limit, nothing being written is no reason to
    go on holding them at 0 (it took 60 s of refused writes in a chaos run)."""
    w = Writers()
    w.report(lag=3.0, rows_per_s=0)
    assert w.flow.held() == {"v0": 0.0}
    w.write(0.5)
    assert w.refused > 0
    w.report(lag=0.3, rows_per_s=0)  # caught up; the writers were kept out meanwhile
    assert w.flow.held() == {}
    assert w.write(1.0) > 200_000
    w.report(lag=3.0, rows_per_s=0, who="q2")
    assert w.flow.held() == {"v0": 0.0}
    w.flow.hear(FlowReport("querynode q2", gone=True))  # its consumer left: nothing to hold to
    assert w.flow.held() == {}


def test_held_rates_are_shared_by_the_proxies_and_a_late_report_counts_as_lag() -> None:
    w = Writers()
    for proxy in ("proxy p1", "proxy p2"):  # two proxies report (they consume nothing)
        w.flow.hear(FlowReport(proxy, at=w.now))
    w.report(lag=1.9, rows_per_s=40_000)
    assert w.flow.held()["v0"] == pytest.approx(10_000, rel=0.01)  # half of 40k / 2
    quiet = Writers()
    quiet.report(lag=1.0, rows_per_s=40_000)
    assert quiet.flow.verdict(["v0"]).level is Level.NORMAL
    quiet.now += 1.2  # its consumer misses six reports: taken to fall behind meanwhile
    verdict = quiet.flow.verdict(["v0"])
    assert verdict.level is Level.THROTTLED and "v0 is 2.0 s behind" in verdict.reason
    quiet.now += 1.0  # and forgotten once stale (it died)
    assert quiet.flow.verdict(["v0"]).level is Level.NORMAL


def test_a_report_without_rates_reads_and_slows_writes_in_proportion() -> None:
    """A role of an older version sends ``[lag, pending]`` and no time: no rate to hold
    to, so a lag past soft delays each write as before."""
    old = FlowReport.from_doc({"reporter": "querynode q1", "channels": {"v0": [2.4, 3]}})
    assert old.channels[0].consumed == 0 and old.at is None
    w = Writers(flow_max_delay_s=0.4)
    w.flow.hear(old)
    w.flow.hear(old)
    assert w.flow.held() == {}
    before = w.now
    w.flow.admit(["v0"], "insert into c")  # 1 s past soft of 4 s between: 25 % of 0.4 s
    assert w.now - before == pytest.approx(0.1)


def _limits(limits: FlowLimits, tick_ms: int = 100) -> dict[str, float]:
    """Settings whose effective limits are ``limits`` (tick lag limits count on top of two
    tick intervals)."""
    slack = 2 * tick_ms / 1000
    return {
        "flow_tick_lag_soft_s": limits.tick_lag_soft_s - slack,
        "flow_tick_lag_hard_s": limits.tick_lag_hard_s - slack,
        "flow_pending_soft": int(limits.pending_soft),
        "flow_pending_hard": int(limits.pending_hard),
        "flow_memory_low": limits.memory_low,
        "flow_memory_high": limits.memory_high,
    }


def test_retrying_backs_off_with_jitter_until_the_deadline() -> None:
    assert [retry.backoff(a, rng=lambda: 0.0) for a in range(8)] == pytest.approx(
        [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    )
    assert retry.backoff(0, rng=lambda: 1.0) == pytest.approx(0.05)
    calls, waits = [0], []

    def flaky() -> str:
        calls[0] += 1
        if calls[0] < 3:
            raise ElanusError(ErrorCode.RATE_LIMITED, "writes refused: behind")
        return "done"

    assert retry.retrying(flaky, 10.0, lambda exc, wait: waits.append(wait)) == "done"
    assert calls[0] == 3 and len(waits) == 2
    with pytest.raises(ElanusError) as info:  # other codes are never sent again
        retry.retrying(lambda: (_ for _ in ()).throw(ElanusError("TIMEOUT", "x")), 10.0)
    assert info.value.code == ErrorCode.TIMEOUT

    def refused() -> None:
        raise ElanusError(ErrorCode.RATE_LIMITED, "writes refused: behind")

    started = time.monotonic()
    with pytest.raises(ElanusError) as info:
        retry.retrying(refused, 0.3)
    assert info.value.code == ErrorCode.RATE_LIMITED and "retried for 0.3 s" in info.value.message
    assert 0.3 <= time.monotonic() - started < 1.0
    with pytest.raises(ElanusError) as info:  # 0: not retried at all
        retry.retrying(refused, 0)
    assert info.value.message == "writes refused: behind"


def test_a_lapsed_coord_lease_is_retried_for_a_write_of_one_request_only() -> None:
    """The coord's lease lapsed (a NATS election): a write of one request did nothing and
    is sent again; one streamed in several requests may be half written, and is not."""
    calls = [0]

    def lapsed_twice() -> str:
        calls[0] += 1
        if calls[0] < 3:
            raise coord_lapsed("lapsed")
        return "done"

    assert retry.retrying(lapsed_twice, 10.0, one_request=True) == "done"
    assert calls[0] == 3
    calls[0] = 0
    with pytest.raises(ElanusError) as info:
        retry.retrying(lapsed_twice, 10.0)
    assert is_coord_lapse(info.value) and calls[0] == 1
    with pytest.raises(ElanusError) as info:  # any other UNAVAILABLE is not sent again
        retry.retrying(
            lambda: (_ for _ in ()).throw(ElanusError("UNAVAILABLE", "x")), 10.0, one_request=True
        )
    assert info.value.message == "x"


# -- the unthrottled writers -------------------------------------------------------------------
DIM = 16
WRITERS = 3
BATCH = 4000
RUN_S = 15.0
READ_EVERY_S = 0.2
TICK_LAG_HARD_S = 0.25


def _batch(rng: np.random.Generator) -> dict[str, object]:
    return {"vector": rng.random((BATCH, DIM), dtype=np.float32)}


@pytest.mark.slow
@pytest.mark.serial
def test_unthrottled_writers_keep_strong_reads_under_a_second(tmp_path: Path) -> None:
    limits = {
        # effective limits 0.11 / 0.25 s: each counts on top of two 50 ms tick intervals
        "flow_tick_lag_soft_s": 0.01,
        "flow_tick_lag_hard_s": TICK_LAG_HARD_S - 0.1,
        "flow_pending_soft": 8,
        "flow_pending_hard": 32,
        "timetick_interval_ms": 50,
        "dml_rate_per_user": 0,
    }
    with own_stack(tmp_path, "flow", **limits) as stack:
        admin = stack.client()
        admin.create_collection("flow", dimension=DIM, auto_id=True)
        admin.load_collection("flow")
        stop = threading.Event()
        acked = [0] * WRITERS
        write_errors: list[BaseException] = []
        waits = [0] * WRITERS

        def writer(i: int) -> None:
            rng = np.random.default_rng(i)
            data = _batch(rng)
            with Client(stack.uri, timeout=60) as c:

                def waited(exc: ElanusError, wait: float, i: int = i) -> None:
                    waits[i] += 1

                c.on_retry = waited
                while not stop.is_set():
                    try:
                        acked[i] += c.insert("flow", data)["insert_count"]
                    except BaseException as exc:  # noqa: BLE001 - reported below
                        write_errors.append(exc)
                        return

        latencies: list[float] = []
        read_errors: list[BaseException] = []
        lags: list[float] = []
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        reader = stack.client()
        query = [[0.5] * DIM]
        deadline = time.monotonic() + RUN_S
        n = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                if n % 2:
                    reader.search("flow", query, limit=3, consistency_level="Strong")
                else:
                    reader.query("flow", "", ["count(*)"], consistency_level="Strong")
            except BaseException as exc:  # noqa: BLE001 - every read must succeed
                read_errors.append(exc)
            latencies.append(time.monotonic() - started)
            lags += [c.tick_lag_s or 0.0 for c in metrics.reporters() if _consumer(c)]
            n += 1
            time.sleep(max(0.0, READ_EVERY_S - (time.monotonic() - started)))
        stop.set()
        for t in threads:
            t.join(60)
        assert not write_errors, write_errors[:3]
        assert not read_errors, read_errors[:3]
        p99 = float(np.percentile(latencies, 99))
        flow = stack.proxy.flow
        engaged = flow.throttled + flow.refused
        print(
            f"\nrows acked {sum(acked):,} ({sum(acked) / RUN_S:,.0f}/s), reads {len(latencies)}, "
            f"p50 {np.percentile(latencies, 50):.3f}s p99 {p99:.3f}s max {max(latencies):.3f}s, "
            f"throttled {flow.throttled} refused {flow.refused} client waits {sum(waits)}, "
            f"tick lag p99 {np.percentile(lags, 99):.2f}s max {max(lags):.2f}s"
        )
        assert p99 < 1.0, f"Strong read p99 {p99:.3f}s"
        assert engaged > 0, "the writers never met flow control"
        if flow.refused:
            assert sum(waits) > 0  # the SDK waited and sent them again
        total = reader.query("flow", "", ["count(*)"], consistency_level="Strong")
        assert total[0]["count(*)"] == sum(acked)


def _consumer(source: object) -> bool:
    return isinstance(source, ChannelConsumer)
