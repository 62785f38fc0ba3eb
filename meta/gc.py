"""Garbage collection of segment files (DESIGN.md, write path step 6).

Three kinds of files go, each only after ``gc_delay_s`` (a query may still read them):
those of dropped segments (compacted away, or of a dropped collection), whole directories
of dropped collections, and orphans — segment directories no record points to, left by a
flush or compaction whose report never reached the coord. Stale staged writes and the
scratch files of finished import jobs go too (``ImportManager.collect_garbage``). A backup
holds collection (``hold``) while it copies files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from elanus import layout, objstore, tsutil
from elanus.channels.loop import Periodic
from elanus.meta import segmentmeta
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import CompactionPlans, ImportGarbage

log = logging.getLogger(__name__)


class GarbageCollector:
    def __init__(self, ctx: CoordContext, plans: CompactionPlans, imports: ImportGarbage) -> None:
        self.ctx, self.plans, self.imports = ctx, plans, imports
        self.removed: list[str] = []
        self._holds = 0
        self._round = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """No file is removed while held (a backup is reading them); a round under way
        finishes first."""
        async with self._round:
            self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1

    def background(self) -> list[Periodic]:
        interval = max(1.0, min(30.0, self.ctx.settings.gc_delay_s / 4))
        return [Periodic(self.collect, interval, "garbage collection")]

    async def collect(self) -> list[str]:
        """One round; returns the directories removed (none while held)."""
        async with self._round:
            return [] if self._holds else await self._collect()

    async def _collect(self) -> list[str]:
        delay = self.ctx.settings.gc_delay_s
        horizon = tsutil.compose(tsutil.now_ms() - int(delay * 1000))
        storage = self.ctx.settings.storage_uri

        def plan(con: Any) -> tuple[list[Any], list[int], set[int]]:
            where = "state = ? AND path IS NOT NULL AND dropped_ts <= ?"
            dropped = segmentmeta.load(con, storage, where, [SegmentState.DROPPED.value, horizon])
            collections = [
                r[0]
                for r in con.execute(
                    "SELECT collection_id FROM collections WHERE dropped_ts IS NOT NULL "
                    "AND dropped_ts <= ?",
                    [horizon],
                ).fetchall()
            ]
            known = {r[0] for r in con.execute("SELECT segment_id FROM segments").fetchall()}
            return dropped, collections, known

        dropped, collections, known = await self.ctx.db.run(plan)
        known |= self.plans.open_targets()
        dirs = [layout.parent(s.path) for s in dropped if s.path]
        dirs += [layout.collection_dir(storage, c) for c in collections]
        removed = await asyncio.to_thread(_remove, dirs, storage, known, delay)
        for s in dropped:
            s.path = None
        await self.ctx.db.run(segmentmeta.save, dropped)
        removed += await asyncio.to_thread(self.imports.collect_garbage, delay)
        self.removed.extend(removed)
        return removed


def _remove(dirs: list[str], storage: str, known: set[int], delay: float) -> list[str]:
    removed = []
    for d in dirs:
        if objstore.is_dir(d):
            objstore.remove_tree(d)
            removed.append(d)
    cutoff = time.time() - delay
    root = layout.join(storage, "collections")
    for seg_dir in _segment_dirs(root):
        if not seg_dir.rpartition("/")[2].isdigit() or int(seg_dir.rpartition("/")[2]) in known:
            continue
        modified = objstore.modified(seg_dir)
        if modified is not None and modified <= cutoff:
            objstore.remove_tree(seg_dir)
            removed.append(seg_dir)
    return removed


def _segment_dirs(root: str) -> list[str]:
    """``<root>/<collection>/<partition>/<segment>`` directories."""
    found = [root]
    for _ in range(3):
        found = [layout.join(d, name) for d in found for name in objstore.list_dir(d)]
    return found
