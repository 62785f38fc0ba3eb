"""The coord's one task scheduler: index builds, import jobs and compaction plans.

Modelled on Milvus's ``internal/datacoord/task``: every kind of work the coord hands to a
node is a task with a state, a lease (who runs it, until when), a count of attempts and
the reason it failed. One loop (``TaskScheduler.round``) does for every kind what each
used to do in a loop of its own:

1. find running tasks whose lease lapsed (the holder's session went, or its time ran out);
2. issue them again where the kind's policy allows (``may_retry``), else fail them with a
   reason;
3. hand out pending tasks (``dispatch``).

What differs between kinds (how a task is sent, what a failure undoes) stays with the
kind, behind ``TaskQueue``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError

log = logging.getLogger(__name__)

SCHEDULE_INTERVAL_S = 0.5
NO_EXPIRY = math.inf


class Task(Protocol):
    """What the scheduler reads of a task. ``holder`` runs it now; ``lease_expires`` is
    a monotonic time (``NO_EXPIRY``: held while the holder lives); ``attempts`` counts the
    times it was issued; ``reason`` says why it last failed."""

    @property
    def label(self) -> str: ...

    @property
    def holder(self) -> str | None: ...

    @property
    def lease_expires(self) -> float: ...

    @property
    def attempts(self) -> int: ...

    @property
    def reason(self) -> str | None: ...


T = TypeVar("T", bound=Task)


@dataclass(frozen=True)
class Lapsed(Generic[T]):
    """A running task whose lease lapsed, as the scheduler saw it: a queue acts on it only
    while the task is still that attempt under that holder (a report may have come)."""

    task: T
    holder: str | None
    attempts: int
    expired: bool
    """The lease ran out (rather than its holder going away)."""

    def current(self) -> bool:
        return self.task.holder == self.holder and self.task.attempts == self.attempts


class TaskQueue(Protocol[T]):
    """One kind of task, as the scheduler drives it."""

    name: str

    def running(self) -> Iterable[T]:
        """Tasks issued to a holder and not finished."""
        ...

    def live_holders(self) -> Container[str] | None:
        """Who may hold tasks now (``None``: only lease expiry ends a lease)."""
        ...

    def may_retry(self, task: T) -> bool:
        """Whether a task whose lease lapsed is issued again (else it fails)."""
        ...

    async def retry(self, lapsed: Sequence[Lapsed[T]]) -> None: ...

    async def give_up(self, lapsed: Sequence[Lapsed[T]]) -> None:
        """Fail each task with a reason saying whose lease lapsed, and how."""
        ...

    async def dispatch(self) -> None:
        """Hand pending tasks to holders (a kind whose holders pull does nothing)."""
        ...


def lapsed(task: Task, live: Container[str] | None, now: float) -> bool:
    """A running task's lease is over: nobody holds it, its holder left, or time ran out."""
    holder = task.holder
    if holder is None or now >= task.lease_expires:
        return True
    return live is not None and holder not in live


class TaskScheduler:
    """The one scheduling loop of the coord over its task queues."""

    def __init__(self, queues: Sequence[TaskQueue[Any]], interval_s: float = SCHEDULE_INTERVAL_S):
        self.queues = list(queues)
        self.interval_s = interval_s

    def background(self) -> list[Periodic]:
        return [Periodic(self.round, self.interval_s, "task scheduling")]

    async def round(self) -> None:
        """One pass over every queue, side by side: a node slow to take one kind's task
        (a dispatch may wait seconds for its answer) does not hold the others back."""
        await asyncio.gather(*(self._guarded(q) for q in self.queues))

    async def _guarded(self, queue: TaskQueue[Any]) -> None:
        try:
            await self.schedule(queue)
        except ElanusError as exc:  # a node gone, the catalog busy: the next round may work
            log.warning("scheduling %s failed: %s", queue.name, exc)
        except Exception:  # noqa: BLE001 - a bug: its traceback now, then keep going
            log.exception("scheduling %s failed", queue.name)

    async def schedule(self, queue: TaskQueue[Any]) -> None:
        live = queue.live_holders()
        now = time.monotonic()
        over = [
            Lapsed(t, t.holder, t.attempts, now >= t.lease_expires)
            for t in queue.running()
            if lapsed(t, live, now)
        ]
        verdicts = [(x, queue.may_retry(x.task)) for x in over]
        again = [x for x, retry in verdicts if retry]
        failed = [x for x, retry in verdicts if not retry]
        if again:
            await queue.retry(again)
        if failed:
            await queue.give_up(failed)
        await queue.dispatch()
