"""The coord's snapshot API (``meta/snapshots.py``): a collection's shape and the segments
holding its rows at one timestamp, kept in the catalog, their files kept from garbage
collection while the snapshot (or a pin on it) lives; and the restore jobs made from them.

The replies' keys are the wire format of the snapshot actions (docs/protocol.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus.api.base import Ack, Stub, record, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import Range, request


@request("snapshot.create")
class CreateSnapshot:
    """Record a snapshot of a collection whose files are complete up to ``ts`` (the proxy
    flushed it and had every delete up to ``ts`` written first)."""

    name: str
    db: str
    collection: str
    collection_id: int
    ts: int
    description: str = ""
    shape: dict[str, Any]
    """What a restore recreates: ``collection`` (``describe_collection``'s answer) and
    ``indexes`` (``describe_index``'s)."""


@reply
class SnapshotSegment:
    segment_id: int
    partition_id: int
    path: str
    """The segment's data (absolute, under the storage root)."""
    num_rows: int
    """Rows written, before any delete; a restore keeps those visible at the snapshot's ts."""


@reply
class SnapshotView:
    snapshot_id: int
    name: str
    db: str
    collection: str
    collection_id: int
    description: str
    ts: int
    """The snapshot holds exactly what a read at ``ts`` saw."""
    created_at: float
    """Unix seconds."""
    partitions: list[str]
    segments: int
    rows: int
    """Rows in its segments, before deletes."""


@reply
class SnapshotDetail:
    snapshot: SnapshotView
    shape: dict[str, Any]
    files: list[SnapshotSegment]


@request("snapshot.list")
class ListSnapshots:
    db: str | None = None
    collection_id: int | None = None


@reply
class Snapshots:
    snapshots: list[SnapshotView]
    """Oldest first."""


@request("snapshot.get")
class GetSnapshot:
    """One live snapshot, named within its collection; SNAPSHOT_NOT_FOUND otherwise."""

    collection_id: int
    name: str


@request("snapshot.drop")
class DropSnapshot:
    collection_id: int
    name: str


@request("snapshot.pin")
class PinSnapshot:
    collection_id: int
    name: str
    ttl_s: Annotated[float, Range(lo=1)]


@reply
class Pinned:
    pin_id: int
    expires_at: float


@request("snapshot.unpin")
class UnpinSnapshot:
    pin_id: int


@record
class Restore:
    """A restore as the coord records it: the import job ``job_id`` that restores snapshot
    ``snapshot`` of ``source_db.source_collection`` as ``db.collection``."""

    job_id: int
    snapshot: str
    source_db: str
    source_collection: str
    db: str
    collection: str


@request("snapshot.restore_record")
class RecordRestore(Restore):
    """A restore whose rows were staged, now the import job ``job_id``."""


@reply
class RestoreJob(Restore):
    started_at: float


@request("snapshot.restores")
class ListRestores:
    job_id: int | None = None
    db: str | None = None
    collection: str | None = None


@reply
class RestoreJobs:
    jobs: list[RestoreJob]
    """Oldest first."""


class SnapshotAPI(Stub):
    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def create(self, req: CreateSnapshot) -> SnapshotView:
        return await self._ask("snapshot.create", req, SnapshotView)

    async def list(self, req: ListSnapshots) -> Snapshots:
        return await self._ask("snapshot.list", req, Snapshots)

    async def get(self, req: GetSnapshot) -> SnapshotDetail:
        return await self._ask("snapshot.get", req, SnapshotDetail)

    async def drop(self, req: DropSnapshot) -> Ack:
        return await self._ask("snapshot.drop", req, Ack)

    async def pin(self, req: PinSnapshot) -> Pinned:
        return await self._ask("snapshot.pin", req, Pinned)

    async def unpin(self, req: UnpinSnapshot) -> Ack:
        return await self._ask("snapshot.unpin", req, Ack)

    async def record_restore(self, req: RecordRestore) -> Ack:
        return await self._ask("snapshot.restore_record", req, Ack)

    async def restores(self, req: ListRestores) -> RestoreJobs:
        return await self._ask("snapshot.restores", req, RestoreJobs)
