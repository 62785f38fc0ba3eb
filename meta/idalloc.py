"""One allocator for every global ID (collections, partitions, segments, builds, auto-ids).

IDs are handed out from a block reserved in advance; the block's end (the high-water
mark) is persisted before any ID in it is used, so a restart resumes above it and never
repeats an ID, at the cost of skipping the unused rest of the block.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

FIRST_ID = 1000


class IDAllocator:
    def __init__(
        self, saved_high_water: int | None, persist: Callable[[int], None], *, block: int = 100_000
    ) -> None:
        self._persist = persist
        self._block = block
        self._lock = threading.Lock()
        self._next = max(saved_high_water or 0, FIRST_ID)
        self._high_water = self._next

    def alloc(self, count: int = 1) -> int:
        """Reserve ``count`` consecutive IDs and return the first one."""
        if count < 1:
            raise ValueError(f"count must be positive, got {count}")
        with self._lock:
            if self._next + count > self._high_water:
                new_high = self._next + count + self._block
                self._persist(new_high)
                self._high_water = new_high
            start = self._next
            self._next += count
            return start
