"""A proxy's DML flow control: it hears every role's ``FlowReport`` and slows down, then
refuses, the writes to a collection whose consumers fall behind (``channels/flow.py``).

A write to a collection is judged by the figures of the collection's vchannels and by every
process's memory: a stuck consumer of one collection does not stop the writes to another.
Throttled, the Flight thread of the write sleeps ``pressure * flow_max_delay_s`` before it
goes on; refusing, the write fails with RATE_LIMITED before anything of it is done. The
proxy-wide verdict (all channels) sets the ``elanus_proxy_flow_control_state`` gauge and
the ``flow_control`` of the proxy's session (``elanus status``).

A report older than ``STALE_AFTER_TICKS`` tick intervals is forgotten: its role stopped
reporting (it died, or left and said so with a ``gone`` report).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from nats.aio.subscription import Subscription

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.flow import NORMAL, FlowLimits, FlowReport, Level, Verdict, judge
from elanus.channels.metrics import FLOW_CONTROL_STATE
from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings

log = logging.getLogger(__name__)

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
        self.stale_after_s = STALE_AFTER_TICKS * settings.timetick_interval_ms / 1000
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[float, FlowReport]] = {}
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
        """Take one role's figures in (the newest replace its earlier ones)."""
        with self._lock:
            if report.gone:
                self._reports.pop(report.reporter, None)
            else:
                self._reports[report.reporter] = (self._clock(), report)
        self.verdict()

    def _fresh(self) -> list[FlowReport]:
        horizon = self._clock() - self.stale_after_s
        with self._lock:
            for key in [k for k, (at, _) in self._reports.items() if at < horizon]:
                del self._reports[key]
            return [report for _, report in self._reports.values()]

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
        return self.verdict().describe()

    def admit(self, vchannels: Iterable[str], what: str, *, refuse: bool = True) -> None:
        """On a Flight thread, before a write: go on, wait, or raise RATE_LIMITED. With
        ``refuse=False`` (a later batch of a stream whose first was admitted) it only waits."""
        verdict = self.verdict(vchannels)
        if verdict.level is Level.NORMAL:
            return
        if verdict.level is Level.REFUSING and refuse:
            self.refused += 1
            raise ElanusError(
                ErrorCode.RATE_LIMITED,
                f"writes refused ({what}): {verdict.reason}; nothing was written: retry later",
            )
        self.throttled += 1
        self._sleep(min(verdict.pressure, 1.0) * self.max_delay_s)
