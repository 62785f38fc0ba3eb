"""Backups (``backup.create``): a consistent copy of the cluster's data at one timestamp.

1. Garbage collection is held, so no file a backup reads goes while it runs.
2. Every growing segment of every collection is sealed at one timestamp ``T``
   (``DataCoord.seal_all``): every write acknowledged before the backup began carries a
   timestamp below ``T``. Once every channel has passed ``T``, every write stamped below it
   is in the streams: their last positions are noted, and the segments grown meanwhile
   are sealed too (a write is stamped before it is placed in a segment, so some rows
   stamped below ``T`` may be in those).
3. The backup waits until the sealed segments are flushed and every live vchannel's
   checkpoint is past its stream's noted position: then every row and delete up to ``T``
   is in segment files or delta logs, nothing of it only in a stream.
4. The catalog is copied (one consistent state) and turned into the catalog at ``T``
   (``backupfiles.as_of``); the files it references are copied, delta logs keeping only
   deletes up to ``T`` and the segments of the second seal only their rows up to ``T``;
   the manifest is written last.

So the copy holds exactly what a read at ``T`` saw, whatever was written meanwhile.
Restoring it (``backupfiles.restore``) is offline, into an empty data dir.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elanus import layout, objstore
from elanus.api.backup import BackupCreated, BackupTask, BackupTasks, CreateBackup, ListBackupTasks
from elanus.api.datacoord import FlushState
from elanus.channels.dml import pchannel_of, stream_name
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta import backupfiles

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import BackupFlush, CollectionLookup, GcHold

log = logging.getLogger(__name__)

POLL_S = 0.1
KEPT = 50
"""Backups ``backup.list`` remembers (since the coord started)."""


@dataclass
class _Run:
    """A backup as ``backup.list`` shows it, updated as it goes."""

    name: str
    location: str
    started_at: float
    started: float
    """``time.monotonic()`` at its start."""
    state: str = "Running"
    phase: str = "waiting for the backup before it"
    ended: float | None = None
    ts: int | None = None
    done: BackupCreated | None = None
    reason: str | None = None

    def end(self, state: str, reason: str | None = None) -> None:
        self.state, self.reason, self.ended = state, reason, time.monotonic()

    def task(self) -> BackupTask:
        done = self.done
        return BackupTask(
            name=self.name,
            location=self.location,
            state=self.state,
            phase=self.phase,
            started_at=self.started_at,
            seconds=round((self.ended or time.monotonic()) - self.started, 3),
            ts=self.ts,
            rows=done.rows if done else None,
            files=done.files if done else None,
            bytes=done.bytes if done else None,
            reason=self.reason,
        )


class BackupService:
    def __init__(
        self, ctx: CoordContext, lookup: CollectionLookup, data: BackupFlush, gc: GcHold
    ) -> None:
        self.ctx, self.lookup, self.data, self.gc = ctx, lookup, data, gc
        self._one_at_a_time = asyncio.Lock()
        self._runs: collections.deque[_Run] = collections.deque(maxlen=KEPT)

    def handlers(self) -> dict[str, RoleHandler]:
        return {"backup.create": self.create, "backup.list": self.tasks}

    async def tasks(self, req: ListBackupTasks) -> BackupTasks:
        """The backups since the coord started, newest first, with the phase of each."""
        return BackupTasks(tasks=[run.task() for run in reversed(self._runs)])

    async def create(self, req: CreateBackup) -> BackupCreated:
        started = time.monotonic()
        settings = self.ctx.settings
        name = layout.check_write_id(
            req.name or time.strftime("backup-%Y%m%d-%H%M%S", time.gmtime()), "backup name"
        )
        target = backupfiles.check_target(req.target, settings)
        if objstore.is_remote(target):
            objstore.configure(settings.replace(storage=target))  # the coord's S3 settings
        location = layout.join(target, name)
        run = _Run(name, location, time.time(), started)
        self._runs.append(run)
        try:
            done = await self._create(run, req, target, started)
        except BaseException as exc:
            reason = exc.message if isinstance(exc, ElanusError) else type(exc).__name__
            run.end("Failed", reason)
            raise
        run.done = done
        run.phase = "done"
        run.end("Completed")
        return done

    async def _create(
        self, run: _Run, req: CreateBackup, target: str, started: float
    ) -> BackupCreated:
        name, location, settings = run.name, run.location, self.ctx.settings
        deadline = time.monotonic() + req.timeout_s
        async with self._one_at_a_time, self.gc.hold():
            run.phase = "checking the target"
            if await asyncio.to_thread(objstore.is_dir, location):
                raise invalid(f"backup {name!r} already exists at {target}; choose another name")
            run.phase = "sealing every growing segment"
            ts, upper = await self._flush(deadline, run)
            run.ts, run.phase = ts, "copying the catalog and the files"
            with tempfile.TemporaryDirectory(prefix="elanus-backup-") as tmp:
                catalog = os.path.join(tmp, backupfiles.CATALOG)
                await self.ctx.db.run(backupfiles.snapshot, catalog)
                try:
                    done = await asyncio.to_thread(
                        backupfiles.write, catalog, ts, upper, name, settings.storage_uri, location
                    )
                except BaseException:
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(objstore.remove_tree, location)
                    raise
        log.info("backup %s at ts %s: %s files to %s", name, ts, done["files"], location)
        return BackupCreated(
            name=name,
            location=location,
            ts=ts,
            collections=done["collections"],
            segments=done["segments"],
            rows=done["rows"],
            files=done["files"],
            bytes=done["bytes"],
            seconds=round(time.monotonic() - started, 3),
        )

    async def _flush(self, deadline: float, run: _Run) -> tuple[int, int]:
        """Seal everything at the backup's timestamp ``T``, and wait until every row and
        delete up to it is on disk. Returns ``T`` and the second seal's timestamp.

        A write stamped before ``T`` may be placed in a segment only after the seal (its
        stamp is taken first): once every channel has passed ``T`` such writes are in the
        streams, below the positions noted then; a second seal takes the segments they went
        to, whose copies keep only the rows up to ``T`` (``backupfiles.as_of``)."""
        ts, pending = await self.data.seal_all()
        await self._until(deadline, lambda: self._channels_behind(ts), run)
        js = self.ctx.bus.js
        last = {
            p: (await js.stream_info(stream_name(p))).state.last_seq for p in self.ctx.pchannels
        }
        upper, more = await self.data.seal_all()
        pending += more

        async def waiting() -> str | None:
            progress = await self.data.flush_state(FlushState(segment_ids=pending))
            if not progress.flushed:
                return f"{progress.total - progress.done} segment(s) to flush"
            for v in await self.lookup.live_vchannels():
                if self.data.checkpoints.get(v, (0, 0))[0] <= last[pchannel_of(v)]:
                    return f"the checkpoint of {v}"
            return None

        await self._until(deadline, waiting, run)
        return ts, upper

    async def _channels_behind(self, ts: int) -> str | None:
        for v in await self.lookup.live_vchannels():
            if self.data.channel_ticks.get(v, 0) < ts:
                return f"channel {v} to pass the backup's timestamp"
        return None

    @staticmethod
    async def _until(
        deadline: float, waiting: Callable[[], Awaitable[str | None]], run: _Run
    ) -> None:
        """Poll ``waiting`` (what is still awaited, or ``None``) until done or past ``deadline``;
        what it waits for is the run's phase meanwhile."""
        while (still := await waiting()) is not None:
            run.phase = f"waiting for {still}"
            if time.monotonic() > deadline:
                raise ElanusError(
                    ErrorCode.TIMEOUT, f"backup: still waiting for {still} (is a datanode up?)"
                )
            await asyncio.sleep(POLL_S)
