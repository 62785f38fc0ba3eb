"""Partition keys (Milvus's ``is_partition_key``): which partition a row's key value goes to.

A collection with a partition key field has ``num_partitions`` partitions named
``_default_0`` .. ``_default_{n-1}`` (Milvus's names) and no others; a row lives in the
partition its key hashes to (``elanus.pkhash``, the hash the vchannel routing uses, modulo
``n``). The proxy routes inserts, upserts and imports here, and a filter that pins the key
to a few values reads only their partitions. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.errors import invalid
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


def key_partition_ids(partitions: dict[str, int]) -> list[int] | None:
    """A collection's partition ids in routing order (index i is ``_default_i``), or None
    if its partitions are not a partition key collection's."""
    n = len(partitions)
    names = key_partition_names(n)
    if not n or any(name not in partitions for name in names):
        return None
    return [partitions[name] for name in names]
