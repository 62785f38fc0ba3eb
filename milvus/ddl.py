"""Databases, collections, partitions and aliases: each RPC one Flight action."""

from __future__ import annotations

from typing import Any, TypedDict

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus.api.rootcoord import TRUNCATE_WAIT_S, TruncateCollection
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.milvus.fields import check
from elanus.milvus.honoured import COLLECTION_SCHEMA, FIELD_SCHEMA
from elanus.milvus.params import consistency_name
from elanus.milvus.schemas import describe_reply, field_doc, kv_dict, parse_message, schema_doc
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import collections as colls
from elanus.ops import databases as dbs
from elanus.ops import partitions as ops
from elanus.ops.schemachange import AddCollectionField
from elanus.privileges import Need
from elanus.schema import check_name

TRUNCATE_GRACE_S = 10.0
"""Beyond the coord's own wait, for its answer to come back."""


class DdlRpcs(Servicer):
    # -- databases --------------------------------------------------------------------------
    @served()
    def CreateDatabase(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        name, props = request.db_name, kv_dict(request.properties) or None
        self.run_op(ctx, dbs.CreateDatabase(db=_db_beside(ctx, name), name=name, properties=props))
        return ok()

    @served()
    def DropDatabase(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        name = request.db_name
        self.run_op(ctx, dbs.DropDatabase(db=_db_beside(ctx, name), name=name))
        return ok()

    @served()
    def ListDatabases(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        names = self.run_op(ctx, dbs.ListDatabases(db=ctx.db))["names"]
        return milvus_pb2.ListDatabasesResponse(
            status=ok(), db_names=names, created_timestamp=[0] * len(names)
        )

    @served()
    def DescribeDatabase(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        name = request.db_name or "default"
        doc = self.run_op(ctx, dbs.DescribeDatabase(db=_db_beside(ctx, name), name=name))
        return milvus_pb2.DescribeDatabaseResponse(
            status=ok(),
            db_name=doc["name"],
            dbID=doc["db_id"],
            created_timestamp=doc["created_ts"],
            properties=[
                common_pb2.KeyValuePair(key=k, value=v) for k, v in doc["properties"].items()
            ],
        )

    @served()
    def AlterDatabase(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Milvus's ``alter_database_properties`` and ``drop_database_properties``."""
        op = dbs.AlterDatabaseProperties(
            db=_db_beside(ctx, request.db_name),
            name=request.db_name,
            properties=kv_dict(request.properties) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        self.run_op(ctx, op)
        return ok()

    # -- collections ------------------------------------------------------------------------
    @served()
    def CreateCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        proto = parse_message(
            schema_pb2.CollectionSchema, request.schema, "CreateCollection: schema"
        )
        check(proto, COLLECTION_SCHEMA, "CreateCollection: schema")
        props = kv_dict(request.properties)
        op = colls.CreateCollection(
            db=ctx.db,
            name=request.collection_name,
            schema=schema_doc(proto),
            num_shards=request.shards_num or 1,
            num_partitions=request.num_partitions or None,
            consistency_level=consistency_name(request.consistency_level),
            properties=props or None,
            description=proto.description,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def DropCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        try:
            self.run_op(ctx, colls.DropCollection(db=ctx.db, name=request.collection_name))
        except ElanusError as exc:  # Milvus: dropping what is not there succeeds
            if exc.code != ErrorCode.COLLECTION_NOT_FOUND:
                raise
        return ok()

    @served()
    def TruncateCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Every entity goes; schema, indexes, partitions and load state stay
        (``meta/truncate.py``). It needs DropCollection: what it removes is as gone."""
        name = check_name(request.collection_name, "collection")
        ctx.caller.require(Need("DropCollection", ctx.db))  # a Global privilege
        req = TruncateCollection(db=ctx.db, name=name)
        timeout = TRUNCATE_WAIT_S + TRUNCATE_GRACE_S
        self.proxy.run(self.proxy.coord.root.truncate_collection(req, timeout))
        return milvus_pb2.TruncateCollectionResponse(status=ok())

    @served()
    def HasCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = colls.HasCollection(db=ctx.db, name=request.collection_name)
        value = self.run_op(ctx, op)["value"]
        return milvus_pb2.BoolResponse(status=ok(), value=bool(value))

    @served()
    def DescribeCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        if not request.collection_name and request.collectionID:
            raise invalid("DescribeCollection: give the collection's name (ids are not served)")
        doc = self.run_op(ctx, colls.DescribeCollection(db=ctx.db, name=request.collection_name))
        reply = describe_reply(doc)
        reply.status.CopyFrom(ok())
        return reply

    @served()
    def ShowCollections(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        names = list(self.run_op(ctx, colls.ListCollections(db=ctx.db))["names"])
        if request.collection_names:
            names = [n for n in names if n in set(request.collection_names)]
        reply = milvus_pb2.ShowCollectionsResponse(status=ok(), collection_names=names)
        reply.collection_ids.extend([0] * len(names))
        reply.created_timestamps.extend([0] * len(names))
        reply.created_utc_timestamps.extend([0] * len(names))
        return reply

    @served()
    def RenameCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = colls.RenameCollection(
            db=ctx.db,
            name=request.oldName,
            new_name=request.newName,
            new_db=request.newDBName or None,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def AddCollectionField(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        proto = parse_message(schema_pb2.FieldSchema, request.schema, "AddCollectionField: schema")
        check(proto, FIELD_SCHEMA, "AddCollectionField: schema")
        op = AddCollectionField(
            db=ctx.db, collection=request.collection_name, field=field_doc(proto)
        )
        self.run_op(ctx, op)
        return ok()

    # -- partitions -------------------------------------------------------------------------
    @served()
    def CreatePartition(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.CreatePartition(db=ctx.db, **_partition_of(request)))
        return ok()

    @served()
    def DropPartition(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.DropPartition(db=ctx.db, **_partition_of(request)))
        return ok()

    @served()
    def HasPartition(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        value = self.run_op(ctx, ops.HasPartition(db=ctx.db, **_partition_of(request)))["value"]
        return milvus_pb2.BoolResponse(status=ok(), value=bool(value))

    @served()
    def ShowPartitions(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        doc = self.run_op(ctx, ops.ListPartitions(db=ctx.db, collection=request.collection_name))
        parts = doc.get("partitions") or [{"name": n} for n in doc["names"]]
        if request.partition_names:
            wanted = set(request.partition_names)
            parts = [p for p in parts if p["name"] in wanted]
        return milvus_pb2.ShowPartitionsResponse(
            status=ok(),
            partition_names=[p["name"] for p in parts],
            partitionIDs=[int(p.get("partition_id", 0)) for p in parts],
            created_timestamps=[int(p.get("created_ts", 0)) for p in parts],
            created_utc_timestamps=[int(p.get("created_ts", 0)) >> 18 for p in parts],
            inMemory_percentages=[0] * len(parts),
        )

    # -- aliases ----------------------------------------------------------------------------
    @served()
    def CreateAlias(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.CreateAlias(db=ctx.db, collection=request.collection_name, alias=request.alias)
        self.run_op(ctx, op)
        return ok()

    @served()
    def AlterAlias(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.AlterAlias(db=ctx.db, collection=request.collection_name, alias=request.alias)
        self.run_op(ctx, op)
        return ok()

    @served()
    def DropAlias(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.DropAlias(db=ctx.db, alias=request.alias))
        return ok()

    @served()
    def DescribeAlias(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        doc = self.run_op(ctx, ops.DescribeAlias(db=ctx.db, alias=request.alias))
        return milvus_pb2.DescribeAliasResponse(
            status=ok(),
            db_name=doc.get("db_name") or ctx.db,
            alias=doc.get("alias") or request.alias,
            collection=doc.get("collection_name", ""),
        )

    @served()
    def ListAliases(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.ListAliases(db=ctx.db, collection=request.collection_name or None)
        doc = self.run_op(ctx, op)
        return milvus_pb2.ListAliasesResponse(
            status=ok(),
            db_name=doc.get("db_name") or ctx.db,
            collection_name=doc.get("collection_name") or request.collection_name,
            aliases=doc.get("aliases") or [],
        )


class PartitionNamed(TypedDict):
    """The collection and partition a Milvus partition request names."""

    collection: str
    partition: str


def _partition_of(request: Any) -> PartitionNamed:
    return PartitionNamed(collection=request.collection_name, partition=request.partition_name)


def _db_beside(ctx: Ctx, name: str) -> str | None:
    """The ``db`` of a database RPC's record beside the ``name`` it is about. The RPC's
    ``db_name`` is both the call's database and the one it names, so the two agree and
    ``db`` is left out (the privilege is then checked in the default database, as ever);
    where they differ (no ``db_name``, another ``dbname`` header) both go, refused as such."""
    return None if ctx.db == name else ctx.db
