"""The sync manager of one vchannel (Milvus's ``flushcommon/syncmgr``): runs syncs off the
consumption path.

Ordering rules:

- syncs of one segment run one after another, in the order they were submitted: a spill's
  fragment appends after the previous one, a flush's pk stats and delete log follow its
  last rows, a delta log of a segment follows its flush, a compaction follows the delta
  logs of its sources (a sync names every segment it touches, and waits for each one's
  previous sync);
- syncs of different segments overlap, at most ``limit`` writing at once (the
  ``max_parallel_syncs`` setting); the others wait for a slot, and the pipeline never waits
  for any of them;
- a sync holds its stream position from its submission until its write is done *and* its
  ``then`` (the report to the coord) has returned; a sync that fails keeps it for good.
  ``oldest`` is the smallest position held: the channel checkpoint is the minimum of it,
  the write buffer's ``oldest`` and the next position to consume, so it never passes data
  that is not synced and reported.

A failed write is tried again (``SYNC_ATTEMPTS`` in all, each write is safe to repeat);
then the sync fails: the supervisor logs it at once with its traceback, ``failure`` is
set, and every sync that has not started writing gives up (those of its segments would
build on the missing write; the channel is going down anyway). Failed and abandoned syncs
keep their positions. The pipeline raises ``failure`` on its next pack, which fails the
channel's task: the coord is told and watches the channel again from its checkpoint,
which lies before every unsynced message, so the replay writes them again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from elanus.channels.runtime.supervisor import Supervisor

log = logging.getLogger(__name__)

T = TypeVar("T")
SYNC_ATTEMPTS = 3
RETRY_DELAY_S = 0.2


class SyncAbandoned(Exception):
    """A sync given up because an earlier sync of one of its segments failed."""


class SyncManager:
    def __init__(self, supervisor: Supervisor, owner: str, limit: int) -> None:
        self.supervisor = supervisor
        self.owner = owner
        """Whose syncs these are, in task names and logs (the vchannel)."""
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._last: dict[int, asyncio.Task[None]] = {}
        """The latest sync of each segment, which the segment's next sync waits for."""
        self._held: dict[int, int] = {}
        """Stream positions held by unfinished syncs, by sync number."""
        self._numbers = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self.in_flight = 0
        """Syncs writing now (never above ``limit``)."""
        self.peak = 0
        """The most syncs that were ever writing at once."""
        self.failure: BaseException | None = None

    def submit(
        self,
        name: str,
        segments: Iterable[int],
        write: Callable[[int], T],
        *,
        position: int | None,
        then: Callable[[T], Awaitable[None]] | None = None,
        attempts: int = SYNC_ATTEMPTS,
    ) -> asyncio.Task[None]:
        """Run ``write(attempt)`` on a worker thread after the previous syncs of
        ``segments``, then ``then(result)`` on the loop; hold ``position`` until both end."""
        number = next(self._numbers)
        if position is not None:
            self._held[number] = position
        keys = list(dict.fromkeys(segments))
        before = [t for k in keys if (t := self._last.get(k)) is not None]

        async def run() -> None:
            if before:
                await asyncio.wait(before)
            if self.failure is not None:  # the channel is failing: write nothing more
                raise SyncAbandoned(f"{name}: a sync of this channel failed")
            if any(t.cancelled() or t.exception() is not None for t in before):
                raise SyncAbandoned(f"{name}: an earlier sync of its segments failed")
            result = await self._write(name, write, attempts)
            if then is not None:
                await then(result)
            self._held.pop(number, None)  # a failed sync keeps it: the checkpoint stays

        task = self.supervisor.spawn(f"{self.owner}: {name}", run, on_failure=self._failed)
        self._tasks.add(task)
        task.add_done_callback(self._forget(keys))
        for k in keys:
            self._last[k] = task
        return task

    def _forget(self, keys: list[int]) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            for k in keys:
                if self._last.get(k) is task:
                    del self._last[k]

        return done

    async def _write(self, name: str, write: Callable[[int], T], attempts: int) -> T:
        async with self._slots:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                for attempt in range(attempts):
                    try:
                        return await asyncio.to_thread(write, attempt)
                    except Exception:
                        if attempt + 1 == attempts:
                            raise
                        log.warning(
                            "%s: %s failed (attempt %d of %d), retrying",
                            self.owner,
                            name,
                            attempt + 1,
                            attempts,
                            exc_info=True,
                        )
                        await asyncio.sleep(RETRY_DELAY_S * 2**attempt)
                raise AssertionError("unreachable")
            finally:
                self.in_flight -= 1

    def _failed(self, exc: BaseException) -> None:
        if self.failure is None and not isinstance(exc, SyncAbandoned):
            self.failure = exc

    def oldest(self) -> int | None:
        """The smallest stream position an unfinished sync holds."""
        return min(self._held.values(), default=None)

    def running(self) -> list[asyncio.Task[None]]:
        """The syncs submitted and not finished, to wait for (``Flusher.persist``)."""
        return list(self._tasks)

    @property
    def pending(self) -> int:
        """Syncs submitted and not finished (waiting, writing or reporting)."""
        return len(self._tasks)

    async def drain(self, timeout: float) -> None:
        """Let the syncs end (files stay whole) for up to ``timeout``; cancel the rest."""
        tasks: list[asyncio.Task[Any]] = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for task in tasks:
            if not task.done():
                task.cancel()
        if tasks:
            await asyncio.wait(tasks)
