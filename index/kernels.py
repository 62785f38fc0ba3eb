"""Exact vector search over one segment's vector column, and the top-k reduce.

Pure compute (numpy, faiss, pyarrow): query-node workers and delegators call it on the
in-memory columns of growing segments (and of sealed segments without an index), and the
delegator and proxy call :func:`merge_topk` to reduce per-segment and per-shard results.
It lives in ``index/`` (the Knowhere of DESIGN.md's table) because the segment-index engine
scans FLAT and HNSW storage with it too: ``segments/`` imports ``index/``, never the reverse.

Distances follow Milvus: ``L2`` is the squared Euclidean distance, ``HAMMING`` the number
of differing bits and ``JACCARD`` ``1 - |a & b| / |a | b|`` (smaller is better); ``IP`` and
``COSINE`` are similarities (larger is better). Range search keeps
``range_filter <= d < radius`` for the former and ``radius < d <= range_filter`` for the
latter (``range_filter`` optional). Results come back best first.

How the kernels were chosen (min of interleaved runs, 2 shared cores, 128-d float32, k=10):

    rows  queries  this module   faiss.knn   IndexFlatL2   gemm alone
    100k      1      1.2 ms       2.8 ms       3.6 ms        1.2 ms
    100k    100     20 ms        118 ms        87 ms         22 ms
    200k      1      2.6 ms       7.0 ms       7.1 ms        2.3 ms
    200k    100     52 ms        228 ms       185 ms         41 ms

i.e. a numpy BLAS product (``Q @ X.T``, queries pre-scaled by -2, plus the rows' squared
norms) then faiss's C heap (``float_maxheap_array_t.addn``, ~10x faster than
``np.argpartition`` for k <= 128; argpartition above). With a dense visibility bitset the
invisible rows get a +inf/-inf bias folded into the norms (200k rows, 50% visible: 3.7 ms
for 1 query, 56 ms for 100, vs 4.3 / 268 ms for ``knn_L2sqr`` with ``IDSelectorBitmap``);
when fewer than a quarter of the rows are visible only that gathered subset is searched.
Binary vectors use ``faiss.hammings`` (5-15x faster than numpy ``bitwise_count``); JACCARD
is derived from the Hamming distance and the rows' popcounts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
from faiss import swig_ptr

from elanus import bfloat16
from elanus.errors import invalid
from elanus.reduce import (
    KIND_METRICS,
    LARGER_IS_BETTER,
    normalize_metric,
)

HEAP_MAX_K = 128  # faiss heap for k <= this, np.argpartition above (measured crossover)
BLOCK_ELEMENTS = 1 << 24  # at most this many scores (64 MiB float32) are materialised at once
SUBSET_FRACTION = 0.25  # search a gathered subset when fewer rows than this are visible

F32 = np.float32
I64 = np.int64


def check_range(metric: str, radius: float | None, range_filter: float | None) -> None:
    """A Milvus range keeps ``range_filter <= d < radius`` (``radius < d <= range_filter``
    where larger is better): the bounds must leave room between them."""
    if radius is None or range_filter is None:
        return
    larger = metric in LARGER_IS_BETTER
    if not (radius < range_filter if larger else range_filter < radius):
        side = "larger" if larger else "smaller"
        raise invalid(f"range_filter must be {side} than radius for metric {metric}")


def stop_faiss_interrupt_checks() -> None:
    """Keep FAISS from taking the GIL in the middle of a search, for this process.

    FAISS's Python module installs a callback that long loops call to look for Ctrl-C; it
    takes the GIL. In a server the search has released the GIL and other threads (the event
    loop) hold it often, so that check waited for them: with a loop thread 10% busy, a
    single-query search on a Flight thread took 173 us instead of 117 us, and the calls/s
    of a one-client loop fell by a quarter. Servers stop on signals handled elsewhere, so
    the check buys nothing there.
    """
    faiss.InterruptCallback.clear_instance()  # type: ignore[attr-defined]  # not in faiss's stub


# -- top-k ------------------------------------------------------------------------------------


_FAISS_THREADS: dict[int, int] = {}
"""OS thread id -> the OpenMP thread count set on it. Not a ``threading.local``: a Flight
handler thread gets a fresh Python thread state on every call (pyarrow's
``PyGILState_Ensure``), so thread-local values vanish between calls while the OpenMP
setting stays with the OS thread."""


def use_faiss_threads(n: int) -> None:
    """Let FAISS use ``n`` OpenMP threads on the calling thread from now on.

    The setting is per thread, so concurrent searches do not interfere, and it stays: every
    FAISS caller here sets what it needs first, which costs nothing when it is already so
    (a get and a set per search were ~10 us of a 70 us single-query path).

    One thread is the rule: FAISS's OpenMP workers keep spinning after each call and fight
    numpy's OpenBLAS threads for the cores (measured 3-5x slower searches on 2 cores), and a
    single thread scans ~1e9 scores/s, plenty here.

    A thread that reuses a finished one's id starts from OpenMP's default while the table
    says otherwise; that only matters for a large batch beside other searches (more
    threads than cores for a moment), never for results.
    """
    ident = threading.get_ident()
    if _FAISS_THREADS.get(ident) != n:
        faiss.omp_set_num_threads(n)
        if len(_FAISS_THREADS) >= 4096:  # threads come and go: forget the gone ones
            _FAISS_THREADS.clear()
        _FAISS_THREADS[ident] = n


def topk(scores: np.ndarray, k: int, larger: bool) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` columns of each row of ``scores`` (float32, C-contiguous), best first.

    Entries equal to the worst value (+inf, or -inf when ``larger``) are never returned:
    their slots come back as distance ±inf and index -1.
    """
    nq, n = scores.shape
    k = min(k, n)
    worst = -np.inf if larger else np.inf
    if k <= HEAP_MAX_K:
        scores = np.ascontiguousarray(scores, dtype=F32)
        D = np.empty((nq, k), F32)
        ids = np.empty((nq, k), I64)
        heap = faiss.float_minheap_array_t() if larger else faiss.float_maxheap_array_t()
        heap.nh, heap.k, heap.val, heap.ids = nq, k, swig_ptr(D), swig_ptr(ids)
        use_faiss_threads(1)
        heap.heapify()
        heap.addn(n, swig_ptr(scores), 0, 0, nq)  # type: ignore[call-arg]
        heap.reorder()
    else:
        key = -scores if larger else scores
        part = np.argpartition(key, k - 1, axis=1)[:, :k] if k < n else np.argsort(key, axis=1)
        order = np.argsort(np.take_along_axis(key, part, 1), axis=1, kind="stable")
        ids = np.take_along_axis(part, order, 1).astype(I64, copy=False)
        D = np.take_along_axis(scores, ids, 1).astype(F32, copy=False)
    # empty heap slots hold id -1 (and ±inf); argpartition may pick ±inf (invisible) entries
    missing = (ids < 0) | ~np.isfinite(D)
    if missing.any():
        D[missing] = worst
        ids[missing] = -1
    return D, ids


def _apply_range(
    scores: np.ndarray, larger: bool, radius: float, range_filter: float | None
) -> None:
    """Set the scores outside the Milvus range to the worst value, in place."""
    if larger:
        bad = scores <= radius
        if range_filter is not None:
            bad |= scores > range_filter
        scores[bad] = -np.inf
    else:
        bad = scores >= radius
        if range_filter is not None:
            bad |= scores < range_filter
        scores[bad] = np.inf


# -- input conversion -------------------------------------------------------------------------


def _single_chunk(column: Any) -> Any:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def is_float_column(t: pa.DataType) -> bool:
    """fixed_size_list of float32, float16 or bfloat16 bit patterns (uint16)."""
    return pa.types.is_fixed_size_list(t) and (
        pa.types.is_float32(t.value_type)
        or pa.types.is_float16(t.value_type)
        or bfloat16.is_bits_type(t)
    )


def float_matrix(arr: pa.FixedSizeListArray) -> np.ndarray:
    """(n, dim) float32 matrix of a dense float vector column (see ``is_float_column``;
    float32 data is not copied, bfloat16 is widened)."""
    dim = arr.type.list_size
    values = arr.values.slice(arr.offset * dim, len(arr) * dim)
    x = values.to_numpy(zero_copy_only=values.null_count == 0 and values.type == pa.float32())
    if x.dtype == np.uint16:
        x = bfloat16.widen(x)
    elif x.dtype != F32:
        x = x.astype(F32)
    return x.reshape(len(arr), dim)


def binary_matrix(arr: pa.FixedSizeBinaryArray) -> np.ndarray:
    width = arr.type.byte_width
    buf = arr.buffers()[1]
    return np.frombuffer(buf, np.uint8, count=len(arr) * width, offset=arr.offset * width).reshape(
        len(arr), width
    )


def sparse_to_csr(data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices uint32, values float32) from a map<uint32, float32> array, a list of
    ``{index: value}`` dicts (or of ``(indices, values)`` pairs), or a CSR triple."""
    if isinstance(data, tuple) and len(data) == 3:
        indptr, indices, values = data
        return np.asarray(indptr, I64), np.asarray(indices, np.uint32), np.asarray(values, F32)
    if isinstance(data, dict):  # a single query
        data = [data]
    data = _single_chunk(data)
    if isinstance(data, pa.MapArray):
        offsets = data.offsets.to_numpy().astype(I64)
        lo, hi = int(offsets[0]), int(offsets[-1])
        keys = data.keys.slice(lo, hi - lo).to_numpy(zero_copy_only=False).astype(np.uint32)
        vals = data.items.slice(lo, hi - lo).to_numpy(zero_copy_only=False).astype(F32)
        return offsets - lo, keys, vals
    rows = [r.items() if isinstance(r, dict) else zip(*r, strict=True) for r in data]
    pairs = [sorted((int(i), float(v)) for i, v in r) for r in rows]
    indptr = np.zeros(len(pairs) + 1, I64)
    indptr[1:] = np.cumsum([len(p) for p in pairs])
    flat = [p for r in pairs for p in r]
    indices = np.fromiter((i for i, _ in flat), np.uint32, len(flat))
    values = np.fromiter((v for _, v in flat), F32, len(flat))
    return indptr, indices, values


# -- BM25 -------------------------------------------------------------------------------------


BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class BM25:
    """Okapi BM25 as Milvus (knowhere) scores it: a query is a sparse vector of
    ``tf_query * idf`` per term (``elanus.reduce.bm25_idf``, from the statistics), a row a
    sparse vector of term frequencies, and the score their product after each row
    frequency ``tf`` is saturated as ``tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``
    (``dl`` the row's length in tokens, ``avgdl`` at least 1: knowhere clamps it so, and a
    collection of mostly empty texts then scores as in Milvus)."""

    k1: float = BM25_K1
    b: float = BM25_B
    avgdl: float = 1.0

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> BM25:
        """From a search's params (``bm25_k1``, ``bm25_b``, ``bm25_avgdl``: the proxy set
        them after gathering the statistics)."""
        return cls(
            float(params.get("bm25_k1", BM25_K1)),
            float(params.get("bm25_b", BM25_B)),
            float(params.get("bm25_avgdl", 1.0)),
        )

    def saturate(self, tf: np.ndarray, dl: np.ndarray) -> np.ndarray:
        """Row term frequencies to their BM25 weights (float64, vectorised)."""
        avgdl = max(self.avgdl, 1.0)
        norm = self.k1 * (1.0 - self.b + self.b * dl / avgdl)
        return tf * (self.k1 + 1.0) / (tf + norm)


# -- the index --------------------------------------------------------------------------------


class VectorIndexExact:
    """Brute-force (exact) search over one vector column.

    Built from an Arrow column (``fixed_size_list<float32|float16|uint16 bfloat16, dim>``,
    ``fixed_size_binary(dim/8)`` or ``map<uint32, float32>``) or a numpy matrix (float →
    FloatVector, uint8 → BinaryVector). float32 data is used in place, zero-copy; null rows
    are never returned. Per-row norms (L2, COSINE) and popcounts (JACCARD) are computed on
    first use, or up front for ``metric``.
    """

    def __init__(self, column: Any, metric: str | None = None) -> None:
        column = _single_chunk(column)
        self._nonnull: np.ndarray | None = None
        self._sqnorm: np.ndarray | None = None
        self._inv_norm: np.ndarray | None = None
        self._popcount: np.ndarray | None = None
        self._copied = False
        if isinstance(column, np.ndarray):
            if column.ndim != 2:
                raise invalid("a vector matrix must be 2-dimensional")
            if column.dtype == np.uint8:
                self.kind, self.x = "binary", np.ascontiguousarray(column)
                self.dim = column.shape[1] * 8
            else:
                self.kind, self.x = "float", np.ascontiguousarray(column, dtype=F32)
                self.dim = column.shape[1]
            self.n = column.shape[0]
        else:
            self._from_arrow(column)
        if metric is not None:
            self.prepare(metric)

    def prepare(self, metric: str) -> None:
        """Compute the per-row statistics ``metric`` needs now rather than on first search."""
        m = normalize_metric(metric)
        if self.kind == "float" and m in ("L2", "COSINE"):
            _ = self.inv_norm if m == "COSINE" else self.sqnorm
        elif self.kind == "binary" and m == "JACCARD":
            _ = self.popcount

    def _from_arrow(self, column: Any) -> None:
        if not isinstance(column, pa.Array):
            raise invalid(f"cannot search a column of type {type(column).__name__}")
        self.n = len(column)
        if column.null_count:
            self._nonnull = column.is_valid().to_numpy(zero_copy_only=False)
        t = column.type
        if is_float_column(t):
            self.kind, self.dim = "float", t.list_size
            self.x = float_matrix(column)
            self._copied = not pa.types.is_float32(t.value_type)
        elif pa.types.is_fixed_size_binary(t):
            self.kind, self.dim = "binary", t.byte_width * 8
            self.x = binary_matrix(column)
        elif pa.types.is_map(t):
            self.kind, self.dim = "sparse", 0
            self._build_sparse(column)
        else:
            raise invalid(f"cannot search a column of type {t}")

    @property
    def own_nbytes(self) -> int:
        """Bytes held beyond the column searched: per-row statistics, and the float32 copy
        of a float16/bfloat16 column or a sparse column's inverted index."""
        held = [self._nonnull, self._sqnorm, self._inv_norm, self._popcount]
        if self.kind == "sparse":
            held += [self._skeys, self._srows, self._svals, self.row_sums]
        total = sum(a.nbytes for a in held if a is not None)
        return total + (self.x.nbytes if self._copied else 0)

    # -- per-row statistics, computed on first use ---------------------------------------------
    @property
    def sqnorm(self) -> np.ndarray:
        if self._sqnorm is None:
            self._sqnorm = np.einsum("ij,ij->i", self.x, self.x)
        return self._sqnorm

    @property
    def inv_norm(self) -> np.ndarray:
        if self._inv_norm is None:
            norm = np.sqrt(self.sqnorm)
            self._inv_norm = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
        return self._inv_norm

    @property
    def popcount(self) -> np.ndarray:
        if self._popcount is None:
            self._popcount = np.bitwise_count(self.x).sum(axis=1, dtype=np.int32)
        return self._popcount

    def _build_sparse(self, column: pa.MapArray) -> None:
        indptr, keys, vals = sparse_to_csr(column)
        rows = np.repeat(np.arange(self.n, dtype=I64), np.diff(indptr))
        order = np.argsort(keys, kind="stable")  # an inverted index: postings per dimension
        self._skeys, self._srows, self._svals = keys[order], rows[order], vals[order]
        # a BM25 row's length in tokens: the sum of its term frequencies
        self.row_sums = np.bincount(rows, vals.astype(np.float64), minlength=self.n)

    def _postings(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in the inverted index of every key's postings, concatenated; the
        number of postings per key)."""
        lo = np.searchsorted(self._skeys, keys, "left")
        lengths = np.searchsorted(self._skeys, keys, "right") - lo
        starts = np.repeat(lo - np.cumsum(lengths) + lengths, lengths)
        return starts + np.arange(int(lengths.sum())), lengths

    def term_stats(
        self, terms: np.ndarray, valid: np.ndarray | None = None
    ) -> tuple[int, float, np.ndarray]:
        """BM25 statistics of the visible rows: (rows, their total length in tokens, per
        term the number of rows holding it) — a sparse column of term frequencies only."""
        if self.kind != "sparse":
            raise invalid("term statistics need a sparse vector column")
        mask = self._mask(valid)
        terms = np.asarray(terms, np.uint32)
        pos, lengths = self._postings(terms)
        seen = np.ones(len(pos), bool) if mask is None else mask[self._srows[pos]]
        which = np.repeat(np.arange(len(terms)), lengths)
        df = np.bincount(which, seen.astype(np.float64), minlength=len(terms)).astype(I64)
        if mask is None:
            return self.n, float(self.row_sums.sum()), df
        return int(np.count_nonzero(mask)), float(self.row_sums[mask].sum()), df

    # -- search --------------------------------------------------------------------------------
    def search(
        self,
        queries: Any,
        k: int,
        metric: str,
        valid: np.ndarray | None = None,
        radius: float | None = None,
        range_filter: float | None = None,
        bm25: BM25 | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows per query: ``(distances (nq, k') float32, rows (nq, k') int64)``.

        ``k' = min(k, visible rows)``; slots without a result (range search, or sparse rows
        sharing no dimension with the query) hold row -1 and distance ±inf (the worst value).
        ``valid`` is a bool (or 0/1) array with one entry per row; False rows are skipped.
        Metric BM25 (sparse term frequencies, queries weighted by IDF) takes ``bm25``.
        """
        metric = normalize_metric(metric)
        if metric not in KIND_METRICS[self.kind]:
            raise invalid(f"metric {metric} does not apply to {self.kind} vectors")
        if (metric == "BM25") != (bm25 is not None):
            raise invalid("metric BM25 and its parameters (k1, b, avgdl) go together")
        if k < 0:
            raise invalid(f"k must be non-negative, got {k}")
        larger = metric in LARGER_IS_BETTER
        check_range(metric, radius, range_filter)
        Q, qsq = self._queries(queries, metric)
        nq = Q[0].shape[0] - 1 if isinstance(Q, tuple) else Q.shape[0]
        mask = self._mask(valid)
        count = self.n if mask is None else int(np.count_nonzero(mask))
        kk = min(k, count)
        worst = -np.inf if larger else np.inf
        if kk == 0 or nq == 0:
            return np.full((nq, kk), worst, F32), np.full((nq, kk), -1, I64)

        rows: np.ndarray | None = None
        bias: np.ndarray | None = None
        if mask is not None and count < self.n:
            if self.kind != "sparse" and count <= self.n * SUBSET_FRACTION:
                rows = np.flatnonzero(mask)
            else:
                bias = np.where(mask, F32(0), F32(worst))

        D = np.empty((nq, kk), F32)
        ids = np.empty((nq, kk), I64)
        ranged = radius is not None
        blocks = self._score_blocks(Q, qsq if ranged else None, metric, rows, bias, bm25)
        for q0, S in blocks:
            if radius is not None:
                _apply_range(S, larger, radius, range_filter)
            d, i = topk(S, kk, larger)
            D[q0 : q0 + len(S)], ids[q0 : q0 + len(S)] = d, i
        if rows is not None:
            ids = np.where(ids >= 0, rows[np.maximum(ids, 0)], -1)
        if metric == "L2" and not ranged:  # |q|² does not change the ranking: added last
            D += qsq[:, None]
            np.maximum(D, 0, out=D)
        return D, ids

    def _mask(self, valid: np.ndarray | None) -> np.ndarray | None:
        if valid is None:
            return self._nonnull
        v = np.asarray(valid)
        if v.shape != (self.n,):
            raise invalid(f"the visibility bitset has {v.shape} entries, the segment {self.n} rows")
        v = v.astype(bool, copy=False)
        return v if self._nonnull is None else v & self._nonnull

    def _queries(self, queries: Any, metric: str) -> tuple[Any, np.ndarray]:
        """The queries in kernel form, and their squared norms (float vectors only)."""
        qsq = np.zeros(0, F32)
        if self.kind == "sparse":
            return sparse_to_csr(queries), qsq
        if self.kind == "binary":
            if isinstance(queries, bytes | bytearray):
                queries = [queries]
            if isinstance(queries, list | tuple) and queries and isinstance(queries[0], bytes):
                queries = np.frombuffer(b"".join(queries), np.uint8).reshape(len(queries), -1)
            Q = np.ascontiguousarray(queries, dtype=np.uint8)
            width = self.dim // 8
        else:
            Q = np.ascontiguousarray(queries, dtype=F32)
            width = self.dim
        if Q.ndim == 1:
            Q = Q.reshape(1, -1)
        if Q.ndim != 2 or Q.shape[1] != width:
            raise invalid(f"query vectors have shape {Q.shape}, expected (nq, {width}) ")
        if self.kind == "float":
            qsq = np.einsum("ij,ij->i", Q, Q)
            if metric == "COSINE":
                qn = np.sqrt(qsq)
                Q = Q * np.divide(1.0, qn, out=np.zeros_like(qn), where=qn > 0)[:, None]
        return Q, qsq

    def _score_blocks(
        self,
        Q: Any,
        qsq: np.ndarray | None,
        metric: str,
        rows: np.ndarray | None,
        bias: np.ndarray | None,
        bm25: BM25 | None = None,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first query, scores (c, m) float32) for chunks of queries; column j is row j (or
        ``rows[j]``); invisible rows score the worst value. L2 scores leave out |q|² unless
        ``qsq`` is given (range search needs true distances)."""
        m = self.n if rows is None else len(rows)
        nq = Q[0].shape[0] - 1 if isinstance(Q, tuple) else Q.shape[0]
        step = max(1, BLOCK_ELEMENTS // max(m, 1))
        if self.kind == "sparse":
            for q0 in range(0, nq, step):
                yield q0, self._sparse_scores(Q, q0, min(nq, q0 + step), bias, bm25)
            return

        X = self.x if rows is None else self.x[rows]

        def sub(v: np.ndarray) -> np.ndarray:
            return v if rows is None else v[rows]

        if metric == "L2":
            base = sub(self.sqnorm) if bias is None else self.sqnorm + bias
        elif metric == "COSINE":
            scale = sub(self.inv_norm)
        elif metric in ("HAMMING", "JACCARD"):
            pop = sub(self.popcount).astype(F32)
        for q0 in range(0, nq, step):
            Qc = Q[q0 : q0 + step]
            if metric in ("HAMMING", "JACCARD"):
                ham = np.empty((len(Qc), m), np.int32)
                use_faiss_threads(1)
                faiss.hammings(  # type: ignore[attr-defined]
                    swig_ptr(Qc), swig_ptr(X), len(Qc), m, X.shape[1], swig_ptr(ham)
                )
                S = ham.astype(F32)
                if metric == "JACCARD":  # |a|b| = (|a|+|b|+ham)/2, |a&b| = (|a|+|b|-ham)/2
                    qpop = np.bitwise_count(Qc).sum(axis=1, dtype=np.int32).astype(F32)
                    union2 = S + pop + qpop[:, None]
                    S = np.divide(2 * S, union2, out=np.zeros_like(S), where=union2 > 0)
            elif metric == "L2":
                S = (Qc * F32(-2)) @ X.T
                S += base
                if qsq is not None:
                    S += qsq[q0 : q0 + len(Qc), None]
                    np.maximum(S, 0, out=S)
            else:
                S = Qc @ X.T
                if metric == "COSINE":
                    S *= scale
            if bias is not None and metric != "L2":
                S += bias
            yield q0, S

    def _sparse_scores(
        self,
        Q: tuple[np.ndarray, np.ndarray, np.ndarray],
        q0: int,
        q1: int,
        bias: Any,
        bm25: BM25 | None = None,
    ) -> np.ndarray:
        indptr, qkeys, qvals = Q
        S = np.empty((q1 - q0, self.n), F32)
        for r, q in enumerate(range(q0, q1)):
            keys, vals = qkeys[indptr[q] : indptr[q + 1]], qvals[indptr[q] : indptr[q + 1]]
            pos, lengths = self._postings(keys)
            hit_rows = self._srows[pos]
            tf = self._svals[pos].astype(np.float64)
            if bm25 is not None:
                tf = bm25.saturate(tf, self.row_sums[hit_rows])
            weights = tf * np.repeat(vals, lengths)
            score = np.bincount(hit_rows, weights, minlength=self.n)
            S[r] = score
            S[r, score == 0] = -np.inf  # no shared dimension (or a zero product): no result
        if bias is not None:
            S += bias
        return S


# -- reduce -----------------------------------------------------------------------------------
