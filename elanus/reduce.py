"""Merging ranked search results: per segment, per worker, per shard, then per proxy.

Pure numpy (no I/O), so workers, delegators and the proxy all reduce the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isfinite
from typing import Any, Literal

import numpy as np

from elanus.errors import invalid

Metric = Literal["L2", "IP", "COSINE", "HAMMING", "JACCARD", "BM25"]
METRICS = ("L2", "IP", "COSINE", "HAMMING", "JACCARD", "BM25")
LARGER_IS_BETTER = frozenset({"IP", "COSINE", "BM25"})
KIND_METRICS = {
    "float": frozenset({"L2", "IP", "COSINE"}),
    "binary": frozenset({"HAMMING", "JACCARD"}),
    "sparse": frozenset({"IP", "BM25"}),
}


F32 = np.float32
I64 = np.int64


def normalize_metric(metric: str) -> str:
    m = str(metric).upper()
    if m not in METRICS:
        raise invalid(f"unknown metric type {metric!r}; expected one of {', '.join(METRICS)}")
    return m


def larger_is_better(metric: str) -> bool:
    return normalize_metric(metric) in LARGER_IS_BETTER


def worst_distance(metric: str) -> float:
    """The padding distance: -inf for similarities, +inf for distances."""
    return -np.inf if larger_is_better(metric) else np.inf


def _pk_fill(dtype: np.dtype) -> Any:
    # Padding must compare with real keys when merged again (VarChar keys are strings).
    return -1 if dtype.kind in "iu" else ""


def merge_topk(
    parts: Sequence[tuple[np.ndarray, ...]],
    k: int,
    metric: str,
    offset: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reduce per-segment / per-shard results of the same ``nq`` queries.

    Each part is ``(distances (nq, k_i), pks (nq, k_i))`` or ``(distances, pks, rows)``;
    entries whose distance is not finite are padding. Per query, entries are ranked best
    first (ties keep part order), a primary key seen again is dropped (the best-ranked copy
    wins), then ``offset`` entries are skipped and ``k`` kept.

    Returns ``(distances (nq, k), pks (nq, k), source_index, row_index)``: ``source_index``
    is the part each entry came from (-1 for padding) and ``row_index`` the part's ``rows``
    value (or the entry's column within the part when a part has no ``rows``). Padding has
    distance ±inf, pk -1 (None/"" for object/string keys) and indices -1.
    """
    larger = larger_is_better(metric)
    worst = -np.inf if larger else np.inf
    if k < 0 or offset < 0:
        raise invalid("limit and offset must be non-negative")
    if not parts:
        raise invalid("merge_topk needs at least one part")
    nq = np.atleast_2d(np.asarray(parts[0][0])).shape[0]
    dist_l, pk_l, src_l, row_l = [], [], [], []
    for s, part in enumerate(parts):
        d = np.asarray(part[0], F32).reshape(nq, -1)
        p = np.asarray(part[1]).reshape(nq, -1)
        if d.shape != p.shape:
            raise invalid(f"part {s}: distances {d.shape} and pks {p.shape} differ in shape")
        r = (
            np.asarray(part[2], I64).reshape(nq, -1)
            if len(part) > 2 and part[2] is not None
            else np.broadcast_to(np.arange(d.shape[1], dtype=I64), d.shape)
        )
        dist_l.append(d)
        pk_l.append(p)
        src_l.append(np.full(d.shape, s, np.int32))
        row_l.append(r)
    D = np.concatenate(dist_l, axis=1)
    P = np.concatenate(pk_l, axis=1)
    S = np.concatenate(src_l, axis=1)
    R = np.concatenate(row_l, axis=1)
    fill = _pk_fill(P.dtype)

    out_d = np.full((nq, k), worst, F32)
    out_p = np.full((nq, k), fill, dtype=P.dtype)
    out_s = np.full((nq, k), -1, np.int32)
    out_r = np.full((nq, k), -1, I64)
    if D.shape[1] == 0 or k == 0 or nq == 0:
        return out_d, out_p, out_s, out_r
    if nq == 1:
        _reduce_one(D[0], P[0], (D, P, S, R), (out_d, out_p, out_s, out_r), larger, offset, k)
        return out_d, out_p, out_s, out_r

    # rank each query's entries best first (stable: ties keep part order); padding last
    key = np.where(np.isfinite(D), -D if larger else D, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    want = offset + k
    # Fast path: only the first `want` ranked entries of every query. A query whose window
    # held duplicates (fewer than `want` distinct pks) while more entries follow is redone
    # over all its entries; dropping a duplicate depends only on better-ranked entries.
    width = min(D.shape[1], want)
    ins, outs = (D, P, S, R), (out_d, out_p, out_s, out_r)
    everyone = np.arange(nq)
    redo = _reduce_rows(everyone, order[:, :width], key, P, offset, k, ins, outs)
    if width < D.shape[1]:
        redo &= np.isfinite(key[everyone, order[:, width]])
        short = np.flatnonzero(redo)
        if short.size:
            _reduce_rows(short, order[short], key, P, offset, k, ins, outs)
    return out_d, out_p, out_s, out_r


def _reduce_one(
    d: np.ndarray,
    p: np.ndarray,
    ins: tuple[np.ndarray, ...],
    outs: tuple[np.ndarray, ...],
    larger: bool,
    offset: int,
    k: int,
) -> None:
    """``merge_topk`` for a single query in a handful of numpy calls (single-query searches
    spent more time in the general path than in the index)."""
    key = np.where(np.isfinite(d), -d if larger else d, np.inf)
    order = np.argsort(key, kind="stable")
    order = order[np.isfinite(key[order])]
    _, first = np.unique(p[order], return_index=True)  # best-ranked copy of each key
    keep = order[np.sort(first)][offset : offset + k]
    for a, out in zip(ins, outs, strict=True):
        out[0, : len(keep)] = a[0, keep]


def _reduce_rows(
    qs: np.ndarray,
    order: np.ndarray,
    key: np.ndarray,
    P: np.ndarray,
    offset: int,
    k: int,
    ins: tuple[np.ndarray, ...],
    outs: tuple[np.ndarray, ...],
) -> np.ndarray:
    """Write the merged results of queries ``qs`` (entries ranked by ``order``, one row per
    query) into ``outs``; returns which of them kept fewer than offset + k entries."""
    rows = qs[:, None]
    present = np.isfinite(key[rows, order])
    pks = P[rows, order]
    codes = pks if pks.dtype.kind in "iub" else np.unique(pks, return_inverse=True)[1]
    codes = codes.reshape(pks.shape)
    # a pk already kept at a better rank of the same query is dropped
    by_pk = np.argsort(codes, axis=1, kind="stable")  # equal pks stay in rank order
    sorted_codes = np.take_along_axis(codes, by_pk, 1)
    dup_sorted = np.zeros(codes.shape, bool)
    dup_sorted[:, 1:] = (sorted_codes[:, 1:] == sorted_codes[:, :-1]) & np.take_along_axis(
        present, by_pk, 1
    )[:, :-1]
    dup = np.empty_like(dup_sorted)
    np.put_along_axis(dup, by_pk, dup_sorted, 1)

    keep = present & ~dup
    rank = np.cumsum(keep, axis=1) - 1
    sel = keep & (rank >= offset) & (rank < offset + k)
    ri, ci = np.nonzero(sel)
    qi, src_col, out_col = qs[ri], order[ri, ci], rank[ri, ci] - offset
    for a, out in zip(ins, outs, strict=True):
        out[qi, out_col] = a[qi, src_col]
    return np.asarray(rank[:, -1] + 1 < offset + k) if rank.shape[1] else np.ones(len(qs), bool)


def _reduced_as_is(part: dict[str, Any], k: int, offset: int) -> bool:
    """Whether a part as searches make it (numpy arrays) is already its own top-k."""
    d, p = part["distances"], part["pks"]
    return (
        type(d) is np.ndarray
        and type(p) is np.ndarray
        and d.dtype == F32
        and d.ndim == 2
        and p.dtype.kind in "iuO"
        and _already_reduced(d, p, k, offset)
    )


def _already_reduced(d: np.ndarray, p: np.ndarray, k: int, offset: int) -> bool:
    """Whether a part (best first, as every search returns) is its own top-k: no offset
    to skip, no wider than k, no padding and no primary key twice in a query."""
    if offset or d.shape[1] > k:
        return False
    if d.shape[1] < 2:
        return d.shape[1] == 0 or bool(np.isfinite(d).all())
    if d.shape[0] == 1:  # one query (the common case): plain Python is quicker here
        row = p[0].tolist()
        return isfinite(d[0, -1]) and len(set(row)) == len(row)  # padding is at the end
    if not np.isfinite(d[:, -1]).all():
        return False
    s = np.sort(p, axis=1)
    return bool((s[:, 1:] != s[:, :-1]).all())


def reduce_parts(
    parts: Sequence[dict[str, Any]], k: int, metric: str, offset: int = 0
) -> dict[str, Any]:
    """Merge result parts into one part of the same shape (so it can be merged again).

    A part is ``{"distances": (nq, k'), "pks": (nq, k'), "outputs": table | None,
    "output_rows": flat positions}``: ``outputs`` holds one row per real hit, in query-major
    order, and ``output_rows`` says which flat ``(query * k' + column)`` slot each is.
    """
    if len(parts) == 1 and _reduced_as_is(parts[0], k, offset):
        # One part that is sorted, within k and free of repeated keys (the common case of
        # one segment or one shard): nothing to merge. Measured: merging cost more than
        # the HNSW search itself for single queries.
        return parts[0]
    nonempty = [p for p in parts if np.shape(p["distances"])[-1:] != (0,)]
    parts = nonempty or parts[:1]  # parts with no hits (empty segments) add nothing
    arrays = [(np.asarray(p["distances"], dtype=F32), _as_pks(p["pks"])) for p in parts]
    arrays = [a for a in arrays if a[0].ndim == 2]
    if not arrays:
        return {"distances": np.zeros((0, 0), F32), "pks": np.zeros((0, 0), I64)}
    if len(parts) == 1 and len(arrays) == 1 and _already_reduced(*arrays[0], k, offset):
        return {**parts[0], "distances": arrays[0][0], "pks": arrays[0][1]}
    import pyarrow as pa  # the merge itself needs only numpy

    distances, pks, source, column = merge_topk(arrays, k, metric, offset)
    out: dict[str, Any] = {"distances": distances, "pks": pks}
    with_outputs = [p for p in parts if p.get("outputs") is not None]
    if not with_outputs:
        return out
    tables, maps, base = [], [], 0
    for (d, _), p in zip(arrays, parts, strict=True):
        slot_to_row = np.full(d.size, -1, dtype=I64)
        rows = np.asarray(p.get("output_rows", []), dtype=I64)
        slot_to_row[rows] = np.arange(len(rows)) + base
        maps.append((slot_to_row, d.shape[1]))
        table = p["outputs"]
        tables.append(table)
        base += table.num_rows
    merged = pa.concat_tables(tables, promote_options="permissive")
    nq, width = distances.shape
    query = np.repeat(np.arange(nq), width)
    src, col = source.ravel(), column.ravel()
    index = np.full(nq * width, -1, dtype=I64)
    for i, (slot_to_row, k_i) in enumerate(maps):
        pick = np.nonzero(src == i)[0]
        index[pick] = slot_to_row[query[pick] * k_i + col[pick]]
    valid = np.nonzero(index >= 0)[0]
    out["outputs"] = merged.take(pa.array(index[valid], pa.int64()))
    out["output_rows"] = valid
    return out


def _as_pks(pks: Any) -> np.ndarray:
    arr = np.asarray(pks)
    return arr.astype(object) if arr.dtype.kind == "U" else arr


# -- BM25 statistics ----------------------------------------------------------------------------


def add_term_stats(parts: list[dict[str, Any]], terms: int) -> dict[str, Any]:
    """BM25 statistics of several parts (segments, workers, shards) together: ``rows``,
    ``tokens`` (their total length) and ``df`` (rows holding each of ``terms`` terms)."""
    df = np.zeros(terms, I64)
    for p in parts:
        df += np.asarray(p["df"], I64)
    rows = sum(int(p["rows"]) for p in parts)
    return {"rows": rows, "tokens": float(sum(float(p["tokens"]) for p in parts)), "df": df}


def bm25_idf(rows: int, df: np.ndarray) -> np.ndarray:
    """Lucene's (and Milvus's) IDF: ``ln(1 + (N - df + 0.5) / (df + 0.5))``, never negative."""
    n = np.asarray(df, np.float64)
    return np.log1p((rows - n + 0.5) / (n + 0.5))
