"""The proxy's ddQueue (seed 000 §6.6.1): DDL runs one task at a time, in timestamp order.

``submit`` takes a TSO timestamp and appends the task under one lock, so queue order is
timestamp order; a single worker runs tasks serially (at most one is active), and the
caller waits until its own task is done (WaitToFinish).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from elanus.channels.runtime.loop import cancel_and_wait
from elanus.channels.runtime.supervisor import Supervisor
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

TaskFn = Callable[[int], Awaitable[Any]]
"""A DDL task body; it receives the task's timestamp."""


@dataclass
class DdTask:
    name: str
    ts: int
    run: TaskFn
    done: asyncio.Future[Any] = field(repr=False)


class DdQueue:
    def __init__(self, alloc_ts: Callable[[], Awaitable[int]], max_pending: int = 1024) -> None:
        self._alloc_ts = alloc_ts
        self._queue: asyncio.Queue[DdTask] = asyncio.Queue(max_pending)
        self._enqueue_lock = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self.last_ts = 0
        self.executed = 0
        self.active: DdTask | None = None

    async def start(self, supervisor: Supervisor) -> DdQueue:
        """Run the worker (restarted with a backoff should it ever fail)."""
        if self._worker is None:
            self._worker = supervisor.spawn("ddl queue", self._work, restart=True)
        return self

    async def stop(self) -> None:
        """Stop the worker; tasks still queued fail with UNAVAILABLE."""
        if self._worker is not None:
            await cancel_and_wait(self._worker)
            self._worker = None
        while not self._queue.empty():
            task = self._queue.get_nowait()
            if not task.done.done():
                task.done.set_exception(
                    ElanusError(ErrorCode.UNAVAILABLE, f"proxy stopped before {task.name} ran")
                )

    def pending(self) -> int:
        return self._queue.qsize()

    async def submit(self, name: str, run: TaskFn) -> Any:
        """Enqueue ``run`` with a fresh timestamp and wait for its result (or error)."""
        if self._worker is None:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the proxy's DDL queue is not running")
        async with self._enqueue_lock:
            ts = await self._alloc_ts()
            if ts <= self.last_ts:  # the TSO is strictly increasing; never trust otherwise
                raise ElanusError(
                    ErrorCode.INTERNAL, f"TSO went backwards: {ts} after {self.last_ts}"
                )
            self.last_ts = ts
            task = DdTask(name, ts, run, asyncio.get_running_loop().create_future())
            await self._queue.put(task)
        return await task.done

    async def _work(self) -> None:
        while True:
            task = await self._queue.get()
            if task.done.done():  # the caller gave up
                continue
            self.active = task
            try:
                result = await task.run(task.ts)
            except asyncio.CancelledError:
                if not task.done.done():
                    task.done.set_exception(
                        ElanusError(ErrorCode.UNAVAILABLE, f"{task.name} was cancelled")
                    )
                raise
            except Exception as exc:  # noqa: BLE001 - delivered to the waiting caller
                if not task.done.done():
                    task.done.set_exception(exc)
            else:
                if not task.done.done():
                    task.done.set_result(result)
            finally:
                self.active = None
                self.executed += 1
