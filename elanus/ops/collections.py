"""Collections by name: drop, has, describe, list, rename (create, with its schema, and the
property changes are still checked by ``flight/ddl_actions.py``)."""

from __future__ import annotations

from typing import Annotated

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation
from elanus.requests import Named


@operation("drop_collection")
class DropCollection:
    db: DbName = DEFAULT_DB
    name: CollectionName


@operation("has_collection")
class HasCollection:
    db: DbName = DEFAULT_DB
    name: CollectionName


@operation("describe_collection")
class DescribeCollection:
    db: DbName = DEFAULT_DB
    name: CollectionName


@operation("list_collections")
class ListCollections:
    db: DbName = DEFAULT_DB


@operation("rename_collection")
class RenameCollection:
    db: DbName = DEFAULT_DB
    name: CollectionName
    new_name: CollectionName
    new_db: Annotated[str, Named("database")] | None = None
    """Absent: the collection stays in ``db``."""

    def check(self) -> None:
        if (self.db, self.name) == (self.new_db or self.db, self.new_name):
            raise invalid(f"rename_collection: 'new_name' {self.new_name!r} is the current name")
