"""Function rerankers (issue 36, item 3) through the Elanus SDK (Flight) and pymilvus (the
Milvus face) on one standalone: decay (gauss, exp, linear) on search and hybrid search,
RRF and weighted as ``Function`` rankers, model rerankers refused by name.

Expected orders and scores are computed here from the raw distances and field values
with Milvus's formulas written out (``decay_function.go``), not through
``elanus.rerankers``; the candidates are the ``limit + offset`` nearest per query, the
``topk`` Milvus's proxy searches before it reranks (``parseSearchInfo``). Milvus Lite
3.2 runs the decay ranker with the same scores, but in a plain search it picks its
candidates in its own way (with limit 2 it reranked neither the 2 nearest nor all rows),
so it is the reference for the hybrid searches only, where each request's ``limit`` fixes
the candidates.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import StandaloneProcess
from pymilvus import (
    AnnSearchRequest,
    DataType,
    Function,
    FunctionType,
    MilvusClient,
    MilvusException,
)

from elanus import ElanusError
from elanus.channels.nats_server import free_port
from elanus.client.client import Client

N = 60
DIM = 4
TOL = 1e-5


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, MilvusClient]]:
    port = free_port()
    server = StandaloneProcess(
        tmp_path_factory.mktemp("rerank") / "data", "--milvus-port", str(port)
    )
    try:
        server.start().wait_ready()
        mc = MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=30)
        schema = mc.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("a", DataType.FLOAT_VECTOR, dim=DIM)
        schema.add_field("b", DataType.FLOAT_VECTOR, dim=DIM)
        schema.add_field("t", DataType.DOUBLE)
        schema.add_field("name", DataType.VARCHAR, max_length=8)
        mc.create_collection("r", schema=schema, consistency_level="Strong")
        index = mc.prepare_index_params()
        index.add_index("a", index_type="FLAT", metric_type="L2")
        index.add_index("b", index_type="FLAT", metric_type="COSINE")
        mc.create_index("r", index)
        mc.insert("r", [{"id": i, **row(i)} for i in range(N)])
        mc.load_collection("r")
        yield Client(server.uri), mc
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusClient]:
    """Milvus Lite with the same rows: the reference for hybrid searches, whose candidates
    (each request's own ``limit``) Lite picks as Milvus does."""
    c = MilvusClient(str(tmp_path_factory.mktemp("lite") / "lite.db"))
    schema = c.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("a", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("b", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("t", DataType.DOUBLE)
    c.create_collection("r", schema=schema)
    index = c.prepare_index_params()
    index.add_index("a", index_type="FLAT", metric_type="L2")
    index.add_index("b", index_type="FLAT", metric_type="COSINE")
    c.create_index("r", index)
    c.load_collection("r")
    c.insert("r", [{"id": i, **{k: v for k, v in row(i).items() if k != "name"}} for i in range(N)])
    try:
        yield c
    finally:
        c.close()


def row(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {
        "a": rng.standard_normal(DIM).astype(np.float32).tolist(),
        "b": rng.standard_normal(DIM).astype(np.float32).tolist(),
        "t": float(i * 1.5),
        "name": f"n{i}",
    }


ROWS = [row(i) for i in range(N)]
Q = np.ones((1, DIM), np.float32)


def decay(fn: str, **params: Any) -> Function:
    return Function(
        name="d",
        input_field_names=["t"],
        function_type=FunctionType.RERANK,
        params={"reranker": "decay", "function": fn, **params},
    )


def factor(fn: str, v: float, origin: float, scale: float, offset: float, d: float) -> float:
    x = max(0.0, abs(v - origin) - offset)
    if fn == "gauss":
        return math.exp(-(x**2) / (2 * (scale**2 / (-2 * math.log(d)))))
    if fn == "exp":
        return math.exp(math.log(d) / scale * x)
    return max(d, 1 - (1 - d) / scale * x)


def l2(field: str, i: int) -> float:
    return float(np.sum((np.asarray(ROWS[i][field], np.float32) - Q[0]) ** 2))


def cosine(field: str, i: int) -> float:
    v = np.asarray(ROWS[i][field], np.float64)
    return float(v @ Q[0] / (np.linalg.norm(v) * np.linalg.norm(Q[0])))


def expected_decay(
    fn: str,
    candidates: int,
    limit: int,
    offset: int,
    origin: float,
    scale: float,
    o: float,
    d: float,
) -> list[tuple[int, float]]:
    """Milvus's decay over the ``candidates`` nearest by L2 on ``a``: L2 -> 1 - 2 atan/pi,
    times the decay of ``t``; best first, then the window."""
    nearest = sorted(range(N), key=lambda i: (l2("a", i), i))[:candidates]
    scored = [
        (
            i,
            (1 - 2 * math.atan(l2("a", i)) / math.pi)
            * factor(fn, ROWS[i]["t"], origin, scale, o, d),
        )
        for i in nearest
    ]
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[offset : offset + limit]


def same(got: list[Any], want: list[tuple[int, float]]) -> None:
    assert [h["id"] for h in got] == [i for i, _ in want]
    for h, (_, s) in zip(got, want, strict=True):
        assert math.isclose(h["distance"], s, rel_tol=TOL, abs_tol=TOL)


@pytest.mark.parametrize(
    ("fn", "params"),
    [
        ("gauss", {"origin": 30, "scale": 20}),
        ("exp", {"origin": 10, "scale": 15, "offset": 5, "decay": 0.3}),
        ("linear", {"origin": 45, "scale": 30, "decay": 0.2}),
    ],
)
def test_decay_search_on_both_faces(
    clients: tuple[Client, MilvusClient], fn: str, params: dict[str, Any]
) -> None:
    ec, mc = clients
    want = expected_decay(
        fn,
        7,
        5,
        2,
        params["origin"],
        params["scale"],
        params.get("offset", 0),
        params.get("decay", 0.5),
    )
    ranker = decay(fn, **params)
    got = mc.search(
        "r", Q.tolist(), anns_field="a", limit=5, offset=2, ranker=ranker, output_fields=["t"]
    )
    same(list(got[0]), want)
    assert [h["entity"]["t"] for h in got[0]] == [ROWS[i]["t"] for i, _ in want]
    sdk = ec.search("r", Q, anns_field="a", limit=5, offset=2, ranker=ranker)
    same(list(sdk[0]), want)
    as_dict = {
        "input_field_names": ["t"],
        "params": {"reranker": "decay", "function": fn, **params},
    }
    same(list(ec.search("r", Q, anns_field="a", limit=5, offset=2, ranker=as_dict)[0]), want)


def test_decay_hybrid_takes_each_keys_best_normalised_score(
    clients: tuple[Client, MilvusClient], lite: MilvusClient
) -> None:
    ec, mc = clients
    reqs = [
        AnnSearchRequest(Q.tolist(), "a", {"metric_type": "L2"}, limit=6),
        AnnSearchRequest(Q.tolist(), "b", {"metric_type": "COSINE"}, limit=6),
    ]
    near_a = sorted(range(N), key=lambda i: (l2("a", i), i))[:6]
    near_b = sorted(range(N), key=lambda i: (-cosine("b", i), i))[:6]
    best: dict[int, float] = {}
    for i in near_a:
        best[i] = 1 - 2 * math.atan(l2("a", i)) / math.pi
    for i in near_b:
        best[i] = max(best.get(i, -math.inf), cosine("b", i))
    scored = sorted(
        ((i, s * factor("gauss", ROWS[i]["t"], 40, 25, 0, 0.5)) for i, s in best.items()),
        key=lambda p: (-p[1], p[0]),
    )[:4]
    ranker = decay("gauss", origin=40, scale=25)
    same(list(lite.hybrid_search("r", reqs, ranker, limit=4)[0]), scored)
    same(list(mc.hybrid_search("r", reqs, ranker, limit=4)[0]), scored)
    same(list(ec.hybrid_search("r", reqs, ranker, limit=4)[0]), scored)


def test_rrf_and_weighted_as_functions_match_the_classic_rankers(
    clients: tuple[Client, MilvusClient], lite: MilvusClient
) -> None:
    from pymilvus import RRFRanker, WeightedRanker

    ec, mc = clients
    reqs = [
        AnnSearchRequest(Q.tolist(), "a", {"metric_type": "L2"}, limit=8),
        AnnSearchRequest(Q.tolist(), "b", {"metric_type": "COSINE"}, limit=8),
    ]
    pairs = [
        (
            Function(
                name="r",
                input_field_names=[],
                function_type=FunctionType.RERANK,
                params={"reranker": "rrf", "k": 20},
            ),
            RRFRanker(20),
        ),
        (
            Function(
                name="w",
                input_field_names=[],
                function_type=FunctionType.RERANK,
                params={"reranker": "weighted", "weights": [0.3, 0.7], "norm_score": True},
            ),
            WeightedRanker(0.3, 0.7),
        ),
    ]
    for function, classic in pairs:
        want = [(h["id"], h["distance"]) for h in mc.hybrid_search("r", reqs, classic, limit=5)[0]]
        same(list(lite.hybrid_search("r", reqs, function, limit=5)[0]), want)
        same(list(mc.hybrid_search("r", reqs, function, limit=5)[0]), want)
        same(list(ec.hybrid_search("r", reqs, function, limit=5)[0]), want)


def _milvus_error(call: Any, *words: str) -> None:
    with pytest.raises(MilvusException) as info:
        call()
    assert info.value.code == 1100, info.value
    for w in words:
        assert w in info.value.message, info.value.message


def test_bad_rankers_are_refused_by_name(clients: tuple[Client, MilvusClient]) -> None:
    ec, mc = clients
    q = Q.tolist()
    model = Function(
        name="m",
        input_field_names=["name"],
        function_type=FunctionType.RERANK,
        params={"reranker": "model", "provider": "tei", "queries": ["x"], "endpoint": "http://x"},
    )
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=model), "model")
    _milvus_error(
        lambda: mc.search("r", q, anns_field="a", ranker=decay("gauss", origin=0, scale=0)),
        "scale",
    )
    _milvus_error(
        lambda: mc.search("r", q, anns_field="a", ranker=decay("cubic", origin=0, scale=1)),
        "cubic",
    )
    text = Function(
        name="d",
        input_field_names=["name"],
        function_type=FunctionType.RERANK,
        params={"reranker": "decay", "function": "gauss", "origin": 0, "scale": 1},
    )
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=text), "'name'", "numeric")
    _milvus_error(
        lambda: mc.search(
            "r", q, anns_field="a", ranker=decay("gauss", origin=0, scale=1), group_by_field="t"
        ),
        "grouping",
    )
    with pytest.raises(ElanusError, match="exactly one input field"):
        ec.search(
            "r",
            Q,
            anns_field="a",
            ranker={
                "input_field_names": ["t", "id"],
                "params": {"reranker": "decay", "function": "exp", "origin": 0, "scale": 1},
            },
        )
    with pytest.raises(ElanusError, match="] search: the decay ranker needs the param 'origin'"):
        ec.search(
            "r",
            Q,
            anns_field="a",
            ranker={
                "input_field_names": ["t"],
                "params": {"reranker": "decay", "function": "exp", "scale": 1},
            },
        )


# -- boost (Milvus 2.6's Boost Ranker; elanus/boost.py) -------------------------------------
# Expected scores follow Milvus's source (rescores/Scorer.cpp, RescoresNode.cpp): a matched
# hit's raw distance times (boost_mode sum: plus) its boost, in float32. Milvus Lite 3.2
# runs the boost ranker but applies every boost twice (weight 0.5 scales a distance by
# 0.25, weight 2 by 4), so it is no reference here; Milvus applies it once, as its docs show.
M64 = (1 << 64) - 1


def _murmur_special(key: int, seed: int) -> int:
    """Milvus's MurmurHash3_x64_64_Special (rescores/Murmur3.c), in Python integers."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & M64

    def fmix(k: int) -> int:
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & M64
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & M64
        return k ^ (k >> 33)

    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    key, seed = key & M64, seed & M64
    h1 = key ^ seed ^ ((rotl((key * c1) & M64, 31) * c2) & M64)
    h1 = (((rotl(h1, 27) + seed) & M64) * 5 + 0x52DCE729) & M64
    h2 = seed ^ ((rotl((seed * c2) & M64, 33) * c1) & M64)
    h2 = (((rotl(h2, 31) + h1) & M64) * 5 + 0x38495AB5) & M64
    h1, h2 = h1 ^ 16, h2 ^ 16
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    return (fmix(h1) + fmix(h2)) & M64


def _draw(key: int, seed: int) -> float:
    """Milvus's hash_to_double: the low 52 bits as a mantissa in [1, 2), less 1."""
    bits = (_murmur_special(key, seed) & 0xFFFFFFFFFFFFF) | (0x3FF << 52)
    return float(np.array([bits], np.uint64).view(np.float64)[0]) - 1.0


def boost(**params: Any) -> Function:
    return Function(
        name="b",
        input_field_names=[],
        function_type=FunctionType.RERANK,
        params={"reranker": "boost", **params},
    )


def expected_boost(
    field: str, candidates: int, limit: int, offset: int, boosts: dict[int, float], sum_: bool
) -> list[tuple[int, float]]:
    """Milvus's boost over the ``candidates`` nearest on ``field`` (a: L2 ascending, b:
    COSINE descending), each boosted key's distance times (or plus) its boost."""
    larger = field == "b"
    raw = {i: cosine(field, i) if larger else l2(field, i) for i in range(N)}
    nearest = sorted(range(N), key=lambda i: (-raw[i] if larger else raw[i], i))[:candidates]
    scored = []
    for i in nearest:
        d = np.float32(raw[i])
        if i in boosts:
            b = np.float32(boosts[i])
            d = np.float32(d + b) if sum_ else np.float32(d * b)
        scored.append((i, float(d)))
    scored.sort(key=lambda p: (-p[1] if larger else p[1], p[0]))
    return scored[offset : offset + limit]


def test_boost_search_on_both_faces(clients: tuple[Client, MilvusClient]) -> None:
    ec, mc = clients
    ranker = boost(filter="t < 30", weight=0.5)
    want = expected_boost("a", 8, 5, 3, {i: 0.5 for i in range(N) if i * 1.5 < 30}, False)
    got = mc.search(
        "r", Q.tolist(), anns_field="a", limit=5, offset=3, ranker=ranker, output_fields=["t"]
    )
    same(list(got[0]), want)
    assert [h["entity"]["t"] for h in got[0]] == [ROWS[i]["t"] for i, _ in want]
    same(list(ec.search("r", Q, anns_field="a", limit=5, offset=3, ranker=ranker)[0]), want)
    as_dict = {"input_field_names": [], "params": {"reranker": "boost", "filter": "t < 30",
                                                   "weight": 0.5}}  # fmt: skip
    same(list(ec.search("r", Q, anns_field="a", limit=5, offset=3, ranker=as_dict)[0]), want)


def test_boost_function_score_merges_weights_and_random_draws(
    clients: tuple[Client, MilvusClient],
) -> None:
    """Two boost functions in a FunctionScore on a COSINE field: a fixed weight on some
    rows and a seeded random weight (by the ``id`` field) on all, merged by function_mode,
    added to the score (boost_mode sum); the random draw is Milvus's hash of the field."""
    from pymilvus import FunctionScore

    ec, mc = clients
    fixed = boost(filter="t >= 45", weight=0.3)
    drawn = boost(random_score={"seed": 126, "field": "id"}, weight=0.4)
    boosts = {}
    for i in range(N):
        r = float(np.float32(_draw(i, 126)) * np.float32(0.4))
        boosts[i] = float(np.float32(0.3) * np.float32(r)) if i * 1.5 >= 45 else r
    want = expected_boost("b", 6, 6, 0, boosts, True)
    score = FunctionScore([fixed, drawn], params={"boost_mode": "Sum", "function_mode": "Multiply"})
    same(list(mc.search("r", Q.tolist(), anns_field="b", limit=6, ranker=score)[0]), want)
    same(list(ec.search("r", Q, anns_field="b", limit=6, ranker=score)[0]), want)
    # without a field Elanus hashes the primary key (Milvus: the segment offset), which
    # for an Int64 key equal to the id field draws the same numbers
    keyed = FunctionScore([fixed, boost(random_score={"seed": 126}, weight=0.4)],
                          params={"boost_mode": "sum"})  # fmt: skip
    same(list(mc.search("r", Q.tolist(), anns_field="b", limit=6, ranker=keyed)[0]), want)


def test_bad_boost_rankers_are_refused(clients: tuple[Client, MilvusClient]) -> None:
    from pymilvus import FunctionScore

    ec, mc = clients
    q = Q.tolist()
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=boost(filter="t < 3")),
                  "'weight'")  # fmt: skip
    bad_mode = FunctionScore([boost(weight=2)], params={"boost_mode": "max"})
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=bad_mode), "boost_mode")
    _milvus_error(
        lambda: mc.search("r", q, anns_field="a", ranker=boost(weight=2), group_by_field="t"),
        "grouping",
    )
    seeded_by_double = boost(random_score={"seed": 1, "field": "t"}, weight=1)
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=seeded_by_double), "Int64")
    with pytest.raises(MilvusException, match="boost ranker filter"):
        mc.search("r", q, anns_field="a", ranker=boost(filter="nope > 1", weight=2))
    mixed = FunctionScore([boost(weight=2), decay("gauss", origin=0, scale=1)])
    _milvus_error(lambda: mc.search("r", q, anns_field="a", ranker=mixed), "decay")
    reqs = [
        AnnSearchRequest(q, "a", {"metric_type": "L2"}, limit=4),
        AnnSearchRequest(q, "b", {"metric_type": "COSINE"}, limit=4),
    ]
    _milvus_error(lambda: mc.hybrid_search("r", reqs, boost(weight=2)), "hybrid search")
    with pytest.raises(ElanusError, match="hybrid search"):
        ec.hybrid_search("r", reqs, boost(weight=2))
