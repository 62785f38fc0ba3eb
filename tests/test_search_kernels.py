"""Exact search kernels and the top-k reduce (index/kernels.py) against numpy brute force."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from elanus.errors import ElanusError
from elanus.index import kernels as S
from elanus.index.kernels import VectorIndexExact
from elanus.reduce import merge_topk

FLOAT_METRICS = ["L2", "IP", "COSINE"]
BINARY_METRICS = ["HAMMING", "JACCARD"]
N, DIM, BITS, NQ = 3000, 24, 256, 7


# -- reference implementations ----------------------------------------------------------------


def ref_float(Q: np.ndarray, X: np.ndarray, metric: str) -> np.ndarray:
    q, x = Q.astype(np.float64), X.astype(np.float64)
    if metric == "L2":
        return ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    if metric == "COSINE":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return q @ x.T


def ref_binary(Q: np.ndarray, X: np.ndarray, metric: str) -> np.ndarray:
    qb = np.unpackbits(Q, axis=1).astype(bool)
    xb = np.unpackbits(X, axis=1).astype(bool)
    inter = (qb[:, None, :] & xb[None]).sum(-1)
    union = (qb[:, None, :] | xb[None]).sum(-1)
    if metric == "HAMMING":
        return (union - inter).astype(np.float64)
    return 1.0 - np.divide(inter, union, out=np.ones(inter.shape), where=union > 0)


def ref_sparse(Q: list[dict[int, float]], rows: list[dict[int, float]]) -> np.ndarray:
    out = np.zeros((len(Q), len(rows)))
    for i, q in enumerate(Q):
        for j, r in enumerate(rows):
            out[i, j] = sum(v * r[t] for t, v in q.items() if t in r)
    return out


def expected_topk(ref: np.ndarray, k: int, larger: bool, keep: np.ndarray) -> list[np.ndarray]:
    """Per query: the visible row ids (``keep``: (nq, n) bool) ordered best first, cut at k."""
    out = []
    for q in range(ref.shape[0]):
        cand = np.flatnonzero(keep[q])
        key = -ref[q, cand] if larger else ref[q, cand]
        out.append(cand[np.argsort(key, kind="stable")][:k])
    return out


def check(D, ids, ref, k, larger, keep, width=None, tol=1e-4):
    """Results equal brute force: same distances (ties allowed to swap ids), and the same ids
    wherever the reference has no near-tie."""
    nq = ref.shape[0]
    exp = expected_topk(ref, k, larger, keep)
    width = max((len(e) for e in exp), default=0) if width is None else width
    assert D.shape == ids.shape == (nq, width)
    assert D.dtype == np.float32 and ids.dtype == np.int64
    worst = -np.inf if larger else np.inf
    for q in range(nq):
        e = exp[q]
        got = ids[q, : len(e)]
        assert (ids[q, len(e) :] == -1).all() and (D[q, len(e) :] == worst).all()
        assert len(set(got.tolist())) == len(e) and (got >= 0).all()
        assert keep[q, got].all(), "a returned row is invisible or out of range"
        np.testing.assert_allclose(D[q, : len(e)], ref[q, e], rtol=1e-5, atol=tol)
        np.testing.assert_allclose(D[q, : len(e)], ref[q, got], rtol=1e-5, atol=tol)
        # ids must match exactly where no other candidate is within the tolerance
        cand = np.sort(ref[q, keep[q]])
        for j, row in enumerate(e):
            if np.count_nonzero(np.abs(cand - ref[q, row]) <= 10 * tol) == 1:
                assert got[j] == row, (q, j)


def masks(n: int, rng: np.random.Generator) -> dict[str, np.ndarray | None]:
    one = np.zeros(n, bool)
    one[n // 3] = True
    return {
        "all": None,
        "all_explicit": np.ones(n, bool),
        "half": rng.random(n) < 0.5,
        "tenth": rng.random(n) < 0.1,
        "one": one,
        "none": np.zeros(n, bool),
    }


def fixed_list(x: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])


def fixed_binary(x: np.ndarray) -> pa.FixedSizeBinaryArray:
    return pa.array([bytes(r) for r in x], pa.binary(x.shape[1]))


@pytest.fixture(scope="module")
def float_data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N, DIM), dtype=np.float32)
    Q = rng.standard_normal((NQ, DIM), dtype=np.float32)
    return X, Q, VectorIndexExact(fixed_list(X))


@pytest.fixture(scope="module")
def binary_data():
    rng = np.random.default_rng(8)
    X = rng.integers(0, 256, (N, BITS // 8), dtype=np.uint8)
    Q = rng.integers(0, 256, (NQ, BITS // 8), dtype=np.uint8)
    return X, Q, VectorIndexExact(fixed_binary(X))


# -- k-NN -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_name", ["all", "all_explicit", "half", "tenth", "one", "none"])
@pytest.mark.parametrize("metric", FLOAT_METRICS + BINARY_METRICS)
@pytest.mark.parametrize("k", [10, 200])  # faiss heap and argpartition paths
def test_knn_matches_brute_force(float_data, binary_data, metric, mask_name, k):
    X, Q, ix = binary_data if metric in BINARY_METRICS else float_data
    ref = (ref_binary if metric in BINARY_METRICS else ref_float)(Q, X, metric)
    valid = masks(N, np.random.default_rng(3))[mask_name]
    keep = np.ones(ref.shape, bool) if valid is None else np.broadcast_to(valid, ref.shape)
    D, ids = ix.search(Q, k, metric, valid=valid)
    check(D, ids, ref, k, metric in S.LARGER_IS_BETTER, keep)


@pytest.mark.parametrize("metric", FLOAT_METRICS + BINARY_METRICS)
def test_k_larger_than_visible(float_data, binary_data, metric):
    X, Q, ix = binary_data if metric in BINARY_METRICS else float_data
    ref = (ref_binary if metric in BINARY_METRICS else ref_float)(Q, X, metric)
    valid = np.zeros(N, bool)
    valid[np.random.default_rng(5).choice(N, 37, replace=False)] = True
    D, ids = ix.search(Q, 100, metric, valid=valid)
    assert D.shape == (NQ, 37)
    check(D, ids, ref, 100, metric in S.LARGER_IS_BETTER, np.broadcast_to(valid, ref.shape))
    # more than the segment holds
    D, ids = ix.search(Q[:2], N + 50, metric)
    assert D.shape == (2, N)
    assert sorted(ids[0].tolist()) == list(range(N))


@pytest.mark.parametrize("metric", FLOAT_METRICS + BINARY_METRICS)
@pytest.mark.parametrize("k", [5, 150])
def test_many_query_blocks(float_data, binary_data, monkeypatch, metric, k):
    """Queries processed in several blocks, dense bias and gathered subset paths."""
    monkeypatch.setattr(S, "BLOCK_ELEMENTS", 2 * N + 1)  # two queries per block
    X, Q, ix = binary_data if metric in BINARY_METRICS else float_data
    ref = (ref_binary if metric in BINARY_METRICS else ref_float)(Q, X, metric)
    for frac in (0.6, 0.2):
        valid = np.random.default_rng(11).random(N) < frac
        D, ids = ix.search(Q, k, metric, valid=valid)
        check(D, ids, ref, k, metric in S.LARGER_IS_BETTER, np.broadcast_to(valid, ref.shape))


def test_single_query_vector_and_one_dim_input(float_data):
    X, Q, ix = float_data
    D1, I1 = ix.search(Q[0], 4, "L2")
    D2, I2 = ix.search(Q[:1], 4, "L2")
    assert D1.shape == (1, 4)
    assert (I1 == I2).all()
    np.testing.assert_array_equal(D1, D2)


# -- range search -----------------------------------------------------------------------------


def threshold_near(values: np.ndarray, quantile: float) -> float:
    """A threshold near the quantile that lies in a clear gap between reference values."""
    v = np.unique(values)
    i = int(quantile * (len(v) - 1))
    while i + 1 < len(v) and v[i + 1] - v[i] < 1e-4 * max(1.0, abs(v[i])):
        i += 1
    assert i + 1 < len(v)
    return float((v[i] + v[i + 1]) / 2)


@pytest.mark.parametrize("metric", FLOAT_METRICS + BINARY_METRICS)
@pytest.mark.parametrize("with_filter", [False, True])
@pytest.mark.parametrize("k", [8, 500])
def test_range_search(float_data, binary_data, metric, with_filter, k):
    X, Q, ix = binary_data if metric in BINARY_METRICS else float_data
    ref = (ref_binary if metric in BINARY_METRICS else ref_float)(Q, X, metric)
    larger = metric in S.LARGER_IS_BETTER
    # similarities: keep radius < d <= range_filter; distances: range_filter <= d < radius
    radius = threshold_near(ref, 0.8 if larger else 0.2)
    rf = threshold_near(ref, 0.95 if larger else 0.05) if with_filter else None
    if larger:
        keep = (ref > radius) & ((ref <= rf) if rf is not None else True)
    else:
        keep = (ref < radius) & ((ref >= rf) if rf is not None else True)
    valid = np.random.default_rng(2).random(N) < 0.7
    keep &= valid
    D, ids = ix.search(Q, k, metric, valid=valid, radius=radius, range_filter=rf)
    assert D.shape[1] == min(k, int(valid.sum()))
    check(D, ids, ref, k, larger, keep, width=D.shape[1])
    if k > 300:
        assert (ids == -1).any()  # fewer than k results in range


def test_range_filter_must_be_on_the_right_side(float_data):
    _, Q, ix = float_data
    with pytest.raises(ElanusError):
        ix.search(Q, 5, "L2", radius=10.0, range_filter=20.0)
    with pytest.raises(ElanusError):
        ix.search(Q, 5, "IP", radius=1.0, range_filter=0.5)


# -- input types ------------------------------------------------------------------------------


def test_float32_path_is_zero_copy(float_data):
    X, _, _ = float_data
    col = fixed_list(X)
    ix = VectorIndexExact(col)
    arrow_data = np.frombuffer(col.values.buffers()[1], np.float32)
    assert np.shares_memory(ix.x, arrow_data)
    # a slice of the column and a one-chunk ChunkedArray are still views
    sliced = VectorIndexExact(col.slice(100, 500))
    assert np.shares_memory(sliced.x, arrow_data)
    np.testing.assert_array_equal(sliced.x, X[100:600])
    chunked = VectorIndexExact(pa.chunked_array([col]))
    assert np.shares_memory(chunked.x, arrow_data)
    # searching leaves the data untouched and allocates no copy of it
    ix.search(X[:3], 5, "COSINE")
    assert np.shares_memory(ix.x, arrow_data)


def test_multi_chunk_and_sliced_columns(float_data):
    X, Q, _ = float_data
    chunked = pa.chunked_array([fixed_list(X[:1000]), fixed_list(X[1000:])])
    D, ids = VectorIndexExact(chunked).search(Q, 10, "L2")
    ref = ref_float(Q, X, "L2")
    check(D, ids, ref, 10, False, np.ones(ref.shape, bool))
    sub = VectorIndexExact(fixed_list(X).slice(500, 1000))
    D, ids = sub.search(Q, 10, "IP")
    ref = ref_float(Q, X[500:1500], "IP")
    check(D, ids, ref, 10, True, np.ones(ref.shape, bool))


def test_float16_vectors():
    rng = np.random.default_rng(4)
    X16 = rng.standard_normal((800, 16)).astype(np.float16)
    Q = rng.standard_normal((5, 16)).astype(np.float16).astype(np.float32)
    col = pa.FixedSizeListArray.from_arrays(pa.array(X16.ravel(), pa.float16()), 16)
    ix = VectorIndexExact(col)
    assert ix.x.dtype == np.float32
    X = X16.astype(np.float32)
    for metric in FLOAT_METRICS:
        ref = ref_float(Q, X, metric)
        D, ids = ix.search(Q.astype(np.float16), 10, metric)  # float16 queries too
        check(D, ids, ref, 10, metric in S.LARGER_IS_BETTER, np.ones(ref.shape, bool))


def test_binary_inputs_bytes_and_views(binary_data):
    X, Q, ix = binary_data
    col = fixed_binary(X)
    assert np.shares_memory(VectorIndexExact(col).x, np.frombuffer(col.buffers()[1], np.uint8))
    D1, I1 = ix.search([bytes(q) for q in Q], 5, "HAMMING")
    D2, I2 = ix.search(Q, 5, "HAMMING")
    np.testing.assert_array_equal(D1, D2)
    np.testing.assert_array_equal(I1, I2)
    D3, _ = VectorIndexExact(X).search(Q, 5, "HAMMING")  # from a numpy uint8 matrix
    np.testing.assert_array_equal(D3, D2)
    # a sliced binary column
    part = VectorIndexExact(col.slice(10, 100))
    ref = ref_binary(Q, X[10:110], "JACCARD")
    D, ids = part.search(Q, 7, "JACCARD")
    check(D, ids, ref, 7, False, np.ones(ref.shape, bool))


def test_null_vectors_are_never_returned(float_data):
    X, Q, _ = float_data
    n = 200
    nulls = np.zeros(n, bool)
    nulls[::3] = True
    col = pa.FixedSizeListArray.from_arrays(pa.array(X[:n].ravel()), DIM, mask=pa.array(nulls))
    ix = VectorIndexExact(col)
    ref = ref_float(Q, X[:n], "L2")
    D, ids = ix.search(Q, 20, "L2")
    check(D, ids, ref, 20, False, np.broadcast_to(~nulls, ref.shape))
    valid = np.arange(n) < 100
    D, ids = ix.search(Q, 20, "L2", valid=valid)
    check(D, ids, ref, 20, False, np.broadcast_to(~nulls & valid, ref.shape))


def test_sparse_inner_product():
    rng = np.random.default_rng(9)
    rows = []
    for _ in range(400):
        dims = rng.choice(50, rng.integers(1, 8), replace=False)
        rows.append(
            {int(d): float(v) for d, v in zip(dims, rng.random(len(dims)) + 0.1, strict=True)}
        )
    rows[5] = {}  # an empty row
    queries = [
        {int(d): float(rng.random() + 0.1) for d in rng.choice(50, 4, replace=False)}
        for _ in range(6)
    ]
    queries.append({999: 1.0})  # shares no dimension with any row
    col = pa.array([list(r.items()) for r in rows], pa.map_(pa.uint32(), pa.float32()))
    ix = VectorIndexExact(col)
    ref = ref_sparse(queries, rows)
    overlap = ref != 0  # rows sharing no dimension with the query are not results
    D, ids = ix.search(queries, 10, "IP")
    check(D, ids, ref, 10, True, overlap, width=10)
    assert (ids[-1] == -1).all()
    valid = rng.random(400) < 0.5
    D, ids = ix.search(queries, 10, "IP", valid=valid)
    check(D, ids, ref, 10, True, overlap & valid, width=10)
    # range search; the same queries as a map array; a sliced column
    radius = threshold_near(ref[overlap], 0.6)
    D, ids = ix.search(
        pa.array([list(q.items()) for q in queries], pa.map_(pa.uint32(), pa.float32())),
        50,
        "IP",
        radius=radius,
    )
    check(D, ids, ref, 50, True, overlap & (ref > radius), width=50)
    D, ids = VectorIndexExact(col.slice(100, 200)).search(queries, 10, "ip")
    check(D, ids, ref[:, 100:300], 10, True, overlap[:, 100:300], width=10)
    _, one = ix.search(queries[0], 10, "IP")  # a single query as a dict
    np.testing.assert_array_equal(one, ix.search(queries[:1], 10, "IP")[1])
    with pytest.raises(ElanusError):
        ix.search(queries, 10, "L2")


def test_bad_arguments(float_data, binary_data):
    _, Q, ix = float_data
    _, BQ, bix = binary_data
    with pytest.raises(ElanusError):
        ix.search(Q, 5, "HAMMING")
    with pytest.raises(ElanusError):
        bix.search(BQ, 5, "L2")
    with pytest.raises(ElanusError):
        ix.search(Q, 5, "EUCLID")
    with pytest.raises(ElanusError):
        ix.search(Q[:, :5], 5, "L2")
    with pytest.raises(ElanusError):
        ix.search(Q, 5, "L2", valid=np.ones(N - 1, bool))
    with pytest.raises(ElanusError):
        VectorIndexExact(pa.array([1, 2, 3]))
    D, ids = ix.search(Q, 0, "L2")
    assert D.shape == ids.shape == (NQ, 0)


# -- reduce -----------------------------------------------------------------------------------


def ref_merge(parts, k, larger, offset):
    nq = len(parts[0][0])
    out = []
    for q in range(nq):
        entries = []
        for s, p in enumerate(parts):
            for c in range(len(p[0][q])):
                d = float(p[0][q][c])
                if np.isfinite(d):
                    row = p[2][q][c] if len(p) > 2 else c
                    entries.append((-d if larger else d, s, c, p[1][q][c], int(row), d))
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        seen, kept = set(), []
        for e in entries:
            if e[3] not in seen:
                seen.add(e[3])
                kept.append(e)
        out.append(kept[offset : offset + k])
    return out


def assert_merge_equal(result, expected, larger):
    D, P, src, rows = result
    worst = -np.inf if larger else np.inf
    for q, exp in enumerate(expected):
        n = len(exp)
        assert D[q, :n].tolist() == pytest.approx([e[5] for e in exp])
        assert P[q, :n].tolist() == [e[3] for e in exp]
        assert src[q, :n].tolist() == [e[1] for e in exp]
        assert rows[q, :n].tolist() == [e[4] for e in exp]
        assert (D[q, n:] == worst).all() and (src[q, n:] == -1).all() and (rows[q, n:] == -1).all()


def random_parts(rng, nq, larger, string_pks=False):
    parts = []
    for width in (10, 6, 0, 12):
        d = np.round(rng.random((nq, width)) * 20, 1).astype(np.float32)  # ties are likely
        d = -np.sort(-d, axis=1) if larger else np.sort(d, axis=1)
        pk = rng.integers(0, 25, (nq, width))  # overlapping keys across and within parts
        if width:
            d[:, -2:] = -np.inf if larger else np.inf  # padding
            pk[:, -2:] = -1
        if string_pks:
            pk = np.array([[f"k{v}" for v in row] for row in pk], dtype=object).reshape(nq, width)
        rows = rng.integers(0, 1000, (nq, width))
        parts.append((d, pk, rows) if width % 4 else (d, pk))
    return parts


@pytest.mark.parametrize("metric", ["L2", "IP"])
@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.parametrize("string_pks", [False, True])
def test_merge_topk_matches_reference(metric, offset, string_pks):
    rng = np.random.default_rng(21)
    larger = metric == "IP"
    parts = random_parts(rng, 50, larger, string_pks)
    for k in (1, 5, 40):
        result = merge_topk(parts, k, metric, offset=offset)
        assert result[0].shape == (50, k)
        assert_merge_equal(result, ref_merge(parts, k, larger, offset), larger)


def test_merge_topk_handoff_duplicates():
    # a row in both a growing and a sealed copy: the best-ranked copy wins, once
    growing = (np.array([[0.1, 0.5, 0.9]], np.float32), np.array([[7, 8, 9]]))
    sealed = (
        np.array([[0.1, 0.3, np.inf]], np.float32),
        np.array([[7, 3, -1]]),
        np.array([[40, 41, -1]]),
    )
    D, P, src, rows = merge_topk([growing, sealed], 10, "L2")
    assert P[0, :4].tolist() == [7, 3, 8, 9]
    assert src[0, :4].tolist() == [0, 1, 0, 0]
    assert rows[0, :4].tolist() == [0, 41, 1, 2]
    assert D[0, :4].tolist() == pytest.approx([0.1, 0.3, 0.5, 0.9])
    assert P[0, 4:].tolist() == [-1] * 6
    # offset skips after deduplication
    D, P, _, _ = merge_topk([growing, sealed], 2, "L2", offset=1)
    assert P.tolist() == [[3, 8]]
    # IP: larger first
    D, P, _, _ = merge_topk(
        [(np.array([[0.9, 0.2]]), np.array([[1, 2]])), (np.array([[0.95]]), np.array([[2]]))],
        3,
        "IP",
    )
    assert P.tolist() == [[2, 1, -1]]
    assert D[0, :2].tolist() == pytest.approx([0.95, 0.9])


def test_merge_topk_with_search_results(float_data):
    """Per-segment search results reduce to the search of the whole collection."""
    X, Q, _ = float_data
    pks = np.arange(N) * 10 + 3
    cuts = [0, 700, 1900, N]
    for metric in FLOAT_METRICS:
        parts = []
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            D, ids = VectorIndexExact(X[lo:hi]).search(Q, 15, metric)
            parts.append((D, np.where(ids >= 0, pks[lo:hi][ids], -1), ids))
        D, P, src, rows = merge_topk(parts, 10, metric, offset=2)
        full_D, full_ids = VectorIndexExact(X).search(Q, 12, metric)
        np.testing.assert_allclose(D, full_D[:, 2:], rtol=1e-5, atol=1e-5)
        assert (pks[full_ids[:, 2:]] == P).all()
        assert (pks[np.array(cuts)[src] + rows] == P).all()


def test_merge_topk_many_queries_stay_sorted():
    """A large reduce (2000 queries, 8 parts, k=100; bench/exact_kernels.py times it)."""
    rng = np.random.default_rng(0)
    nq, k = 2000, 100
    parts = []
    for _ in range(8):
        d = np.sort(rng.random((nq, k), dtype=np.float32), axis=1)
        parts.append((d, rng.integers(0, 10**9, (nq, k))))
    D, P, _, _ = merge_topk(parts, k, "L2")
    assert (np.diff(D, axis=1) >= 0).all()


def test_empty_segment_and_prepared_statistics(float_data):
    X, Q, _ = float_data
    empty = VectorIndexExact(fixed_list(X[:0]))
    D, ids = empty.search(Q, 10, "L2")
    assert D.shape == ids.shape == (NQ, 0)
    ix = VectorIndexExact(fixed_list(X), metric="COSINE")
    assert ix._inv_norm is not None
    ref = ref_float(Q, X, "COSINE")
    D, ids = ix.search(Q, 10, "COSINE")
    check(D, ids, ref, 10, True, np.ones(ref.shape, bool))
