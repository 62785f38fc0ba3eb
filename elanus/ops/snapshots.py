"""Collection snapshots (Milvus 2.6's snapshot API): take, list, describe, drop, restore,
follow a restore, pin a snapshot's files. A snapshot is named as collections are."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, InCollection, operation, shape
from elanus.requests import Named, Range
from elanus.schema import check_name

SnapshotName = Annotated[str, Named("snapshot")]
MAX_DESCRIPTION = 1024
DEFAULT_PIN_TTL_S = 3600
"""A pin's life when the request gives none (Milvus: "0 uses the server default")."""
MAX_PIN_TTL_S = 7 * 24 * 3600


@shape
class OnSnapshot(InCollection):
    """The body of an operation on one snapshot, by its name and its collection's."""

    name: SnapshotName


@operation("create_snapshot")
class CreateSnapshot(OnSnapshot):
    description: str | None = None
    """Absent: none (the SDK sends none for "")."""

    def check(self) -> None:
        if len(self.description or "") > MAX_DESCRIPTION:
            raise invalid(
                f"create_snapshot: 'description' is longer than {MAX_DESCRIPTION} characters"
            )


class SnapshotListing(TypedDict):
    """A snapshot as ``list_snapshots`` shows it: the body of the coord's ``SnapshotView``
    (``elanus/api/snapshot.py``), as the SDK returns it."""

    snapshot_id: int
    name: str
    db: str
    collection: str
    collection_id: int
    description: str
    ts: int
    created_at: float
    partitions: list[str]
    segments: int
    rows: int


class SnapshotIndex(TypedDict):
    """An index a snapshot records, as ``create_index`` takes it back on a restore."""

    field_name: str
    index_name: str
    index_type: str
    metric_type: str
    params: dict[str, Any]


class SnapshotList(TypedDict):
    snapshots: list[SnapshotListing]


class SnapshotDescription(SnapshotListing):
    """``describe_snapshot``'s reply: the listing and what a restore recreates (``shape``:
    ``collection``, describe_collection's answer, and ``indexes``)."""

    shape: dict[str, Any]


@operation("list_snapshots")
class ListSnapshots:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection whose snapshots to list; absent or empty: the database's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")


@operation("describe_snapshot")
class DescribeSnapshot(OnSnapshot):
    pass


@operation("drop_snapshot")
class DropSnapshot(OnSnapshot):
    pass


@operation("restore_snapshot")
class RestoreSnapshot(OnSnapshot):
    target_collection: CollectionName
    """The new collection the snapshot is restored into."""
    target_db: str | None = None
    """Its database; absent or empty: ``db``."""

    def check(self) -> None:
        check_name(self.into_db, "database")

    @property
    def into_db(self) -> str:
        """The database restored into."""
        return self.target_db or self.db


class RestoreStarted(TypedDict):
    """The reply of ``restore_snapshot``: the job to poll."""

    job_id: int


class RestoreJobState(TypedDict):
    """A restore job as ``get_restore_snapshot_state`` answers: the coord's ``RestoreJob``
    and its import job's progress, in Milvus's words."""

    job_id: int
    snapshot: str
    source_db: str
    source_collection: str
    db: str
    collection: str
    started_at: float
    state: str
    """A ``RestoreSnapshotState`` name."""
    progress: int
    """0-100."""
    rows: int
    reason: str
    start_time_ms: int
    time_cost_ms: int


@operation("get_restore_snapshot_state")
class GetRestoreSnapshotState:
    db: DbName = DEFAULT_DB
    job_id: Annotated[int, Range(1)]

    def privilege_scope(self) -> dict[str, str]:
        return {}  # an id is the whole request: checked in the default database


@operation("list_restore_snapshot_jobs")
class ListRestoreSnapshotJobs:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection restored into; absent or empty: any of the database's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")


class RestoreJobList(TypedDict):
    jobs: list[RestoreJobState]


@operation("pin_snapshot_data")
class PinSnapshotData(OnSnapshot):
    ttl_seconds: Annotated[int, Range(0, MAX_PIN_TTL_S)] = 0
    """0: ``DEFAULT_PIN_TTL_S``."""


class SnapshotPin(TypedDict):
    """The reply of ``pin_snapshot_data`` (the coord's ``Pinned``)."""

    pin_id: int
    expires_at: float


@operation("unpin_snapshot_data")
class UnpinSnapshotData:
    db: DbName = DEFAULT_DB
    pin_id: Annotated[int, Range(1)]

    def privilege_scope(self) -> dict[str, str]:
        return {}  # an id is the whole request: checked in the default database
