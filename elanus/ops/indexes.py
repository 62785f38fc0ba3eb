"""Indexes: create, drop, describe and list a collection's indexes; the pull protocol of
external builders (claim tasks under a lease, renew it, report each result).

Only a body's shape is checked here; an index's type, metric and parameters are checked by
the index coord (``elanus.indexparams``), where the field's type and dimension are known.
An index or field name given empty counts as absent, as it always has.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, InCollection, operation, shape
from elanus.requests import Range
from elanus.schema import check_name


def check_target(index_name: str | None, field_name: str | None) -> None:
    """The index and field names an index request gives (empty: not given)."""
    if index_name:
        check_name(index_name, "index")
    if field_name:
        check_name(field_name, "field")


@operation("create_index")
class CreateIndex:
    db: DbName = DEFAULT_DB
    index_name: str | None = None
    """Absent (or empty): the field's name."""
    field_name: str | None = None
    """Required: its absence is refused in ``check``, after the names (the dict checker's
    order and words)."""
    collection: CollectionName
    index_type: str | None = None
    """Absent: AUTOINDEX (an empty one is sent on as it is, for the coord to refuse)."""
    metric_type: str | None = None
    params: dict[str, Any] | None = None

    def check(self) -> None:
        check_target(self.index_name, self.field_name)
        if not self.field_name:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "create_index: 'field_name' is required")


@shape
class IndexNamed:
    """An index by its name or its field's."""

    db: DbName = DEFAULT_DB
    index_name: str | None = None
    field_name: str | None = None
    collection: CollectionName

    def check(self) -> None:
        check_target(self.index_name, self.field_name)


@operation("drop_index")
class DropIndex(IndexNamed):
    pass


@operation("describe_index")
class DescribeIndex(IndexNamed):
    pass


@operation("list_indexes")
class ListIndexes(InCollection):
    pass


# -- the pull protocol of external builders (Spark index runs) ----------------------------
BUILDER_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def check_builder(node_id: str) -> None:
    if not BUILDER_ID.fullmatch(node_id):
        raise invalid(f"node_id {node_id!r} must be 1 to 128 letters, digits, '_' or '-'")


@operation("claim_index_tasks")
class ClaimIndexTasks:
    """Take the pending build tasks (of one collection, or all) under a lease."""

    db: DbName = DEFAULT_DB
    collection: str | None = None
    """Absent (or empty): every collection's tasks."""
    node_id: str
    limit: Annotated[int, Range(1)] | None = None
    retry_failed: bool = False

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")
        check_builder(self.node_id)


@operation("index_heartbeat")
class IndexHeartbeat:
    """Renew a builder's lease."""

    db: DbName | None = None
    """Unused: a builder's lease is cluster-wide."""
    node_id: str

    def check(self) -> None:
        check_builder(self.node_id)


@operation("report_index_task")
class ReportIndexTask:
    """A builder's result for one task (``index/buildtask.py``'s report, with its id)."""

    db: DbName | None = None
    """Unused: a build id names its collection."""
    build_id: int
    version: int
    node_id: str
    ok: bool
    files: list[str] | None = None
    fail_reason: str | None = None
    seconds: float | None = None

    def check(self) -> None:
        check_builder(self.node_id)
