"""The index half of the SDK (mixed into ``Client``): create, drop, describe and list
indexes, and wait for builds. Same shapes as pymilvus where they exist."""

from __future__ import annotations

import time
from typing import Any

from elanus.flight.client_base import ClientBase


class IndexAPI(ClientBase):
    def create_index(
        self,
        collection_name: str,
        field_name: str,
        index_type: str = "AUTOINDEX",
        metric_type: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        index_name: str | None = None,
        db: str | None = None,
    ) -> int:
        """Record an index; every flushed segment (and each later one) gets a build task.
        An identical request returns the existing index id."""
        body = _in(self, db, collection_name, field_name=field_name, index_type=index_type)
        if metric_type:
            body["metric_type"] = metric_type
        if params:
            body["params"] = dict(params)
        if index_name:
            body["index_name"] = index_name
        return int(self._action("create_index", body)["index_id"])

    def drop_index(
        self,
        collection_name: str,
        index_name: str | None = None,
        *,
        field_name: str | None = None,
        db: str | None = None,
    ) -> None:
        body = _in(self, db, collection_name, index_name=index_name, field_name=field_name)
        self._action("drop_index", body)

    def describe_index(
        self,
        collection_name: str,
        index_name: str | None = None,
        *,
        field_name: str | None = None,
        db: str | None = None,
    ) -> list[dict[str, Any]]:
        """Indexes with build progress: state, indexed_rows / total_rows, pending_tasks,
        failed_tasks (segment and reason)."""
        body = _in(self, db, collection_name, index_name=index_name, field_name=field_name)
        return list(self._action("describe_index", body)["indexes"])

    def list_indexes(self, collection_name: str, *, db: str | None = None) -> list[str]:
        return list(self._action("list_indexes", _in(self, db, collection_name))["names"])

    def wait_for_index(
        self,
        collection_name: str,
        index_name: str | None = None,
        *,
        timeout: float = 300.0,
        db: str | None = None,
    ) -> dict[str, Any]:
        """Poll until every task of the index finished; raises on failure or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            (info,) = self.describe_index(collection_name, index_name, db=db)
            if info["state"] == "Finished":
                return info
            if info["state"] == "Failed":
                reasons = "; ".join(str(f["reason"]) for f in info["failed_tasks"])
                raise RuntimeError(f"index {info['index_name']!r} failed: {reasons}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"index {info['index_name']!r}: {info['indexed_rows']}/"
                    f"{info['total_rows']} rows indexed after {timeout:g}s"
                )
            time.sleep(0.1)


class BuilderAPI(ClientBase):
    """The pull protocol of external index builders (Spark index runs), mixed into
    ``Client``: claim tasks under a lease, renew it, report each result."""

    def claim_index_tasks(
        self,
        node_id: str,
        collection_name: str | None = None,
        *,
        retry_failed: bool = False,
        db: str | None = None,
    ) -> dict[str, Any]:
        """``{"tasks": [...], "lease_s": ...}``: pending tasks now held by ``node_id``."""
        body = self._in_db(db, node_id=node_id, retry_failed=retry_failed)
        if collection_name:
            body["collection"] = collection_name
        return self._action("claim_index_tasks", body)

    def index_heartbeat(self, node_id: str) -> dict[str, Any]:
        """Renew the lease; ``{"alive", "tasks"}`` (the builder's tasks still in progress)."""
        return self._action("index_heartbeat", {"node_id": node_id})

    def report_index_task(self, node_id: str, report: dict[str, Any]) -> dict[str, Any]:
        """One task's result; ``{"accepted": false, ...}`` for a stale version."""
        return self._action("report_index_task", {**report, "node_id": node_id})


def _in(client: ClientBase, db: str | None, collection: str, **body: Any) -> dict[str, Any]:
    return client._in_db(db, collection=collection, **{k: v for k, v in body.items() if v})
