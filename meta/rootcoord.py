"""Root coordination: TSO, IDs and DDL (seed 000 §6.1, seed 003).

DDL runs one request at a time (an asyncio lock in front of the single database thread),
each stamped with a TSO timestamp, and every change is broadcast so proxies drop their
cached meta before the next request sees it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from elanus import indexprops
from elanus.api.base import ACK, Ack
from elanus.api.rootcoord import (
    AddCollectionField,
    AddFunction,
    AliasDescription,
    AliasList,
    AlterCollectionField,
    AlterCollectionProperties,
    AlterDatabaseProperties,
    AlterIndexProperties,
    AlterMmap,
    CollectionChanged,
    CollectionDescription,
    CreateAlias,
    CreateCollection,
    CreateDatabase,
    CreatePartition,
    DatabaseCreated,
    DatabaseDescription,
    DescribeAlias,
    DescribeCollection,
    DescribeDatabase,
    DropAlias,
    DropCollection,
    DropCollectionField,
    DropDatabase,
    DropFunction,
    DropPartition,
    FieldAdded,
    FieldDropped,
    Flag,
    FunctionDropped,
    HasCollection,
    HasPartition,
    IdAlloc,
    IdBlock,
    ListAliases,
    ListCollections,
    ListDatabases,
    ListPartitions,
    Names,
    PartitionChanged,
    PartitionInfo,
    Partitions,
    RenameCollection,
    SchemaAPI,
    Timestamps,
    TsoAlloc,
    UpdateSchema,
)
from elanus.channels import subjects
from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.fieldprops import canonical, of_field, plan, stored_key
from elanus.functions import Function
from elanus.meta.catalog import Catalog
from elanus.mmapsettings import KEY as MMAP_KEY
from elanus.mmapsettings import field_key, index_key, public
from elanus.partitionkey import check_num_partitions
from elanus.properties import MMAP_KEYS
from elanus.schema import Field, Schema, check_name
from elanus.schemachange import added_field

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.collections import CatalogLookup
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import (
        ChannelBalance,
        CollectionIndexes,
        CollectionSegments,
        LoadedCollections,
        ProxyNotices,
    )


log = logging.getLogger(__name__)
NODE_WAIT_S = 10.0
_MMAP_LOADED = "can not alter mmap properties if collection loaded"
_INDEX_LOADED = "can't alter index on loaded collection, please release the collection first"
_FIELD_LOADED = "can not alter collection field properties if collection loaded"


class RootCoord:
    """DDL: each change also reaches the services that hold the collection's state."""

    def __init__(
        self,
        ctx: CoordContext,
        lookup: CatalogLookup,
        proxies: ProxyNotices,
        *,
        data: CollectionSegments,
        index: CollectionIndexes,
        query: LoadedCollections,
        channels: ChannelBalance,
    ) -> None:
        self.ctx, self.lookup, self.proxies = ctx, lookup, proxies
        self.data, self.index, self.query, self.channels = data, index, query, channels
        self._ddl_lock = asyncio.Lock()

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "tso.alloc": self.tso_alloc,
            "id.alloc": self.id_alloc,
            "database.create": self.create_database,
            "database.drop": self.drop_database,
            "database.list": self.list_databases,
            "database.describe": self.describe_database,
            "database.alter_properties": self.alter_database_properties,
            "collection.create": self.create_collection,
            "collection.drop": self.drop_collection,
            "collection.has": self.has_collection,
            "collection.describe": self.describe_collection,
            "collection.list": self.list_collections,
            "collection.rename": self.rename_collection,
            "collection.add_field": self.add_collection_field,
            "collection.drop_field": self.drop_collection_field,
            "collection.add_function": self.add_function,
            "collection.drop_function": self.drop_function,
            "collection.alter_properties": self.alter_collection_properties,
            "collection.alter_mmap": self.alter_mmap,
            "collection.alter_field": self.alter_collection_field,
            "collection.alter_index": self.alter_index_properties,
            "partition.create": self.create_partition,
            "partition.drop": self.drop_partition,
            "partition.has": self.has_partition,
            "partition.list": self.list_partitions,
            "alias.create": self.create_alias,
            "alias.alter": self.alter_alias,
            "alias.drop": self.drop_alias,
            "alias.describe": self.describe_alias,
            "alias.list": self.list_aliases,
        }

    # -- helpers ----------------------------------------------------------------------------
    async def _read(self, fn: Any, *args: Any) -> Any:
        return await self.lookup.read(fn, *args)

    async def _ddl(self, ts: int, fn: Any, *args: Any) -> tuple[Any, int]:
        """Run one DDL change under the DDL lock, stamped with the request's timestamp (if
        the caller took one, else a new one)."""
        ts = ts or self.ctx.tso.alloc()
        async with self._ddl_lock:
            result = await self.ctx.db.run(lambda con: fn(self._catalog(con), *args, ts))
        return result, ts

    def _catalog(self, con: Any) -> Catalog:
        return self.lookup.catalog(con)

    async def _invalidate(self, kind: str, db: str, name: str, collection_id: int, ts: int) -> None:
        await self.proxies.invalidate(kind, db, name, collection_id, ts)

    # -- TSO and IDs ------------------------------------------------------------------------
    async def tso_alloc(self, req: TsoAlloc) -> Timestamps:
        return Timestamps(ts=self.ctx.tso.alloc(req.count), count=req.count)

    async def id_alloc(self, req: IdAlloc) -> IdBlock:
        return IdBlock(start=self.ctx.ids.alloc(req.count), count=req.count)

    # -- databases --------------------------------------------------------------------------
    async def create_database(self, req: CreateDatabase) -> DatabaseCreated:
        name = check_name(req.name, "database")
        db_id, _ = await self._ddl(req.ts, Catalog.create_database, name, req.properties)
        return DatabaseCreated(db_id=db_id)

    async def describe_database(self, req: DescribeDatabase) -> DatabaseDescription:
        described = await self._read(Catalog.describe_database, req.name)
        return DatabaseDescription(**described)

    async def alter_database_properties(self, req: AlterDatabaseProperties) -> Ack:
        """Change a database's properties; every proxy drops what it cached of the
        database (its properties and its collections) before this answers, so the next
        write, read or load there obeys the new ones."""

        def alter(cat: Catalog, ts: int) -> None:
            cat.alter_database_properties(req.name, req.properties, req.delete_keys)

        _, ts = await self._ddl(req.ts, alter)
        await self._invalidate("database.alter_properties", req.name, "", 0, ts)
        return ACK

    async def drop_database(self, req: DropDatabase) -> Ack:
        _, ts = await self._ddl(req.ts, Catalog.drop_database, req.name)
        await self._invalidate("database.drop", req.name, "", 0, ts)  # its cached properties
        return ACK

    async def list_databases(self, req: ListDatabases) -> Names:
        return Names(names=await self._read(Catalog.list_databases))

    # -- collections ------------------------------------------------------------------------
    async def create_collection(self, req: CreateCollection) -> CollectionDescription:
        db = req.db
        name = check_name(req.name, "collection")
        schema = Schema.from_dict(req.schema)
        schema.validate()
        num_partitions = check_num_partitions(req.num_partitions, schema.partition_key is not None)
        try:
            level = ConsistencyLevel.parse(req.consistency_level)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        properties = req.properties
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
            raise invalid("collection.create: 'properties' must map strings to strings")

        def create(cat: Catalog, ts: int) -> dict[str, Any]:
            return cat.create_collection(
                db,
                name,
                schema,
                num_shards=req.num_shards,
                consistency_level=level.value,
                properties=properties,
                description=req.description,
                ts=ts,
                num_partitions=num_partitions,
            )

        info, ts = await self._ddl(req.ts, create)
        await self._invalidate("collection.create", db, name, info["collection_id"], ts)
        await self.channels.balance()  # (re)assign vchannels and the ticked pchannels
        return described(info)

    async def drop_collection(self, req: DropCollection) -> CollectionChanged:
        db, name = req.db, req.name
        cid, ts = await self._ddl(req.ts, Catalog.drop_collection, db, name)
        await self._invalidate("collection.drop", db, name, cid, ts)
        await self.query.release_collection(cid)
        await self.data.drop_collection(cid, ts)
        await self.index.drop_collection(cid)
        await self.channels.balance()  # (re)assign vchannels and the ticked pchannels
        return CollectionChanged(collection_id=cid)

    async def has_collection(self, req: HasCollection) -> Flag:
        return Flag(value=await self._read(Catalog.has_collection, req.db, req.name))

    async def describe_collection(self, req: DescribeCollection) -> CollectionDescription:
        if req.collection_id is not None:
            return described(await self._read(Catalog.describe_by_id, req.collection_id))
        if req.name is None:
            raise invalid("collection.describe needs 'name' or 'collection_id'")
        return described(await self._read(Catalog.describe, req.db, req.name))

    async def list_collections(self, req: ListCollections) -> Names:
        return Names(names=await self._read(Catalog.list_collections, req.db))

    async def rename_collection(self, req: RenameCollection) -> CollectionChanged:
        db, name = req.db, req.name
        new_name = check_name(req.new_name, "collection")

        def rename(cat: Catalog, ts: int) -> int:
            return cat.rename_collection(db, name, new_name, req.new_db)

        cid, ts = await self._ddl(req.ts, rename)
        await self._invalidate("collection.rename", db, name, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def alter_collection_properties(
        self, req: AlterCollectionProperties
    ) -> CollectionChanged:
        """Change a collection's properties (checked by the proxy); proxies drop their
        cached meta before this answers, so the next read there takes the new TTL. As in
        Milvus, ``mmap.enabled`` only changes while the collection is released."""
        mmap = any(k in MMAP_KEYS for k in (*req.properties, *req.delete_keys))

        def alter(cat: Catalog, ts: int) -> int:
            if mmap:
                cid = cat.require_collection(req.db, req.name)
                self._released(cid, "alter_collection_properties", _MMAP_LOADED, req.name)
            return cat.alter_properties(req.db, req.name, req.properties, req.delete_keys)

        cid, ts = await self._ddl(req.ts, alter)
        await self._invalidate("collection.alter_properties", req.db, req.name, cid, ts)
        return CollectionChanged(collection_id=cid)

    def _released(self, cid: int, what: str, loaded: str, collection: str) -> None:
        """Refuse a change that Milvus makes only while the collection is released."""
        if cid in self.query.loaded:
            raise invalid(f"{what}: {loaded} ({collection!r})")

    async def _change_schema(
        self, kind: str, db_name: str, collection: str, ts: int, change: Any
    ) -> tuple[int, Schema, list[Field]]:
        """One change to a collection's fields (``change(catalog)`` gives its id, the new
        schema and the fields dropped). Under the DDL lock: check it against the catalog,
        hand the new schema to every data and query node (they widen or narrow their rows
        and ack), then save it; then drop the dropped fields' indexes and expire the
        proxies' caches: no client can use the new schema before every holder of rows
        has it. A refusal changes nothing."""
        ts = ts or self.ctx.tso.alloc()
        db = self.ctx.db
        async with self._ddl_lock:
            cid, schema, dropped = await db.run(lambda con: change(self._catalog(con)))
            await self._tell_nodes(cid, schema)
            await db.run(lambda con: self._catalog(con).save_schema(cid, schema))
        self.data.forget_schema(cid)
        for f in dropped:
            await self.index.drop_field(cid, f.name)
        await self._invalidate(kind, db_name, collection, cid, ts)
        return cid, schema, dropped

    async def add_collection_field(self, req: AddCollectionField) -> FieldAdded:
        """Add a nullable scalar field (``_change_schema``)."""
        added = added_field(req.field)

        def change(cat: Catalog) -> tuple[int, Schema, list[Field]]:
            return (*cat.with_added_field(req.db, req.collection, added), [])

        cid, schema, _ = await self._change_schema(
            "collection.add_field", req.db, req.collection, req.ts, change
        )
        assert added.field_id is not None  # with_added_field numbered it
        return FieldAdded(collection_id=cid, field_id=added.field_id, version=schema.version)

    async def drop_collection_field(self, req: DropCollectionField) -> FieldDropped:
        """Drop a field (``_change_schema``): nodes stop reading its column (its data stays
        in the segments, as in Milvus) and its indexes go."""
        if (req.field_name is None) == (req.field_id is None):
            raise invalid("drop_collection_field: give exactly one of 'field_name' and 'field_id'")

        def change(cat: Catalog) -> tuple[int, Schema, list[Field]]:
            cid, schema, gone = cat.without_field(
                req.db, req.collection, req.field_name, req.field_id
            )
            return cid, schema, [gone]

        cid, schema, dropped = await self._change_schema(
            "collection.drop_field", req.db, req.collection, req.ts, change
        )
        field_id = dropped[0].field_id
        assert field_id is not None
        return FieldDropped(collection_id=cid, field_id=field_id, version=schema.version)

    async def add_function(self, req: AddFunction) -> FieldAdded:
        """Add a function and its output field (``_change_schema``). Rows already written
        get the output, as Milvus 2.6 backfills it: nodes compute it for the rows they
        hold and read (``storage.Computed``), a segment sealed later is widened before it
        is sorted (``SealSync``), and each data node writes the column into its channels'
        flushed segments (``ChannelWriter.adopt``), so an index on the output reads it from
        every segment's files."""
        output = Field.from_dict(req.field)
        output.field_id = None  # the coord numbers it
        output.validate()
        function = Function.from_dict(req.function)

        def change(cat: Catalog) -> tuple[int, Schema, list[Field]]:
            return (*cat.with_function(req.db, req.collection, output, function), [])

        cid, schema, _ = await self._change_schema(
            "collection.add_function", req.db, req.collection, req.ts, change
        )
        assert output.field_id is not None
        return FieldAdded(collection_id=cid, field_id=output.field_id, version=schema.version)

    async def drop_function(self, req: DropFunction) -> FunctionDropped:
        """Drop a function with its output fields, as Milvus's ``drop_function_field``
        (``_change_schema``)."""

        def change(cat: Catalog) -> tuple[int, Schema, list[Field]]:
            return cat.without_function(req.db, req.collection, req.function)

        cid, schema, dropped = await self._change_schema(
            "collection.drop_function", req.db, req.collection, req.ts, change
        )
        ids = [f.field_id for f in dropped if f.field_id is not None]
        return FunctionDropped(collection_id=cid, field_ids=ids, version=schema.version)

    async def alter_mmap(self, req: AlterMmap) -> CollectionChanged:
        """Set or drop ``mmap.enabled`` (``elanus.mmapsettings``). As in Milvus, only while
        the collection is released: a loaded one keeps what it was loaded with."""
        key, loaded = MMAP_KEY, _MMAP_LOADED
        if req.index_id is not None:
            key = index_key(req.index_id)
            loaded = _INDEX_LOADED
        elif req.field is not None:
            key = field_key(req.field)
            loaded = _FIELD_LOADED
        value = None if req.enabled is None else str(req.enabled).lower()

        def alter(cat: Catalog, ts: int) -> int:
            cid = cat.require_collection(req.db, req.collection)
            names = {f["name"] for f in cat.describe_by_id(cid)["schema"]["fields"]}
            if req.field is not None and req.field not in names:
                raise invalid(
                    f"alter_mmap: collection {req.collection!r} has no field {req.field!r}"
                )
            self._released(cid, "alter_mmap", loaded, req.collection)
            changes = {} if value is None else {key: value}
            return cat.alter_properties(req.db, req.collection, changes, [key])

        cid, ts = await self._ddl(req.ts, alter)
        await self._invalidate("collection.alter", req.db, req.collection, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def alter_collection_field(self, req: AlterCollectionField) -> CollectionChanged:
        """Change one field's properties (``elanus.fieldprops``). A new ``max_length`` or
        ``max_capacity`` is a new schema version, handed to the nodes before it is saved,
        as an added field is; the stored settings change only while the collection is
        released, as in Milvus. A refusal changes nothing."""
        ts = req.ts or self.ctx.tso.alloc()
        dropped = [stored_key(req.field_name, canonical(k)) for k in req.delete_keys]

        def check(cat: Catalog) -> tuple[int, Schema | None, dict[str, str]]:
            cid = cat.require_collection(req.db, req.collection)
            schema = Schema.from_dict(cat.describe_by_id(cid)["schema"])
            new, stored = plan(schema, req.collection, req.field_name, req.properties)
            if stored or dropped:
                self._released(cid, "alter_collection_field", _FIELD_LOADED, req.collection)
            return cid, new, stored

        def save(cat: Catalog, cid: int, new: Schema | None, stored: dict[str, str]) -> None:
            if new is not None:
                cat.save_schema(cid, new)
            if stored or dropped:
                cat.alter_properties(req.db, req.collection, stored, dropped)

        async with self._ddl_lock:
            cid, new, stored = await self.ctx.db.run(lambda con: check(self._catalog(con)))
            if new is not None:
                await self._tell_nodes(cid, new)
            await self.ctx.db.run(lambda con: save(self._catalog(con), cid, new, stored))
        if new is not None:
            self.data.forget_schema(cid)
        await self._invalidate("collection.alter_field", req.db, req.collection, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def alter_index_properties(self, req: AlterIndexProperties) -> CollectionChanged:
        """Set or drop an index's settings (``elanus.indexprops``): as in Milvus, only
        while the collection is released."""
        changes = indexprops.stored(req.index_id, req.properties)
        dropped = [
            indexprops.stored_key(req.index_id, indexprops.canonical(k)) for k in req.delete_keys
        ]

        def alter(cat: Catalog, ts: int) -> int:
            cid = cat.require_collection(req.db, req.collection)
            self._released(cid, "alter_index_properties", _INDEX_LOADED, req.collection)
            return cat.alter_properties(req.db, req.collection, changes, dropped)

        cid, ts = await self._ddl(req.ts, alter)
        await self._invalidate("collection.alter", req.db, req.collection, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def _tell_nodes(self, collection_id: int, schema: Schema) -> None:
        """Every live data and query node takes the schema (nodes that do not hold the
        collection ignore it). A node that does not answer is only logged: its session
        is on its way out, and a node that comes back watches with the saved schema."""
        req = UpdateSchema(collection_id=collection_id, schema=schema.to_dict())
        await self.ctx.sessions.poll()
        nodes = [
            SchemaAPI(self.ctx.bus, subjects.node_prefix(role, s.node_id))
            for role in ("datanode", "querynode")
            for s in self.ctx.sessions.of_role(role)
        ]
        results = await asyncio.gather(
            *(node.update_schema(req, NODE_WAIT_S) for node in nodes),
            return_exceptions=True,
        )
        for node, result in zip(nodes, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("%s did not take the new schema: %s", node.prefix, result)

    # -- partitions -------------------------------------------------------------------------
    async def create_partition(self, req: CreatePartition) -> PartitionChanged:
        db, coll = req.db, req.collection
        name = check_name(req.name, "partition")
        pid, ts = await self._ddl(req.ts, Catalog.create_partition, db, coll, name)
        cid = await self._read(Catalog.require_collection, db, coll)
        await self._invalidate("partition.create", db, coll, cid, ts)
        return PartitionChanged(partition_id=pid)

    async def drop_partition(self, req: DropPartition) -> PartitionChanged:
        db, coll, name = req.db, req.collection, req.name
        parts = {
            p["name"]: p["partition_id"]
            for p in await self._read(Catalog.list_partitions, db, coll)
        }
        if name in parts and self.query.serves(
            await self._read(Catalog.require_collection, db, coll), parts[name]
        ):
            raise invalid(
                f"partition {name!r} of {coll!r} is loaded: release the collection before "
                "dropping it"
            )
        (cid, pid), ts = await self._ddl(req.ts, Catalog.drop_partition, db, coll, name)
        await self._invalidate("partition.drop", db, coll, cid, ts)
        await self.data.drop_segments(
            lambda s: s.collection_id == cid and s.partition_id == pid, ts
        )
        return PartitionChanged(partition_id=pid)

    async def has_partition(self, req: HasPartition) -> Flag:
        return Flag(value=await self._read(Catalog.has_partition, req.db, req.collection, req.name))

    async def list_partitions(self, req: ListPartitions) -> Partitions:
        found = await self._read(Catalog.list_partitions, req.db, req.collection)
        return Partitions(partitions=[PartitionInfo(**p) for p in found])

    # -- aliases ----------------------------------------------------------------------------
    # Every change is broadcast under the alias's name and the collection it named, so a
    # proxy drops both the alias's cache entry and the collection's (whose description
    # lists its aliases) before the next request reads them.
    async def create_alias(self, req: CreateAlias) -> CollectionChanged:
        alias = check_name(req.alias, "alias")
        cid, ts = await self._ddl(req.ts, Catalog.create_alias, req.db, req.collection, alias)
        await self._invalidate("alias.create", req.db, alias, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def alter_alias(self, req: CreateAlias) -> CollectionChanged:
        alias = check_name(req.alias, "alias")
        (old, cid), ts = await self._ddl(req.ts, Catalog.alter_alias, req.db, req.collection, alias)
        await self._invalidate("alias.alter", req.db, alias, old, ts)
        if cid != old:
            await self._invalidate("alias.alter", req.db, alias, cid, ts)
        return CollectionChanged(collection_id=cid)

    async def drop_alias(self, req: DropAlias) -> Ack:
        cid, ts = await self._ddl(req.ts, Catalog.drop_alias, req.db, req.alias)
        await self._invalidate("alias.drop", req.db, req.alias, cid, ts)
        return ACK

    async def describe_alias(self, req: DescribeAlias) -> AliasDescription:
        return AliasDescription(**await self._read(Catalog.describe_alias, req.db, req.alias))

    async def list_aliases(self, req: ListAliases) -> AliasList:
        aliases = await self._read(Catalog.list_aliases, req.db, req.collection)
        return AliasList(aliases=aliases, db_name=req.db, collection_name=req.collection)


def described(d: dict[str, Any]) -> CollectionDescription:
    """The catalog's description of a collection as the reply type."""
    names = [f["name"] for f in d["schema"]["fields"]]
    settings = {n: kept for n in names if (kept := of_field(d["properties"], n))}
    ids = {int(k.split(".")[1]) for k in d["properties"] if indexprops.is_stored_key(k)}
    per_index = {str(i): indexprops.of_index(d["properties"], i) for i in sorted(ids)}
    return CollectionDescription(
        **{
            **d,
            "properties": public(d["properties"]),
            "field_properties": settings,
            "index_properties": per_index,
            "partitions": [PartitionInfo(**p) for p in d["partitions"]],
        }
    )
