"""The root coord's API (``meta/rootcoord.py``): timestamps, ids, databases, collections,
partitions and aliases, and the schema push it sends to data and query nodes.

A change carries ``ts`` when the caller took its timestamp (the proxy's DdQueue does; 0:
the coord takes one). The key names are the wire format: renaming a field changes the
protocol, and the Flight layer hands several replies to clients as they are.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.api.base import Ack, Stub, record, reply
from elanus.channels.bus import Bus
from elanus.channels.subjects import COORD
from elanus.requests import Range, request
from elanus.schema import DEFAULT_DB, MAX_SHARDS

# -- TSO and IDs ------------------------------------------------------------------------------


@request("tso.alloc")
class TsoAlloc:
    count: Annotated[int, Range(1, 1 << 18)] = 1


@reply
class Timestamps:
    """``count`` consecutive timestamps from ``ts``."""

    ts: int
    count: int


@request("id.alloc")
class IdAlloc:
    count: Annotated[int, Range(1, 10_000_000)] = 1


@reply
class IdBlock:
    """``count`` ids from ``start``."""

    start: int
    count: int


# -- databases --------------------------------------------------------------------------------


@request("database.create")
class CreateDatabase:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    """Checked by the proxy (``elanus.dbproperties``)."""
    ts: int = 0


@reply
class DatabaseCreated:
    db_id: int


@request("database.drop")
class DropDatabase:
    name: str
    ts: int = 0


@request("database.list")
class ListDatabases:
    pass


@request("database.describe")
class DescribeDatabase:
    name: str


@reply
class DatabaseDescription:
    """A database as Milvus's ``describe_database`` answers: its properties as text."""

    name: str
    db_id: int
    created_ts: int
    properties: dict[str, str]


@request("database.alter_properties")
class AlterDatabaseProperties:
    """Set ``properties`` or drop ``delete_keys`` of a database's properties (checked by
    the proxy: one or the other, as Milvus); a key dropped that is not set is no change."""

    name: str
    properties: dict[str, str] = field(default_factory=dict)
    delete_keys: list[str] = field(default_factory=list)
    ts: int = 0


@reply
class Names:
    """Names of databases, or of a database's collections."""

    names: list[str]


# -- the keys requests share, first in each --------------------------------------------------


@record
class CollectionNamed:
    """The keys of a request about one collection, by its name in ``db``."""

    db: str = DEFAULT_DB
    name: str


@record
class OnCollection:
    """The keys of a request about one collection's parts (fields, functions, partitions,
    aliases, settings): ``db`` and the collection's name, first."""

    db: str = DEFAULT_DB
    collection: str


@record
class OnPartition(OnCollection):
    """... and about one partition of it, by ``name``."""

    name: str


@record
class AliasNamed:
    """The keys of a request about one alias, by its name in ``db``."""

    db: str = DEFAULT_DB
    alias: str


# -- collections ------------------------------------------------------------------------------


@request("collection.create")
class CreateCollection:
    db: str = DEFAULT_DB
    name: str
    schema: dict[str, Any]
    num_shards: Annotated[int, Range(1, MAX_SHARDS)] = 1
    consistency_level: str = "Bounded"
    properties: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    num_partitions: int | None = None
    """Partitions of a partition key collection (checked by the coord against the schema)."""
    ts: int = 0


@reply
class PartitionInfo:
    name: str
    partition_id: int
    created_ts: int


@reply
class CollectionDescription:
    """A collection as the catalog holds it; the proxy caches it and hands it to clients
    as ``describe_collection``'s result. ``schema`` is the schema document
    (``Schema.to_dict``), field ids included."""

    collection_id: int
    db: str
    name: str
    description: str
    schema: dict[str, Any]
    num_shards: int
    consistency_level: str
    properties: dict[str, str]
    created_ts: int
    vchannels: list[str]
    pchannels: list[str]
    partitions: list[PartitionInfo]
    aliases: list[str]
    field_properties: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each field's stored settings (``elanus.fieldprops``: mmap, warm-up), by name."""
    index_properties: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each index's stored settings (``elanus.indexprops``), by index id (as text)."""


@request("collection.drop")
class DropCollection(CollectionNamed):
    ts: int = 0


TRUNCATE_WAIT_S = 60.0
"""How long a truncate waits for the datanodes to write the rows it removes."""


@request("collection.truncate")
class TruncateCollection(CollectionNamed):
    pass


@reply
class Truncated:
    """``ts``: the truncate's timestamp (rows written before it are gone);
    ``segment_ids``: the segments it dropped."""

    collection_id: int
    ts: int
    segment_ids: list[int]


@reply
class CollectionChanged:
    """The collection a drop, a rename or an alias change applied to."""

    collection_id: int


@request("collection.has")
class HasCollection(CollectionNamed):
    pass


@reply
class Flag:
    """The answer of a ``has`` call."""

    value: bool


@request("collection.describe")
class DescribeCollection:
    """By ``collection_id`` if given, else by ``name`` in ``db``."""

    db: str = DEFAULT_DB
    collection_id: int | None = None
    name: str | None = None


@request("collection.list")
class ListCollections:
    db: str = DEFAULT_DB


@request("collection.rename")
class RenameCollection(CollectionNamed):
    new_name: str
    new_db: str | None = None
    ts: int = 0


@request("collection.add_field")
class AddCollectionField(OnCollection):
    field: dict[str, Any]
    ts: int = 0


@request("collection.drop_field")
class DropCollectionField(OnCollection):
    """Drop one field, named (``field_name``) or by id (``field_id``), as Milvus 2.6's
    ``AlterCollectionSchema`` drop request; its stored values stay in the segments but
    are never read again, and indexes on it go with it."""

    field_name: str | None = None
    field_id: int | None = None
    ts: int = 0


@request("collection.add_function")
class AddFunction(OnCollection):
    """Add a function and its output field to a collection (Milvus 2.6's
    ``add_function_field``); rows already written get the output (backfilled). ``field``
    and ``function`` are JSON as in a schema."""

    field: dict[str, Any]
    function: dict[str, Any]
    ts: int = 0


@request("collection.drop_function")
class DropFunction(OnCollection):
    """Drop a function together with its output fields, as Milvus 2.6's
    ``AlterCollectionSchema`` drop request by ``function_name`` (pymilvus's
    ``drop_function_field``); the fields go as ``DropCollectionField`` drops one."""

    function: str
    ts: int = 0


@request("collection.alter_properties")
class AlterCollectionProperties(CollectionNamed):
    """Set ``properties`` and drop ``delete_keys`` of a collection's properties (checked
    by the proxy); a key dropped that is not set is no change, as in Milvus."""

    properties: dict[str, str] = field(default_factory=dict)
    delete_keys: list[str] = field(default_factory=list)
    ts: int = 0


@request("collection.alter_mmap")
class AlterMmap(OnCollection):
    """Set (``enabled``) or drop (``None``) Milvus's ``mmap.enabled`` of a collection, of
    one of its fields or of one of its indexes (``elanus.mmapsettings``); refused while
    the collection is loaded."""

    enabled: bool | None = None
    field: str | None = None
    index_id: int | None = None
    ts: int = 0


@request("collection.alter_field")
class AlterCollectionField(OnCollection):
    """Milvus's ``alter_collection_field``: set ``properties`` and drop ``delete_keys`` of
    one field (keys and value shapes checked by the proxy: ``elanus.fieldprops``)."""

    field_name: str
    properties: dict[str, str] = field(default_factory=dict)
    delete_keys: list[str] = field(default_factory=list)
    ts: int = 0


@request("collection.alter_index")
class AlterIndexProperties(OnCollection):
    """Milvus's ``alter_index_properties`` / ``drop_index_properties`` of the index
    ``index_id`` (keys and values checked by the proxy: ``elanus.indexprops``)."""

    index_id: int
    properties: dict[str, str] = field(default_factory=dict)
    delete_keys: list[str] = field(default_factory=list)
    ts: int = 0


@reply
class FieldAdded:
    collection_id: int
    field_id: int
    version: int
    """The collection's new schema version."""


@reply
class FunctionDropped:
    collection_id: int
    field_ids: list[int]
    """The output fields dropped with the function."""
    version: int


@reply
class FieldDropped:
    collection_id: int
    field_id: int
    version: int
    """The collection's new schema version."""


# -- partitions -------------------------------------------------------------------------------


@request("partition.create")
class CreatePartition(OnPartition):
    ts: int = 0


@reply
class PartitionChanged:
    partition_id: int


@request("partition.drop")
class DropPartition(OnPartition):
    ts: int = 0


@request("partition.has")
class HasPartition(OnPartition):
    pass


@request("partition.list")
class ListPartitions(OnCollection):
    pass


@reply
class Partitions:
    partitions: list[PartitionInfo]


# -- aliases ----------------------------------------------------------------------------------


@request("alias.create")
class CreateAlias(OnCollection):
    """Also ``alias.alter``: point ``alias`` at ``collection`` (a collection's own name)."""

    alias: str
    ts: int = 0


@request("alias.drop")
class DropAlias(AliasNamed):
    ts: int = 0


@request("alias.describe")
class DescribeAlias(AliasNamed):
    pass


@reply
class AliasDescription:
    alias: str
    collection_name: str
    db_name: str


@request("alias.list")
class ListAliases:
    """The aliases of ``collection``, or of every collection of ``db``."""

    db: str = DEFAULT_DB
    collection: str | None = None


@reply
class AliasList:
    aliases: list[str]
    db_name: str
    collection_name: str | None = None

    def to_body(self) -> dict[str, Any]:
        """pymilvus's shape: ``collection_name`` only when one was asked about."""
        out: dict[str, Any] = {"aliases": list(self.aliases), "db_name": self.db_name}
        if self.collection_name is not None:
            out["collection_name"] = self.collection_name
        return out


# -- the schema push to nodes -----------------------------------------------------------------


@request("node.schema")
class UpdateSchema:
    """A collection's new schema (a field was added), for the nodes holding its rows: they
    widen what they hold before any proxy lets a client use the field."""

    collection_id: int
    schema: dict[str, Any]


@reply
class SchemaTaken:
    """The schema version the node holds now (``None``: it holds nothing of the
    collection)."""

    version: int | None


class RootCoordAPI(Stub):
    """The root coord's calls, on ``elanus.coord.<method>``."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, COORD, timeout)

    async def alloc_ts(self, req: TsoAlloc) -> Timestamps:
        return await self._ask("tso.alloc", req, Timestamps)

    async def alloc_ids(self, req: IdAlloc) -> IdBlock:
        return await self._ask("id.alloc", req, IdBlock)

    async def create_database(self, req: CreateDatabase) -> DatabaseCreated:
        return await self._ask("database.create", req, DatabaseCreated)

    async def drop_database(self, req: DropDatabase) -> Ack:
        return await self._ask("database.drop", req, Ack)

    async def list_databases(self, req: ListDatabases) -> Names:
        return await self._ask("database.list", req, Names)

    async def describe_database(self, req: DescribeDatabase) -> DatabaseDescription:
        return await self._ask("database.describe", req, DatabaseDescription)

    async def alter_database_properties(self, req: AlterDatabaseProperties) -> Ack:
        return await self._ask("database.alter_properties", req, Ack)

    async def create_collection(self, req: CreateCollection) -> CollectionDescription:
        return await self._ask("collection.create", req, CollectionDescription)

    async def drop_collection(self, req: DropCollection) -> CollectionChanged:
        return await self._ask("collection.drop", req, CollectionChanged)

    async def truncate_collection(
        self, req: TruncateCollection, timeout: float | None = None
    ) -> Truncated:
        return await self._ask("collection.truncate", req, Truncated, timeout)

    async def has_collection(self, req: HasCollection) -> Flag:
        return await self._ask("collection.has", req, Flag)

    async def describe_collection(self, req: DescribeCollection) -> CollectionDescription:
        return await self._ask("collection.describe", req, CollectionDescription)

    async def list_collections(self, req: ListCollections) -> Names:
        return await self._ask("collection.list", req, Names)

    async def rename_collection(self, req: RenameCollection) -> CollectionChanged:
        return await self._ask("collection.rename", req, CollectionChanged)

    async def alter_collection_properties(
        self, req: AlterCollectionProperties
    ) -> CollectionChanged:
        return await self._ask("collection.alter_properties", req, CollectionChanged)

    async def add_collection_field(self, req: AddCollectionField) -> FieldAdded:
        return await self._ask("collection.add_field", req, FieldAdded)

    async def drop_collection_field(self, req: DropCollectionField) -> FieldDropped:
        return await self._ask("collection.drop_field", req, FieldDropped)

    async def add_function(self, req: AddFunction) -> FieldAdded:
        return await self._ask("collection.add_function", req, FieldAdded)

    async def drop_function(self, req: DropFunction) -> FunctionDropped:
        return await self._ask("collection.drop_function", req, FunctionDropped)

    async def alter_collection_field(self, req: AlterCollectionField) -> CollectionChanged:
        return await self._ask("collection.alter_field", req, CollectionChanged)

    async def alter_index_properties(self, req: AlterIndexProperties) -> CollectionChanged:
        return await self._ask("collection.alter_index", req, CollectionChanged)

    async def alter_mmap(self, req: AlterMmap) -> CollectionChanged:
        return await self._ask("collection.alter_mmap", req, CollectionChanged)

    async def create_partition(self, req: CreatePartition) -> PartitionChanged:
        return await self._ask("partition.create", req, PartitionChanged)

    async def drop_partition(self, req: DropPartition) -> PartitionChanged:
        return await self._ask("partition.drop", req, PartitionChanged)

    async def has_partition(self, req: HasPartition) -> Flag:
        return await self._ask("partition.has", req, Flag)

    async def list_partitions(self, req: ListPartitions) -> Partitions:
        return await self._ask("partition.list", req, Partitions)

    async def create_alias(self, req: CreateAlias) -> CollectionChanged:
        return await self._ask("alias.create", req, CollectionChanged)

    async def alter_alias(self, req: CreateAlias) -> CollectionChanged:
        return await self._ask("alias.alter", req, CollectionChanged)

    async def drop_alias(self, req: DropAlias) -> Ack:
        return await self._ask("alias.drop", req, Ack)

    async def describe_alias(self, req: DescribeAlias) -> AliasDescription:
        return await self._ask("alias.describe", req, AliasDescription)

    async def list_aliases(self, req: ListAliases) -> AliasList:
        return await self._ask("alias.list", req, AliasList)


class SchemaAPI(Stub):
    """A data or query node's ``schema`` call (``elanus.<role>.<node_id>.schema``)."""

    async def update_schema(self, req: UpdateSchema, timeout: float | None = None) -> SchemaTaken:
        return await self._ask("schema", req, SchemaTaken, timeout)
