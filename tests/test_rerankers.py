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
