"""A merged search part as results: JSON hits per query (the ``search`` action, hybrid
search) or Arrow rows (the DoExchange search stream); bfloat16 outputs widened to float32."""

from __future__ import annotations

from math import isfinite
from typing import Any

import numpy as np
import pyarrow as pa

from elanus import bfloat16
from elanus.ops.search import HighlightedHit
from elanus.outputs import entity, json_fields
from elanus.schema import Schema


def widened(merged: dict[str, Any]) -> dict[str, Any]:
    """A merged search part whose output rows return bfloat16 vectors as float32 lists."""
    if merged.get("outputs") is not None:
        merged["outputs"] = bfloat16.widen_table(merged["outputs"])
    return merged


def shape_hits(
    merged: dict[str, Any], outputs: list[str], schema: Schema
) -> list[list[HighlightedHit]]:
    """Per query, ``{"id", "distance", "entity"}`` for each real hit (padding dropped);
    ``entity`` holds the requested outputs only, ``{}`` when none were asked for."""
    distances, pks = np.asarray(merged["distances"]), np.asarray(merged["pks"])
    if distances.ndim != 2:
        return [[] for _ in range(len(distances))]
    rows = merged.get("outputs")
    if rows is None:
        return [
            [
                {"id": p, "distance": d, "entity": {}}
                for p, d in zip(prow, drow, strict=True)
                if isfinite(d)
            ]
            for prow, drow in zip(pks.tolist(), distances.tolist(), strict=True)
        ]
    finite = np.isfinite(distances).tolist()
    where = {int(slot): i for i, slot in enumerate(merged["output_rows"])}
    values = rows.to_pylist()
    json_names = json_fields(schema)
    width = distances.shape[1]
    results = []
    for q, (prow, drow, frow) in enumerate(
        zip(pks.tolist(), distances.tolist(), finite, strict=True)
    ):
        hits: list[HighlightedHit] = []
        for c, (p, d, ok) in enumerate(zip(prow, drow, frow, strict=True)):
            if ok:
                i = where.get(q * width + c)
                row = entity(values[i], outputs, json_names) if i is not None else {}
                hits.append({"id": p, "distance": d, "entity": row})
        results.append(hits)
    return results


def hits_table(merged: dict[str, Any], pk_type: pa.DataType, first_query: int = 0) -> pa.Table:
    """Search results as Arrow rows: query_index, rank, id, distance, output columns."""
    distances = np.asarray(merged["distances"])
    width = distances.shape[1] if distances.ndim == 2 else 0
    flat = distances.ravel()
    slots = np.nonzero(np.isfinite(flat))[0]
    ids = np.asarray(merged["pks"]).ravel()[slots]
    # Every array is built with its type, and integer keys go in as numpy (no list):
    # 25 -> 18 µs a call for 100 hits.
    table = pa.table(
        {
            "query_index": pa.array(
                (slots // max(width, 1) + first_query).astype(np.int32), pa.int32()
            ),
            "rank": pa.array((slots % max(width, 1)).astype(np.int32), pa.int32()),
            "id": pa.array(ids if ids.dtype.kind in "iu" else ids.tolist(), pk_type),
            "distance": pa.array(flat[slots].astype(np.float32), pa.float32()),
        }
    )
    outputs = merged.get("outputs")
    if outputs is not None and outputs.num_columns:
        where = np.searchsorted(np.asarray(merged["output_rows"]), slots)
        picked = outputs.take(pa.array(where, pa.int64()))
        for name in picked.column_names:
            if name not in table.column_names:  # the key is already the ``id`` column
                table = table.append_column(picked.schema.field(name), picked.column(name))
    return table
