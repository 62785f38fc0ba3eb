"""The SDK's collection snapshots (mixed into ``Client``), named as pymilvus's
``MilvusClient`` names them; results are the snapshot actions' documents
(docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from elanus.client.base import ClientBase


class SnapshotAPI(ClientBase):
    def create_snapshot(
        self,
        snapshot_name: str,
        collection_name: str,
        description: str = "",
        *,
        db: str | None = None,
    ) -> dict[str, Any]:
        """Flush the collection and record a snapshot of it (its rows now, its schema,
        partitions and indexes); its files are kept while it lives."""
        body = self._in_db(db, collection=collection_name, name=snapshot_name)
        if description:
            body["description"] = description
        return self._action("create_snapshot", body)

    def list_snapshots(
        self, collection_name: str | None = None, *, db: str | None = None
    ) -> list[dict[str, Any]]:
        body = self._in_db(db)
        if collection_name:
            body["collection"] = collection_name
        return list(self._action("list_snapshots", body)["snapshots"])

    def describe_snapshot(
        self, snapshot_name: str, collection_name: str, *, db: str | None = None
    ) -> dict[str, Any]:
        body = self._in_db(db, collection=collection_name, name=snapshot_name)
        return self._action("describe_snapshot", body)

    def drop_snapshot(
        self, snapshot_name: str, collection_name: str, *, db: str | None = None
    ) -> None:
        self._action(
            "drop_snapshot", self._in_db(db, collection=collection_name, name=snapshot_name)
        )

    def restore_snapshot(
        self,
        snapshot_name: str,
        source_collection_name: str,
        target_collection_name: str,
        *,
        db: str | None = None,
        target_db: str | None = None,
    ) -> int:
        """Restore into a new collection; the restore job's id (``get_restore_snapshot_state``)."""
        body = self._in_db(
            db,
            collection=source_collection_name,
            name=snapshot_name,
            target_collection=target_collection_name,
        )
        if target_db:
            body["target_db"] = target_db
        return int(self._action("restore_snapshot", body)["job_id"])

    def get_restore_snapshot_state(self, job_id: int) -> dict[str, Any]:
        return self._action("get_restore_snapshot_state", self._in_db(None, job_id=job_id))

    def list_restore_snapshot_jobs(
        self, collection_name: str | None = None, *, db: str | None = None
    ) -> list[dict[str, Any]]:
        body = self._in_db(db)
        if collection_name:
            body["collection"] = collection_name
        return list(self._action("list_restore_snapshot_jobs", body)["jobs"])

    def pin_snapshot_data(
        self,
        snapshot_name: str,
        collection_name: str,
        ttl_seconds: int = 0,
        *,
        db: str | None = None,
    ) -> int:
        """Keep the snapshot's files ``ttl_seconds`` (0: an hour) even if it is dropped."""
        body = self._in_db(
            db, collection=collection_name, name=snapshot_name, ttl_seconds=ttl_seconds
        )
        return int(self._action("pin_snapshot_data", body)["pin_id"])

    def unpin_snapshot_data(self, pin_id: int) -> None:
        self._action("unpin_snapshot_data", self._in_db(None, pin_id=pin_id))
