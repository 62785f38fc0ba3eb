"""The SDK's collection snapshots (mixed into ``Client``), with pymilvus's
``MilvusClient`` signatures (``db_name`` "" is the client's database); results are the
snapshot actions' documents (docs/protocol.md), not pymilvus's dataclasses."""

from __future__ import annotations

from typing import Any

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.ops import snapshots as ops


class SnapshotAPI(ClientBase):
    def create_snapshot(
        self,
        snapshot_name: str,
        collection_name: str,
        db_name: str = "",
        description: str = "",
        compaction_protection_seconds: int = 0,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> ops.SnapshotListing:
        """Flush the collection and record a snapshot of it (its rows now, its schema,
        partitions and indexes); its files are kept while it lives. The snapshot as
        ``list_snapshots`` shows it. ``compaction_protection_seconds`` is refused: a
        snapshot keeps its files through compaction anyway."""
        if compaction_protection_seconds:
            kwargs["compaction_protection_seconds"] = compaction_protection_seconds
        reject_unknown("create_snapshot", kwargs)
        op = ops.CreateSnapshot(
            db=self._db_or_own(db_name),
            collection=collection_name,
            name=snapshot_name,
            description=description or None,
        )
        return self._reply(op, ops.SnapshotListing, timeout=timeout)

    def drop_snapshot(
        self,
        snapshot_name: str,
        collection_name: str,
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_snapshot", kwargs)
        op = ops.DropSnapshot(
            db=self._db_or_own(db_name), collection=collection_name, name=snapshot_name
        )
        self._op(op, timeout=timeout)

    def list_snapshots(
        self,
        collection_name: str = "",
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> list[ops.SnapshotListing]:
        """The live snapshots (of one collection, or all), oldest first, each a document
        (pymilvus lists only the names)."""
        reject_unknown("list_snapshots", kwargs)
        op = ops.ListSnapshots(db=self._db_or_own(db_name), collection=collection_name or None)
        return list(self._reply(op, ops.SnapshotList, timeout=timeout)["snapshots"])

    def describe_snapshot(
        self,
        snapshot_name: str,
        collection_name: str,
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> ops.SnapshotDescription:
        reject_unknown("describe_snapshot", kwargs)
        op = ops.DescribeSnapshot(
            db=self._db_or_own(db_name), collection=collection_name, name=snapshot_name
        )
        return self._reply(op, ops.SnapshotDescription, timeout=timeout)

    def restore_snapshot(
        self,
        snapshot_name: str,
        source_collection_name: str,
        target_collection_name: str,
        source_db_name: str = "",
        target_db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> int:
        """Restore into a new collection; the restore job's id (``get_restore_snapshot_state``)."""
        reject_unknown("restore_snapshot", kwargs)
        op = ops.RestoreSnapshot(
            db=self._db_or_own(source_db_name),
            collection=source_collection_name,
            name=snapshot_name,
            target_collection=target_collection_name,
            target_db=target_db_name or self._db,
        )
        return self._reply(op, ops.RestoreStarted, timeout=timeout)["job_id"]

    def get_restore_snapshot_state(
        self, job_id: int, timeout: float | None = None, **kwargs: Any
    ) -> ops.RestoreJobState:
        reject_unknown("get_restore_snapshot_state", kwargs)
        op = ops.GetRestoreSnapshotState(db=self._db, job_id=job_id)
        return self._reply(op, ops.RestoreJobState, timeout=timeout)

    def list_restore_snapshot_jobs(
        self,
        collection_name: str = "",
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> list[ops.RestoreJobState]:
        reject_unknown("list_restore_snapshot_jobs", kwargs)
        op = ops.ListRestoreSnapshotJobs(
            db=self._db_or_own(db_name), collection=collection_name or None
        )
        return list(self._reply(op, ops.RestoreJobList, timeout=timeout)["jobs"])

    def pin_snapshot_data(
        self,
        snapshot_name: str,
        collection_name: str,
        db_name: str = "",
        ttl_seconds: int = 0,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> int:
        """Keep the snapshot's files ``ttl_seconds`` (0: an hour) even if it is dropped."""
        reject_unknown("pin_snapshot_data", kwargs)
        op = ops.PinSnapshotData(
            db=self._db_or_own(db_name),
            collection=collection_name,
            name=snapshot_name,
            ttl_seconds=ttl_seconds,
        )
        return self._reply(op, ops.SnapshotPin, timeout=timeout)["pin_id"]

    def unpin_snapshot_data(self, pin_id: int, timeout: float | None = None, **kwargs: Any) -> None:
        reject_unknown("unpin_snapshot_data", kwargs)
        self._op(ops.UnpinSnapshotData(db=self._db, pin_id=pin_id), timeout=timeout)
