"""The coord's backup API (``meta/backup.py``): write a consistent copy of the cluster's
data at one timestamp under a target (a local path on the coord's machine, or ``s3://``).

The reply's keys are the wire format: the ``backup_create`` action passes it on to Flight
clients as docs/protocol.md shows it.
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus.api.base import Stub, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import Range, request


@request("backup.create")
class CreateBackup:
    target: str
    """Where backups go: ``<target>/<name>/`` receives this one."""
    name: str | None = None
    """The backup's name (letters, digits, ``_``, ``-``); default ``backup-<UTC time>``."""
    timeout_s: Annotated[float, Range(lo=1)] = 3600.0
    """How long the flush and the copy may take."""


@reply
class BackupCreated:
    name: str
    location: str
    """``<target>/<name>``: what ``elanus backup restore`` takes."""
    ts: int
    """The backup's timestamp: it holds exactly what a read at ``ts`` saw."""
    collections: list[dict[str, Any]]
    """Each collection backed up: ``db``, ``name``, ``collection_id``, ``segments``, ``rows``
    (rows written, before deletes)."""
    segments: int
    rows: int
    files: int
    bytes: int
    seconds: float


@request("backup.list")
class ListBackupTasks:
    """The backups this coord ran or runs since it started (``backup list`` reads a
    target's stored backups instead)."""


@reply
class BackupTask:
    name: str
    location: str
    state: str
    """Running, Completed or Failed."""
    phase: str
    """What a running backup does or waits for now; the last phase of one that ended."""
    started_at: float
    """Unix seconds."""
    seconds: float
    """How long it ran (so far)."""
    ts: int | None = None
    """Its timestamp, once taken."""
    rows: int | None = None
    files: int | None = None
    bytes: int | None = None
    reason: str | None = None
    """Why it failed."""


@reply
class BackupTasks:
    tasks: list[BackupTask]
    """Newest first."""


class BackupAPI(Stub):
    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def create(self, req: CreateBackup, timeout: float | None = None) -> BackupCreated:
        """``timeout``: the request's own ``timeout_s`` and a margin, as callers pass it."""
        return await self._ask("backup.create", req, BackupCreated, timeout)

    async def tasks(self, req: ListBackupTasks) -> BackupTasks:
        return await self._ask("backup.list", req, BackupTasks)
