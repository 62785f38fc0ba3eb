"""The one bridge between threaded code (the Flight server, the CLI, tests) and asyncio.

nats-py is asyncio; each process runs one ``LoopThread`` hosting every role's coroutines.
Threads hand work to it with ``call`` (block for the result) or ``submit`` (a future).
Heavy synchronous work (DuckDB, Lance, FAISS) never runs on this loop: roles push it to
executors with ``asyncio.to_thread`` or their own single-thread executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

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
