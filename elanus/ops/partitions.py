"""Partitions and aliases: the operations on a collection's names."""

from __future__ import annotations

from elanus.errors import invalid
from elanus.ops import (
    DEFAULT_DB,
    AliasName,
    CollectionName,
    DbName,
    InCollection,
    PartitionName,
    operation,
    shape,
)
from elanus.schema import DEFAULT_PARTITION, check_name


@shape
class PartitionNamed:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    partition: PartitionName


@operation("create_partition")
class CreatePartition(PartitionNamed):
    pass


@operation("drop_partition")
class DropPartition(PartitionNamed):
    def check(self) -> None:
        if self.partition == DEFAULT_PARTITION:
            raise invalid(
                f"drop_partition: the default partition {DEFAULT_PARTITION!r} cannot be dropped"
            )


@operation("has_partition")
class HasPartition(PartitionNamed):
    pass


@operation("list_partitions")
class ListPartitions(InCollection):
    pass


@shape
class AliasOfCollection:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    alias: AliasName


@operation("create_alias")
class CreateAlias(AliasOfCollection):
    pass


@operation("alter_alias")
class AlterAlias(AliasOfCollection):
    pass


@shape
class AliasNamed:
    db: DbName = DEFAULT_DB
    alias: AliasName


@operation("drop_alias")
class DropAlias(AliasNamed):
    pass


@operation("describe_alias")
class DescribeAlias(AliasNamed):
    pass


@operation("list_aliases")
class ListAliases:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """The collection whose aliases to list; absent or empty: every collection's."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")
