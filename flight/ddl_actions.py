"""DoAction entries of collections, partitions, aliases and cluster control (databases:
``database_actions``).

DDL (create, drop, rename) runs one at a time through the proxy's DdQueue, tagged with a
TSO timestamp; reads of the catalog go through the MetaCache (``flight/ddl.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from elanus.api.base import Ack
from elanus.api.coord import ListSessions, Sessions
from elanus.api.indexcoord import DescribeIndex
from elanus.api.rootcoord import (
    AliasDescription,
    AliasList,
    AlterCollectionField,
    AlterCollectionProperties,
    AlterIndexProperties,
    AlterMmap,
    CollectionChanged,
    CollectionDescription,
    CreateAlias,
    CreatePartition,
    DescribeAlias,
    DropAlias,
    DropCollection,
    DropPartition,
    ListAliases,
    ListCollections,
    PartitionChanged,
    RenameCollection,
    RootCoordAPI,
    Timestamps,
    TsoAlloc,
)
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import alter, control
from elanus.ops import collections as colls
from elanus.ops import partitions as ops
from elanus.privileges import OPEN


# -- collections --------------------------------------------------------------------------
async def _create_collection(c: OpCall[colls.CreateCollection]) -> CollectionDescription:
    return await c.proxy.ddl.create_collection(c.request, c.ts)


operation(
    colls.CreateCollection,
    "Create a collection from a full schema or a quick setup (dimension). Body: name, "
    "schema | dimension, num_shards, num_partitions, consistency_level, properties, "
    "description.",
    privilege="CreateCollection",
    ddl=True,
    run=_create_collection,
)


def _drop_collection(c: OpCall[colls.DropCollection]) -> Awaitable[CollectionChanged]:
    r = c.request
    req = DropCollection(db=r.db, name=r.name, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.drop_collection, req, r.db, r.name)


async def _rename_collection(c: OpCall[colls.RenameCollection]) -> CollectionChanged:
    r = c.request
    new_db = r.new_db or r.db
    req = RenameCollection(db=r.db, name=r.name, new_name=r.new_name, new_db=new_db, ts=c.ts)
    try:
        return await c.proxy.ddl.apply_to(RootCoordAPI.rename_collection, req, r.db, r.name)
    finally:
        c.proxy.ddl.forget(new_db, r.new_name)


operation(
    colls.DropCollection,
    "Drop a collection and its partitions. Body: name.",
    privilege="DropCollection",
    ddl=True,
    run=_drop_collection,
)
operation(
    colls.HasCollection,
    "Whether a collection exists. Body: name. Result: value.",
    privilege="DescribeCollection",
    loop=True,
    run=lambda c: c.proxy.ddl.has_collection(c.request.db, c.request.name),
)
operation(
    colls.DescribeCollection,
    "A collection's id, schema (with field ids), shards, channels, partitions. Body: name.",
    privilege="DescribeCollection",
    loop=True,
    run=lambda c: c.proxy.ddl.describe_collection(c.request.db, c.request.name),
)
operation(
    colls.ListCollections,
    "Names of the collections of a database. Result: names.",
    privilege="ShowCollections",
    loop=True,
    run=lambda c: c.proxy.ddl.send(RootCoordAPI.list_collections, ListCollections(db=c.request.db)),
)
operation(
    colls.RenameCollection,
    "Rename a collection, optionally into another database. Body: name, new_name, new_db.",
    privilege="RenameCollection",
    ddl=True,
    run=_rename_collection,
)


async def _alter_collection_properties(
    c: OpCall[alter.AlterCollectionProperties],
) -> CollectionChanged:
    r = c.request
    properties, dropped = r.changes()
    req = AlterCollectionProperties(
        db=r.db, name=r.name, properties=properties, delete_keys=dropped, ts=c.ts
    )
    return await c.proxy.ddl.apply_to(RootCoordAPI.alter_collection_properties, req, r.db, r.name)


operation(
    alter.AlterCollectionProperties,
    "Set (properties) or remove (delete_keys) a collection's properties, as Milvus's "
    "alter_collection_properties and drop_collection_properties; collection.ttl.seconds "
    "takes effect at the next read. Body: name, properties, delete_keys.",
    privilege="CreateCollection",  # as Milvus checks AlterCollection
    ddl=True,
    run=_alter_collection_properties,
)


async def _alter_collection_field(c: OpCall[alter.AlterCollectionField]) -> CollectionChanged:
    r = c.request
    properties, dropped = r.changes()
    req = AlterCollectionField(
        db=r.db,
        collection=r.collection,
        field_name=r.field_name,
        properties=properties,
        delete_keys=dropped,
        ts=c.ts,
    )
    api = RootCoordAPI.alter_collection_field
    return await c.proxy.ddl.apply_to(api, req, r.db, r.collection)


operation(
    alter.AlterCollectionField,
    "Set (properties) or remove (delete_keys) one field's properties, as Milvus's "
    "alter_collection_field: max_length (VarChar, Array of VarChar) and max_capacity "
    "(Array) change what later writes may hold, field.description the description; "
    "mmap.enabled and the warm-up keys only "
    "while the collection is released (warm-up: stored, no effect). Body: collection, "
    "field_name, properties, delete_keys. Result: collection_id.",
    privilege="CreateCollection",  # as Milvus checks AlterCollectionField
    ddl=True,
    run=_alter_collection_field,
)


async def _index_id(c: OpCall[Any], db: str, collection: str, index_name: str) -> int:
    """An index is named on the wire and kept by id (``elanus.mmapsettings``)."""
    info = await c.proxy.ddl.collection(db, collection)
    ask = DescribeIndex(collection_id=info.collection_id, index_name=index_name)
    (index,) = (await c.proxy.indexcoord.describe(ask)).indexes
    return index.index_id


async def _alter_mmap(c: OpCall[alter.AlterMmap]) -> CollectionChanged:
    r = c.request
    index = r.index_name
    req = AlterMmap(
        db=r.db,
        collection=r.collection,
        enabled=r.enabled,
        field=r.field_name,
        index_id=None if index is None else await _index_id(c, r.db, r.collection, index),
        ts=c.ts,
    )
    return await c.proxy.ddl.apply_to(RootCoordAPI.alter_mmap, req, r.db, r.collection)


async def _alter_index_properties(c: OpCall[alter.AlterIndexProperties]) -> CollectionChanged:
    r = c.request
    properties, dropped = r.changes()
    req = AlterIndexProperties(
        db=r.db,
        collection=r.collection,
        index_id=await _index_id(c, r.db, r.collection, r.index_name),
        properties=properties,
        delete_keys=dropped,
        ts=c.ts,
    )
    api = RootCoordAPI.alter_index_properties
    return await c.proxy.ddl.apply_to(api, req, r.db, r.collection)


operation(
    alter.AlterIndexProperties,
    "Set (properties) or remove (delete_keys) an index's properties, as Milvus's "
    "alter_index_properties and drop_index_properties, while the collection is released: "
    "mmap.enabled (as alter_mmap), indexoffsetcache.enabled and warmup (stored, no "
    "effect). Body: collection, index_name, properties, delete_keys. Result: collection_id.",
    privilege="CreateIndex",  # as Milvus checks AlterIndex
    ddl=True,
    run=_alter_index_properties,
)
operation(
    alter.AlterMmap,
    "Set or drop Milvus's mmap.enabled of a released collection, of one of its fields "
    "(field_name) or of one of its indexes (index_name): its indexes then load mapped from "
    "disk (most specific setting wins). Body: collection, enabled (true, false, or null to "
    "drop it), field_name, index_name. Result: collection_id.",
    privilege="CreateCollection",
    ddl=True,
    run=_alter_mmap,
)


# -- aliases ------------------------------------------------------------------------------
def _create_alias(c: OpCall[ops.CreateAlias]) -> Awaitable[CollectionChanged]:
    r = c.request
    req = CreateAlias(db=r.db, collection=r.collection, alias=r.alias, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.create_alias, req, r.db, r.alias, r.collection)


def _alter_alias(c: OpCall[ops.AlterAlias]) -> Awaitable[CollectionChanged]:
    r = c.request
    req = CreateAlias(db=r.db, collection=r.collection, alias=r.alias, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.alter_alias, req, r.db, r.alias, r.collection)


def _drop_alias(c: OpCall[ops.DropAlias]) -> Awaitable[Ack]:
    r = c.request
    req = DropAlias(db=r.db, alias=r.alias, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.drop_alias, req, r.db, r.alias)


def _describe_alias(c: OpCall[ops.DescribeAlias]) -> Awaitable[AliasDescription]:
    req = DescribeAlias(db=c.request.db, alias=c.request.alias)
    return c.proxy.ddl.send(RootCoordAPI.describe_alias, req)


def _list_aliases(c: OpCall[ops.ListAliases]) -> Awaitable[AliasList]:
    req = ListAliases(db=c.request.db, collection=c.request.collection or None)
    return c.proxy.ddl.send(RootCoordAPI.list_aliases, req)


operation(
    ops.CreateAlias,
    "Give a collection another name in its database. Body: collection, alias.",
    privilege="CreateAlias",
    ddl=True,
    run=_create_alias,
)
operation(
    ops.AlterAlias,
    "Point an existing alias at another collection. Body: collection, alias.",
    privilege="CreateAlias",
    ddl=True,
    run=_alter_alias,
)
operation(
    ops.DropAlias,
    "Drop an alias (not its collection). Body: alias.",
    privilege="DropAlias",
    ddl=True,
    run=_drop_alias,
)
operation(
    ops.DescribeAlias,
    "The collection an alias names. Body: alias. Result: alias, collection_name, db_name.",
    privilege="DescribeAlias",
    loop=True,
    run=_describe_alias,
)
operation(
    ops.ListAliases,
    "Aliases of a collection, or of the whole database. Body: collection (optional). "
    "Result: aliases, db_name, collection_name (if given).",
    privilege="ListAliases",
    loop=True,
    run=_list_aliases,
)


# -- partitions ---------------------------------------------------------------------------
def _create_partition(c: OpCall[ops.CreatePartition]) -> Awaitable[PartitionChanged]:
    r = c.request
    req = CreatePartition(db=r.db, collection=r.collection, name=r.partition, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.create_partition, req, r.db, r.collection)


def _drop_partition(c: OpCall[ops.DropPartition]) -> Awaitable[PartitionChanged]:
    r = c.request
    req = DropPartition(db=r.db, collection=r.collection, name=r.partition, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.drop_partition, req, r.db, r.collection)


operation(
    ops.CreatePartition,
    "Create a partition. Body: collection, partition.",
    privilege="CreatePartition",
    ddl=True,
    run=_create_partition,
)
operation(
    ops.DropPartition,
    "Drop a partition (not _default). Body: collection, partition.",
    privilege="DropPartition",
    ddl=True,
    run=_drop_partition,
)
operation(
    ops.HasPartition,
    "Whether a partition exists. Body: collection, partition.",
    privilege="HasPartition",
    loop=True,
    run=lambda c: c.proxy.ddl.has_partition(
        c.request.db, c.request.collection, c.request.partition
    ),
)
operation(
    ops.ListPartitions,
    "Partitions of a collection. Body: collection. Result: names.",
    privilege="ShowPartitions",
    loop=True,
    run=lambda c: c.proxy.ddl.list_partitions(c.request.db, c.request.collection),
)


# -- control ------------------------------------------------------------------------------
async def _list_sessions(c: OpCall[control.ListSessions]) -> Sessions:
    return await c.proxy.coord.list_sessions(ListSessions())


def _get_timestamp(c: OpCall[control.GetTimestamp]) -> Awaitable[Timestamps]:
    count = c.request.count
    return c.proxy.ddl.send(
        RootCoordAPI.alloc_ts, TsoAlloc() if count is None else TsoAlloc(count=count)
    )


operation(
    control.ListSessions,
    "Live processes (roles) registered in the cluster. Result: sessions.",
    privilege="DescribeCluster",
    loop=True,
    run=_list_sessions,
)
operation(
    control.Health,
    "Status of this proxy and of the coord it talks to. Result: status.",
    privilege=OPEN,
    loop=True,
    run=lambda c: c.proxy.ddl.health(),
)
operation(
    control.GetTimestamp,
    "Allocate hybrid timestamps from the TSO. Body: count (default 1). Result: ts, count.",
    privilege=OPEN,
    loop=True,
    run=_get_timestamp,
)
