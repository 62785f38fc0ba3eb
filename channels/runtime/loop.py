"""The one bridge between threaded code (the Flight server, the CLI, tests) and asyncio.

nats-py is asyncio; each process runs one ``LoopThread`` hosting every role's coroutines.
Threads hand work to it with ``call`` (block for the result) or ``submit`` (a future).
Heavy synchronous work (DuckDB, Lance, FAISS) never runs on this loop: roles push it to
executors with ``asyncio.to_thread`` or their own single-thread executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from elanus.errors import ElanusError

log = logging.getLogger(__name__)

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "elanus-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("LoopThread is not started")
        return self._loop

    def start(self) -> LoopThread:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.call from the loop's own thread would deadlock")
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._loop = None
        self._ready.clear()


def call_in_loop(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], timeout: float | None = None
) -> T:
    """Run ``coro`` on ``loop`` from another thread and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


async def cancel_and_wait(task: asyncio.Task[Any] | None, timeout: float = 10.0) -> None:
    """Cancel a task and wait for it, at most ``timeout`` seconds.

    Python 3.11's ``asyncio.wait_for`` (inside nats-py's fetch) can swallow a cancellation;
    loops that await it must also check a stop flag, and this never waits forever.
    """
    if task is None or task.done():
        return
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()


class Periodic:
    """Call ``fn`` every ``interval_s`` seconds until ``stop``; errors are logged, not fatal.

    Every background loop of a role (keepalives, reports, ticks, housekeeping) is one of
    these, so each stops promptly: a stop flag ends the loop even if a cancellation was
    swallowed (see ``cancel_and_wait``).
    """

    def __init__(self, fn: Callable[[], Awaitable[Any]], interval_s: float, name: str) -> None:
        self.fn = fn
        self.interval_s = interval_s
        self.name = name
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._failing: str | None = None
        """The last round's refusal, while rounds fail."""

    def start(self) -> Periodic:
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        return self

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.interval_s)
            if self._stopping:
                break
            try:
                await self.fn()
            except asyncio.CancelledError:
                raise
            except ElanusError as exc:  # the coord away, a node gone: the next round may work
                # the same refusal round after round (NATS away) is told once, not 5 times a s
                said, self._failing = self._failing, str(exc)
                (log.debug if said == self._failing else log.warning)(
                    "%s failed: %s", self.name, exc
                )
                continue
            except Exception:  # noqa: BLE001 - a bug: its traceback now, then keep going
                log.exception("%s failed", self.name)
                continue
            if self._failing is not None:
                log.info("%s works again", self.name)
                self._failing = None

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._task)
        self._task = None
