"""Partition keys (Milvus's ``is_partition_key``): which partition a row's key value goes to.

A collection with a partition key field has ``num_partitions`` partitions named
``_default_0`` .. ``_default_{n-1}`` (Milvus's names) and no others; a row lives in the
partition its key hashes to (``elanus.pkhash``, the hash the vchannel routing uses, modulo
``n``). The proxy routes inserts, upserts and imports here; a filter that pins the key to a
few values reads only their partitions (``elanus.expr.keypins.read_partitions``). Pure: no
I/O, and no expression compiler, so the SDK's import of the count check stays light.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.pkhash import hash_pks
from elanus.schema import DEFAULT_PARTITION, DataType, Field

DEFAULT_NUM_PARTITIONS = 16
"""Milvus's default when a collection has a partition key and names no count."""
MAX_NUM_PARTITIONS = 1024
"""Milvus's ``rootCoord.maxPartitionNum``: a collection holds at most this many."""


def check_num_partitions(value: Any, has_key: bool) -> int | None:
    """The partition count a collection is created with: None without a partition key
    (Milvus refuses a count then), 1..1024 with one (16 when not given)."""
    if not has_key:
        if value is not None:
            raise invalid(
                "num_partitions only applies to a collection with a partition key field "
                "(is_partition_key=True)"
            )
        return None
    if value is None:
        return DEFAULT_NUM_PARTITIONS
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"num_partitions must be an integer, got {value!r}")
    if not 1 <= value <= MAX_NUM_PARTITIONS:
        raise invalid(
            f"num_partitions {value} is out of range [1, {MAX_NUM_PARTITIONS}] "
            "for a partition key collection"
        )
    return value


def key_partition_names(num_partitions: int) -> list[str]:
    """The partitions of a partition key collection, in routing order."""
    return [f"{DEFAULT_PARTITION}_{i}" for i in range(num_partitions)]


def partition_index(values: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray:
    """Each key value's partition (0-based, in ``key_partition_names`` order), vectorised."""
    return (hash_pks(values) % np.uint64(num_partitions)).astype(np.int64)


def partitions_of_values(field: Field, values: Iterable[Any], num_partitions: int) -> set[int]:
    """The partitions that rows with these key values live in (a filter's pinned values)."""
    arrow = pa.int64() if field.dtype == DataType.INT64 else pa.string()
    array = pa.array(list(values), arrow)
    return set(partition_index(array, num_partitions).tolist()) if len(array) else set()


def key_partition_ids(partitions: dict[str, int], collection: str) -> list[int]:
    """A partition key collection's partition ids in routing order (index i is
    ``_default_i``), from its name -> id map."""
    names = key_partition_names(len(partitions))
    missing = [n for n in names if n not in partitions]
    if not partitions or missing:
        raise ElanusError(
            ErrorCode.INTERNAL,
            f"collection {collection!r} has a partition key but its partitions are not "
            f"{names[0] if names else '_default_0'}..: {', '.join(sorted(partitions))}",
        )
    return [partitions[n] for n in names]


def split_by_partition(
    table: pa.Table, field: Field, partition_ids: list[int]
) -> list[tuple[int, pa.Table]]:
    """``table``'s rows grouped by the partition their key hashes to, in row order within
    each group; partitions without rows are left out."""
    index = partition_index(table.column(field.name), len(partition_ids))
    return [(partition_ids[i], rows) for i, rows in group_rows(table, index)]


def group_rows(table: pa.Table, groups: np.ndarray) -> list[tuple[int, pa.Table]]:
    """``table``'s rows by their number in ``groups`` (ascending), in row order within each
    group; rows all of one group come as they are, without a copy."""
    if not len(groups):
        return []
    if (groups == groups[0]).all():
        return [(int(groups[0]), table)]
    order = np.argsort(groups, kind="stable")
    ordered = table.take(pa.array(order))
    present, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    return [
        (g, ordered.slice(start, count))
        for g, start, count in zip(present.tolist(), starts.tolist(), counts.tolist(), strict=True)
    ]


def partition_name_refused(collection: str, key: Field, doing: str) -> ElanusError:
    """Milvus's refusal of a partition name where a partition key decides the partition."""
    return invalid(
        f"{doing} cannot name a partition of collection {collection!r}: it has a partition "
        f"key ({key.name!r}), so rows go to partitions by the key's value (filter on "
        f"{key.name!r} to narrow a read)"
    )
