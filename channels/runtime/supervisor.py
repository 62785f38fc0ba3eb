"""Supervision of a role's background tasks: no failure goes unnoticed.

Every task a role starts outside a request (channel consumers, workers, spills, handoffs,
jobs) runs through ``Supervisor.spawn``. An exception is logged at once with its traceback
(not when the loop shuts down and asyncio finds it unretrieved), then either

- the task is made again after a backoff (``restart=True``: loops that can simply go on), or
- the failure is kept (``vital=True``: the role cannot do its work without the task) and the
  role reports itself unhealthy, naming the task and the error, through ``health`` (the
  session's meta, so the coord's ``health`` and ``elanus status`` show it), until ``recover``.

One-shot tasks (neither) are only logged; whoever awaits them still gets the exception.

Once the role is stopping (``stop`` began), a task that fails is ended and noted at INFO: a
role stops its parts one after the other (the coord closes its catalog after its
supervisor), and a task started late (a session leaving meanwhile) meets a closed part.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from elanus.channels.runtime.loop import cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
OnFailure = Callable[[BaseException], Any]


@dataclass
class Failure:
    task: str
    error: str
    at: float
    restarts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "error": self.error, "at": self.at, "restarts": self.restarts}


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, as health reports and failure reasons show it."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Supervisor:
    def __init__(self, owner: str, on_change: Callable[[], None] | None = None) -> None:
        self.owner = owner
        """Who the tasks belong to, in log lines (``datanode 3f2a...``)."""
        self.failures: dict[str, Failure] = {}
        """Vital tasks that failed and were not recovered, by task name."""
        self.restarts: dict[str, Failure] = {}
        """The latest failure of each restarted task."""
        self._on_change = on_change
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopping = False
        """Set by ``stop``: a task whose cancellation a NATS request swallowed (Python
        3.11's ``asyncio.wait_for``) ends at its next check of it."""

    def spawn(
        self,
        name: str,
        make: Callable[[], Coroutine[Any, Any, T]],
        *,
        restart: bool = False,
        vital: bool = False,
        on_failure: OnFailure | None = None,
    ) -> asyncio.Task[T]:
        """Run ``make()`` as a task named ``name`` (see the module doc for what a failure
        does). ``on_failure`` is called with the exception after it is logged."""
        task = asyncio.get_running_loop().create_task(
            self._run(name, make, restart, vital, on_failure), name=name
        )
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # logged already; awaiters still get it

    async def _run(
        self,
        name: str,
        make: Callable[[], Coroutine[Any, Any, T]],
        restart: bool,
        vital: bool,
        on_failure: OnFailure | None,
    ) -> T:
        delay = BACKOFF_FIRST_S
        count = 0
        while True:
            try:
                return await make()
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - an engine's panic too (pyo3's
                # PanicException is no Exception): it failed the task, silently until now
                if self.stopping:  # what it needed is going away with its role: no alarm
                    log.info("%s: task %s ended while stopping: %s", self.owner, name, exc)
                    if on_failure is not None:
                        on_failure(exc)
                    raise
                log.exception("%s: task %s failed", self.owner, name)
                if on_failure is not None:
                    on_failure(exc)
                if not restart:
                    if vital:
                        self.failed(name, exc)
                    raise
                self.restarts[name] = Failure(name, describe(exc), time.time(), count)
                count += 1
                log.warning("%s: restarting task %s in %.1f s", self.owner, name, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def failed(self, name: str, exc: BaseException) -> None:
        """A vital task (or thread) ``name`` died: the role is unhealthy until ``recover``.
        Call on the loop (from a thread: through ``call_soon_threadsafe``)."""
        self.failures[name] = Failure(name, describe(exc), time.time())
        self._changed()

    def recover(self, name: str) -> None:
        """A failed vital task was started anew (or given up by its owner): the role is
        healthy again; the failure stays in ``restarts``."""
        failure = self.failures.pop(name, None)
        if failure is not None:
            failure.restarts += 1
            self.restarts[name] = failure
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    @property
    def healthy(self) -> bool:
        return not self.failures

    def health(self) -> dict[str, Any]:
        """``{"status": "ok" | "unhealthy", "failures": [...], "restarts": [...]}``."""
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "failures": [f.to_dict() for f in self.failures.values()],
            "restarts": [f.to_dict() for f in self.restarts.values()],
        }

    async def stop(self) -> None:
        """Cancel whatever still runs (a role's ``stop``, after its own orderly shutdown)."""
        self.stopping = True
        for task in list(self._tasks):
            await cancel_and_wait(task)
