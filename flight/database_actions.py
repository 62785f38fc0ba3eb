"""DoAction entries of databases: create (with properties), drop, list, describe, and
alter their properties (``elanus.dbproperties``: set or drop, as Milvus's
``alter_database_properties`` / ``drop_database_properties``). Their requests are the
records of ``elanus/ops/databases.py``."""

from __future__ import annotations

from typing import Any, TypeVar

from elanus.api.rootcoord import (
    AlterDatabaseProperties,
    CreateDatabase,
    DescribeDatabase,
    DropDatabase,
    ListDatabases,
    RootCoordAPI,
)
from elanus.flight.ddl import RootCall
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import databases as ops

R = TypeVar("R")


async def _apply(c: OpCall[Any], call: RootCall[R], req: R, name: str) -> Any:
    """A database DDL at the task's timestamp; the proxy then drops everything it cached
    in that database without waiting for the coord's broadcast."""
    try:
        return await c.proxy.ddl.send(call, req)
    finally:
        c.proxy.ddl.cache.invalidate(name)


def _create_database(c: OpCall[ops.CreateDatabase]) -> Any:
    name = ops.database_of(c.request)
    properties = ops.database_properties(c.request.properties, "create_database")
    req = CreateDatabase(name=name, properties=properties, ts=c.ts)
    return _apply(c, RootCoordAPI.create_database, req, name)


def _drop_database(c: OpCall[ops.DropDatabase]) -> Any:
    name = ops.database_of(c.request)
    return _apply(c, RootCoordAPI.drop_database, DropDatabase(name=name, ts=c.ts), name)


def _describe_database(c: OpCall[ops.DescribeDatabase]) -> Any:
    req = DescribeDatabase(name=ops.database_of(c.request))
    return c.proxy.ddl.send(RootCoordAPI.describe_database, req)


def _alter_database_properties(c: OpCall[ops.AlterDatabaseProperties]) -> Any:
    r = c.request
    name = ops.database_of(r)
    req = AlterDatabaseProperties(
        name=name,
        properties=ops.database_properties(r.properties, "alter_database_properties"),
        delete_keys=r.delete_keys or [],
        ts=c.ts,
    )
    return _apply(c, RootCoordAPI.alter_database_properties, req, name)


operation(
    ops.CreateDatabase,
    "Create a database, optionally with properties (database.max.collections, "
    "database.force.deny.writing, ...: docs/protocol.md). Body: name, properties.",
    privilege="CreateDatabase",
    ddl=True,
    run=_create_database,
)
operation(
    ops.DropDatabase,
    "Drop an empty database (not 'default'). Body: name.",
    privilege="DropDatabase",
    ddl=True,
    run=_drop_database,
)
operation(
    ops.ListDatabases,
    "Names of all databases. Result: names.",
    privilege="ListDatabases",
    loop=True,
    run=lambda c: c.proxy.ddl.send(RootCoordAPI.list_databases, ListDatabases()),
)
operation(
    ops.DescribeDatabase,
    "A database's name, id, creation timestamp and properties. Body: name. Result: name, "
    "db_id, created_ts, properties.",
    privilege="DescribeDatabase",
    loop=True,
    run=_describe_database,
)
operation(
    ops.AlterDatabaseProperties,
    "Set (properties) or remove (delete_keys) a database's properties, as Milvus's "
    "alter_database_properties and drop_database_properties; one or the other per request. "
    "Body: name, properties, delete_keys.",
    privilege="AlterDatabase",
    ddl=True,
    run=_alter_database_properties,
)
