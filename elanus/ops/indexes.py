"""Indexes: create, drop, describe and list a collection's indexes.

Only a body's shape is checked here; an index's type, metric and parameters are checked by
the index coord (``elanus.indexparams``), where the field's type and dimension are known.
An index or field name given empty counts as absent, as it always has.
"""

from __future__ import annotations

from typing import Any

from elanus.errors import ElanusError, ErrorCode
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation, shape
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
class ListIndexes:
    db: DbName = DEFAULT_DB
    collection: CollectionName
