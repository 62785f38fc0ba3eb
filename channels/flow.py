"""Flow control's figures and verdict, in the manner of Milvus's quota protections.

Every role publishes a ``FlowReport`` on ``subjects.FLOW_REPORT`` each tick interval: its
process's memory and, per channel it consumes, the tick lag (how far its tsafe is behind
the wall clock), the messages it has not fetched yet and the rows it has consumed so far.
Proxies hear them all (``flight/flowcontrol.py``) and ``judge`` them against ``FlowLimits``:

- every figure below its soft limit: **normal**;
- one at or past its soft limit: **throttled**, with a pressure in [0, 1) saying how far
  between soft and hard it is; a tick lag past soft holds the writes to its channel at
  the rate its consumer takes them in (``flight/flowrate.py``), the other figures delay
  each write in proportion;
- one at or past its hard limit: **refusing**, writes fail with RATE_LIMITED.

A consumer's tick lag counts from when it (re)started reading while it catches up with
the log (``ChannelConsumer.flow_lag_s``): the lag an outage left behind is not a backlog
writers make, and refusing them would only lengthen the outage for clients.

A report is pushed rather than read from the session bucket because a session is refreshed
every ``session_ttl_s / 3`` (2 s): an unthrottled writer can put seconds of backlog into
the log between two refreshes, one tick interval cannot.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from elanus.settings import Settings


class Level(enum.IntEnum):
    """The value of the ``elanus_proxy_flow_control_state`` gauge."""

    NORMAL = 0
    THROTTLED = 1
    REFUSING = 2


@dataclass(frozen=True)
class FlowLimits:
    """The soft and hard limits of each figure; a hard limit of 0 turns the figure off."""

    tick_lag_soft_s: float
    tick_lag_hard_s: float
    pending_soft: float
    pending_hard: float
    memory_low: float
    memory_high: float

    @classmethod
    def of(cls, s: Settings) -> FlowLimits:
        """Tick lag limits count on top of two tick intervals: a consumer is that far behind
        between ticks without being behind at all (a slow-ticking cluster is not a lagging
        one)."""
        slack = 2 * s.timetick_interval_ms / 1000

        def lag(limit: float) -> float:
            return limit + slack if limit > 0 else 0.0

        return cls(
            lag(s.flow_tick_lag_soft_s),
            lag(s.flow_tick_lag_hard_s),
            s.flow_pending_soft,
            s.flow_pending_hard,
            s.flow_memory_low,
            s.flow_memory_high,
        )


@dataclass(frozen=True)
class ChannelFigures:
    """One consumer's figures of one vchannel, and who reported them."""

    vchannel: str
    reporter: str
    tick_lag_s: float | None
    pending: float
    consumed: float = 0.0
    """Rows the consumer has taken in since it started (a counter: its rate is what the
    channel's writes are held to while it lags)."""


@dataclass(frozen=True)
class MemoryFigure:
    reporter: str
    fraction: float
    """The process's resident memory over the machine's total."""


@dataclass(frozen=True)
class Verdict:
    level: Level
    pressure: float = 0.0
    """0 when normal, 1 when refusing, in between how far past soft towards hard."""
    reason: str = ""
    """The worst figure, in words (empty when normal)."""
    figure: str = ""
    """Which figure that is: ``tick lag``, ``pending`` or ``memory``."""

    def describe(self) -> str:
        """What ``elanus status`` shows of a proxy."""
        if self.level is Level.NORMAL:
            return "normal"
        if self.level is Level.REFUSING:
            return f"refusing: {self.reason}"
        return f"throttled {self.pressure:.0%}: {self.reason}"


NORMAL = Verdict(Level.NORMAL)
TICK_LAG = "tick lag"


def _pressure(value: float, soft: float, hard: float) -> float | None:
    """None below ``soft`` (or with the figure off), else how far towards ``hard`` (>= 1:
    at or past it)."""
    if hard <= 0 or value < soft:
        return None
    if value >= hard or hard <= soft:
        return 1.0
    return (value - soft) / (hard - soft)


_Figure = tuple[float, float, float, str, str, str]
"""(value, soft limit, hard limit, what it is in words, its limits in words, its name)."""


def _figures(
    channels: Iterable[ChannelFigures], memory: Iterable[MemoryFigure], limits: FlowLimits
) -> Iterator[_Figure]:
    """Every figure the reports give, each with the limits it is judged against."""
    lag_limit = f"{limits.tick_lag_soft_s:g} s soft, {limits.tick_lag_hard_s:g} s hard"
    pending_limit = f"{limits.pending_soft:g} soft, {limits.pending_hard:g} hard"
    memory_limit = f"{limits.memory_low:.0%} low, {limits.memory_high:.0%} high"
    for c in channels:
        if c.tick_lag_s is not None:
            what = f"vchannel {c.vchannel} is {c.tick_lag_s:.1f} s behind ({c.reporter})"
            soft, hard = limits.tick_lag_soft_s, limits.tick_lag_hard_s
            yield c.tick_lag_s, soft, hard, what, lag_limit, TICK_LAG
        what = f"vchannel {c.vchannel} has {c.pending:.0f} messages not consumed ({c.reporter})"
        soft, hard = limits.pending_soft, limits.pending_hard
        yield c.pending, soft, hard, what, pending_limit, "pending"
    for m in memory:
        what = f"{m.reporter} uses {m.fraction:.0%} of the machine's memory"
        soft, hard = limits.memory_low, limits.memory_high
        yield m.fraction, soft, hard, what, memory_limit, "memory"


def judge(
    channels: Iterable[ChannelFigures], memory: Iterable[MemoryFigure], limits: FlowLimits
) -> Verdict:
    """The verdict of the worst figure (refusing over throttled; the higher pressure)."""
    worst: tuple[float, str, str, str] | None = None  # (pressure, reason, limits, figure)
    for value, soft, hard, what, limit, figure in _figures(channels, memory, limits):
        p = _pressure(value, soft, hard)
        if p is not None and (worst is None or p > worst[0]):
            worst = (p, what, limit, figure)
    if worst is None:
        return NORMAL
    pressure, what, limit, figure = worst
    level = Level.REFUSING if pressure >= 1.0 else Level.THROTTLED
    return Verdict(level, pressure, f"{what}; limits {limit}", figure)


@dataclass(frozen=True)
class FlowReport:
    """One role's figures, as published on ``subjects.FLOW_REPORT``."""

    reporter: str
    """``<role> <node_id>``."""
    channels: tuple[ChannelFigures, ...] = ()
    memory: MemoryFigure | None = None
    gone: bool = False
    """The role is stopping: forget its figures now."""
    at: float | None = None
    """When the figures were taken, on the reporter's clock (seconds since the epoch):
    rates are drawn between two reports of one reporter, whenever they arrive."""

    @classmethod
    def of(cls, reporter: str, live: Mapping[str, Any], total_memory: int) -> FlowReport:
        """From a role's ``live_meta`` (what its session carries)."""
        channels = tuple(
            ChannelFigures(
                vchannel,
                reporter,
                _flow_lag(figures),
                figures["pending"],
                float(figures.get("consumed", 0)),
            )
            for vchannel, figures in (live.get("channels") or {}).items()
        )
        rss = live.get("rss_bytes")
        memory = MemoryFigure(reporter, rss / total_memory) if rss and total_memory else None
        return cls(reporter, channels, memory, at=time.time())

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"reporter": self.reporter}
        if self.gone:
            doc["gone"] = True
        if self.memory is not None:
            doc["memory"] = self.memory.fraction
        if self.at is not None:
            doc["at"] = self.at
        doc["channels"] = {c.vchannel: [c.tick_lag_s, c.pending, c.consumed] for c in self.channels}
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> FlowReport:
        """A report as published; one of an older version (no ``at``, channels as
        ``[lag, pending]``) reads as one with no rates to draw."""
        reporter = str(doc["reporter"])
        channels = tuple(
            ChannelFigures(
                str(v),
                reporter,
                None if figures[0] is None else float(figures[0]),
                float(figures[1] or 0),
                float(figures[2] or 0) if len(figures) > 2 else 0.0,
            )
            for v, figures in dict(doc.get("channels") or {}).items()
        )
        fraction = doc.get("memory")
        memory = None if fraction is None else MemoryFigure(reporter, float(fraction))
        at = doc.get("at")
        return cls(
            reporter,
            channels,
            memory,
            bool(doc.get("gone", False)),
            None if at is None else float(at),
        )


def _flow_lag(figures: Mapping[str, Any]) -> float | None:
    """The consumer's ``flow_lag_s`` (the tick lag, counted from its restart while it
    catches up); a role of an older version reports the tick lag only."""
    lag = figures.get("flow_lag_s", figures.get("tick_lag_s"))
    return None if lag is None else float(lag)


@functools.cache
def total_memory() -> int:
    """The machine's memory, the denominator of the memory water levels."""
    return int(psutil.virtual_memory().total)
