"""Databases: create (with properties), drop, list, describe, and alter their properties
(``elanus.dbproperties``).

A database action names its database by ``name``; ``db``, which every action takes, is
accepted as a synonym (the two must agree). So these records' ``db`` is ``None`` unless
the body gave it, and ``database_of`` is the database the action is about.
"""

from __future__ import annotations

from typing import Any

from elanus.dbproperties import check_database_property
from elanus.errors import invalid
from elanus.ops import DbName, PrivilegeScope, name_of, operation
from elanus.properties import property_key, text_properties
from elanus.schema import check_name
from elanus.wire.codec import DEFAULT_DB


@operation("create_database")
class CreateDatabase:
    db: DbName | None = None
    """A synonym of ``name``."""
    name: str | None = None
    properties: dict[str, Any] | None = None
    """Text, or numbers and booleans written as text (``text_properties``)."""

    def check(self) -> None:
        database_of(self)
        database_properties(self.properties, "create_database")

    def privilege_scope(self) -> PrivilegeScope:
        return {"name": database_of(self)}  # checked in the default database, as always


@operation("drop_database")
class DropDatabase:
    db: DbName | None = None
    """A synonym of ``name``."""
    name: str | None = None

    def check(self) -> None:
        if database_of(self) == DEFAULT_DB:
            raise invalid(f"drop_database: the {DEFAULT_DB!r} database cannot be dropped")

    def privilege_scope(self) -> PrivilegeScope:
        return {"name": database_of(self)}  # checked in the default database, as always


@operation("list_databases")
class ListDatabases:
    db: DbName | None = None
    """Checked as a name, else unused (the SDK sends none)."""

    def privilege_scope(self) -> PrivilegeScope:
        return {}  # ListDatabases is checked in the default database, whatever db says


@operation("describe_database")
class DescribeDatabase:
    db: DbName | None = None
    """A synonym of ``name``."""
    name: str | None = None

    def check(self) -> None:
        database_of(self)

    def privilege_scope(self) -> PrivilegeScope:
        return {"name": database_of(self)}  # checked in the default database, as always


@operation("alter_database_properties")
class AlterDatabaseProperties:
    """Set ``properties`` or remove ``delete_keys``, one or the other per request (Milvus's
    ``alter_database_properties`` and ``drop_database_properties``)."""

    db: DbName | None = None
    """A synonym of ``name``."""
    name: str | None = None
    properties: dict[str, Any] | None = None
    delete_keys: list[Any] | None = None
    """Each checked as a property key (``property_key``), not merely as text."""

    def check(self) -> None:
        what = "alter_database_properties"
        database_of(self)
        properties = database_properties(self.properties, what)
        dropped = self.delete_keys or []
        for key in dropped:
            property_key(key, what)
        if properties and dropped:  # Milvus's root coord's words
            raise invalid(f"{what}: cannot modify properties and delete keys at the same time")
        if not properties and not dropped:
            raise invalid(
                f"{what}: empty properties and delete keys, expected to set either properties "
                "or delete keys"
            )

    def privilege_scope(self) -> PrivilegeScope:
        return {"name": database_of(self)}  # checked in the default database, as always


NamesADatabase = CreateDatabase | DropDatabase | DescribeDatabase | AlterDatabaseProperties


def database_of(op: NamesADatabase) -> str:
    """The database ``op`` is about: its ``name``, or its ``db`` if only that was given."""
    name, db = op.name, op.db
    if name is not None and db is not None and name != db:
        raise invalid(f"{name_of(op)}: 'name' {name!r} and 'db' {db!r} disagree; give one")
    if name is None and db is None:
        raise invalid(f"{name_of(op)}: missing required key 'name'")
    return check_name(name if name is not None else db, "database")


def database_properties(raw: dict[str, Any] | None, what: str) -> dict[str, str]:
    """A database's properties as stored, each value checked as its key takes it."""
    return text_properties(raw, what, check_database_property)
