"""The proxy's side of time-tick synchronisation (seed 000 §6.6.1 and §6.6.3).

Each DML task registers on its pchannels *before* it asks the TSO for its timestamp and
leaves when JetStream has acknowledged its messages. Each report first takes a fresh
timestamp ``now`` and then reads the registry: a pchannel with tasks in flight reports just
below their smallest timestamp; one with a task still waiting for its timestamp repeats its
previous report (that task's timestamp will exceed the previous ``now``); an idle one
reports ``now``. So a reported value never lets a tick overtake an unpublished message.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError, ErrorCode, is_coord_lapse

log = logging.getLogger(__name__)


@dataclass
class DmlTask:
    task_id: int
    pchannels: tuple[str, ...]
    ts: int | None = None


@dataclass
class _Stats:
    pending: int = 0
    timestamps: Counter[int] = field(default_factory=Counter)


class DmlTracker:
    """In-flight DML tasks per pchannel; thread-safe (Flight threads and the loop use it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[str, _Stats] = {}
        self._ids = itertools.count(1)
        self._last: dict[str, int] = {}
        self._last_default = 0

    def begin(self, pchannels: Iterable[str]) -> DmlTask:
        task = DmlTask(next(self._ids), tuple(sorted(set(pchannels))))
        with self._lock:
            for p in task.pchannels:
                self._stats.setdefault(p, _Stats()).pending += 1
        return task

    def stamp(self, task: DmlTask, ts: int) -> None:
        with self._lock:
            task.ts = ts
            for p in task.pchannels:
                st = self._stats[p]
                st.pending -= 1
                st.timestamps[ts] += 1

    def end(self, task: DmlTask) -> None:
        with self._lock:
            for p in task.pchannels:
                st = self._stats[p]
                if task.ts is None:
                    st.pending -= 1
                else:
                    st.timestamps[task.ts] -= 1
                    if st.timestamps[task.ts] <= 0:
                        del st.timestamps[task.ts]
                if st.pending == 0 and not st.timestamps:
                    del self._stats[p]

    def report(self, now: int) -> tuple[int, dict[str, int]]:
        """(default, per-pchannel) values to send; ``now`` must be allocated just before."""
        with self._lock:
            out: dict[str, int] = {}
            for p, st in self._stats.items():
                if st.pending:
                    out[p] = self._last.get(p, self._last_default)
                else:
                    out[p] = min(min(st.timestamps) - 1, now)
            self._last = dict(out)
            self._last_default = now
            return now, out

    def in_flight(self) -> int:
        with self._lock:
            return sum(st.pending + sum(st.timestamps.values()) for st in self._stats.values())


class TimeTicker:
    """Reports the tracker to the coord every interval, and on demand."""

    def __init__(
        self,
        tracker: DmlTracker,
        alloc_ts: Callable[[], Awaitable[int]],
        send: Callable[[int, dict[str, int]], Awaitable[None]],
        interval_s: float,
        lease_s: float = 5.0,
    ) -> None:
        self.tracker = tracker
        self.alloc_ts = alloc_ts
        self.send = send
        self.interval_s = interval_s
        self._periodic = Periodic(self._report_in_time, interval_s, "time tick report")
        self._lock = asyncio.Lock()
        self.lease_s = lease_s
        self.epoch = 0
        """Bumped when reports stopped for longer than the lease: the coord may then have
        stopped waiting for this proxy, so writes in flight across it cannot be trusted."""
        self._last_ok = 0.0

    async def start(self, wait_s: float = 60.0) -> None:
        """First report, waiting for the coord if it is still starting: the coord must count
        this proxy before it publishes anything."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            try:
                await self.report_now()
                break
            except ElanusError as exc:
                if exc.code not in (ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT):
                    raise
                if asyncio.get_running_loop().time() > deadline:
                    raise
                log.info("waiting for the coord: %s", exc.message)
                await asyncio.sleep(0.2)
        self._periodic.start()

    async def report_now(self) -> None:
        async with self._lock:
            try:
                now = await self.alloc_ts()
                default, pchannels = self.tracker.report(now)
                await self.send(default, pchannels)
            except ElanusError as exc:
                if is_coord_lapse(exc):
                    # The coord answered: alive, and counting no proxy's silence until it
                    # serves again (then from that moment), so it cannot pass a write in
                    # flight here meanwhile. Without this, a write across a NATS server's
                    # death (the coord's lease lapses while streams elect) was failed as
                    # "may be incomplete" though the coord had waited for it.
                    self._answered()
                raise
            self._answered()

    def _answered(self) -> None:
        clock = time.monotonic()
        if self._last_ok and clock - self._last_ok > self.lease_s:
            self.epoch += 1
        self._last_ok = clock

    async def _report_in_time(self) -> None:
        """The periodic report, given up after a few intervals: a request in flight to a
        coord that died is never answered, and waiting out its 30 s timeout would hold every
        later report, so a new coord (a standby taking over) would see no report from this
        proxy and publish no time tick meanwhile: Strong reads would stall as long."""
        limit = max(1.0, 5 * self.interval_s)
        try:
            await asyncio.wait_for(self.report_now(), limit)
        except TimeoutError:
            raise ElanusError(
                ErrorCode.TIMEOUT, f"the coord did not take this proxy's report in {limit:g}s"
            ) from None

    def lease_held(self, epoch: int) -> bool:
        """Whether the coord has counted this proxy without a break since ``epoch``."""
        return self.epoch == epoch and time.monotonic() - self._last_ok <= self.lease_s

    async def stop(self) -> None:
        await self._periodic.stop()
