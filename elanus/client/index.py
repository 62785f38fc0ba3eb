"""The index half of the SDK (mixed into ``Client``): create, drop, describe and list
indexes, and wait for builds. Same shapes as pymilvus where they exist."""

from __future__ import annotations

import time
from typing import Any, cast

from elanus.client.base import ClientBase
from elanus.client.compat import (
    IndexParam,
    IndexParams,
    reject_unknown,
)
from elanus.client.replies import IndexInfo
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import alter
from elanus.ops import indexes as index_ops
from elanus.ops.replies import (
    IndexClaim,
    IndexDescription,
    IndexDescriptions,
    IndexLease,
    IndexVerdict,
)
from elanus.states import IndexTaskState


class IndexAPI(ClientBase):
    @staticmethod
    def prepare_index_params(field_name: str = "", **kwargs: Any) -> IndexParams:
        """An index list to ``add_index`` to, for ``create_index``/``create_collection``."""
        params = IndexParams()
        if field_name:
            params.add_index(field_name, **kwargs)
        return params

    def create_index(
        self,
        collection_name: str,
        index_params: IndexParams | str | None = None,
        timeout: float | None = None,
        *,
        field_name: str | None = None,
        index_type: str = "AUTOINDEX",
        metric_type: str | None = None,
        params: dict[str, Any] | None = None,
        index_name: str | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> int | list[int]:
        """Record indexes; every flushed segment (and each later one) gets a build task.

        pymilvus's form: ``create_index(name, index_params)`` with
        ``prepare_index_params()``; returns the index ids. Elanus's shorthand for one index:
        ``create_index(name, field_name=..., index_type=..., metric_type=..., params=...)``
        (``index_params`` may also be the field name); returns its id. An identical
        request returns the existing index id."""
        reject_unknown("create_index", kwargs)
        if isinstance(index_params, IndexParams):
            if not index_params:
                raise ElanusError(ErrorCode.INVALID_ARGUMENT, "index_params lists no index")
            return [self._create_one(collection_name, p, timeout, db) for p in index_params]
        if isinstance(index_params, str):
            field_name = field_name or index_params
        elif index_params is not None:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                "index_params must come from prepare_index_params() (or be a field name)",
            )
        if not field_name:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "create_index needs a field name")
        one = IndexParam(
            field_name, index_type, index_name or "", metric_type=metric_type, params=params
        )
        return self._create_one(collection_name, one, timeout, db)

    def _create_one(
        self, collection: str, index: IndexParam, timeout: float | None, db: str | None
    ) -> int:
        """One index of ``create_index``; what ``index`` leaves empty is not sent."""
        op = index_ops.CreateIndex(
            db=self._db_or_own(db),
            index_name=index.index_name or None,
            field_name=index.field_name or None,
            collection=collection,
            index_type=index.index_type or None,
            metric_type=index.metric_type or None,
            params=dict(index.params) if index.params else None,
        )
        return int(self._op(op, timeout=timeout)["index_id"])

    def drop_index(
        self,
        collection_name: str,
        index_name: str | None = "",
        timeout: float | None = None,
        *,
        field_name: str | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_index", kwargs)
        op = index_ops.DropIndex(
            db=self._db_or_own(db),
            index_name=index_name or None,
            field_name=field_name or None,
            collection=collection_name,
        )
        self._op(op, timeout=timeout)

    def describe_index(
        self,
        collection_name: str,
        index_name: str | None = "",
        timeout: float | None = None,
        *,
        field_name: str | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> IndexInfo | list[IndexInfo]:
        """Indexes with build progress: state, indexed_rows / total_rows,
        pending_index_rows, pending_tasks, failed_tasks (segment and reason). Named (as
        pymilvus requires), the one index's dict; unnamed, a list of every index's."""
        reject_unknown("describe_index", kwargs)
        infos = self.index_infos(
            collection_name, index_name, field_name=field_name, db=db, timeout=timeout
        )
        return infos[0] if index_name and infos else infos

    def alter_index_properties(
        self,
        collection_name: str,
        index_name: str,
        properties: dict[str, Any],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``mmap.enabled`` (the index then loads mapped from disk),
        ``indexoffsetcache.enabled`` and ``warmup`` (stored, no effect), while the
        collection is released (``elanus.indexprops``); an index's build parameters are
        fixed: drop the index and create it with others instead."""
        reject_unknown("alter_index_properties", kwargs)
        op = alter.AlterIndexProperties(
            db=self._db_or_own(db), collection=collection_name, index_name=index_name,
            properties=properties,
        )  # fmt: skip
        self._op(op, timeout=timeout)

    def drop_index_properties(
        self,
        collection_name: str,
        index_name: str,
        property_keys: list[str],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Drop those settings (``mmap.enabled``: back to the field's or collection's)."""
        reject_unknown("drop_index_properties", kwargs)
        op = alter.AlterIndexProperties(
            db=self._db_or_own(db), collection=collection_name, index_name=index_name,
            delete_keys=list(property_keys),
        )  # fmt: skip
        self._op(op, timeout=timeout)

    def alter_mmap(
        self,
        collection_name: str,
        enabled: bool | None,
        *,
        field_name: str | None = None,
        index_name: str | None = None,
        timeout: float | None = None,
        db: str | None = None,
    ) -> None:
        """Set (or drop, ``None``) Milvus's ``mmap.enabled`` of a released collection, of
        one of its fields or of one of its indexes (``elanus.mmapsettings``)."""
        op = alter.AlterMmap(
            db=self._db_or_own(db), collection=collection_name, field_name=field_name or None,
            index_name=index_name or None, enabled=enabled,
        )  # fmt: skip
        self._op(op, timeout=timeout)

    def index_infos(
        self,
        collection_name: str,
        index_name: str | None = None,
        *,
        field_name: str | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> list[IndexInfo]:
        """``describe_index`` always as a list (every index, or those named/of a field)."""
        op = index_ops.DescribeIndex(
            db=self._db_or_own(db),
            index_name=index_name or None,
            field_name=field_name or None,
            collection=collection_name,
        )
        reply = self._reply(op, IndexDescriptions, timeout=timeout)
        return [_milvus_index(i) for i in reply["indexes"]]

    def list_indexes(
        self,
        collection_name: str,
        field_name: str | None = "",
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Index names, of one field's indexes when ``field_name`` is given."""
        timeout = kwargs.pop("timeout", None)
        reject_unknown("list_indexes", kwargs)
        if field_name:
            infos = self.index_infos(collection_name, field_name=field_name, db=db)
            return [str(i["index_name"]) for i in infos]
        op = index_ops.ListIndexes(db=self._db_or_own(db), collection=collection_name)
        return list(self._op(op, timeout=timeout)["names"])

    def wait_for_index(
        self,
        collection_name: str,
        index_name: str | None = None,
        *,
        timeout: float = 300.0,
        db: str | None = None,
    ) -> IndexInfo:
        """Poll until every task of the index finished; raises on failure or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            (info,) = self.index_infos(collection_name, index_name, db=db)
            if info["state"] == IndexTaskState.FINISHED:
                return info
            if info["state"] == IndexTaskState.FAILED:
                reasons = "; ".join(str(f["reason"]) for f in info["failed_tasks"])
                raise RuntimeError(f"index {info['index_name']!r} failed: {reasons}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"index {info['index_name']!r}: {info['indexed_rows']}/"
                    f"{info['total_rows']} rows indexed after {timeout:g}s"
                )
            time.sleep(0.1)


def _milvus_index(info: IndexDescription) -> IndexInfo:
    """pymilvus's keys beside Elanus's: the build parameters flat at the top level
    (``M``, ``efConstruction``, as pymilvus shows them; still under ``params`` too),
    ``field_name`` and ``pending_index_rows``."""
    params = info.get("params")
    flat = dict(params) if isinstance(params, dict) else {}
    out = cast(IndexInfo, {**flat, **info, "field_name": info.get("field")})
    total, done = info.get("total_rows"), info.get("indexed_rows")
    if isinstance(total, int) and isinstance(done, int):
        out["pending_index_rows"] = max(total - done, 0)
    return out


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
    ) -> IndexClaim:
        """``{"tasks": [...], "lease_s": ...}``: pending tasks now held by ``node_id``."""
        op = index_ops.ClaimIndexTasks(
            db=self._db_or_own(db),
            node_id=node_id,
            retry_failed=retry_failed,
            collection=collection_name or None,
        )
        return self._reply(op, IndexClaim)

    def index_heartbeat(self, node_id: str) -> IndexLease:
        """Renew the lease; ``{"alive", "tasks"}`` (the builder's tasks still in progress)."""
        return self._reply(index_ops.IndexHeartbeat(node_id=node_id), IndexLease)

    def report_index_task(self, node_id: str, report: dict[str, Any]) -> IndexVerdict:
        """One task's result (``run_build_task``'s report); ``{"accepted": false, ...}`` for
        a stale version."""
        op = index_ops.ReportIndexTask(**report, node_id=node_id)
        return self._reply(op, IndexVerdict)
