"""The timestamp oracle (seed 003): strictly increasing hybrid timestamps for the cluster.

Before handing out a timestamp whose physical part is ``p``, the oracle has persisted an
upper bound ``>= p``; after a restart (even kill -9) it starts above that bound, so no
timestamp is ever issued twice or goes backwards. The bound is written ``window_ms`` ahead,
so persistence costs one small write every few seconds, not one per allocation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from elanus import tsutil

Persist = Callable[[int], None]


class TimestampOracle:
    def __init__(
        self,
        saved_bound_ms: int | None,
        persist: Persist,
        *,
        window_ms: int = 3000,
        clock: Callable[[], int] = tsutil.now_ms,
        guard: Callable[[], None] | None = None,
    ) -> None:
        self._persist = persist
        self.guard = guard
        """Raises while this oracle may not hand out timestamps (the coord's lease lapsed:
        ``CoordLease.check``)."""
        self._window_ms = window_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._physical = max(clock(), (saved_bound_ms or 0) + 1)
        self._logical = 0
        self._bound = saved_bound_ms or 0
        self._extend(self._physical)

    def _extend(self, physical: int) -> None:
        bound = physical + self._window_ms
        self._persist(bound)
        self._bound = bound

    def alloc(self, count: int = 1) -> int:
        """Reserve ``count`` consecutive timestamps and return the first one."""
        if not 1 <= count <= tsutil.LOGICAL_MASK + 1:
            raise ValueError(f"count must be in [1, {tsutil.LOGICAL_MASK + 1}], got {count}")
        if self.guard is not None:
            self.guard()
        with self._lock:
            now = self._clock()
            if now > self._physical:
                self._physical, self._logical = now, 0
            if self._logical + count > tsutil.LOGICAL_MASK + 1:
                # The logical space of this millisecond is used up: borrow the next one.
                self._physical, self._logical = self._physical + 1, 0
            if self._physical + self._window_ms // 3 >= self._bound:
                self._extend(max(self._physical, now))
            ts = tsutil.compose(self._physical, self._logical)
            self._logical += count
            return ts

    @property
    def last(self) -> int:
        with self._lock:
            return tsutil.compose(self._physical, max(self._logical - 1, 0))
