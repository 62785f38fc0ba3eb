"""A range search's hits as a k-NN result: FAISS's range search gives each query a
variable number of hits (``lims``); the engine answers with the best ``k`` of them per
query, padded as its k-NN searches are (``elanus.index.engine``)."""

from __future__ import annotations

import numpy as np

from elanus.index.kernels import topk

F32, I64 = np.float32, np.int64


def ranged_topk(
    lims: np.ndarray,
    dist: np.ndarray,
    rows: np.ndarray,
    nq: int,
    kk: int,
    larger: bool,
    range_filter: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``kk`` of each query's range-search hits (FAISS already applied the radius),
    after dropping those beyond ``range_filter``; padded like a k-NN result."""
    worst = -np.inf if larger else np.inf
    per_query: np.ndarray = np.diff(lims.astype(I64))
    qi = np.repeat(np.arange(nq), per_query)
    if range_filter is not None:
        keep = (dist <= range_filter) if larger else (dist >= range_filter)
        qi, dist, rows = qi[keep], dist[keep], rows[keep]
    counts = np.bincount(qi, minlength=nq)
    width = int(counts.max()) if len(counts) else 0
    outD = np.full((nq, kk), worst, F32)
    outR = np.full((nq, kk), -1, I64)
    if width == 0:
        return outD, outR
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(qi)) - starts[qi]
    M = np.full((nq, width), worst, F32)
    R = np.full((nq, width), -1, I64)
    M[qi, pos], R[qi, pos] = dist, rows
    d, j = topk(M, kk, larger)
    outD[:, : d.shape[1]] = d
    outR[:, : d.shape[1]] = np.where(j >= 0, np.take_along_axis(R, np.maximum(j, 0), 1), -1)
    return outD, outR
