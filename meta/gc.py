"""Garbage collection of segment files (DESIGN.md, write path step 6).

Three kinds of files go, each only after ``gc_delay_s`` (a query may still read them):
those of dropped segments (compacted away, or of a dropped collection), whole directories
of dropped collections, and orphans — segment directories no record points to, left by a
flush or compaction whose report never reached the coord. Stale staged writes and the
scratch files of finished import jobs go too (``ImportManager.collect_garbage``).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elanus import layout, tsutil
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

    def background(self) -> list[Periodic]:
        interval = max(1.0, min(30.0, self.ctx.settings.gc_delay_s / 4))
        return [Periodic(self.collect, interval, "garbage collection")]

    async def collect(self) -> list[str]:
        """One round; returns the directories removed."""
        delay = self.ctx.settings.gc_delay_s
        horizon = tsutil.compose(tsutil.now_ms() - int(delay * 1000))
        storage = self.ctx.settings.storage_path

        def plan(con: Any) -> tuple[list[Any], list[int], set[int]]:
            where = "state = ? AND path IS NOT NULL AND dropped_ts <= ?"
            dropped = segmentmeta.load(con, where, [SegmentState.DROPPED.value, horizon])
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
        dirs = [Path(s.path).parent for s in dropped if s.path]
        dirs += [layout.collection_dir(storage, c) for c in collections]
        removed = await asyncio.to_thread(_remove, dirs, storage, known, delay)
        for s in dropped:
            s.path = None
        await self.ctx.db.run(segmentmeta.save, dropped)
        removed += await asyncio.to_thread(self.imports.collect_garbage, delay)
        self.removed.extend(removed)
        return removed


def _remove(dirs: list[Path], storage: Path, known: set[int], delay: float) -> list[str]:
    removed = []
    for d in dirs:
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    cutoff = time.time() - delay
    root = storage / "collections"
    for seg_dir in root.glob("*/*/*") if root.is_dir() else []:
        if not seg_dir.name.isdigit() or int(seg_dir.name) in known:
            continue
        if seg_dir.stat().st_mtime <= cutoff:
            shutil.rmtree(seg_dir, ignore_errors=True)
            removed.append(str(seg_dir))
    return removed
