"""Collection snapshots (Milvus 2.6's snapshot API): take, list, describe, drop, restore,
follow a restore, pin a snapshot's files. A snapshot is named as collections are."""

from __future__ import annotations

from typing import Annotated, Any

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation
from elanus.requests import Named, Range
from elanus.schema import check_name

SnapshotName = Annotated[str, Named("snapshot")]
MAX_DESCRIPTION = 1024
DEFAULT_PIN_TTL_S = 3600
"""A pin's life when the request gives none (Milvus: "0 uses the server default")."""
MAX_PIN_TTL_S = 7 * 24 * 3600


@operation("create_snapshot")
class CreateSnapshot:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    name: SnapshotName
    description: str | None = None
    """Absent: none (the SDK sends none for "")."""

    def check(self) -> None:
        if len(self.description or "") > MAX_DESCRIPTION:
            raise invalid(
                f"create_snapshot: 'description' is longer than {MAX_DESCRIPTION} characters"
            )


@operation("list_snapshots")
class ListSnapshots:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection whose snapshots to list; absent or empty: the database's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")


@operation("describe_snapshot")
class DescribeSnapshot:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    name: SnapshotName


@operation("drop_snapshot")
class DropSnapshot:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    name: SnapshotName


@operation("restore_snapshot")
class RestoreSnapshot:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    name: SnapshotName
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


@operation("get_restore_snapshot_state")
class GetRestoreSnapshotState:
    db: DbName = DEFAULT_DB
    job_id: Annotated[int, Range(1)]

    def privilege_scope(self) -> dict[str, Any]:
        return {}  # an id is the whole request: checked in the default database


@operation("list_restore_snapshot_jobs")
class ListRestoreSnapshotJobs:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection restored into; absent or empty: any of the database's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")


@operation("pin_snapshot_data")
class PinSnapshotData:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    name: SnapshotName
    ttl_seconds: Annotated[int, Range(0, MAX_PIN_TTL_S)] = 0
    """0: ``DEFAULT_PIN_TTL_S``."""


@operation("unpin_snapshot_data")
class UnpinSnapshotData:
    db: DbName = DEFAULT_DB
    pin_id: Annotated[int, Range(1)]

    def privilege_scope(self) -> dict[str, Any]:
        return {}  # an id is the whole request: checked in the default database
