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
    data, carried = _live_rows(source_dirs, schema, horizon_ts, ttl)
    return _write_target(target_dir, data, carried, schema)


def cluster_segments(
    source_dirs: list[str],
    target_dirs: list[str],
    schema: Schema,
    horizon_ts: int,
    key: str,
    target_rows: int,
    ttl: int = 0,
) -> list[dict[str, Any]]:
    """Clustering compaction: the live rows of the sources, ordered by the clustering
    ``key`` (nulls last), cut into contiguous ranges of about ``target_rows`` rows, one per
    target (at most ``len(target_dirs)``; the rest stay empty). Each target records its
    key's ``key_range`` ([min, max]; [None, None]: only nulls)."""
    data, carried = _live_rows(source_dirs, schema, horizon_ts, ttl)
    n = min(len(target_dirs), max(1, -(-data.num_rows // max(1, target_rows))))
    order = pc.sort_indices(data, sort_keys=[(key, "ascending")], null_placement="at_end")
    cuts = _cuts(data.column(key).take(order), n)
    out = []
    for i, target_dir in enumerate(target_dirs):
        has_run = i + 1 < len(cuts)
        part = data.take(order[cuts[i] : cuts[i + 1]]) if has_run else data.slice(0, 0)
        mine = carried
        if carried is not None and part.num_rows:
            mine = carried.filter(
                pc.is_in(carried.column(PK_COLUMN), part.column(schema.primary.name))
            )
        result = _write_target(target_dir, part, mine, schema)
        if part.num_rows:
            mm = pc.min_max(part.column(key))
            result["key_range"] = [mm["min"].as_py(), mm["max"].as_py()]
        out.append(result)
    return out


def _cuts(keys: pa.ChunkedArray, n: int) -> list[int]:
    """Where to cut the sorted ``keys`` (nulls last) into ``n`` runs of about equal rows,
    each cut moved past the run of its key value, so no value spans two targets (a value
    with more rows than a target holds makes a larger one) and the nulls come after them
    all: the targets' key ranges are disjoint."""
    total, nulls = len(keys), keys.null_count
    valued = keys.slice(0, total - nulls).to_numpy(zero_copy_only=False)
    cuts = [0]
    for i in range(1, n):
        c = total * i // n
        if 0 < c < len(valued):
            c = int(np.searchsorted(valued, valued[c - 1], side="right"))
        if c > cuts[-1] and c < total:
            cuts.append(c)
    return [*cuts, total]


def _live_rows(
    source_dirs: list[str], schema: Schema, horizon_ts: int, ttl: int
) -> tuple[pa.Table, pa.Table | None]:
    """The sources' rows less those deleted or expired at the horizon, and the newer
    deletes (to carry into the targets' delta logs)."""
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
    return data, carried


def _write_target(
    target_dir: str, data: pa.Table, carried: pa.Table | None, schema: Schema
) -> dict[str, Any]:
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
