"""The FAISS segment-index engine (index/engine.py, index/build.py) against the exact
kernel as ground truth."""

from __future__ import annotations

import threading

import faiss
import lance
import numpy as np
import pyarrow as pa
import pytest

from elanus.errors import ElanusError
from elanus.index.build import MIN_POINTS_PER_LIST, build_index, build_segment_index
from elanus.index.engine import load_index
from elanus.index.kernels import VectorIndexExact
from elanus.indexparams import make_index_spec

N, DIM, NQ, K = 50_000, 128, 100, 10
SMALL_N, SMALL_DIM = 8_000, 32


def clustered(n: int, dim: int, seed: int, clusters: int = 256, sigma: float = 1.0) -> np.ndarray:
    """Deterministic gaussian blobs: ``clusters`` unit-normal centres, points around them."""
    rng = np.random.default_rng(1000 + clusters)
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.integers(clusters, size=n)
    noise = rng.standard_normal((n, dim), dtype=np.float32) * np.float32(sigma)
    return centres[labels] + noise


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean fraction of each query's true neighbours that were found (queries with none skipped)."""
    hits, total = 0, 0
    for f, t in zip(found, truth, strict=True):
        t = t[t >= 0]
        hits += len(np.intersect1d(f[f >= 0], t))
        total += len(t)
    return hits / total


def spec(itype: str, metric: str = "L2", dim: int = DIM, **params):
    dtype = "BinaryVector" if itype.startswith("BIN") else "FloatVector"
    return make_index_spec(dtype, dim, itype, metric, params)


@pytest.fixture(scope="module")
def big():
    X = clustered(N, DIM, seed=1)
    Q = clustered(NQ, DIM, seed=2)
    return X, Q, VectorIndexExact(X, "L2")


@pytest.fixture(scope="module")
def big_indexes(big):
    X, _, _ = big
    return {
        "HNSW": build_index(spec("HNSW", M=16, efConstruction=64), X),
        "IVF_FLAT": build_index(spec("IVF_FLAT", nlist=256), X),
    }


@pytest.fixture(scope="module")
def small():
    return clustered(SMALL_N, SMALL_DIM, seed=3, clusters=64), clustered(20, SMALL_DIM, seed=4)


@pytest.fixture(scope="module")
def bits():
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, (64, 16), dtype=np.uint8)  # 128-bit vectors near 64 centres
    flips = np.packbits(rng.random((6000, 128)) < 0.1, axis=1)
    X = base[rng.integers(64, size=6000)] ^ flips
    return X, X[:15] ^ np.packbits(rng.random((15, 128)) < 0.05, axis=1)


# -- recall on 50k clustered vectors ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("itype,params", [("HNSW", {"ef": 64}), ("IVF_FLAT", {"nprobe": 16})])
def test_recall_at_10(big, big_indexes, itype, params):
    X, Q, exact = big
    ix = big_indexes[itype]
    assert ix.built_as == itype and ix.num_rows == N and ix.num_vectors == N
    _, truth = exact.search(Q, K, "L2")
    D, rows = ix.search(Q, K, params)
    assert D.shape == rows.shape == (NQ, K) and D.dtype == np.float32 and rows.dtype == np.int64
    assert recall(rows, truth) >= 0.95
    assert (np.diff(D, axis=1) >= 0).all()  # best first
    # distances are true squared L2 distances of the returned rows
    ref = ((X[rows] - Q[:, None, :]) ** 2).sum(-1)
    np.testing.assert_allclose(D, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("itype", ["HNSW", "IVF_FLAT"])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_filtered_search_recall(big, big_indexes, itype, fraction):
    _, Q, exact = big
    valid = np.random.default_rng(int(fraction * 100)).random(N) < fraction
    _, truth = exact.search(Q, K, "L2", valid=valid)
    _, rows = big_indexes[itype].search(Q, K, {}, valid=valid)
    assert (rows >= 0).all() and valid[rows].all()
    assert recall(rows, truth) >= 0.9


@pytest.mark.slow
def test_heavy_filter_uses_exact_scan_and_policy(big, big_indexes):
    _, Q, exact = big
    hnsw = big_indexes["HNSW"]
    valid = np.zeros(N, bool)
    valid[np.random.default_rng(9).choice(N, 700, replace=False)] = True  # 1.4 % visible
    D0, truth = exact.search(Q, K, "L2", valid=valid)
    D, rows = hnsw.search(Q, K, {}, valid=valid)
    assert recall(rows, truth) == 1.0
    np.testing.assert_allclose(D, D0, rtol=1e-4, atol=1e-3)
    assert hnsw.prefers_exact(0.05) and not hnsw.prefers_exact(0.5)
    assert big_indexes["IVF_FLAT"].prefers_exact(0.01)
    # only three rows visible: k' shrinks to 3 like the exact kernel's
    few = np.zeros(N, bool)
    few[[5, 17, 40_000]] = True
    D, rows = hnsw.search(Q[:2], K, {}, valid=few)
    assert rows.shape == (2, 3) and set(rows[0]) == {5, 17, 40_000}


@pytest.mark.slow
def test_concurrent_searches_match_serial(big, big_indexes):
    _, Q, _ = big
    valid = np.random.default_rng(3).random(N) < 0.5
    for ix in big_indexes.values():
        serial = [ix.search(Q[i : i + 1], K, {}, valid=valid)[1] for i in range(40)]
        batch = ix.search(Q[:40], K, {}, valid=valid)[1]
        np.testing.assert_array_equal(np.vstack(serial), batch)
        out: dict[int, np.ndarray] = {}

        def work(t: int, ix=ix, out=out) -> None:
            for i in range(t, 40, 4):
                out[i] = ix.search(Q[i : i + 1], K, {}, valid=valid)[1][0]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        np.testing.assert_array_equal(np.vstack([out[i] for i in range(40)]), batch)


# -- every index type -------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_flat_distances_equal_the_exact_kernel(small, metric):
    X, Q = small
    ix = build_index(spec("FLAT", metric, SMALL_DIM), X)
    D0, R0 = VectorIndexExact(X).search(Q, K, metric)
    D, R = ix.search(Q, K)
    np.testing.assert_array_equal(R, R0)
    np.testing.assert_allclose(D, D0, rtol=1e-5, atol=1e-4)
    valid = np.arange(SMALL_N) % 7 == 0
    D0, R0 = VectorIndexExact(X).search(Q, K, metric, valid=valid)
    D, R = ix.search(Q, K, valid=valid)
    np.testing.assert_array_equal(R, R0)
    np.testing.assert_allclose(D, D0, rtol=1e-5, atol=1e-4)


ALL_FLOAT_METRICS = ("L2", "IP", "COSINE")
PQ8 = {"nlist": 64, "m": 16, "nbits": 8}  # slow training: the one slow case
APPROX = [  # (type, build params, search params, min recall@10, metrics)
    ("IVF_FLAT", {"nlist": 64}, {"nprobe": 64}, 1.0, ALL_FLOAT_METRICS),  # every list: exact
    ("IVF_SQ8", {"nlist": 64}, {"nprobe": 16}, 0.9, ALL_FLOAT_METRICS),
    ("IVF_PQ", PQ8, {"nprobe": 16}, 0.6, ("L2",)),
    ("IVF_PQ", {"nlist": 32, "m": 8, "nbits": 4}, {"nprobe": 16}, 0.15, ALL_FLOAT_METRICS),
    ("HNSW", {"M": 16, "efConstruction": 100}, {"ef": 128}, 0.95, ALL_FLOAT_METRICS),
]
CASES = [
    pytest.param(t, b, p, r, m, marks=[pytest.mark.slow] if b is PQ8 else [])
    for t, b, p, r, ms in APPROX
    for m in ms
]


@pytest.mark.parametrize("itype,build,params,min_recall,metric", CASES)
def test_approximate_types_build_and_search(small, itype, build, params, min_recall, metric):
    X, Q = small
    ix = build_index(spec(itype, metric, SMALL_DIM, **build), X)
    assert ix.built_as == itype and ix.nlist == build.get("nlist")
    D0, truth = VectorIndexExact(X).search(Q, K, metric)
    D, rows = ix.search(Q, K, params)
    assert rows.shape == (len(Q), K) and (rows >= 0).all()
    assert recall(rows, truth) >= (min_recall if metric != "IP" else min_recall - 0.1)
    larger = metric != "L2"
    assert (np.diff(D, axis=1) <= 0 if larger else np.diff(D, axis=1) >= 0).all()
    if min_recall == 1.0:
        np.testing.assert_allclose(D, D0, rtol=1e-4, atol=1e-3)
    valid = np.random.default_rng(1).random(SMALL_N) < 0.3
    _, rows = ix.search(Q, K, params, valid=valid)
    assert valid[rows[rows >= 0]].all()
    assert ix.nbytes > 0


@pytest.mark.parametrize("metric", ["HAMMING", "JACCARD"])
def test_bin_flat_equals_the_exact_kernel(bits, metric):
    X, Q = bits
    ix = build_index(spec("BIN_FLAT", metric, 128), X)
    exact = VectorIndexExact(X)
    valid = np.arange(len(X)) % 3 > 0
    for v in (None, valid):
        D0, R0 = exact.search(Q, K, metric, valid=v)
        D, R = ix.search(Q, K, valid=v)
        np.testing.assert_array_equal(D, D0)
        np.testing.assert_array_equal(R, R0)
    D0, R0 = exact.search(Q, K, metric, radius=20 if metric == "HAMMING" else 0.3)
    D, R = ix.search(Q, K, radius=20 if metric == "HAMMING" else 0.3)
    np.testing.assert_array_equal(D, D0)


def test_bin_ivf_flat(bits):
    X, Q = bits
    ix = build_index(spec("BIN_IVF_FLAT", "HAMMING", 128, nlist=32), X)
    assert ix.built_as == "BIN_IVF_FLAT" and ix.nlist == 32
    exact = VectorIndexExact(X)
    D0, truth = exact.search(Q, K, "HAMMING")
    D, rows = ix.search(Q, K, {"nprobe": 32})  # every list: exact distances
    np.testing.assert_array_equal(D, D0)
    assert D.dtype == np.float32
    _, rows = ix.search(Q, K, {"nprobe": 4})
    assert recall(rows, truth) >= 0.8
    valid = np.random.default_rng(2).random(len(X)) < 0.2  # FAISS has no selector here: exact
    D0, _ = exact.search(Q, K, "HAMMING", valid=valid)
    D, rows = ix.search(Q, K, {"nprobe": 4}, valid=valid)
    np.testing.assert_array_equal(D, D0)
    assert valid[rows].all()


def test_range_search(small):
    X, Q = small
    exact = VectorIndexExact(X)
    D0, _ = exact.search(Q, 50, "L2")
    radius, rf = float(np.median(D0[:, 30])), float(np.median(D0[:, 3]))
    for itype, build in [("FLAT", {}), ("IVF_FLAT", {"nlist": 64}), ("HNSW", {"M": 8})]:
        ix = build_index(spec(itype, "L2", SMALL_DIM, **build), X)
        for f in (None, rf):
            De, Re = exact.search(Q, 20, "L2", radius=radius, range_filter=f)
            D, R = ix.search(Q, 20, {"nprobe": 64, "ef": 200}, radius=radius, range_filter=f)
            hit = R >= 0
            assert D.shape == (len(Q), 20)
            assert (D[hit] < radius).all() and (f is None or (D[hit] >= f).all())
            assert np.isinf(D[~hit]).all()
            assert recall(R, Re) >= (1.0 if itype != "HNSW" else 0.9)
    cos = build_index(spec("IVF_FLAT", "COSINE", SMALL_DIM, nlist=64), X)
    D0, _ = exact.search(Q, 50, "COSINE")
    radius, rf = float(np.median(D0[:, 30])), float(np.median(D0[:, 3]))
    De, Re = exact.search(Q, 20, "COSINE", radius=radius, range_filter=rf)
    D, R = cos.search(Q, 20, {"nprobe": 64}, radius=radius, range_filter=rf)
    assert recall(R, Re) == 1.0
    assert ((D[R >= 0] > radius) & (D[R >= 0] <= rf + 1e-6)).all()


# -- persistence, tiny segments, nulls ----------------------------------------------------------

ALL_TYPES = [
    ("FLAT", {}),
    ("IVF_FLAT", {"nlist": 32}),
    ("IVF_SQ8", {"nlist": 32}),
    ("IVF_PQ", {"nlist": 32, "m": 8, "nbits": 6}),
    ("HNSW", {"M": 8, "efConstruction": 32}),
    ("BIN_FLAT", {}),
    ("BIN_IVF_FLAT", {"nlist": 32}),
]


@pytest.mark.parametrize("itype,build", ALL_TYPES)
def test_write_load_round_trip(tmp_path, small, bits, itype, build):
    binary = itype.startswith("BIN")
    X, Q = bits if binary else small
    metric = "HAMMING" if binary else "COSINE"
    valid = np.arange(len(X)) % 10 != 3  # some null vectors too
    ix = build_index(spec(itype, metric, 128 if binary else SMALL_DIM, **build), X, valid)
    keys = ix.write(tmp_path / "seg")
    assert sorted(keys) == ["index.faiss", "meta.json"]
    assert all((tmp_path / "seg" / k).is_file() for k in keys)
    again = load_index(tmp_path / "seg")
    assert (again.spec, again.built_as, again.nlist) == (ix.spec, ix.built_as, ix.nlist)
    assert (again.num_rows, again.num_vectors, again.nbytes) == (len(X), valid.sum(), ix.nbytes)
    # mmap.enabled: the same answers from the file, mapped (IVF: FAISS's on-disk lists)
    mapped = load_index(tmp_path / "seg", mmap=True)
    assert mapped.nbytes == ix.nbytes and 0 < mapped.mapped_nbytes < ix.nbytes
    assert again.mapped_nbytes == 0
    if "IVF" in itype:
        lists = faiss.downcast_InvertedLists(mapped.faiss_structure.invlists)
        assert isinstance(lists, faiss.OnDiskInvertedLists)
    filt = np.random.default_rng(4).random(len(X)) < 0.4
    for v in (None, filt):
        D, R = ix.search(Q, K, {}, valid=v)
        for loaded in (again, mapped):
            D2, R2 = loaded.search(Q, K, {}, valid=v)
            np.testing.assert_array_equal(R, R2)
            np.testing.assert_array_equal(D, D2)
        assert valid[R[R >= 0]].all()


def test_load_rejects_missing_or_foreign_files(tmp_path):
    with pytest.raises(ElanusError, match="no readable index metadata"):
        load_index(tmp_path)
    ix = build_index(spec("FLAT", "L2", 4), np.eye(4, dtype=np.float32))
    ix.write(tmp_path)
    (tmp_path / "index.faiss").write_bytes(b"not an index")
    with pytest.raises(ElanusError, match="cannot read index file"):
        load_index(tmp_path)


@pytest.mark.parametrize("itype,build", ALL_TYPES)
def test_one_row_segments(itype, build):
    binary = itype.startswith("BIN")
    dim = 64 if binary else 8
    X = np.full((1, 8), 7, np.uint8) if binary else np.ones((1, 8), np.float32)
    ix = build_index(spec(itype, "HAMMING" if binary else "L2", dim, **build), X)
    assert ix.built_as == ("BIN_FLAT" if binary else "FLAT") and ix.num_vectors == 1
    D, R = ix.search(X, K, {})
    assert R.tolist() == [[0]] and D.tolist() == [[0.0]]


def test_small_segments_degrade_sensibly(small):
    X, Q = small
    ivf = build_index(spec("IVF_FLAT", "L2", SMALL_DIM, nlist=4096), X)  # 8000 rows < 39 * 4096
    assert ivf.built_as == "IVF_FLAT" and ivf.nlist == SMALL_N // MIN_POINTS_PER_LIST
    _, rows = ivf.search(Q, K, {"nprobe": 4096})  # nprobe is checked against the spec's nlist
    _, truth = VectorIndexExact(X).search(Q, K, "L2")
    assert recall(rows, truth) == 1.0
    pq = build_index(spec("IVF_PQ", "L2", SMALL_DIM, nlist=8, m=4, nbits=14), X)  # < 2^14 rows
    assert pq.built_as == "FLAT"
    tiny = build_index(spec("HNSW", "L2", SMALL_DIM), X[:100])
    D, rows = tiny.search(Q, K)
    D0, truth = VectorIndexExact(X[:100]).search(Q, K, "L2")
    assert tiny.built_as == "FLAT" and (rows == truth).all()


def test_null_vectors_are_never_returned(big):
    X, Q, _ = big
    X = X[:6000]
    valid = np.random.default_rng(7).random(6000) < 0.6
    for itype in ("HNSW", "IVF_FLAT", "FLAT"):
        build = {"M": 8, "efConstruction": 32} if itype == "HNSW" else {}
        ix = build_index(spec(itype, "L2", DIM, **build), X, valid)
        assert ix.num_rows == 6000 and ix.num_vectors == valid.sum()
        _, truth = VectorIndexExact(X).search(Q, K, "L2", valid=valid)
        for v in (None, np.ones(6000, bool), np.random.default_rng(1).random(6000) < 0.05):
            _, rows = ix.search(Q, K, {"nprobe": 64, "ef": 64}, valid=v)
            assert (rows >= 0).all() and valid[rows].all()
        _, rows = ix.search(Q, K, {"nprobe": 64, "ef": 64})
        assert recall(rows, truth) >= 0.95
    none = build_index(spec("HNSW", "L2", DIM), X[:50], np.zeros(50, bool))
    D, rows = none.search(Q[:3], K)
    assert D.shape == rows.shape == (3, 0)


def test_bad_input_is_rejected_and_changes_nothing(small):
    X, Q = small
    s = spec("IVF_FLAT", "L2", SMALL_DIM, nlist=16)
    with pytest.raises(ElanusError, match=r"shape \(10, 5\), expected \(n, 32\)"):
        build_index(s, np.zeros((10, 5), np.float32))
    with pytest.raises(ElanusError, match="valid has"):
        build_index(s, X, np.ones(3, bool))
    bad = X[:100].copy()
    bad[3, 4] = np.nan
    with pytest.raises(ElanusError, match="NaN"):
        build_index(s, bad)
    with pytest.raises(ElanusError, match="threads must be a positive integer"):
        build_index(s, X, threads=0)
    with pytest.raises(ElanusError, match="uint8"):
        build_index(spec("BIN_FLAT", "HAMMING", 64), np.zeros((3, 8), np.float32))
    ix = build_index(s, X)
    before = ix.search(Q, K, {"nprobe": 8})
    cases = [
        ({"queries": Q[:, :5], "k": K}, r"shape \(20, 5\)"),
        ({"queries": Q, "k": K, "valid": np.ones(3, bool)}, "visibility bitset"),
        ({"queries": Q, "k": K, "params": {"nprobe": 17}}, r"nprobe must be in \[1, 16\]"),
        ({"queries": Q, "k": 0}, "positive"),
        ({"queries": Q, "k": K, "radius": 1.0, "range_filter": 2.0}, "range_filter must be"),
        ({"queries": Q, "k": K, "range_filter": 2.0}, "needs a radius"),
        ({"queries": np.full((1, SMALL_DIM), np.inf), "k": K}, "NaN or infinite"),
        ({"queries": [["a"] * SMALL_DIM], "k": K}, "numeric"),
    ]
    for kwargs, msg in cases:
        with pytest.raises(ElanusError, match=msg):
            ix.search(**kwargs)
    after = ix.search(Q, K, {"nprobe": 8})
    np.testing.assert_array_equal(before[1], after[1])
    one = ix.search(Q[0], K, {"nprobe": 8})  # a single 1-d query
    np.testing.assert_array_equal(one[1], before[1][:1])


# -- from a Lance dataset ---------------------------------------------------------------------


def test_build_segment_index_from_lance(tmp_path, small, bits):
    X, Q = small
    n = 3000
    present = np.arange(n) % 11 != 0
    vec = pa.FixedSizeListArray.from_arrays(pa.array(X[:n].ravel()), SMALL_DIM)
    vec = pa.array(
        [row if ok else None for row, ok in zip(vec.to_pylist(), present, strict=True)],
        type=vec.type,
    )
    B, BQ = bits
    bvec = pa.array([bytes(r) for r in B[:n]], type=pa.binary(16))
    half = pa.FixedSizeListArray.from_arrays(pa.array(X[:n].astype(np.float16).ravel()), SMALL_DIM)
    table = pa.table({"pk": pa.array(np.arange(n)), "v": vec, "b": bvec, "h": half})
    path = str(tmp_path / "seg.lance")
    lance.write_dataset(table, path)

    s = spec("HNSW", "L2", SMALL_DIM, M=8, efConstruction=40)
    ix = build_segment_index(path, "v", s)
    assert ix.num_rows == n and ix.num_vectors == present.sum()
    D, rows = ix.search(Q, K, {"ef": 100})
    D0, truth = VectorIndexExact(X[:n]).search(Q, K, "L2", valid=present)
    assert present[rows].all() and recall(rows, truth) >= 0.95

    hspec = make_index_spec("Float16Vector", SMALL_DIM, "FLAT", "IP")
    D, rows = build_segment_index(path, "h", hspec).search(Q, K)
    D0, truth = VectorIndexExact(X[:n].astype(np.float16).astype(np.float32)).search(Q, K, "IP")
    np.testing.assert_array_equal(rows, truth)

    bix = build_segment_index(path, "b", spec("BIN_FLAT", "HAMMING", 128))
    D, rows = bix.search(BQ, K)
    D0, _ = VectorIndexExact(B[:n]).search(BQ, K, "HAMMING")
    np.testing.assert_array_equal(D, D0)

    with pytest.raises(ElanusError, match="expected fixed_size_list<float32>"):
        build_segment_index(path, "pk", s)
    with pytest.raises(ElanusError, match="expected fixed_size_binary"):
        build_segment_index(path, "v", spec("BIN_FLAT", "HAMMING", 128))
    with pytest.raises(ElanusError, match="cannot read field 'nope'"):
        build_segment_index(path, "nope", s)
    with pytest.raises(ElanusError, match="cannot read field"):
        build_segment_index(str(tmp_path / "missing.lance"), "v", s)
