"""Merging segments: the rows of the sources, minus those deleted at or before the horizon,
written in primary-key order (Milvus's mix compaction sorts its output too).

A row ``(pk, ts_row)`` is gone when a delete ``(pk, ts_del)`` has ``ts_row < ts_del <=
horizon``. Deletes after the horizon are kept in the target's delta log, so reads at a
time inside the retention window still see those rows as they were. With a collection
TTL, rows already expired at the horizon go too: no read inside the window sees them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.properties import expire_floor
from elanus.schema import PK_COLUMN, TIMESTAMP_FIELD, Schema
from elanus.segments import storage


def deleted_mask(pks: pa.Array, row_ts: pa.Array, deltas: pa.Table, horizon_ts: int) -> np.ndarray:
    """True for rows removed by a delete at or before ``horizon_ts``."""
    old = deltas.filter(pc.less_equal(deltas.column("ts"), pa.scalar(horizon_ts, pa.uint64())))
    if old.num_rows == 0:
        return np.zeros(len(pks), dtype=bool)
    latest = old.group_by(PK_COLUMN).aggregate([("ts", "max")])
    rows = pa.table(
        {PK_COLUMN: pks, "row_ts": row_ts, "idx": pa.array(np.arange(len(pks), dtype=np.int64))}
    )
    joined = rows.join(latest, keys=PK_COLUMN, join_type="inner")
    hit = joined.filter(pc.less(joined.column("row_ts"), joined.column("ts_max")))
    mask = np.zeros(len(pks), dtype=bool)
    mask[hit.column("idx").to_numpy()] = True
    return mask


def compact_segments(
    source_dirs: list[str], target_dir: str, schema: Schema, horizon_ts: int, ttl: int = 0
) -> dict[str, Any]:
    """Write the merged target; returns what the coord records about it. Every source is
    read in the collection's segment schema, whichever writer (or older version) wrote it.
    ``ttl``: the collection's TTL in ms (0: none)."""
    pk_field = schema.primary.name
    data = pa.concat_tables([storage.read_segment(d, schema) for d in source_dirs])
    data = data.combine_chunks()
    floor = expire_floor(horizon_ts, ttl)
    if floor:
        live = pc.greater_equal(data.column(TIMESTAMP_FIELD), pa.scalar(floor, pa.uint64()))
        data = data.filter(live)
    delta_tables = [t for t in (storage.read_deltas(d) for d in source_dirs) if t is not None]
    carried = None
    if delta_tables:
        deltas = pa.concat_tables(delta_tables).combine_chunks()
        pks = data.column(pk_field).combine_chunks()
        gone = deleted_mask(pks, data.column(TIMESTAMP_FIELD).combine_chunks(), deltas, horizon_ts)
        data = data.filter(pa.array(~gone))
        newer = pc.greater(deltas.column("ts"), pa.scalar(horizon_ts, pa.uint64()))
        carried = deltas.filter(newer)
    if data.num_rows == 0:
        return {"num_rows": 0}
    path = storage.write_segment(target_dir, data, schema)
    if carried is not None and carried.num_rows:
        storage.write_deltas(
            target_dir,
            carried.column(PK_COLUMN).combine_chunks(),
            carried.column("ts").combine_chunks(),
            "compacted",
        )
    mm = pc.min_max(data.column(TIMESTAMP_FIELD))
    return {
        "num_rows": data.num_rows,
        "path": str(path),
        "min_ts": mm["min"].as_py(),
        "max_ts": mm["max"].as_py(),
        "is_sorted": True,  # write_segment sorts
    }
