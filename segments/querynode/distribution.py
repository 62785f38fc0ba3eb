"""A delegator's distribution (seed 001): which worker serves which sealed segment.

Besides the sealed segments (worker, partition, files; their key statistics go to the
PK oracle), it keeps the segments that left (compacted away) for snapshot reads planned
before they left, and the version every read pins: a ``sync`` that removes segments
answers only once the reads that began on the old distribution are done, so the coord
releases those segments after them (Milvus's "pin readable segments"). Reads come from
the event loop and from Flight threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from elanus import layout
from elanus.api.querynode import SealedSegment
from elanus.channels.runtime.metrics import NO_LABELS, SEGMENTS_PRUNED
from elanus.expr.keyranges import Intervals, may_match
from elanus.segments import storage
from elanus.segments.storage.pkoracle import PkOracle

RETIRED_KEPT = 4096


class Distribution:
    def __init__(self, pk_oracle: PkOracle) -> None:
        self.pk_oracle = pk_oracle
        self.sealed: dict[int, SealedSegment] = {}
        self.retired: dict[int, dict[str, Any]] = {}
        """Sealed segments that left (compacted away): where their files are, and the
        delete-buffer floor they hold (``hold_ts``), for snapshot reads planned before."""
        self._holds: dict[int, tuple[float, int]] = {}  # retired -> (until, hold_ts)
        self.version = 0
        """Bumped by every ``advance``; reads count themselves per version."""
        self._readers: dict[int, int] = {}
        self._readers_lock = threading.Lock()  # readers also come from Flight threads
        self._syncs_waiting = 0
        self._readers_done = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    # -- membership -------------------------------------------------------------------------
    def add(self, segments: list[SealedSegment]) -> None:
        """Sealed segments join (their key statistics go to the PK oracle)."""
        for s in segments:
            stats = storage.load_pk_stats(layout.parent(s.path)) if s.path else None
            self.pk_oracle.add(s.segment_id, stats)
            self.sealed[s.segment_id] = s

    def remove(self, segment_ids: list[int], hold_ts: int, hold_s: float) -> None:
        """Sealed segments leave; they stay readable from their files, holding the delete
        buffer at ``hold_ts`` for ``hold_s`` seconds (see ``deletebuffer``)."""
        until = time.monotonic() + hold_s
        for sid in segment_ids:
            seg = self.sealed.pop(sid, None)
            self.pk_oracle.remove(sid)
            if seg is None or not seg.path:
                continue
            self.retired[sid] = {
                "segment_id": sid,
                "partition_id": seg.partition_id,
                "path": seg.path,
                "hold_ts": hold_ts,
            }
            self._holds[sid] = (until, hold_ts)
            while len(self.retired) > RETIRED_KEPT:
                gone = next(iter(self.retired))
                del self.retired[gone]
                self._holds.pop(gone, None)

    def retired_hold(self) -> int | None:
        """The lowest delete-buffer floor a retired segment still holds (expired holds go)."""
        now = time.monotonic()
        for sid, (until, _) in list(self._holds.items()):
            if until <= now:
                del self._holds[sid]
        return min((h for _, h in self._holds.values()), default=None)

    def workers(
        self, partition_ids: list[int] | None, keys: Intervals = None
    ) -> dict[str, list[int]]:
        """Each worker's sealed segments (of ``partition_ids``, default all), less those
        whose clustering key range the filter's ``keys`` rule out (counted as pruned)."""
        by_node: dict[str, list[int]] = {}
        wanted = set(partition_ids) if partition_ids else None
        pruned = 0
        for sid, seg in list(self.sealed.items()):
            if wanted is None or seg.partition_id in wanted:
                if keys is not None and not may_match(keys, seg.key_range):
                    pruned += 1
                    continue
                by_node.setdefault(seg.node_id, []).append(sid)
        if pruned:
            SEGMENTS_PRUNED.inc(NO_LABELS, pruned)
        return by_node

    # -- pinning ----------------------------------------------------------------------------
    def enter_read(self) -> int:
        with self._readers_lock:
            version = self.version
            self._readers[version] = self._readers.get(version, 0) + 1
            return version

    def exit_read(self, version: int) -> None:
        with self._readers_lock:
            self._readers[version] -= 1
            if not self._readers[version]:
                del self._readers[version]
            if not self._syncs_waiting:
                return  # nobody to wake (waking the loop on every read costs GIL time)
        if threading.get_ident() == self._loop_thread:
            self._readers_done.set()
        else:
            self._loop.call_soon_threadsafe(self._readers_done.set)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        version = self.enter_read()
        try:
            yield
        finally:
            self.exit_read(version)

    async def advance(self) -> None:
        """A new version; returns once no read of an older one is running."""
        with self._readers_lock:
            old, self.version = self.version, self.version + 1
            self._syncs_waiting += 1
        try:
            while True:
                with self._readers_lock:
                    if not any(n for v, n in self._readers.items() if v <= old):
                        return
                    self._readers_done.clear()
                await self._readers_done.wait()
        finally:
            with self._readers_lock:
                self._syncs_waiting -= 1
