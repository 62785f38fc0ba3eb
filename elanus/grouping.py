"""Grouping search results by a scalar field (Milvus's ``group_by_field``).

A grouped search returns, per query, up to ``limit`` groups (distinct values of the
field), ordered by their best hit, each with its ``group_size`` best hits, best first;
a group's hits sit together in the result. Segments, delegators and the proxy all apply
:func:`regroup` to a result part whose outputs carry the field, so the groups stay right
when parts are merged: a merge re-ranks every candidate by distance first.

Pure numpy/pyarrow, no per-hit Python loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.reduce import _pk_fill, larger_is_better, reduce_parts

I64 = np.int64


def _slot_codes(part: dict[str, Any], field: str, size: int) -> np.ndarray:
    """The group of every slot as a small integer (-1: padding); nulls are one group."""
    codes = np.full(size, -1, I64)
    outputs = part.get("outputs")
    rows = np.asarray(part.get("output_rows", []), I64)
    if outputs is None or not len(rows):
        return codes
    column = outputs.column(field).combine_chunks()
    encoded = pc.dictionary_encode(column)
    codes[rows] = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy()
    return codes


def regroup(
    part: dict[str, Any], limit: int, group_size: int, offset: int, field: str, metric: str
) -> tuple[dict[str, Any], np.ndarray]:
    """The grouped answer of one part: ``(part of width limit * group_size, complete)``
    where ``complete[q]`` says query ``q`` found ``offset + limit`` groups with
    ``group_size`` hits each (so a wider search could not change its answer)."""
    larger = larger_is_better(metric)
    d = np.asarray(part["distances"], np.float32)
    pks = np.asarray(part["pks"])
    nq, w = d.shape if d.ndim == 2 else (len(d), 0)
    codes = _slot_codes(part, field, nq * w).reshape(nq, w)
    # best first within each query (a part may come grouped already)
    rank_key = np.where(np.isfinite(d), -d if larger else d, np.inf)
    by_rank = np.argsort(rank_key, axis=1, kind="stable")
    d, codes = np.take_along_axis(d, by_rank, 1), np.take_along_axis(codes, by_rank, 1)
    valid = np.isfinite(d) & (codes >= 0)
    span = int(codes.max()) + 2 if codes.size else 1
    key = np.where(valid, np.arange(nq)[:, None] * span + codes, -1).ravel()
    n = key.size
    srt = np.argsort(key, kind="stable")  # equal keys keep their rank order
    sk = key[srt]
    starts = np.ones(n, bool)
    starts[1:] = sk[1:] != sk[:-1]
    run_first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    occ = np.empty(n, I64)
    occ[srt] = np.arange(n) - run_first  # place of a hit within its group
    first = (valid.ravel() & (occ == 0)).reshape(nq, w)
    group_rank = (np.cumsum(first, axis=1) - 1).ravel()
    order = np.empty(n, I64)
    order[srt] = group_rank[srt[run_first]]  # the rank of the hit's group by best hit
    occ2, order2 = occ.reshape(nq, w), order.reshape(nq, w)
    wanted = offset + limit
    member = valid & (order2 < wanted) & (occ2 < group_size)
    counts = np.bincount(
        (np.arange(nq)[:, None] * wanted + order2)[member], minlength=nq * wanted
    ).reshape(nq, wanted)
    complete = counts.min(axis=1, initial=group_size) >= group_size if wanted else np.ones(nq, bool)

    keep = member & (order2 >= offset)
    kr, kc = np.nonzero(keep)
    width = limit * group_size
    sort_key = kr * width + (order2[kr, kc] - offset) * group_size + occ2[kr, kc]
    pick = np.argsort(sort_key, kind="stable")
    kr, kc = kr[pick], kc[pick]
    per_row = np.bincount(kr, minlength=nq)
    new_col = np.arange(len(kr)) - (np.cumsum(per_row) - per_row)[kr]
    worst = -np.inf if larger else np.inf
    out_d = np.full((nq, width), worst, np.float32)
    out_p = np.full((nq, width), _pk_fill(pks.dtype), dtype=pks.dtype)
    out_d[kr, new_col] = d[kr, kc]
    src_col = by_rank[kr, kc]  # the hit's column in the part as given
    out_p[kr, new_col] = pks.reshape(nq, w)[kr, src_col]
    out: dict[str, Any] = {"distances": out_d, "pks": out_p}
    outputs = part.get("outputs")
    if outputs is not None:
        slot_to_row = np.full(nq * w, -1, I64)
        rows = np.asarray(part.get("output_rows", []), I64)
        slot_to_row[rows] = np.arange(len(rows))
        out["outputs"] = outputs.take(pa.array(slot_to_row[kr * w + src_col]))
        out["output_rows"] = kr * width + new_col
    return out, complete


def reduce_grouped(
    parts: Sequence[dict[str, Any]],
    limit: int,
    group_size: int,
    metric: str,
    field: str,
    offset: int = 0,
) -> dict[str, Any]:
    """Merge grouped parts (of segments or shards) into one grouped answer."""
    total = sum(int(np.shape(p["distances"])[-1]) for p in parts if np.ndim(p["distances"]) == 2)
    merged = reduce_parts(parts, max(total, 1), metric)  # every candidate, best first
    if np.ndim(merged["distances"]) != 2:
        return merged
    return regroup(merged, limit, group_size, offset, field, metric)[0]
