"""Request types of the coordinator's catalog and query handlers (``elanus.coord.*``; the
data coord's are in ``elanus/api/datacoord.py``) and of a datanode's channels.

Each class is the schema of one subject's body (``elanus.requests.request``); the coord
decodes bodies into them at its edge, and callers in any package may build them instead of
dicts. The key names are the wire format: renaming a field changes the protocol.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.requests import Range, request
from elanus.schema import DEFAULT_DB, MAX_SHARDS

# -- TSO and IDs ------------------------------------------------------------------------------


@request("tso.alloc")
class TsoAlloc:
    count: Annotated[int, Range(1, 1 << 18)] = 1


@request("id.alloc")
class IdAlloc:
    count: Annotated[int, Range(1, 10_000_000)] = 1


# -- DDL: a change carries ``ts`` when the caller took its timestamp (0: the coord takes one) --


@request("database.create")
class CreateDatabase:
    name: str
    ts: int = 0


@request("database.drop")
class DropDatabase:
    name: str
    ts: int = 0


@request("database.list")
class ListDatabases:
    pass


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


@request("collection.drop")
class DropCollection:
    db: str = DEFAULT_DB
    name: str
    ts: int = 0


@request("collection.has")
class HasCollection:
    db: str = DEFAULT_DB
    name: str


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
class RenameCollection:
    db: str = DEFAULT_DB
    name: str
    new_name: str
    new_db: str | None = None
    ts: int = 0


@request("collection.add_field")
class AddCollectionField:
    db: str = DEFAULT_DB
    collection: str
    field: dict[str, Any]
    ts: int = 0


@request("partition.create")
class CreatePartition:
    db: str = DEFAULT_DB
    collection: str
    name: str
    ts: int = 0


@request("partition.drop")
class DropPartition:
    db: str = DEFAULT_DB
    collection: str
    name: str
    ts: int = 0


@request("partition.has")
class HasPartition:
    db: str = DEFAULT_DB
    collection: str
    name: str


@request("partition.list")
class ListPartitions:
    db: str = DEFAULT_DB
    collection: str


@request("alias.create")
class CreateAlias:
    """Also ``alias.alter``: point ``alias`` at ``collection`` (a collection's own name)."""

    db: str = DEFAULT_DB
    collection: str
    alias: str
    ts: int = 0


@request("alias.drop")
class DropAlias:
    db: str = DEFAULT_DB
    alias: str
    ts: int = 0


@request("alias.describe")
class DescribeAlias:
    db: str = DEFAULT_DB
    alias: str


@request("alias.list")
class ListAliases:
    """The aliases of ``collection``, or of every collection of ``db``."""

    db: str = DEFAULT_DB
    collection: str | None = None


# -- loading (query coord) --------------------------------------------------------------------


@request("query.load")
class LoadCollection:
    collection_id: int
    partition_ids: list[int] | None = None
    """Load only these partitions (``None``: all of them)."""


@request("query.release")
class ReleaseCollection:
    collection_id: int


@request("query.state")
class LoadState:
    collection_id: int


@request("query.route")
class QueryRoute:
    collection_id: int


# -- a datanode's channels --------------------------------------------------------------------


@request("datanode.watch")
class WatchChannel:
    vchannel: str
    pchannel: str
    collection_id: int
    schema: dict[str, Any]
    checkpoint: dict[str, Any] | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    """The channel's unflushed segments, as the coord knows them."""


@request("datanode.unwatch")
class UnwatchChannel:
    vchannel: str


@request("node.schema")
class UpdateSchema:
    """A collection's new schema (a field was added), for the nodes holding its rows: they
    widen what they hold before any proxy lets a client use the field."""

    collection_id: int
    schema: dict[str, Any]
