"""One row per primary key in query results: the newest insert of a key wins.

An ``insert`` of a key that already exists adds a second row (Milvus does not check
keys on insert; ``upsert`` is the call that replaces). A query answers one row per key,
the most recently inserted of the rows that pass its filter, as Milvus's query reduce
does (milvus-io/milvus#33883). The proxy applies it to the rows of every shard; a segment
asked for its first ``limit`` keys offers every copy of them (``MemSegment.query``), so
the newest is among them. ``count(*)`` and search are not deduplicated here: Milvus
counts every row, and a search keeps a key's best-ranked hit (``elanus.reduce``); a
snapshot read (``read_plan``) returns every stored row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.schema import TIMESTAMP_FIELD


def newest_per_key(keys: pa.Array | pa.ChunkedArray, ts: np.ndarray) -> np.ndarray:
    """Positions (ascending by key) of each key's newest row; ties on timestamp keep one."""
    if len(keys) < 2:
        return np.arange(len(keys), dtype=np.int64)
    table = pa.table({"k": keys, "t": pa.array(ts, pa.uint64())})
    order = pc.sort_indices(table, [("k", "ascending"), ("t", "descending")])
    ranked = keys.take(order)
    if isinstance(ranked, pa.ChunkedArray):
        ranked = ranked.combine_chunks()
    changed = pc.not_equal(ranked.slice(1), ranked.slice(0, len(ranked) - 1))
    first = np.concatenate([[True], changed.to_numpy(zero_copy_only=False)])
    return order.to_numpy()[first]


def has_repeats(keys: pa.Array | pa.ChunkedArray) -> bool:
    return len(keys) > 1 and pc.count_distinct(keys).as_py() < len(keys)


def newest_rows(table: pa.Table, pk: str, order: Sequence[tuple[str, str]] = ()) -> pa.Table:
    """``table`` (with ``_ts``) reduced to one row per key, without ``_ts``, sorted by
    ``order`` (``(column, "ascending" | "descending")`` pairs), then by key."""
    keys = table.column(pk)
    if has_repeats(keys):
        ts = table.column(TIMESTAMP_FIELD).to_numpy()
        table = table.take(pa.array(newest_per_key(keys, ts), pa.int64()))
    return table.sort_by([*order, (pk, "ascending")]).drop_columns([TIMESTAMP_FIELD])
