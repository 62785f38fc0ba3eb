"""Partitions and aliases: the operations on a collection's names."""

from __future__ import annotations

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, AliasName, CollectionName, DbName, PartitionName, operation
from elanus.schema import DEFAULT_PARTITION, check_name


@operation("create_partition")
class CreatePartition:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    partition: PartitionName


@operation("drop_partition")
class DropPartition:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    partition: PartitionName

    def check(self) -> None:
        if self.partition == DEFAULT_PARTITION:
            raise invalid(
                f"drop_partition: the default partition {DEFAULT_PARTITION!r} cannot be dropped"
            )


@operation("has_partition")
class HasPartition:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    partition: PartitionName


@operation("list_partitions")
class ListPartitions:
    db: DbName = DEFAULT_DB
    collection: CollectionName


@operation("create_alias")
class CreateAlias:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    alias: AliasName


@operation("alter_alias")
class AlterAlias:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    alias: AliasName


@operation("drop_alias")
class DropAlias:
    db: DbName = DEFAULT_DB
    alias: AliasName


@operation("describe_alias")
class DescribeAlias:
    db: DbName = DEFAULT_DB
    alias: AliasName


@operation("list_aliases")
class ListAliases:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection whose aliases to list; absent or empty: every collection's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")
