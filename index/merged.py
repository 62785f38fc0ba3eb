"""Concurrent searches of one index with the same parameters, run as one FAISS call.

Milvus's query node merges search tasks that agree on collection, field, metric and
parameters into one batch before it calls the index. Here the merge happens where the
calls meet: a segment's built index. While fewer than ``parallel`` calls of one kind run
(one per core by default) a search goes at once, alone, so a lone client waits for
nothing and concurrent clients keep every core busy. Past that, searches queue; when a
call ends, the first queued caller runs every queued query, up to ``MAX_QUERIES``, in
one call and hands each caller its rows. FAISS's per-call costs (its Python wrapper,
the search parameters, a thread's cold caches) are then paid once per batch, and the
clients beyond the core count wait in one queue rather than crowd the cores.

Only unfiltered searches of every row merge (the index's answer then depends on nothing
but the queries, ``k`` and the parameters): a filter or a delete mask, a range search and
a read timestamp that hides rows give each request a selector of its own and run alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

MAX_QUERIES = 64
"""Queries in one merged call at most (a batch's first caller is never left out)."""

Answer = tuple[np.ndarray, np.ndarray]
Runner = Callable[[np.ndarray], Answer]


@dataclass(eq=False)
class _Waiting:
    queries: np.ndarray
    done: threading.Event = field(default_factory=threading.Event)
    answer: Answer | None = None
    error: BaseException | None = None
    lead: bool = False
    """Woken to run the next batch (a call of its kind ended) rather than with an answer."""


class MergedSearches:
    """The merge point of one index: ``search(key, queries, run)``, where ``key`` says which
    calls may share a batch and ``run`` answers a stack of queries."""

    def __init__(self, parallel: int | None = None) -> None:
        self.parallel = max(1, parallel or os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._queues: dict[Hashable, list[_Waiting]] = {}
        self._running: dict[Hashable, int] = {}
        self.calls = 0
        """Index calls made (a merged batch counts once)."""
        self.searches = 0
        """Searches answered."""

    def search(self, key: Hashable, queries: np.ndarray, run: Runner) -> Answer:
        me = _Waiting(queries)
        with self._lock:
            leads = self._running.get(key, 0) < self.parallel
            if leads:
                self._running[key] = self._running.get(key, 0) + 1
            else:
                self._queues.setdefault(key, []).append(me)
        if not leads:
            me.done.wait()
            if not me.lead:
                return self._outcome(me)
        self._run_batch(key, me, run)
        return self._outcome(me)

    def _run_batch(self, key: Hashable, first: _Waiting, run: Runner) -> None:
        """Run ``first``'s queries and those queued behind it, then hand the call on to the
        next caller queued meanwhile (taken off the queue here, so no other batch takes
        it), or give the slot back."""
        with self._lock:
            queue = self._queues.get(key, [])
            batch, rows = [first], len(first.queries)
            while queue and rows + len(queue[0].queries) <= MAX_QUERIES:
                waiting = queue.pop(0)
                batch.append(waiting)
                rows += len(waiting.queries)
        try:
            stacked = (
                first.queries if len(batch) == 1 else np.concatenate([w.queries for w in batch])
            )
            distances, ids = run(stacked)
        except BaseException as exc:  # noqa: BLE001 - every caller of the batch gets it
            for w in batch:
                w.error = exc
        else:
            start = 0
            for w in batch:
                n = len(w.queries)
                w.answer = (distances[start : start + n], ids[start : start + n])
                start += n
        following = None
        with self._lock:
            self.calls += 1
            self.searches += len(batch)
            queue = self._queues.get(key, [])
            if queue:
                following = queue.pop(0)
                following.lead = True
            else:
                self._queues.pop(key, None)
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
        if following is not None:
            following.done.set()
        for w in batch[1:]:
            w.done.set()

    @staticmethod
    def _outcome(me: _Waiting) -> Answer:
        if me.error is not None:
            raise me.error
        assert me.answer is not None
        return me.answer
