"""Collections by name: drop, has, describe, list, rename (create, with its schema, is still
checked by ``flight/ddl_actions.py``; property changes: ``elanus/ops/alter.py``)."""

from __future__ import annotations

from typing import Annotated

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation, shape
from elanus.requests import Named


@shape
class CollectionNamed:
    db: DbName = DEFAULT_DB
    name: CollectionName


@operation("drop_collection")
class DropCollection(CollectionNamed):
    pass


@operation("has_collection")
class HasCollection(CollectionNamed):
    pass


@operation("describe_collection")
class DescribeCollection(CollectionNamed):
    pass


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
