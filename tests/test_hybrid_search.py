"""Hybrid search end to end (issue 15, "Must have" 1) on a real stack: two dense float
fields and a sparse one, two shards, sealed and growing rows, deletes.

Every answer is checked against the same thing done by hand here: each sub-search exactly
in numpy (filters, deletes, grouping), then the fusion written out from Milvus's rules
(RRF ``1 / (k + rank)``; weighted sums of the arctan / ``(1 + x) / 2`` normalisations, the
L2 flip, the raw ascending sum of unnormalised distances) — not through ``elanus.rankers``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Stack, own_stack, wait_for
from lite_oracle import run_in_child

from elanus import (
    AnnSearchRequest,
    DataType,
    ElanusError,
    ErrorCode,
    RRFRanker,
    Schema,
    WeightedRanker,
)
from elanus.client.client import Client

NAME = "hy"
N = 240
DIM_A, DIM_B, SPARSE_DIMS = 8, 6, 30
DELETED = {5, 77, 200}
STRONG = "Strong"
TOL = 1e-5
LARGER = {"IP", "COSINE"}


class Data:
    def __init__(self) -> None:
        rng = np.random.default_rng(15)
        self.ids = np.arange(N, dtype=np.int64)
        self.a = rng.standard_normal((N, DIM_A)).astype(np.float32)
        self.b = rng.standard_normal((N, DIM_B)).astype(np.float32)
        mask = rng.random((N, SPARSE_DIMS)) < 0.2
        self.sp = np.where(mask, rng.random((N, SPARSE_DIMS)), 0).astype(np.float32)
        self.tag = (self.ids % 5).astype(np.int32)
        self.live = np.array([i not in DELETED for i in range(N)])
        self.rng = rng

    def columns(self, lo: int, hi: int) -> dict[str, Any]:
        return {
            "id": self.ids[lo:hi],
            "tag": self.tag[lo:hi],
            "name": [f"n{i}" for i in range(lo, hi)],
            "a": self.a[lo:hi],
            "b": self.b[lo:hi],
            "sp": [sparse(r) for r in self.sp[lo:hi]],
        }


def sparse(row: np.ndarray) -> dict[int, float]:
    return {int(i): float(row[i]) for i in np.flatnonzero(row)}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Client, Data]]:
    with own_stack(tmp_path_factory.mktemp("hybrid"), "hybrid", compaction_interval_s=0) as stack:
        wait_for(lambda: stack.coord and stack.coord.sessions.of_role("querynode"), what="qn")
        client = stack.client()
        schema = (
            Schema()
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("tag", DataType.INT32)
            .add_field("name", DataType.VARCHAR, max_length=16)
            .add_field("a", DataType.FLOAT_VECTOR, dim=DIM_A)
            .add_field("b", DataType.FLOAT_VECTOR, dim=DIM_B)
            .add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
        )
        client.create_collection(NAME, schema=schema, num_shards=2)
        data = Data()
        client.insert(NAME, data.columns(0, 150))
        client.flush(NAME, timeout=30)
        client.load_collection(NAME)
        client.insert(NAME, data.columns(150, N))  # growing
        client.delete(NAME, sorted(DELETED))
        yield stack, client, data


# -- exact sub-searches and hand-made fusion ---------------------------------------------------


def distances(data: Data, field: str, metric: str, q: Any) -> np.ndarray:
    if field == "sp":
        dense = np.zeros(SPARSE_DIMS)
        dense[list(q)] = list(q.values())
        return data.sp.astype(np.float64) @ dense
    x = (data.a if field == "a" else data.b).astype(np.float64)
    q = np.asarray(q, np.float64)
    if metric == "L2":
        return ((x - q) ** 2).sum(axis=1)
    if metric == "IP":
        return x @ q
    return (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))


def exact(
    data: Data,
    field: str,
    metric: str,
    q: Any,
    limit: int,
    keep: np.ndarray | None = None,
    group_size: int = 0,
) -> list[tuple[int, float]]:
    """One sub-search's hits, best first; grouped by tag when ``group_size``."""
    d = distances(data, field, metric, q)
    ok = data.live.copy() if keep is None else data.live & keep
    if field == "sp":
        ok &= d > 0  # rows sharing no dimension with a sparse query are no hits
    order = [int(i) for i in np.argsort(-d if metric in LARGER else d, kind="stable") if ok[i]]
    if not group_size:
        return [(i, float(d[i])) for i in order[:limit]]
    groups: dict[int, list[int]] = {}
    for i in order:
        members = groups.setdefault(int(data.tag[i]), [])
        if len(members) < group_size:
            members.append(i)
    picked = list(groups.values())[:limit]  # dicts keep first-seen order: best hit first
    return [(i, float(d[i])) for g in picked for i in g]


def rrf(lists: list[list[tuple[int, float]]], k: float = 60) -> dict[int, float]:
    out: dict[int, float] = {}
    for hits in lists:
        for rank, (pk, _) in enumerate(hits, start=1):
            out[pk] = out.get(pk, 0.0) + 1 / (k + rank)
    return out


def weighted(
    lists: list[list[tuple[int, float]]], metrics: list[str], weights: list[float], norm: bool
) -> tuple[dict[int, float], bool]:
    """Fused scores and whether larger is better."""
    larger = [m in LARGER for m in metrics]
    mixed = any(larger) and not all(larger)

    def f(metric: str, d: float) -> float:
        if norm:
            if metric == "COSINE":
                return (1 + d) / 2
            if metric == "IP":
                return 0.5 + math.atan(d) / math.pi
            return 1 - 2 * math.atan(d) / math.pi
        if mixed and metric not in LARGER:
            return 1 - 2 * math.atan(d) / math.pi
        return d

    out: dict[int, float] = {}
    for hits, metric, w in zip(lists, metrics, weights, strict=True):
        for pk, d in hits:
            out[pk] = out.get(pk, 0.0) + w * f(metric, d)
    return out, norm or mixed or all(larger)


def ranking(scores: dict[int, float], descending: bool = True) -> list[tuple[int, float]]:
    sign = -1 if descending else 1
    return sorted(scores.items(), key=lambda kv: (sign * kv[1], kv[0]))


def check(hits: list[dict[str, Any]], expected: list[tuple[int, float]], what: str) -> None:
    """Same keys in the same order with the same scores; where two expected scores lie
    within TOL (float32 distances vs float64 here) their order may differ."""
    assert len(hits) == len(expected), f"{what}: {len(hits)} hits, expected {len(expected)}"
    scores = dict(expected)
    for rank, (h, (pk, score)) in enumerate(zip(hits, expected, strict=True)):
        assert h["distance"] == pytest.approx(score, abs=TOL), f"{what}: rank {rank}"
        if h["id"] != pk:
            assert h["id"] in scores and abs(scores[h["id"]] - score) <= TOL, (
                f"{what}: rank {rank} is {h['id']}, expected {pk}"
            )
    assert len({h["id"] for h in hits}) == len(hits), f"{what}: a key appears twice"


def queries(data: Data) -> dict[str, list[Any]]:
    rng = np.random.default_rng(3)
    sp = np.where(rng.random((2, SPARSE_DIMS)) < 0.4, rng.random((2, SPARSE_DIMS)), 0)
    return {
        "a": rng.standard_normal((2, DIM_A)).astype(np.float32).tolist(),
        "b": rng.standard_normal((2, DIM_B)).astype(np.float32).tolist(),
        "sp": [sparse(r) for r in sp],
    }


def reqs(qs: dict[str, list[Any]], metrics: dict[str, str], limit: int = 20) -> list[Any]:
    return [
        AnnSearchRequest(qs[f], f, {"metric_type": m} if f != "sp" else {}, limit)
        for f, m in metrics.items()
    ]


def expected_lists(
    data: Data, qs: dict[str, list[Any]], metrics: dict[str, str], q: int, limit: int = 20
) -> list[list[tuple[int, float]]]:
    return [exact(data, f, m, qs[f][q], limit) for f, m in metrics.items()]


# -- fusion against the hand-made answer ------------------------------------------------------


def test_rrf_over_two_dense_fields_and_a_sparse_one(env: tuple[Stack, Client, Data]) -> None:
    _, client, data = env
    qs = queries(data)
    metrics = {"a": "L2", "b": "IP", "sp": "IP"}
    res = client.hybrid_search(
        NAME,
        reqs(qs, metrics),
        RRFRanker(30),
        limit=12,
        output_fields=["name", "tag"],
        consistency_level=STRONG,
    )
    assert len(res) == 2
    for q in range(2):
        expected = ranking(rrf(expected_lists(data, qs, metrics, q), k=30))[:12]
        check(res[q], expected, f"rrf q{q}")
        for h in res[q]:
            assert h["entity"] == {"name": f"n{h['id']}", "tag": h["id"] % 5}


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize(
    "metrics",
    [
        {"a": "COSINE", "b": "L2", "sp": "IP"},  # mixed: the L2 request is flipped
        {"a": "L2", "b": "L2"},  # all smaller-better: raw sums rank ascending without norm
        {"a": "IP", "b": "COSINE"},
    ],
    ids=["cosine-l2-ip", "l2-l2", "ip-cosine"],
)
def test_weighted_fusion(
    env: tuple[Stack, Client, Data], metrics: dict[str, str], norm: bool
) -> None:
    _, client, data = env
    qs = queries(data)
    weights = [0.7, 0.2, 0.5][: len(metrics)]
    res = client.hybrid_search(
        NAME,
        reqs(qs, metrics),
        WeightedRanker(*weights, norm_score=norm),
        limit=10,
        consistency_level=STRONG,
    )
    for q in range(2):
        lists = expected_lists(data, qs, metrics, q)
        scores, descending = weighted(lists, list(metrics.values()), weights, norm)
        check(res[q], ranking(scores, descending)[:10], f"weighted q{q}")
        assert all(h["entity"] == {} for h in res[q])
    if not norm and metrics == {"a": "L2", "b": "L2"}:
        assert res[0][0]["distance"] <= res[0][-1]["distance"], "smaller sums rank first"


def test_filters_per_request_offset_and_limits_per_request(
    env: tuple[Stack, Client, Data],
) -> None:
    _, client, data = env
    qs = queries(data)
    r = [
        AnnSearchRequest(qs["a"][:1], "a", {"metric_type": "L2"}, 15, expr="tag in [1, 2]"),
        AnnSearchRequest(
            qs["b"][:1],
            "b",
            {"metric_type": "COSINE"},
            25,
            expr="id < {hi}",
            expr_params={"hi": 120},
        ),
    ]
    res = client.hybrid_search(
        NAME, r, WeightedRanker(0.4, 0.9), limit=7, offset=5, consistency_level=STRONG
    )
    lists = [
        exact(data, "a", "L2", qs["a"][0], 15, keep=np.isin(data.tag, [1, 2])),
        exact(data, "b", "COSINE", qs["b"][0], 25, keep=data.ids < 120),
    ]
    scores, _ = weighted(lists, ["L2", "COSINE"], [0.4, 0.9], True)
    check(res[0], ranking(scores)[5:12], "filtered, offset 5")
    assert all(h["id"] < 120 or h["id"] % 5 in (1, 2) for h in res[0])


def test_group_by_groups_each_request_then_the_fused_ranking(
    env: tuple[Stack, Client, Data],
) -> None:
    _, client, data = env
    qs = queries(data)
    r = [
        AnnSearchRequest(qs["a"][:1], "a", {"metric_type": "L2"}, 3),
        AnnSearchRequest(qs["sp"][:1], "sp", {}, 3),
    ]
    res = client.hybrid_search(
        NAME,
        r,
        RRFRanker(),
        limit=2,
        group_by_field="tag",
        group_size=2,
        output_fields=["name"],
        consistency_level=STRONG,
    )
    lists = [
        exact(data, "a", "L2", qs["a"][0], 3, group_size=2),
        exact(data, "sp", "IP", qs["sp"][0], 3, group_size=2),
    ]
    fused = ranking(rrf(lists))
    groups: dict[int, list[tuple[int, float]]] = {}
    for pk, score in fused:
        members = groups.setdefault(int(data.tag[pk]), [])
        if len(members) < 2:
            members.append((pk, score))
    ordered = sorted(groups.values(), key=lambda g: (-g[0][1], -len(g), g[0][0]))
    expected = [hit for g in ordered[:2] for hit in g]
    check(res[0], expected, "grouped")
    tags = [h["entity"]["tag"] for h in res[0]]
    assert len(set(tags)) == 2 and all(tags.count(t) <= 2 for t in tags)
    assert all(h["entity"]["name"] == f"n{h['id']}" for h in res[0])


def test_pymilvus_objects_and_dicts_give_the_same_answer(
    env: tuple[Stack, Client, Data],
) -> None:
    pymilvus = pytest.importorskip("pymilvus")
    _, client, data = env
    qs = queries(data)
    ours = client.hybrid_search(
        NAME,
        reqs(qs, {"a": "L2", "sp": "IP"}),
        WeightedRanker(0.3, 0.6),
        limit=8,
        consistency_level=STRONG,
    )
    theirs = client.hybrid_search(
        NAME,
        [
            pymilvus.AnnSearchRequest(qs["a"], "a", {"metric_type": "L2"}, 20),
            pymilvus.AnnSearchRequest(qs["sp"], "sp", {}, 20),
        ],
        pymilvus.WeightedRanker(0.3, 0.6),
        limit=8,
        consistency_level=STRONG,
    )
    plain = client.hybrid_search(
        NAME,
        [
            {"data": qs["a"], "anns_field": "a", "param": {"metric_type": "L2"}, "limit": 20},
            {"data": qs["sp"], "anns_field": "sp", "limit": 20},
        ],
        {"strategy": "weighted", "params": {"weights": [0.3, 0.6]}},
        limit=8,
        consistency_level=STRONG,
    )
    assert [[h["id"] for h in q] for q in ours] == [[h["id"] for h in q] for q in theirs]
    assert [[h["id"] for h in q] for q in ours] == [[h["id"] for h in q] for q in plain]
    no_ranker = client.hybrid_search(
        NAME, reqs(qs, {"a": "L2", "sp": "IP"}), None, limit=8, consistency_level=STRONG
    )
    expected = ranking(rrf(expected_lists(data, qs, {"a": "L2", "sp": "IP"}, 0)))[:8]
    check(no_ranker[0], expected, "no ranker: RRF k=60")


def test_every_request_reads_at_one_timestamp(env: tuple[Stack, Client, Data]) -> None:
    """A row inserted after a hybrid search's timestamp is invisible to every request of a
    later one read ``as_of`` that timestamp, visible to a Strong one."""
    _, client, data = env
    qs = queries(data)
    r = reqs(qs, {"a": "L2", "b": "L2"}, limit=5)
    before = client.hybrid_search(NAME, r, RRFRanker(), limit=5, consistency_level=STRONG)
    reply = client._action(
        "hybrid_search",
        {
            "collection": NAME,
            "reqs": [
                {"data": qs["a"][:1], "anns_field": "a", "param": {"metric_type": "L2"}},
                {"data": qs["b"][:1], "anns_field": "b", "param": {"metric_type": "L2"}},
            ],
            "limit": 5,
            "consistency_level": STRONG,
        },
    )
    read_ts = int(reply["ts"])
    assert [h["id"] for h in reply["results"][0]] == [h["id"] for h in before[0]]
    # A new row equal to both queries: the best hit of both requests from now on.
    client.insert(
        NAME,
        {
            "id": [10_000],
            "tag": [0],
            "name": ["new"],
            "a": [qs["a"][0]],
            "b": [qs["b"][0]],
            "sp": [{0: 1.0}],
        },
    )
    old = client.hybrid_search(NAME, r, RRFRanker(), limit=5, as_of=read_ts)
    assert [h["id"] for h in old[0]] == [h["id"] for h in before[0]]
    new = client.hybrid_search(NAME, r, RRFRanker(), limit=5, consistency_level=STRONG)
    assert new[0][0]["id"] == 10_000
    assert new[0][0]["distance"] == pytest.approx(2 / 61)
    client.delete(NAME, [10_000])
    wait_for(
        lambda: all(
            h["id"] != 10_000
            for h in client.hybrid_search(NAME, r, limit=5, consistency_level=STRONG)[0]
        ),
        what="the extra row deleted",
    )


# -- beside Milvus Lite ----------------------------------------------------------------------

_LITE = r"""
import json, sys
from pymilvus import AnnSearchRequest, DataType, MilvusClient, RRFRanker, WeightedRanker

spec = json.load(sys.stdin)
c = MilvusClient(spec["path"])
s = c.create_schema(auto_id=False)
s.add_field("id", DataType.INT64, is_primary=True)
s.add_field("a", DataType.FLOAT_VECTOR, dim=len(spec["qa"]))
s.add_field("b", DataType.FLOAT_VECTOR, dim=len(spec["qb"]))
index = c.prepare_index_params()
index.add_index("a", index_type="FLAT", metric_type="L2")
index.add_index("b", index_type="FLAT", metric_type="COSINE")
c.create_collection("c", schema=s, index_params=index)
c.insert("c", spec["rows"])
reqs = [AnnSearchRequest([spec["qa"]], "a", {}, 20), AnnSearchRequest([spec["qb"]], "b", {}, 20)]
out = []
for ranker in (RRFRanker(60), WeightedRanker(0.6, 0.3), WeightedRanker(0.6, 0.3, norm_score=False)):
    hits = c.hybrid_search("c", reqs, ranker, limit=10)[0]
    out.append([[h["id"], h["distance"]] for h in hits])
c.close()
json.dump(out, sys.stdout)
"""


@pytest.mark.slow
def test_fusion_agrees_with_milvus_lite(env: tuple[Stack, Client, Data], tmp_path: Path) -> None:
    """Milvus Lite, on the same live rows and queries, ranks and scores as Elanus does
    (RRF, weighted with and without norm_score over L2 + COSINE)."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    _, client, data = env
    qs = queries(data)
    live = [int(i) for i in data.ids[data.live]]
    rows = [{"id": i, "a": data.a[i].tolist(), "b": data.b[i].tolist()} for i in live]
    spec = {"path": str(tmp_path / "lite.db"), "rows": rows, "qa": qs["a"][0], "qb": qs["b"][0]}
    lite = run_in_child(_LITE, spec, timeout=180)
    r = reqs({"a": qs["a"][:1], "b": qs["b"][:1]}, {"a": "L2", "b": "COSINE"})
    rankers = (RRFRanker(60), WeightedRanker(0.6, 0.3), WeightedRanker(0.6, 0.3, norm_score=False))
    for ranker, theirs in zip(rankers, lite, strict=True):
        ours = client.hybrid_search(NAME, r, ranker, limit=10, consistency_level=STRONG)[0]
        check(ours, [(int(pk), float(d)) for pk, d in theirs], f"lite {ranker!r}")


# -- bad inputs -------------------------------------------------------------------------------


def _refused(client: Client, *words: str, **call: Any) -> None:
    args = {"limit": 5, "ranker": RRFRanker(), **call}
    with pytest.raises(ElanusError) as err:
        client.hybrid_search(NAME, **args)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT, err.value
    for w in words:
        assert w in err.value.message, err.value.message


def test_bad_inputs_are_refused_with_clear_errors(env: tuple[Stack, Client, Data]) -> None:
    _, client, data = env
    qs = queries(data)
    good = reqs(qs, {"a": "L2", "b": "IP"})
    _refused(
        client,
        "unsupported rank type 'softmax'",
        reqs=good,
        ranker={"strategy": "softmax", "params": {}},
    )
    _refused(
        client,
        "mismatch with ann search requests",
        "3 weight(s) for 2 request(s)",
        reqs=good,
        ranker={"strategy": "weighted", "params": {"weights": [0.1, 0.2, 0.3]}},
    )
    _refused(
        client,
        "weight should be in range [0, 1]",
        reqs=good,
        ranker={"strategy": "weighted", "params": {"weights": [0.5, 1.5]}},
    )
    _refused(
        client,
        "k should be in range (0, 16384)",
        reqs=good,
        ranker={"strategy": "rrf", "params": {"k": 0}},
    )
    _refused(
        client,
        "reqs[1]: anns_field 'nope' is not a vector field",
        reqs=[good[0], AnnSearchRequest(qs["b"], "nope", {}, 5)],
    )
    _refused(client, "minimum of ann search requests is 1", reqs=[])
    _refused(client, "maximum of ann search requests is 1024", reqs=[good[0]] * 1025)
    _refused(
        client,
        "reqs[1]: search: vector field 'b' has dim 6",
        "have 8",
        reqs=[good[0], AnnSearchRequest(qs["a"], "b", {}, 5)],
    )
    _refused(
        client,
        "as many query vectors",
        "reqs[0]: 2",
        "reqs[1]: 1",
        reqs=[good[0], AnnSearchRequest(qs["b"][:1], "b", {}, 5)],
    )
    _refused(
        client,
        "reqs[1]",
        "'limit'",
        reqs=[good[0], {"data": qs["b"], "anns_field": "b", "limit": "5"}],
    )
    _refused(
        client,
        "reqs[0]",
        "unknown key(s) 'vectors'",
        reqs=[{"vectors": qs["a"], "anns_field": "a"}],
    )
    _refused(client, "cannot output count(*)", reqs=good, output_fields=["count(*)"])
    bad_filter = AnnSearchRequest(qs["b"], "b", {}, 5, expr="tag >")
    with pytest.raises(ElanusError) as err:
        client.hybrid_search(NAME, [good[0], bad_filter], RRFRanker(), limit=5)
    assert err.value.code == ErrorCode.BAD_EXPRESSION and "reqs[1]" in err.value.message
    with pytest.raises(ElanusError, match="rank param weight should be in range"):
        WeightedRanker(0.5, -0.1)
