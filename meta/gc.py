"""Garbage collection of segment files (DESIGN.md, write path step 6).

Files of dropped segments (compacted away, or of a dropped collection) and whole
directories of dropped collections go after ``gc_delay_s`` (a query may still read them).
Orphans go once untouched for ``orphan_grace_s``: segment directories no record points
to (a flush or compaction whose report never reached the coord, its writer killed), and
index files no task uses — a build id no task has, or a version of a task other than the
one being built or served (an attempt that failed, lapsed or was superseded; the index
coord's ``recycle`` removes those of dropped and finished tasks at once). Stale staged
writes and the scratch files of finished import jobs go too
(``ImportManager.collect_garbage``). Every file access goes through ``elanus/objstore.py``.
A backup holds collection (``hold``) while it copies files. The files of segments a
snapshot lists, and a dropped collection's directory while a snapshot of it lives, stay
(``meta/snapshots.held``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from elanus import layout, objstore, tsutil
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError
from elanus.meta import segmentmeta, snapshots
from elanus.states import IndexTaskState, SegmentState

if TYPE_CHECKING:
    from elanus.meta.context import CoordContext
    from elanus.meta.indexmeta import IndexTask
    from elanus.meta.interfaces import CompactionPlans, ImportGarbage, IndexTasks

log = logging.getLogger(__name__)

RECYCLING = -1
"""An index build whose files ``IndexCoord.recycle`` removes: not an orphan."""


class GarbageCollector:
    def __init__(
        self,
        ctx: CoordContext,
        plans: CompactionPlans,
        imports: ImportGarbage,
        index: IndexTasks,
    ) -> None:
        self.ctx, self.plans, self.imports, self.index = ctx, plans, imports, index
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
        # Before what owns files is read: anything written since is newer than the cutoff.
        orphan_cutoff = time.time() - self.ctx.settings.orphan_grace_s
        horizon = tsutil.compose(tsutil.now_ms() - int(delay * 1000))
        storage = self.ctx.settings.storage_uri

        def plan(con: Any) -> tuple[list[Any], list[int], set[int]]:
            kept, kept_collections = snapshots.held(con, time.time())
            where = "state = ? AND path IS NOT NULL AND dropped_ts <= ?"
            dropped = [
                s
                for s in segmentmeta.load(
                    con, storage, where, [SegmentState.DROPPED.value, horizon]
                )
                if s.segment_id not in kept
            ]
            collections = [
                r[0]
                for r in con.execute(
                    "SELECT collection_id FROM collections WHERE dropped_ts IS NOT NULL "
                    "AND dropped_ts <= ?",
                    [horizon],
                ).fetchall()
                if r[0] not in kept_collections
            ]
            known = {r[0] for r in con.execute("SELECT segment_id FROM segments").fetchall()}
            return dropped, collections, known | kept

        dropped, collections, known = await self.ctx.db.run(plan)
        known |= self.plans.open_targets()
        versions = index_versions_in_use(self.index.tasks)
        dirs = [layout.parent(s.path) for s in dropped if s.path]
        dirs += [layout.collection_dir(storage, c) for c in collections]

        def remove() -> list[str]:
            return [
                *_remove(dirs),
                *_orphan_segments(storage, known, orphan_cutoff),
                *_orphan_index_files(storage, versions, orphan_cutoff),
            ]

        removed = await asyncio.to_thread(remove)
        for s in dropped:
            s.path = None
        await self.ctx.db.run(segmentmeta.save, dropped)
        removed += await asyncio.to_thread(self.imports.collect_garbage, delay)
        self.removed.extend(removed)
        return removed


def index_versions_in_use(tasks: Mapping[int, IndexTask]) -> dict[int, int | None]:
    """Build id -> the version whose files are being built or served (None: neither)."""
    return {b: _version_in_use(t) for b, t in tasks.items()}


def _version_in_use(t: IndexTask) -> int | None:
    """``RECYCLING`` for a build the index coord's ``recycle`` is about to clear (marked
    deleted, or finished with older versions not yet removed): left to it."""
    finished = t.state is IndexTaskState.FINISHED
    if t.mark_deleted or (finished and not t.recycled):
        return RECYCLING
    return t.version if finished or t.state is IndexTaskState.IN_PROGRESS else None


def _remove(dirs: list[str]) -> list[str]:
    removed = []
    for d in dirs:
        if objstore.is_dir(d):
            objstore.remove_tree(d)
            removed.append(d)
    return removed


def _remove_old(dirs: list[str], cutoff: float) -> list[str]:
    """Those of ``dirs`` nothing under which changed after ``cutoff``."""
    removed = []
    for d in dirs:
        modified = objstore.modified(d)
        if modified is None or modified > cutoff:
            continue
        try:
            objstore.remove_tree(d)
        except ElanusError:
            if objstore.exists(d):
                raise
            continue  # removed meanwhile (the index coord's recycling)
        removed.append(d)
    return removed


def _orphan_segments(storage: str, known: set[int], cutoff: float) -> list[str]:
    root = layout.join(storage, "collections")
    orphans = [
        d
        for d in _segment_dirs(root)
        if (name := d.rpartition("/")[2]).isdigit() and int(name) not in known
    ]
    return _remove_old(orphans, cutoff)


def _orphan_index_files(storage: str, versions: dict[int, int | None], cutoff: float) -> list[str]:
    """``indexes/<build>`` of builds no task has; ``indexes/<build>/<version>`` of the
    versions a task does not use (``index_versions_in_use``)."""
    orphans = []
    for name in objstore.list_dir(layout.join(storage, "indexes")):
        if not name.isdigit():
            continue
        build, root = int(name), layout.index_root(storage, int(name))
        if build not in versions:
            orphans.append(root)
            continue
        if versions[build] == RECYCLING:
            continue
        orphans += [
            layout.join(root, v)
            for v in objstore.list_dir(root)
            if v.isdigit() and int(v) != versions[build]
        ]
    return _remove_old(orphans, cutoff)


def _segment_dirs(root: str) -> list[str]:
    """``<root>/<collection>/<partition>/<segment>`` directories."""
    found = [root]
    for _ in range(3):
        found = [layout.join(d, name) for d in found for name in objstore.list_dir(d)]
    return found
