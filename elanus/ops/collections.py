"""Collections: create (from a schema or by quick setup), drop, has, describe, list, rename
(property changes: ``elanus/ops/alter.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation, shape
from elanus.partitionkey import check_num_partitions
from elanus.properties import check_property, text_properties
from elanus.requests import Named, Range
from elanus.schema import MAX_DESCRIPTION, MAX_SHARDS, DataType, Schema, check_name, quick_schema

QUICK_METRICS = ("L2", "IP", "COSINE")
QUICK_KEYS = ("primary_field", "vector_field", "id_type", "auto_id", "metric_type", "max_length")


@dataclass(frozen=True)
class NewCollection:
    """What a ``create_collection`` body comes to once checked: the schema (the client's,
    or quick setup's), the properties as stored, the partition count and the level."""

    schema: Schema
    properties: dict[str, str]
    num_partitions: int | None
    consistency_level: str


@operation("create_collection")
class CreateCollection:
    """Create a collection from a full ``schema``, or by quick setup (``dimension`` and the
    ``QUICK_KEYS``); checked whole in ``check``, which keeps what it made (``created``)."""

    db: DbName = DEFAULT_DB
    name: CollectionName
    schema: dict[str, Any] | None = None
    dimension: int | None = None
    num_shards: Annotated[int, Range(1, MAX_SHARDS)] = 1
    num_partitions: int | None = None
    """Checked against the schema (``check_num_partitions``): only with a partition key."""
    consistency_level: str = "Bounded"
    properties: dict[str, Any] | None = None
    description: str = ""
    primary_field: str | None = None
    vector_field: str | None = None
    id_type: str | None = None
    auto_id: bool | None = None
    metric_type: str | None = None
    max_length: int | None = None

    def check(self) -> None:
        self.created  # noqa: B018 - checked once, kept for the executor

    @cached_property
    def created(self) -> NewCollection:
        properties = text_properties(self.properties, "create_collection", check_property)
        schema = self._schema(properties)
        num_partitions = check_num_partitions(self.num_partitions, schema.partition_key is not None)
        try:
            level = ConsistencyLevel.parse(self.consistency_level)
        except ValueError as exc:
            raise invalid(f"create_collection: {exc}") from None
        if len(self.description) > MAX_DESCRIPTION:
            raise invalid(
                f"create_collection: 'description' is longer than {MAX_DESCRIPTION} characters"
            )
        return NewCollection(schema, properties, num_partitions, level.value)

    def _schema(self, properties: dict[str, str]) -> Schema:
        """The client's schema or quick setup's; validated, field ids stripped. Quick setup
        records its metric in ``properties``."""
        given, dimension = self.schema, self.dimension
        if given is not None and dimension is not None:
            raise invalid("create_collection: give either 'schema' or 'dimension', not both")
        if given is None and dimension is None:
            raise invalid("create_collection: needs a 'schema' or a 'dimension' (quick setup)")
        if given is not None:
            quick = [k for k in QUICK_KEYS if getattr(self, k) is not None]
            if quick:
                raise invalid(
                    f"create_collection: {', '.join(map(repr, quick))} only apply to "
                    "quick setup with 'dimension', not with 'schema'"
                )
            try:
                schema = Schema.from_dict(given)
            except (TypeError, ValueError, KeyError) as exc:
                raise invalid(f"create_collection: bad schema: {exc}") from None
        else:
            assert dimension is not None
            metric = (self.metric_type or "COSINE").upper()
            if metric not in QUICK_METRICS:
                raise invalid(
                    f"create_collection: metric_type {metric!r} is not one of "
                    f"{', '.join(QUICK_METRICS)}"
                )
            properties["metric_type"] = metric
            schema = quick_schema(
                dimension,
                primary_field=self.primary_field or "id",
                vector_field=self.vector_field or "vector",
                id_type=self.id_type or "int64",
                auto_id=bool(self.auto_id),
                max_length=512 if self.max_length is None else self.max_length,
            )
        _validate(schema)
        if not schema.dropped:  # a described schema (a snapshot's) keeps its ids: number_fields
            for f in schema.fields:
                f.field_id = None
        return schema


def _validate(schema: Schema) -> None:
    """``Schema.validate`` plus what it does not check: non-string names, auto_id types."""
    for f in schema.fields:
        check_name(f.name, "field")  # validate() puts names in a set: they must be strings
    schema.validate()
    pk = schema.primary
    if pk.auto_id and pk.dtype != DataType.INT64:
        raise invalid(f"auto_id primary key field {pk.name!r} must be Int64, not {pk.dtype.value}")


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
