"""The SDK's DDL (mixed into ``Client``): collections, partitions, databases."""

from __future__ import annotations

from typing import Any

from elanus.client.base import ClientBase
from elanus.client.compat import IndexParams, milvus_description, reject_unknown
from elanus.client.index import IndexAPI
from elanus.client.read import ReadAPI
from elanus.client.replies import DescribedCollection
from elanus.consistency import ConsistencyLevel
from elanus.functions import Function
from elanus.ops import alter
from elanus.ops import collections as colls
from elanus.ops import databases as dbs
from elanus.ops import partitions as ops
from elanus.ops import schemachange as fields
from elanus.ops.replies import (
    AliasDescription,
    AliasList,
    CollectionDescription,
    DatabaseDescription,
)
from elanus.schema import DataType, Field, Schema, check_name


class CollectionAPI(IndexAPI, ReadAPI):
    """Collections; ``create_collection`` with ``index_params`` also indexes and loads."""

    @staticmethod
    def create_schema(
        *,
        auto_id: bool = False,
        enable_dynamic_field: bool = False,
        description: str = "",
        **kwargs: Any,
    ) -> Schema:
        """An empty schema to ``add_field`` to (pymilvus's ``MilvusClient.create_schema``);
        ``auto_id`` becomes the default of the primary field."""
        reject_unknown("create_schema", kwargs)
        return Schema(
            enable_dynamic_field=enable_dynamic_field, description=description, auto_id=auto_id
        )

    def create_collection(
        self,
        collection_name: str,
        dimension: int | None = None,
        primary_field_name: str = "id",
        id_type: str = "int",
        vector_field_name: str = "vector",
        metric_type: str = "COSINE",
        auto_id: bool = False,
        timeout: float | None = None,
        schema: Schema | dict[str, Any] | None = None,
        index_params: IndexParams | None = None,
        *,
        max_length: int | None = None,
        num_shards: int = 1,
        num_partitions: int | None = None,
        consistency_level: str | ConsistencyLevel = "Bounded",
        properties: dict[str, str] | None = None,
        description: str = "",
        db: str | None = None,
        **kwargs: Any,
    ) -> DescribedCollection:
        """Create from a ``Schema`` or by quick setup (``dimension``); returns the description.
        As pymilvus does, quick setup also creates an AUTOINDEX index of ``metric_type`` on
        the vector field and loads the collection, and with ``index_params`` a schema's
        indexes are created and the collection loaded. ``num_partitions`` (default 16)
        applies to a schema with a partition key."""
        reject_unknown("create_collection", kwargs)
        quick = dimension is not None
        op = colls.CreateCollection(
            db=self._db_or_own(db),
            name=collection_name,
            num_shards=num_shards,
            consistency_level=str(consistency_level),
            properties=properties or {},
            description=description,
            num_partitions=num_partitions,
            schema=schema.to_dict() if isinstance(schema, Schema) else schema,
            dimension=dimension,
            primary_field=primary_field_name if quick else None,
            vector_field=vector_field_name if quick else None,
            id_type=id_type if quick else None,
            auto_id=auto_id if quick else None,
            metric_type=metric_type if quick else None,
            max_length=max_length if quick else None,
        )
        created = milvus_description(self._reply(op, CollectionDescription, timeout=timeout))
        if dimension is not None and schema is None and not index_params:
            index_params = IndexParams()
            index_params.add_index(vector_field_name, "AUTOINDEX", metric_type=metric_type)
        if index_params:
            self.create_index(collection_name, index_params, timeout, db=db)
            self.load_collection(collection_name, timeout, db=db)
        return created

    def alter_collection_properties(
        self,
        collection_name: str,
        properties: dict[str, Any],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Set collection properties (``collection.ttl.seconds`` takes effect at the next
        read: older entities are no longer seen)."""
        reject_unknown("alter_collection_properties", kwargs)
        op = alter.AlterCollectionProperties(
            db=self._db_or_own(db), name=collection_name, properties=properties
        )
        self._op(op, timeout=timeout)

    def drop_collection_properties(
        self,
        collection_name: str,
        property_keys: list[str],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Remove collection properties (dropping ``collection.ttl.seconds`` ends the TTL)."""
        reject_unknown("drop_collection_properties", kwargs)
        op = alter.AlterCollectionProperties(
            db=self._db_or_own(db), name=collection_name, delete_keys=list(property_keys)
        )
        self._op(op, timeout=timeout)

    def alter_collection_field(
        self,
        collection_name: str,
        field_name: str,
        field_params: dict[str, Any],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Change one field's properties (``elanus.fieldprops``): ``max_length`` and
        ``max_capacity`` bound later writes; ``mmap.enabled`` and the warm-up keys only
        while the collection is released (warm-up: stored, no effect)."""
        reject_unknown("alter_collection_field", kwargs)
        op = alter.AlterCollectionField(
            db=self._db_or_own(db),
            collection=collection_name,
            field_name=field_name,
            properties=field_params,
        )
        self._op(op, timeout=timeout)

    def drop_collection_field_properties(
        self,
        collection_name: str,
        field_name: str,
        property_keys: list[str],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Remove a field's ``mmap.enabled`` or warm-up settings (its limits stay)."""
        reject_unknown("drop_collection_field_properties", kwargs)
        op = alter.AlterCollectionField(
            db=self._db_or_own(db),
            collection=collection_name,
            field_name=field_name,
            delete_keys=list(property_keys),
        )
        self._op(op, timeout=timeout)

    def drop_collection(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_collection", kwargs)
        self._op(
            colls.DropCollection(db=self._db_or_own(db), name=collection_name), timeout=timeout
        )

    def has_collection(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> bool:
        reject_unknown("has_collection", kwargs)
        op = colls.HasCollection(db=self._db_or_own(db), name=collection_name)
        return bool(self._op(op, timeout=timeout)["value"])

    def describe_collection(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> DescribedCollection:
        """Elanus's description (``schema``, ``vchannels``, ``partitions``, ...) with
        pymilvus's keys beside it (``collection_name``, ``fields``, ``auto_id``, ...)."""
        reject_unknown("describe_collection", kwargs)
        op = colls.DescribeCollection(db=self._db_or_own(db), name=collection_name)
        return milvus_description(self._reply(op, CollectionDescription, timeout=timeout))

    def list_collections(self, *, db: str | None = None, **kwargs: Any) -> list[str]:
        timeout = kwargs.pop("timeout", None)
        reject_unknown("list_collections", kwargs)
        op = colls.ListCollections(db=self._db_or_own(db))
        return list(self._op(op, timeout=timeout)["names"])

    def rename_collection(
        self,
        old_name: str,
        new_name: str,
        target_db: str | None = "",
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Rename, optionally into another database (``target_db``)."""
        reject_unknown("rename_collection", kwargs)
        op = colls.RenameCollection(
            db=self._db_or_own(db), name=old_name, new_name=new_name, new_db=target_db or None
        )
        self._op(op, timeout=timeout)

    def add_collection_field(
        self,
        collection_name: str,
        field_name: str,
        data_type: DataType | str,
        desc: str = "",
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Add a scalar field to a collection that may hold rows (Milvus 2.6): it must be
        ``nullable=True``; rows already there read its ``default_value``, or null. Other
        keywords as ``Schema.add_field`` takes them (max_length, element_type, ...)."""
        field = Schema().add_field(field_name, data_type, description=desc, **kwargs).fields[0]
        op = fields.AddCollectionField(
            db=self._db_or_own(db), collection=collection_name, field=field.to_dict()
        )
        self._op(op, timeout=timeout)

    def drop_collection_field(
        self,
        collection_name: str,
        field_name: str = "",
        field_id: int = 0,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Drop a field by name or id (pymilvus's ``drop_collection_field``): its values
        are never read again, its indexes go; the primary key, the partition key, a
        function's fields and the last vector field are refused."""
        reject_unknown("drop_collection_field", kwargs)
        op = fields.DropCollectionField(
            db=self._db_or_own(db),
            collection=collection_name,
            field_name=field_name or None,
            field_id=field_id or None,
        )
        self._op(op, timeout=timeout)

    def add_function_field(
        self,
        collection_name: str,
        field_schema: Field | dict[str, Any],
        func: Any,
        index_params: IndexParams | None = None,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Add a BM25 function and its sparse output field (pymilvus's
        ``add_function_field``); rows already written get the output. Then the output's
        index from ``index_params`` if given (pymilvus binds exactly one)."""
        reject_unknown("add_function_field", kwargs)
        field = field_schema if isinstance(field_schema, Field) else Field.from_dict(field_schema)
        op = fields.AddFunctionField(
            db=self._db_or_own(db),
            collection=collection_name,
            field=field.to_dict(),
            function=Function.coerce(func).to_dict(),
        )
        self._op(op, timeout=timeout)
        if index_params is not None:
            self.create_index(collection_name, index_params, timeout=timeout, db=db)

    def drop_function_field(
        self,
        collection_name: str,
        function_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Drop a function and its output fields (pymilvus's ``drop_function_field``), as
        ``drop_collection_field`` drops a field."""
        reject_unknown("drop_function_field", kwargs)
        op = fields.DropFunctionField(
            db=self._db_or_own(db), collection=collection_name, function_name=function_name
        )
        self._op(op, timeout=timeout)

    # -- aliases: another name of a collection, accepted wherever a collection is named ---
    def create_alias(
        self,
        collection_name: str,
        alias: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("create_alias", kwargs)
        op = ops.CreateAlias(db=self._db_or_own(db), collection=collection_name, alias=alias)
        self._op(op, timeout=timeout)

    def alter_alias(
        self,
        collection_name: str,
        alias: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Point ``alias`` at ``collection_name`` instead of the collection it names now."""
        reject_unknown("alter_alias", kwargs)
        op = ops.AlterAlias(db=self._db_or_own(db), collection=collection_name, alias=alias)
        self._op(op, timeout=timeout)

    def drop_alias(
        self, alias: str, timeout: float | None = None, *, db: str | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("drop_alias", kwargs)
        self._op(ops.DropAlias(db=self._db_or_own(db), alias=alias), timeout=timeout)

    def describe_alias(
        self, alias: str, timeout: float | None = None, *, db: str | None = None, **kwargs: Any
    ) -> AliasDescription:
        """``{"alias", "collection_name", "db_name"}``, as pymilvus returns."""
        reject_unknown("describe_alias", kwargs)
        op = ops.DescribeAlias(db=self._db_or_own(db), alias=alias)
        return self._reply(op, AliasDescription, timeout=timeout)

    def list_aliases(
        self,
        collection_name: str = "",
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> AliasList:
        """``{"aliases": [...], "db_name", "collection_name"}`` (the last only when a
        collection was named), as pymilvus returns; without one, the database's aliases."""
        reject_unknown("list_aliases", kwargs)
        op = ops.ListAliases(db=self._db_or_own(db), collection=collection_name or None)
        return self._reply(op, AliasList, timeout=timeout)


class PartitionAPI(ClientBase):
    def create_partition(
        self,
        collection_name: str,
        partition_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("create_partition", kwargs)
        op = ops.CreatePartition(
            db=self._db_or_own(db), collection=collection_name, partition=partition_name
        )
        self._op(op, timeout=timeout)

    def drop_partition(
        self,
        collection_name: str,
        partition_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_partition", kwargs)
        op = ops.DropPartition(
            db=self._db_or_own(db), collection=collection_name, partition=partition_name
        )
        self._op(op, timeout=timeout)

    def has_partition(
        self,
        collection_name: str,
        partition_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> bool:
        reject_unknown("has_partition", kwargs)
        op = ops.HasPartition(
            db=self._db_or_own(db), collection=collection_name, partition=partition_name
        )
        return bool(self._op(op, timeout=timeout)["value"])

    def list_partitions(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> list[str]:
        reject_unknown("list_partitions", kwargs)
        op = ops.ListPartitions(db=self._db_or_own(db), collection=collection_name)
        return list(self._op(op, timeout=timeout)["names"])


class DatabaseAPI(ClientBase):
    def create_database(
        self,
        db_name: str,
        properties: dict[str, Any] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("create_database", kwargs)
        self._op(dbs.CreateDatabase(name=db_name, properties=properties or None), timeout=timeout)

    def drop_database(self, db_name: str, **kwargs: Any) -> None:
        timeout = kwargs.pop("timeout", None)
        reject_unknown("drop_database", kwargs)
        self._op(dbs.DropDatabase(name=db_name), timeout=timeout)

    def describe_database(self, db_name: str, **kwargs: Any) -> dict[str, str]:
        """``{"name", **properties}`` as pymilvus returns it (each value as text);
        DATABASE_NOT_FOUND for one that does not exist."""
        timeout = kwargs.pop("timeout", None)
        reject_unknown("describe_database", kwargs)
        op = dbs.DescribeDatabase(name=db_name)
        described = self._reply(op, DatabaseDescription, timeout=timeout)
        return {"name": described["name"], **described["properties"]}

    def alter_database_properties(
        self, db_name: str, properties: dict[str, Any], **kwargs: Any
    ) -> None:
        """Set database properties (``database.max.collections``, ...: docs/protocol.md)."""
        timeout = kwargs.pop("timeout", None)
        reject_unknown("alter_database_properties", kwargs)
        op = dbs.AlterDatabaseProperties(name=db_name, properties=properties)
        self._op(op, timeout=timeout)

    def drop_database_properties(
        self, db_name: str, property_keys: list[str], **kwargs: Any
    ) -> None:
        """Remove database properties; a key that is not set is no change."""
        timeout = kwargs.pop("timeout", None)
        reject_unknown("drop_database_properties", kwargs)
        op = dbs.AlterDatabaseProperties(name=db_name, delete_keys=list(property_keys))
        self._op(op, timeout=timeout)

    def list_databases(self, timeout: float | None = None, **kwargs: Any) -> list[str]:
        reject_unknown("list_databases", kwargs)
        return list(self._op(dbs.ListDatabases(), timeout=timeout)["names"])

    def using_database(self, db_name: str, **kwargs: Any) -> None:
        """Make ``db_name`` the database of later calls (checked by the server on use)."""
        reject_unknown("using_database", kwargs)
        self._db = check_name(db_name, "database")

    use_database = using_database
