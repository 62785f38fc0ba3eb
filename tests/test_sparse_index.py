"""Sparse vector indexes (issue 15, "Must have" 4): SPARSE_INVERTED_INDEX and SPARSE_WAND.

- the index alone against the exact kernel: every algorithm gives the same ids and the
  same scores, bit for bit, with visibility masks, null rows and range searches; files
  written and read back; a damaged postings file refused; drop ratios keep recall;
- the real stack (nats-server, coord, index node, query node, proxy): indexed searches
  identical to the exact searches made before the index, with filters, deletes and
  grouping; describe_index; drop ratios; bad requests refused with clear errors;
- a Spark index run building a sparse index.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack
from test_index_service import collection_id, create_bucketed, served_indexes, tasks
from test_read_path import wait_for

from elanus import ElanusError, ErrorCode
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.index.engine import load_index
from elanus.index.kernels import VectorIndexExact
from elanus.index.sparse import POSTINGS_FILE, SparseIndex, build_sparse_index
from elanus.index.verify import verify_report
from elanus.indexparams import make_index_spec

VOCAB = 3000
SPARSE = pa.map_(pa.uint32(), pa.float32())
STRONG = "Strong"
ALGOS = [
    ("SPARSE_INVERTED_INDEX", "TAAT_NAIVE"),
    ("SPARSE_INVERTED_INDEX", "DAAT_MAXSCORE"),
    ("SPARSE_INVERTED_INDEX", "DAAT_WAND"),
    ("SPARSE_WAND", "DAAT_WAND"),
]


def corpus(n: int, seed: int) -> list[dict[int, float]]:
    """Rows shaped like learned sparse embeddings: frequent dimensions (a Zipf law) carry
    small weights, rare ones large, so the max-score pruning has something to prune."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dims = np.unique((rng.zipf(1.3, int(rng.integers(4, 40))) - 1) % VOCAB)
        weights = rng.random(len(dims)) * (0.2 + np.log1p(dims) / 4)
        out.append({int(d): float(np.float32(w)) for d, w in zip(dims, weights, strict=True)})
    return out


def dense(rows: list[dict[int, float]]) -> np.ndarray:
    m = np.zeros((len(rows), VOCAB), np.float64)
    for i, r in enumerate(rows):
        m[i, list(r)] = list(r.values())
    return m


def column(rows: list[dict[int, float] | None]) -> pa.Array:
    return pa.array([None if r is None else sorted(r.items()) for r in rows], SPARSE)


def spec(index_type: str = "SPARSE_INVERTED_INDEX", **params: Any) -> Any:
    return make_index_spec("SparseFloatVector", 0, index_type, "IP", params)


def recall(got: np.ndarray, want: np.ndarray) -> float:
    hits = sum(len(set(g[g >= 0]) & set(w[w >= 0])) for g, w in zip(got, want, strict=True))
    return hits / max(1, int((want >= 0).sum()))


# -- 1. the index alone ------------------------------------------------------------------------


@pytest.mark.parametrize(("index_type", "algo"), ALGOS)
def test_every_algorithm_equals_the_exact_kernel(index_type: str, algo: str) -> None:
    rows: list[dict[int, float] | None] = list(corpus(4000, seed=3))
    for i in range(0, 4000, 101):
        rows[i] = None  # null vectors: never returned
    col = column(rows)
    exact = VectorIndexExact(col)
    index = build_sparse_index(spec(index_type, inverted_index_algo=algo), col)
    assert (index.num_rows, index.num_vectors) == (4000, 4000 - 40)
    queries = corpus(60, seed=4)
    rng = np.random.default_rng(5)
    for valid in (None, rng.random(4000) < 0.5, rng.random(4000) < 0.03):
        for k in (1, 10, 64):
            D, ids = index.search(queries, k, {}, valid)
            D0, ids0 = exact.search(queries, k, "IP", valid)
            assert D.shape == D0.shape
            assert np.array_equal(ids, ids0), (k, int((ids != ids0).sum()))
            assert np.array_equal(D, D0)  # bit for bit, -inf padding included
            if valid is not None:
                assert valid[ids[ids >= 0]].all()
    D, ids = index.search(queries, 10, {}, None, radius=1.0, range_filter=2.0)
    D0, ids0 = exact.search(queries, 10, "IP", None, radius=1.0, range_filter=2.0)
    assert np.array_equal(ids, ids0) and np.array_equal(D, D0)
    found = D[ids >= 0]
    assert len(found) and ((found > 1.0) & (found <= 2.0)).all()


def test_pruning_really_prunes_and_keeps_the_answer() -> None:
    """The MaxScore path must be taken on this data (or the equality above proves little)."""
    rows = corpus(20000, seed=6)
    col = column(list(rows))
    index = build_sparse_index(spec(), col)
    taken = 0
    terms_seen = 0
    for q in corpus(30, seed=7):
        keys = np.array(sorted(q), np.uint32)
        vals = np.array([q[int(k)] for k in keys], np.float32)
        terms, qv = index._terms(keys, vals)
        terms_seen += len(terms)
        pruned = index._pruned(terms, qv, 10, np.ones(20000, bool))
        if pruned is not None:
            taken += 1
            full = index._accumulate(terms, qv)
            top = np.argsort(-full, kind="stable")[:10]
            assert np.array_equal(pruned[top], full[top])  # the top rows keep exact sums
            assert int((pruned > 0).sum()) < int((full > 0).sum())  # rows were skipped
    assert taken >= 5, f"pruning used for {taken} of 30 queries"


def test_drop_ratios_keep_recall() -> None:
    rows = corpus(5000, seed=8)
    col = column(list(rows))
    queries = corpus(100, seed=9)
    _, want = VectorIndexExact(col).search(queries, 10, "IP")
    full = build_sparse_index(spec(), col)
    dropped = build_sparse_index(spec(drop_ratio_build=0.3), col)
    assert dropped.num_postings < full.num_postings * 0.75
    assert np.array_equal(dropped.row_len, full.row_len)  # lengths are taken before the drop
    assert recall(dropped.search(queries, 10, {})[1], want) >= 0.85
    assert recall(full.search(queries, 10, {"drop_ratio_search": 0.3})[1], want) >= 0.85
    both = dropped.search(queries, 10, {"params": {"drop_ratio_search": "0.2"}})
    assert recall(both[1], want) >= 0.8
    with pytest.raises(ElanusError, match=r"drop_ratio_search must be in \[0, 1\)"):
        full.search(queries, 10, {"drop_ratio_search": 1.0})


def test_written_index_loads_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    rows = corpus(3000, seed=10)
    col = column([*rows[:1000], None, *rows[1000:]])
    index = build_sparse_index(spec("SPARSE_WAND", drop_ratio_build=0.1), col)
    out = tmp_path / "ix"
    keys = index.write(out)
    assert sorted(keys) == sorted([POSTINGS_FILE, "meta.json"])
    loaded = load_index(out)
    assert isinstance(loaded, SparseIndex) and loaded.spec == index.spec
    queries = corpus(20, seed=11)
    for a, b in zip(loaded.search(queries, 10), index.search(queries, 10), strict=True):
        assert np.array_equal(a, b)
    files = [str(out / k) for k in keys]
    assert verify_report(tmp_path, out, files, index.spec.to_dict(), 3001) is None
    assert "rows" in str(verify_report(tmp_path, out, files, index.spec.to_dict(), 3000))
    other = spec("SPARSE_INVERTED_INDEX").to_dict()
    assert "parameters" in str(verify_report(tmp_path, out, files, other, 3001))
    with np.load(out / POSTINGS_FILE) as z:
        arrays = {name: z[name] for name in z.files}
    arrays["rows"] = arrays["rows"][::-1].copy()  # postings no longer ascending
    with open(out / POSTINGS_FILE, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ElanusError, match="inconsistent"):
        load_index(out)
    assert "does not load" in str(verify_report(tmp_path, out, files, index.spec.to_dict(), 3001))


def test_sparse_specs_defaults_autoindex_and_bm25_params() -> None:
    auto = make_index_spec("SparseFloatVector", None, "AUTOINDEX")  # type: ignore[arg-type]
    assert (auto.index_type, auto.metric, auto.dim) == ("SPARSE_INVERTED_INDEX", "IP", 0)
    assert dict(auto.params) == {"drop_ratio_build": 0.0, "inverted_index_algo": "DAAT_MAXSCORE"}
    wand = make_index_spec(
        "SparseFloatVector", 0, "sparse_wand", "ip", {"drop_ratio_build": "0.25"}
    )
    assert dict(wand.params) == {"drop_ratio_build": 0.25, "inverted_index_algo": "DAAT_WAND"}
    bm25 = make_index_spec("SparseFloatVector", 0, "AUTOINDEX", "BM25", {"bm25_k1": "1.5"})
    assert bm25.metric == "BM25" and bm25.params["bm25_k1"] == 1.5 and bm25.params["bm25_b"] == 0.75
    assert type(bm25).from_dict(bm25.to_dict()) == bm25
    for params, words in (
        ({"bm25_k1": 2.5}, "bm25_k1 must be in [1.2, 2.0]"),
        ({"bm25_b": -0.1}, "bm25_b must be in [0.0, 1.0]"),
        ({"bm25_b": True}, "bm25_b must be a number"),
        ({"drop_ratio_build": float("nan")}, "drop_ratio_build must be a finite number"),
        ({"drop_ratio_build": -0.1}, "drop_ratio_build must be in [0, 1)"),
    ):
        with pytest.raises(ElanusError) as exc:
            make_index_spec("SparseFloatVector", 0, "SPARSE_INVERTED_INDEX", "BM25", params)
        assert exc.value.code == ErrorCode.INVALID_ARGUMENT and words in exc.value.message


def test_bm25_average_length_under_one_counts_as_one() -> None:
    """Mostly empty texts make ``avgdl`` < 1; knowhere scores with ``max(avgdl, 1)``, so
    the index and the exact kernel do too: a one-word row then scores exactly its idf."""
    from elanus.index.kernels import BM25

    rows: list[dict[int, float] | None] = [{7: 1.0}, {}, {}, {}, {7: 2.0}, {}]  # avgdl 0.5
    col = column(rows)
    bm25 = make_index_spec("SparseFloatVector", 0, "SPARSE_INVERTED_INDEX", "BM25", {})
    index = build_sparse_index(bm25, col)
    idf = math.log(1 + (6 - 2 + 0.5) / (2 + 0.5))
    one, two = (tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * tf)) * idf for tf in (1.0, 2.0))
    D, ids = index.search([{7: idf}], 2, {"bm25_avgdl": 0.5})
    D0, ids0 = VectorIndexExact(col).search([{7: idf}], 2, "BM25", None, bm25=BM25(1.2, 0.75, 0.5))
    for d, i in ((D, ids), (D0, ids0)):
        assert i[0].tolist() == [4, 0]
        assert d[0].tolist() == pytest.approx([two, one], rel=1e-6)
    assert one == pytest.approx(idf)


# -- 2. the real stack -------------------------------------------------------------------------


@pytest.fixture
def stack(nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path) -> Iterator[Stack]:
    """The conftest stack without automatic compaction: a merge of the small segments
    mid-test would add an index task (and a segment) the assertions do not expect."""
    s = Stack(loop_thread, nats_server, tmp_path / "data", compaction_interval_s=0)
    try:
        s.start()
        yield s
    finally:
        s.close()


def make_sparse_collection(client: Client, name: str, rows: list[dict[int, float]]) -> None:
    """``id``, ``bucket`` (id % 10) and ``sp``; two flushed segments and a growing tail."""
    create_bucketed(client, name, {"name": "sp", "type": "SparseFloatVector"}, "IP")
    n = len(rows)
    cuts = [(0, n * 2 // 5), (n * 2 // 5, n * 4 // 5), (n * 4 // 5, n)]
    for i, (lo, hi) in enumerate(cuts):
        client.insert(name, [{"id": j, "bucket": j % 10, "sp": rows[j]} for j in range(lo, hi)])
        if i < 2:
            client.flush(name, timeout=60)


def search_all(
    client: Client, name: str, queries: list[dict[int, float]], **kwargs: Any
) -> list[list[tuple[int, float]]]:
    res = client.search(name, queries, limit=10, consistency_level=STRONG, **kwargs)
    return [[(h["id"], h["distance"]) for h in q] for q in res]


@pytest.mark.slow
def test_indexed_search_identical_to_exact_with_filters_deletes_and_groups(stack: Stack) -> None:
    client = stack.client()
    rows = corpus(3000, seed=12)
    queries = corpus(40, seed=13)
    names = {"inv": ("SPARSE_INVERTED_INDEX", {}), "wand": ("SPARSE_WAND", {})}
    for name in names:
        make_sparse_collection(client, name, rows)
        client.load_collection(name)
    flt = "bucket < 3"
    before = search_all(client, "inv", queries)
    before_filtered = search_all(client, "inv", queries, filter=flt)
    grouped = client.search(
        "inv", queries[:5], limit=4, group_by_field="bucket", group_size=2,
        consistency_level=STRONG,
    )  # fmt: skip
    m = dense(rows)
    for got, q in zip(before, dense(queries), strict=True):  # the exact path is right
        scores = m @ q
        want = np.argsort(-scores, kind="stable")[:10]
        assert np.allclose([d for _, d in got], scores[want], rtol=1e-5)

    for name, (index_type, params) in names.items():
        client.create_index(name, "sp", index_type=index_type, metric_type="IP", params=params)
    stack.add_indexnode()
    for name in names:
        client.wait_for_index(name, timeout=120)
    wait_for(lambda: len(served_indexes(stack, "sp")) == 4, what="4 sparse indexes served")

    (info,) = client.describe_index("inv")
    assert info["index_type"] == "SPARSE_INVERTED_INDEX" and info["metric_type"] == "IP"
    assert info["params"] == {"drop_ratio_build": 0.0, "inverted_index_algo": "DAAT_MAXSCORE"}
    assert (info["state"], info["indexed_rows"]) == ("Finished", 2400)
    (info,) = client.describe_index("wand")
    assert info["index_type"] == "SPARSE_WAND"
    assert info["params"]["inverted_index_algo"] == "DAAT_WAND"

    for name in names:  # ids and scores identical to the exact search
        assert search_all(client, name, queries) == before, name
        assert search_all(client, name, queries, filter=flt) == before_filtered, name
    again = client.search(
        "inv", queries[:5], limit=4, group_by_field="bucket", group_size=2,
        consistency_level=STRONG,
    )  # fmt: skip
    assert [[(h["id"], h["distance"]) for h in q] for q in again] == [
        [(h["id"], h["distance"]) for h in q] for q in grouped
    ]
    ranged = search_all(client, "inv", queries, search_params={"radius": 2.0})
    assert all(d > 2.0 for q in ranged for _, d in q)
    assert ranged == [[(i, d) for i, d in q if d > 2.0] for q in before]

    # Deletes reach the index: the deleted rows vanish, the rest is the exact answer.
    gone = sorted({i for q in before[:10] for i, _ in q[:2]})
    for name in names:
        client.delete(name, gone)
    alive = np.ones(3000, bool)
    alive[gone] = False
    for name in names:
        after = search_all(client, name, queries)
        for got, q in zip(after, dense(queries), strict=True):
            scores = np.where(alive, m @ q, -np.inf)
            want = np.argsort(-scores, kind="stable")[:10]
            assert not {i for i, _ in got} & set(gone)
            assert np.allclose([d for _, d in got], scores[want], rtol=1e-5), name

    # drop_ratio_search: an approximation with a stated recall bound.
    exact_ids = [[i for i, _ in q] for q in search_all(client, "inv", queries)]
    approx = search_all(
        client, "inv", queries, search_params={"params": {"drop_ratio_search": 0.3}}
    )
    found = sum(len({i for i, _ in a} & set(e)) for a, e in zip(approx, exact_ids, strict=True))
    assert found / sum(map(len, exact_ids)) >= 0.85


@pytest.mark.slow
def test_drop_ratio_build_recall_and_autoindex(stack: Stack) -> None:
    client = stack.client()
    rows = corpus(3000, seed=14)
    queries = corpus(50, seed=15)
    make_sparse_collection(client, "d", rows)
    make_sparse_collection(client, "auto", rows[:500])
    client.create_index(
        "d", "sp", index_type="SPARSE_INVERTED_INDEX", params={"drop_ratio_build": 0.3}
    )
    client.create_index("auto", "sp")  # AUTOINDEX
    (info,) = client.describe_index("auto")
    assert info["index_type"] == "SPARSE_INVERTED_INDEX" and info["metric_type"] == "IP"
    stack.add_indexnode()
    client.load_collection("d")
    client.wait_for_index("d", timeout=120)
    wait_for(lambda: len(served_indexes(stack, "sp")) >= 2, what="sparse indexes served")
    m = dense(rows)
    got = search_all(client, "d", queries)
    hits = 0
    for g, q in zip(got, dense(queries), strict=True):
        hits += len({i for i, _ in g} & set(np.argsort(-(m @ q), kind="stable")[:10].tolist()))
    assert hits / (10 * len(queries)) >= 0.85


def test_bad_sparse_index_requests_are_refused(stack: Stack) -> None:
    client = stack.client()
    make_sparse_collection(client, "bad", corpus(50, seed=16))
    client.create_collection("vec", dimension=8)
    inv = "SPARSE_INVERTED_INDEX"
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("bad", "sp", {"index_type": inv, "params": {"drop_ratio_build": 1.5}},
         r"drop_ratio_build must be in [0, 1), got 1.5"),
        ("bad", "sp", {"index_type": inv, "params": {"drop_ratio_build": "lots"}},
         "drop_ratio_build must be a finite number"),
        ("bad", "sp", {"index_type": "HNSW"},
         "index type HNSW does not apply to SparseFloatVector fields"),
        ("bad", "sp", {"index_type": inv, "metric_type": "L2"},
         "metric type L2 is not supported for sparse index"),
        ("bad", "sp", {"index_type": inv, "params": {"inverted_index_algo": "SLOW"}},
         "inverted_index_algo must be one of DAAT_MAXSCORE, DAAT_WAND, TAAT_NAIVE"),
        ("bad", "sp", {"index_type": "SPARSE_WAND", "params": {"inverted_index_algo": "TAAT"}},
         "must be one of"),
        ("bad", "sp", {"index_type": "SPARSE_WAND",
                       "params": {"inverted_index_algo": "TAAT_NAIVE"}},
         "SPARSE_WAND is searched with DAAT_WAND"),
        ("bad", "sp", {"index_type": inv, "params": {"bm25_k1": 1.5}}, "bm25_k1"),
        ("vec", "vector", {"index_type": inv},
         "index type SPARSE_INVERTED_INDEX does not apply to FloatVector fields"),
    ]  # fmt: skip
    for collection, field, kwargs, words in cases:
        with pytest.raises(ElanusError) as exc:
            client.create_index(collection, field, **kwargs)
        assert exc.value.code == ErrorCode.INVALID_ARGUMENT, kwargs
        assert words in exc.value.message, (kwargs, exc.value.message)
    assert client.list_indexes("bad") == [] and tasks(stack) == []
    client.create_index("bad", "sp", index_type=inv)
    client.load_collection("bad")
    with pytest.raises(ElanusError) as exc:
        client.search("bad", [{1: 1.0}], search_params={"params": {"drop_ratio_search": 1.5}})
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT
    assert "drop_ratio_search must be in [0, 1)" in exc.value.message
    with pytest.raises(ElanusError) as exc:
        client.search("bad", [{1: 1.0}], search_params={"metric_type": "L2"})
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT and "metric type not match" in str(
        exc.value.message
    )


# -- 3. Spark --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_spark_index_run_builds_a_sparse_index(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from elanus.spark.index_run import run_index_build

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    client = stack.client()
    rows = corpus(1500, seed=17)
    queries = corpus(20, seed=18)
    make_sparse_collection(client, "s", rows)
    client.load_collection("s")
    before = search_all(client, "s", queries)
    client.create_index("s", "sp", index_type="SPARSE_WAND", metric_type="IP")
    run = run_index_build(stack.uri, "s", master="local[1]")
    assert (run.claimed, run.built, run.failed, run.rejected) == (2, 2, 0, 0), run.failures
    (info,) = client.describe_index("s")
    assert info["state"] == "Finished" and info["indexed_rows"] == 1200
    built = tasks(stack, collection_id(client, "s"))
    assert {Path(f).name for t in built for f in t["file_paths"]} == {POSTINGS_FILE, "meta.json"}
    meta = json.loads(Path(built[0]["file_paths"][0]).with_name("meta.json").read_text())
    assert meta["spec"]["index_type"] == "SPARSE_WAND"
    wait_for(lambda: len(served_indexes(stack, "sp")) == 2, what="the Spark-built indexes served")
    assert search_all(client, "s", queries) == before
