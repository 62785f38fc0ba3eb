"""A proxy's DML flow control: it hears every role's ``FlowReport`` and slows down, then
refuses, the writes to a collection whose consumers fall behind (``channels/flow.py``).

A write to a collection is judged by the figures of the collection's vchannels and by every
process's memory: a stuck consumer of one collection does not stop the writes to another.
A vchannel whose consumer lags past the soft limit has its writes held at the rate that
consumer takes them in (``flight/flowrate.py``): the Flight thread of a write waits its
turn, or the write is refused with RATE_LIMITED when the turn is further off than
``flow_max_delay_s``. Throttled by another figure (messages not fetched, memory), a write
sleeps ``pressure * flow_max_delay_s``; past a hard limit, it fails with RATE_LIMITED
before anything of it is done. The proxy-wide verdict (all channels) sets the
``elanus_proxy_flow_control_state`` gauge and the ``flow_control`` of the proxy's session
(``elanus status``).

A report counts as its role's figures until the next: a role busy enough to miss its
reporting times is taken to fall further behind meanwhile (its lag grows by the time it
is late). A report older than ``STALE_AFTER_TICKS`` tick intervals is forgotten: its role
stopped reporting (it died, or left and said so with a ``gone`` report); a held rate then
grows back by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from nats.aio.subscription import Subscription

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.flow import (
    NORMAL,
    TICK_LAG,
    ChannelFigures,
    FlowLimits,
    FlowReport,
    Level,
    Verdict,
    judge,
)
from elanus.channels.runtime.metrics import FLOW_CONTROL_STATE
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.flowrate import ChannelLimit, ConsumeRates
from elanus.settings import Settings

log = logging.getLogger(__name__)


def _later(c: ChannelFigures, late: float) -> ChannelFigures:
    return c if c.tick_lag_s is None else replace(c, tick_lag_s=c.tick_lag_s + late)


STALE_AFTER_TICKS = 10
"""Reports kept this many tick intervals (2 s by default): long enough to ride out a busy
loop on the reporting side, short enough that a dead node's last figures do not hold
writes back for long."""


class FlowControl:
    """The latest report of every role, and the verdicts drawn from them; thread-safe."""

    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = FlowLimits.of(settings)
        self.max_delay_s = settings.flow_max_delay_s
        self.interval_s = settings.timetick_interval_ms / 1000
        self.stale_after_s = STALE_AFTER_TICKS * self.interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[float, FlowReport]] = {}
        self._rates = ConsumeRates()
        self._held: dict[str, ChannelLimit] = {}
        """Per vchannel, the rate this proxy admits rows at (``flight/flowrate.py``)."""
        self._verdict = NORMAL
        self._sub: Subscription | None = None
        self.throttled = 0
        """Writes delayed so far (the refused ones are counted in
        ``elanus_proxy_rate_limited_total``)."""
        self.refused = 0

    async def start(self, bus: Bus) -> None:
        self._sub = await bus.subscribe(subjects.FLOW_REPORT, self._on_report)
        FLOW_CONTROL_STATE.set(Level.NORMAL)

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass

    async def _on_report(self, doc: Any) -> None:
        try:
            report = FlowReport.from_doc(doc)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("unreadable flow report: %s", exc)
            return
        self.hear(report)

    def hear(self, report: FlowReport) -> None:
        """Take one role's figures in (the newest replace its earlier ones), and steer the
        rate of each vchannel they speak of."""
        with self._lock:
            if report.gone:
                self._reports.pop(report.reporter, None)
                self._rates.forget(report.reporter)
            else:
                self._reports[report.reporter] = (self._clock(), report)
                if report.at is not None:
                    for c in report.channels:
                        self._rates.add(report.reporter, c.vchannel, report.at, c.consumed)
            held = set(self._held)  # steered on every report: their consumer may be gone
        self._steer(held | {c.vchannel for c in report.channels})
        self.verdict()

    def _fresh(self) -> list[FlowReport]:
        """The reports not stale, each channel's lag grown by the time its report is late
        (past one tick interval): a consumer too busy to report is still falling behind."""
        now = self._clock()
        horizon = now - self.stale_after_s
        with self._lock:
            for key in [k for k, (at, _) in self._reports.items() if at < horizon]:
                del self._reports[key]
            items = list(self._reports.values())
        out = []
        for at, report in items:
            late = now - at - self.interval_s
            if late > 0 and any(c.tick_lag_s is not None for c in report.channels):
                report = replace(report, channels=tuple(_later(c, late) for c in report.channels))
            out.append(report)
        return out

    def _steer(self, vchannels: set[str]) -> None:
        """Hold or free the writes to ``vchannels`` by their slowest consumer's figures."""
        reports = self._fresh()
        proxies = max(1, sum(r.reporter.startswith("proxy ") for r in reports))
        target = self.limits.tick_lag_soft_s
        if not target or not self.limits.tick_lag_hard_s:
            return  # tick lag is not watched
        now = self._clock()
        for vchannel in vchannels:
            worst = max(
                (c for r in reports for c in r.channels if c.vchannel == vchannel),
                key=lambda c: -1.0 if c.tick_lag_s is None else c.tick_lag_s,
                default=None,
            )
            if worst is None or worst.tick_lag_s is None:
                with self._lock:  # no consumer reports on it (any more): nothing to hold to
                    self._held.pop(vchannel, None)
                continue
            with self._lock:
                rate = self._rates.rate(worst.reporter, vchannel)
                if rate is None:
                    continue
                held = self._held.setdefault(vchannel, ChannelLimit())
                held.steer(worst.tick_lag_s, max(0.0, rate) / proxies, target, now)
                if held.rate is None:
                    del self._held[vchannel]

    def held(self) -> dict[str, float]:
        """The vchannels whose writes are held now, and the rows per second they are held
        to (``elanus status``, tests)."""
        with self._lock:
            return {v: h.rate for v, h in self._held.items() if h.rate is not None}

    def charge(self, vchannel: str, rows: int) -> None:
        """Count rows placed into ``vchannel`` against its held rate (if it is held)."""
        with self._lock:
            held = self._held.get(vchannel)
            if held is not None:
                held.charge(rows, self._clock())

    def verdict(self, vchannels: Iterable[str] | None = None) -> Verdict:
        """The verdict for writes to ``vchannels`` (None: the proxy's, over every channel,
        which also updates the gauge)."""
        reports = self._fresh()
        wanted = None if vchannels is None else set(vchannels)
        channels = (
            c for r in reports for c in r.channels if wanted is None or c.vchannel in wanted
        )
        memory = (r.memory for r in reports if r.memory is not None)
        verdict = judge(channels, memory, self.limits)
        if wanted is None:
            if verdict.level != self._verdict.level:
                log.info("flow control: %s", verdict.describe())
            self._verdict = verdict
            FLOW_CONTROL_STATE.set(verdict.level)
        return verdict

    def describe(self) -> str:
        """The proxy's state for its session (``elanus status``)."""
        state = self.verdict().describe()
        held = self.held()
        if held:
            rates = ", ".join(f"{v} {r:,.0f}" for v, r in sorted(held.items()))
            state += f"; writes held to rows/s: {rates}"
        return state

    def admit(self, vchannels: Iterable[str], what: str, *, refuse: bool = True) -> None:
        """On a Flight thread, before a write: go on, wait, or raise RATE_LIMITED. With
        ``refuse=False`` (a later batch of a stream whose first was admitted) it only waits."""
        vchannels = list(vchannels)
        verdict = self.verdict(vchannels)
        if verdict.level is Level.REFUSING and refuse:
            self._refuse(what, verdict.reason)
        now = self._clock()
        with self._lock:
            held = [(v, self._held[v]) for v in vchannels if v in self._held]
            wait, vchannel = max(((h.wait_s(now), v) for v, h in held), default=(0.0, ""))
        if wait > self.max_delay_s and refuse:
            rate = self._held[vchannel].rate if vchannel in self._held else 0.0
            self._refuse(
                what,
                f"writes to {vchannel} are held to {rate or 0:,.0f} rows/s while its consumer "
                f"catches up ({verdict.reason or 'tick lag'})",
            )
        delay = min(wait, self.max_delay_s)
        if verdict.level is not Level.NORMAL and (verdict.figure != TICK_LAG or not held):
            # memory and unfetched messages slow every write down in proportion; so does
            # a lag whose consumer's rate is not known yet (no two reports of it)
            delay = max(delay, min(verdict.pressure, 1.0) * self.max_delay_s)
        if delay > 0:
            self.throttled += 1
            self._sleep(delay)

    def _refuse(self, what: str, why: str) -> None:
        self.refused += 1
        raise ElanusError(
            ErrorCode.RATE_LIMITED,
            f"writes refused ({what}): {why}; nothing was written: retry later",
        )
