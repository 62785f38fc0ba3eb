"""Searches answer as Milvus answers (issue "Answer as Milvus answers", defects 1, 2, 8, 9).

Real stack (nats-server, coord on DuckDB, Lance segments, query node, index node, Flight
proxy); answers are compared with numpy's exact computation, and group-by also with
Milvus Lite.

- the metric comes from the field's index (L2, IP), else the collection's default; a
  request naming another metric is refused; an index created or dropped after a search
  changes what the next search uses (cached search plans are retired);
- range search in both body forms, per metric, against numpy; bad bounds refused;
- group_by_field / group_size across segments and shards;
- out-of-range nprobe / ef refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, own_stack

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client

DIM = 8
N = 600  # three flushed segments of 200 rows, two shards


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with own_stack(tmp_path_factory.mktemp("semantics"), "semantics-loop") as s:
        s.add_indexnode()
        yield s


@pytest.fixture(scope="module")
def client(stack: Stack) -> Client:
    return stack.client()


def _vectors(n: int = N, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _table(ids: np.ndarray, vectors: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "color": pa.array([f"c{i % 7}" for i in ids.tolist()], pa.string()),
            "bucket": pa.array(ids % 4, pa.int64()),
            "price": pa.array(ids.astype(np.float64) / 10),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


SCHEMA = {
    "fields": [
        {"name": "id", "type": "Int64", "is_primary": True},
        {"name": "color", "type": "VarChar", "max_length": 8},
        {"name": "bucket", "type": "Int64"},
        {"name": "price", "type": "Double"},
        {"name": "vector", "type": "FloatVector", "dim": DIM},
    ]
}


def make(client: Client, name: str, index: tuple[str, str] | None = None) -> np.ndarray:
    """A schema-made collection (no default metric) of three flushed segments, loaded."""
    client.create_collection(name, schema=SCHEMA, num_shards=2)
    vectors = _vectors()
    for lo in range(0, N, 200):
        client.insert(name, _table(np.arange(lo, lo + 200), vectors[lo : lo + 200]))
        client.flush(name, timeout=60)
    if index is not None:
        client.create_index(name, "vector", index_type=index[0], metric_type=index[1])
        client.wait_for_index(name, timeout=60)
    client.load_collection(name)
    return vectors


def scores(vectors: np.ndarray, queries: np.ndarray, metric: str) -> np.ndarray:
    """Milvus's distances: squared L2, inner product, cosine similarity."""
    if metric == "L2":
        return ((queries[:, None, :] - vectors[None, :, :]) ** 2).sum(-1)
    if metric == "IP":
        return queries @ vectors.T
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T


def exact(vectors: np.ndarray, queries: np.ndarray, metric: str, k: int) -> list[list[int]]:
    s = scores(vectors, queries, metric)
    order = np.argsort(-s if metric != "L2" else s, axis=1, kind="stable")
    return order[:, :k].tolist()  # type: ignore[no-any-return]


def search(client: Client, name: str, queries: np.ndarray, **kw: Any) -> list[list[dict[str, Any]]]:
    return client.search(name, queries, consistency_level="Strong", **kw)


def refused(fn: Any, *words: str) -> str:
    with pytest.raises(ElanusError) as exc:
        fn()
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT, exc.value
    for w in words:
        assert w in exc.value.message, exc.value.message
    return exc.value.message


# -- 1. the metric comes from the index --------------------------------------------------------


@pytest.mark.parametrize(("metric", "itype"), [("L2", "FLAT"), ("IP", "HNSW")])
def test_search_uses_the_index_metric(client: Client, metric: str, itype: str) -> None:
    name = f"m_{metric.lower()}"
    vectors = make(client, name, (itype, metric))
    queries = _vectors(3, seed=11)
    hits = search(client, name, queries, limit=5)
    want = exact(vectors, queries, metric, 5)
    assert [[h["id"] for h in row] for row in hits] == want
    s = scores(vectors, queries, metric)
    for q, row in enumerate(hits):
        np.testing.assert_allclose(
            [h["distance"] for h in row], s[q, want[q]], rtol=1e-4, atol=1e-4
        )
    # Naming the index's metric is fine; naming another is refused as Milvus does.
    same = search(client, name, queries, limit=5, search_params={"metric_type": metric})
    assert [[h["id"] for h in row] for row in same] == want
    other = "COSINE"
    refused(
        lambda: search(client, name, queries, limit=5, search_params={"metric_type": other}),
        "metric type not match",
        f"expected={metric}",
        f"actual={other}",
    )


def test_index_created_or_dropped_after_a_search_changes_its_metric(client: Client) -> None:
    vectors = make(client, "late")
    queries = _vectors(2, seed=12)
    before = search(client, "late", queries, limit=4)  # no index: COSINE, Milvus's default
    assert [[h["id"] for h in r] for r in before] == exact(vectors, queries, "COSINE", 4)
    client.create_index("late", "vector", index_type="FLAT", metric_type="L2")
    after = search(client, "late", queries, limit=4)  # same request shape: plan retired
    assert [[h["id"] for h in r] for r in after] == exact(vectors, queries, "L2", 4)
    refused(
        lambda: search(client, "late", queries, limit=4, search_params={"metric_type": "COSINE"}),
        "expected=L2",
    )
    client.drop_index("late", "vector")
    again = search(client, "late", queries, limit=4)
    assert [[h["id"] for h in r] for r in again] == exact(vectors, queries, "COSINE", 4)


def test_quick_setup_metric_is_the_default_and_an_index_overrides_it(client: Client) -> None:
    client.create_collection("quick", dimension=DIM, metric_type="IP")
    vectors = _vectors(100, seed=3)
    client.insert("quick", {"id": np.arange(100), "vector": vectors})
    client.flush("quick", timeout=60)
    queries = _vectors(2, seed=4)
    # As Milvus's, the quick setup made an IP index (AUTOINDEX) and loaded: it refuses L2.
    refused(
        lambda: search(client, "quick", queries, limit=3, search_params={"metric_type": "L2"}),
        "metric type not match",
        "expected=IP",
    )
    client.release_collection("quick")
    client.drop_index("quick", "vector")
    client.load_collection("quick")
    hits = search(client, "quick", queries, limit=3)  # no index: the quick setup's metric
    assert [[h["id"] for h in r] for r in hits] == exact(vectors, queries, "IP", 3)
    # No index: another metric scans exactly in it (Milvus Lite does the same).
    l2 = search(client, "quick", queries, limit=3, search_params={"metric_type": "L2"})
    assert [[h["id"] for h in r] for r in l2] == exact(vectors, queries, "L2", 3)
    # A new index takes over (the state Milvus reaches after drop_index + create_index).
    client.create_index("quick", "vector", index_type="FLAT", metric_type="L2")
    client.wait_for_index("quick", timeout=60)
    hits = search(client, "quick", queries, limit=3)
    assert [[h["id"] for h in r] for r in hits] == exact(vectors, queries, "L2", 3)
    refused(
        lambda: search(client, "quick", queries, limit=3, search_params={"metric_type": "IP"}),
        "metric type not match",
        "expected=L2",
    )


# -- 2. range search --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ranged(client: Client) -> dict[str, np.ndarray]:
    out = {}
    for metric, itype in (("L2", "HNSW"), ("IP", "FLAT"), ("COSINE", "IVF_FLAT")):
        out[metric] = make(client, f"r_{metric.lower()}", (itype, metric))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
@pytest.mark.parametrize("nested", [True, False])
def test_range_search_against_numpy(
    client: Client, ranged: dict[str, np.ndarray], metric: str, nested: bool
) -> None:
    vectors = ranged[metric]
    queries = _vectors(3, seed=21)
    s = scores(vectors, queries, metric)
    lo, hi = np.quantile(s, [0.05, 0.15]) if metric == "L2" else np.quantile(s, [0.85, 0.95])
    radius, range_filter = (float(hi), float(lo)) if metric == "L2" else (float(lo), float(hi))
    bounds = {"radius": radius, "range_filter": range_filter}
    params: dict[str, Any] = (
        {"metric_type": metric, "params": bounds} if nested else {"metric_type": metric, **bounds}
    )
    hits = search(client, f"r_{metric.lower()}", queries, limit=50, search_params=params)
    for q, row in enumerate(hits):
        inside = (s[q] >= lo) & (s[q] < hi) if metric == "L2" else (s[q] > lo) & (s[q] <= hi)
        ids = np.nonzero(inside)[0]
        order = ids[np.argsort(s[q, ids] if metric == "L2" else -s[q, ids], kind="stable")]
        assert [h["id"] for h in row] == order[:50].tolist()
        assert row, "the range holds hits"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("metric", "bounds", "words"),
    [
        ("L2", {"range_filter": 1.0}, ("range_filter needs a radius",)),
        ("L2", {"radius": 1.0, "range_filter": 2.0}, ("range_filter must be less than radius",)),
        ("IP", {"radius": 1.0, "range_filter": 0.5}, ("must be greater than radius",)),
        ("L2", {"radius": "far"}, ("radius", "must be a number")),
    ],
)
def test_bad_range_bounds_are_refused(
    client: Client, ranged: dict[str, np.ndarray], metric: str, bounds: dict[str, Any], words: Any
) -> None:
    q = _vectors(1, seed=1)
    for params in ({"params": bounds}, bounds):
        refused(
            lambda p=params: search(
                client,
                f"r_{metric.lower()}",
                q,
                limit=3,
                search_params={"metric_type": metric, **p},
            ),
            *words,
        )


# -- 3. group by ------------------------------------------------------------------------------


def grouped_numpy(
    vectors: np.ndarray, groups: np.ndarray, query: np.ndarray, limit: int, size: int, metric: str
) -> list[int]:
    """Hand computation: groups by best hit, each group's ``size`` best, group by group."""
    s = scores(vectors, query[None, :], metric)[0]
    order = np.argsort(s if metric == "L2" else -s, kind="stable")
    chosen: dict[Any, list[int]] = {}
    for i in order.tolist():
        g = groups[i]
        if g not in chosen:
            if len(chosen) == limit:
                continue
            chosen[g] = []
        if len(chosen[g]) < size:
            chosen[g].append(i)
    return [i for members in chosen.values() for i in members]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "limit", "size"), [("color", 3, 1), ("bucket", 3, 2), ("color", 7, 3)]
)
def test_group_by_against_numpy(client: Client, field: str, limit: int, size: int) -> None:
    vectors = make(client, f"g_{field}_{limit}_{size}", ("FLAT", "L2"))
    table = _table(np.arange(N), vectors)
    groups = np.asarray(table.column(field).to_pylist(), dtype=object)
    queries = _vectors(2, seed=31)
    hits = search(
        client,
        f"g_{field}_{limit}_{size}",
        queries,
        limit=limit,
        group_by_field=field,
        group_size=size,
        strict_group_size=True,
    )
    for q, row in enumerate(hits):
        assert [h["id"] for h in row] == grouped_numpy(
            vectors, groups, queries[q], limit, size, "L2"
        )
        assert all(h["entity"][field] == groups[h["id"]] for h in row)


def test_group_by_checks(client: Client) -> None:
    make(client, "g_bad")
    q = _vectors(1, seed=2)
    refused(lambda: search(client, "g_bad", q, group_by_field="price"), "price", "not supported")
    refused(lambda: search(client, "g_bad", q, group_by_field="vector"), "not supported")
    refused(lambda: search(client, "g_bad", q, group_by_field="nope"), "nope", "not found")
    refused(lambda: search(client, "g_bad", q, group_by_field="bucket", group_size=0), "group_size")
    refused(lambda: search(client, "g_bad", q, group_size=2), "group_by_field")


@pytest.mark.slow
def test_group_by_matches_milvus_lite(client: Client, tmp_path: Path) -> None:
    pymilvus = pytest.importorskip("pymilvus")
    vectors = make(client, "g_lite", ("FLAT", "L2"))
    lite = pymilvus.MilvusClient(str(tmp_path / "lite.db"))
    schema = lite.create_schema()
    schema.add_field("id", pymilvus.DataType.INT64, is_primary=True)
    schema.add_field("color", pymilvus.DataType.VARCHAR, max_length=8)
    schema.add_field("vector", pymilvus.DataType.FLOAT_VECTOR, dim=DIM)
    lite.create_collection("g", schema=schema)
    index = lite.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="L2")
    lite.create_index("g", index)
    lite.load_collection("g")
    rows = _table(np.arange(N), vectors).select(["id", "color", "vector"]).to_pylist()
    lite.insert("g", rows)
    queries = _vectors(2, seed=41)
    kw = {"limit": 4, "group_by_field": "color", "group_size": 2}
    theirs = lite.search("g", queries.tolist(), output_fields=["color"], **kw)
    ours = search(client, "g_lite", queries, output_fields=["color"], **kw)
    for a, b in zip(theirs, ours, strict=True):
        assert [h["id"] for h in a] == [h["id"] for h in b]
        assert [h["entity"]["color"] for h in a] == [h["entity"]["color"] for h in b]
        np.testing.assert_allclose(
            [h["distance"] for h in a], [h["distance"] for h in b], rtol=1e-4
        )
    lite.close()


# -- 4. search params out of range ------------------------------------------------------------


@pytest.mark.slow
def test_out_of_range_search_params_are_refused(
    client: Client, ranged: dict[str, np.ndarray]
) -> None:
    q = _vectors(1, seed=5)
    make(client, "p_none")
    cases = [
        ("p_none", {"nprobe": -1}, ("nprobe", "[1, 65536]")),
        ("p_none", {"nprobe": 65537}, ("nprobe",)),
        ("p_none", {"ef": 0}, ("ef", "[1, 32768]")),
        ("p_none", {"ef": 40000}, ("ef",)),
        ("r_cosine", {"nprobe": -1}, ("nprobe",)),
        ("r_cosine", {"nprobe": 100000}, ("nprobe",)),
        ("r_l2", {"ef": 5}, ("ef", "limit")),  # HNSW: ef below limit (10)
    ]
    for name, params, words in cases:
        refused(
            lambda n=name, p=params: search(client, n, q, limit=10, search_params={"params": p}),
            *words,
        )
    ok = search(client, "r_l2", q, limit=10, search_params={"params": {"ef": 10}})
    assert len(ok[0]) == 10
