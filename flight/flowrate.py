"""Holding the writes to a lagging vchannel at the rate its consumer takes them in.

A tick lag past the soft limit says writers put rows into a vchannel faster than its
slowest consumer applies them. Delaying every write in proportion to the lag (how flow
control first worked) settles where the delay happens to match the consumer: with fast
writers, or many, close to the hard limit. Instead the proxy measures how many rows per
second the lagging consumer takes in (the ``consumed`` counter of its reports) and admits
its share of that (``ConsumeRates``), less what drains the backlog in about ``DRAIN_S``;
so the lag converges to the soft limit whatever the number of writers and their batches.
Below the soft limit the rate grows by ``GROWTH`` a second, and the hold is lifted once
the writers stay well under it.

Milvus's quota center does the like from the root coord: past ``maxTimeTickDelay`` it
denies writes; below, it scales a configured DML rate by how far the delay is from it
(``internal/rootcoord/quota_center.go``). Elanus has no configured rate to scale, so it
scales the measured one.

A ``ChannelLimit`` is a token bucket that may run into debt: a write is let through when
the bucket holds no debt, and charged its rows once placed (a DoPut's rows are not known
before it is read). A write that would wait longer than ``flow_max_delay_s`` is refused
with RATE_LIMITED instead; the SDK sends it again after a backoff.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

DRAIN_S = 1.0
"""A lag this far past the target takes the admitted rate down to ``MIN_FACTOR`` of the
consumer's; half as far, to half of it: the excess lag drains in about this long."""
MIN_FACTOR = 0.1
GROWTH = 0.5
"""How fast a held rate grows (a fraction of itself per second) while the lag is below the
target: the writers probe for the consumer's capacity without overshooting much."""
LIFT = 4.0
"""A hold is lifted when its rate is this many times what the consumer takes in: the
writers no longer press against it."""
BURST_S = 0.25
"""Seconds' worth of the rate a bucket may save up while writers pause."""
WINDOW_S = 2.0
"""A consumer's rate is measured over its reports of about this long."""


@dataclass
class ChannelLimit:
    """The rows per second one proxy admits into one vchannel (None: not held)."""

    rate: float | None = None
    tokens: float = 0.0
    refilled: float = 0.0
    steered: float = 0.0

    def steer(self, lag: float, consumed: float, target: float, now: float) -> None:
        """Set the rate from the lagging consumer's ``lag`` and the rows per second it takes
        in (this proxy's share of them)."""
        dt = now - self.steered if self.steered else 0.0
        self.steered = now
        if lag > target:
            factor = max(MIN_FACTOR, 1.0 - (lag - target) / DRAIN_S)
            if self.rate is None:
                self.tokens, self.refilled = 0.0, now
            else:
                self._refill(now)
            self.rate = consumed * factor
        elif self.rate is not None:
            if consumed <= 0:
                # caught up and taking nothing in: no backlog is left to protect, and
                # the consumer cannot take in what a hold at its stalled rate (0) keeps
                # out, so holding on would refuse writes for good (a NATS server's
                # restart stalled a consumer, which then caught up)
                self.rate = None
                return
            self._refill(now)
            self.rate = max(self.rate, consumed) * (1.0 + GROWTH * min(dt, 1.0))
            if self.rate > LIFT * consumed:
                self.rate = None

    def wait_s(self, now: float) -> float:
        """How long a write must wait before it may go (0: now)."""
        if self.rate is None:
            return 0.0
        self._refill(now)
        if self.tokens >= 0:
            return 0.0
        return -self.tokens / self.rate if self.rate > 0 else math.inf

    def charge(self, rows: int, now: float) -> None:
        if self.rate is not None:
            self._refill(now)
            self.tokens -= rows

    def _refill(self, now: float) -> None:
        assert self.rate is not None
        saved = self.tokens + self.rate * max(0.0, now - self.refilled)
        self.tokens = min(saved, self.rate * BURST_S)
        self.refilled = now


@dataclass
class ConsumeRates:
    """Each consumer's ``consumed`` counter over its recent reports (its own clock)."""

    history: dict[tuple[str, str], deque[tuple[float, float]]] = field(default_factory=dict)

    def add(self, reporter: str, vchannel: str, at: float, consumed: float) -> None:
        h = self.history.setdefault((reporter, vchannel), deque())
        if h and (at <= h[-1][0] or consumed < h[-1][1]):  # a restarted consumer: anew
            h.clear()
        h.append((at, consumed))
        while len(h) > 2 and at - h[1][0] >= WINDOW_S:
            h.popleft()

    def rate(self, reporter: str, vchannel: str) -> float | None:
        """Rows per second over the window; None before two reports."""
        h = self.history.get((reporter, vchannel))
        if not h or len(h) < 2:
            return None
        (t0, c0), (t1, c1) = h[0], h[-1]
        return (c1 - c0) / (t1 - t0)

    def forget(self, reporter: str) -> None:
        for key in [k for k in self.history if k[0] == reporter]:
            del self.history[key]
