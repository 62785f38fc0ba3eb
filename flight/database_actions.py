"""DoAction entries of databases: create (with properties), drop, list, describe, and
alter their properties (``elanus.dbproperties``: set or drop, as Milvus's
``alter_database_properties`` / ``drop_database_properties``)."""

from __future__ import annotations

from typing import Any

from elanus.api.rootcoord import (
    AlterDatabaseProperties,
    CreateDatabase,
    DescribeDatabase,
    DropDatabase,
    ListDatabases,
    RootCoordAPI,
)
from elanus.dbproperties import check_database_property
from elanus.errors import invalid
from elanus.flight.actions import action, check_db
from elanus.flight.ddl_actions import apply_ddl, ask_root, properties_of, property_key
from elanus.requests import Body
from elanus.schema import check_name
from elanus.wire.codec import DEFAULT_DB


def _database_name(b: Body) -> str:
    """Database actions name their database by ``name`` (``db`` is accepted as a synonym)."""
    name, db = b.str("name", None), b.str("db", None)
    if name is not None and db is not None and name != db:
        raise invalid(f"{b.what}: 'name' {name!r} and 'db' {db!r} disagree; give one")
    if name is None and db is None:
        raise invalid(f"{b.what}: missing required key 'name'")
    return check_name(name if name is not None else db, "database")


def _properties(b: Body, what: str) -> dict[str, str]:
    return properties_of(b, what, check_database_property)


@action(
    "create_database",
    "Create a database, optionally with properties (database.max.collections, "
    "database.force.deny.writing, ...: docs/protocol.md). Body: name, properties.",
    ("name", "properties"),
    privilege="CreateDatabase",
    ddl=True,
    run=apply_ddl(RootCoordAPI.create_database, CreateDatabase),
)
def _create_database(b: Body) -> dict[str, Any]:
    name = _database_name(b)
    return {"name": name, "properties": _properties(b, "create_database")}


@action(
    "drop_database",
    "Drop an empty database (not 'default'). Body: name.",
    ("name",),
    privilege="DropDatabase",
    ddl=True,
    run=apply_ddl(RootCoordAPI.drop_database, DropDatabase),
)
def _drop_database(b: Body) -> dict[str, Any]:
    name = _database_name(b)
    if name == DEFAULT_DB:
        raise invalid(f"drop_database: the {DEFAULT_DB!r} database cannot be dropped")
    return {"name": name}


@action(
    "list_databases",
    "Names of all databases. Result: names.",
    privilege="ListDatabases",
    loop=True,
    run=ask_root(RootCoordAPI.list_databases, ListDatabases),
)
def _list_databases(b: Body) -> dict[str, Any]:
    check_db(b)
    return {}


@action(
    "describe_database",
    "A database's name, id, creation timestamp and properties. Body: name. Result: name, "
    "db_id, created_ts, properties.",
    ("name",),
    privilege="DescribeDatabase",
    loop=True,
    run=ask_root(RootCoordAPI.describe_database, DescribeDatabase),
)
def _describe_database(b: Body) -> dict[str, Any]:
    return {"name": _database_name(b)}


@action(
    "alter_database_properties",
    "Set (properties) or remove (delete_keys) a database's properties, as Milvus's "
    "alter_database_properties and drop_database_properties; one or the other per request. "
    "Body: name, properties, delete_keys.",
    ("name", "properties", "delete_keys"),
    privilege="AlterDatabase",
    ddl=True,
    run=apply_ddl(RootCoordAPI.alter_database_properties, AlterDatabaseProperties),
)
def _alter_database_properties(b: Body) -> dict[str, Any]:
    what = "alter_database_properties"
    name = _database_name(b)
    properties = _properties(b, what)
    dropped = b.list("delete_keys", [])
    for key in dropped:
        property_key(key, what)
    if properties and dropped:  # Milvus's root coord's words
        raise invalid(f"{what}: cannot modify properties and delete keys at the same time")
    if not properties and not dropped:
        raise invalid(
            f"{what}: empty properties and delete keys, expected to set either properties "
            "or delete keys"
        )
    return {"name": name, "properties": properties, "delete_keys": dropped}
