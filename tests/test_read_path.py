"""The read path end to end (DESIGN.md "Read path", seed 001): real nats-server, coord,
datanode, query nodes and proxy; every answer is checked against a numpy brute force or an
exact model of what was acknowledged.

- exact search == brute force over growing, flushed and compacted data, for every metric,
  with filters, output fields, batches, offsets, range search and partitions;
- query (filter, limit/offset by pk, count(*), get), deletes and upserts;
- consistency levels (Strong, Session) and a concurrent writer;
- time travel (``as_of``) inside and outside the retention window;
- handoff (flush, compaction) under continuous reads;
- load / release / partition loads;
- a query node as its own OS process, killed with -9 and replaced.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TRANSPORTS, ElanusProcess, Stack, bare_collection, own_stack, wait_for
from stack_factory import stack_fixture, wait_querynodes

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.meta.coord import Coordinator

DIM = 8
BITS = 64
TOL = 1e-4
STRONG = "Strong"
FLOAT_METRICS = ("L2", "IP", "COSINE")
BINARY_METRICS = ("HAMMING", "JACCARD")
LARGER = {"IP", "COSINE"}


# -- helpers ------------------------------------------------------------------------------------


def wait_compacted(client: Client, job: int, timeout: float = 30) -> None:
    wait_for(lambda: client.get_compaction_state(job) == "Completed", timeout, "compaction")


def flushed_segments(client: Client, name: str) -> list[dict[str, Any]]:
    return [s for s in client.get_segment_info(name) if s["state"] == "Flushed"]


def served_sealed(stack: Stack, collection_id: int) -> set[int]:
    """Sealed segments the delegators of a collection route to, over every query node."""
    out: set[int] = set()
    for qn in stack.querynodes:
        for d in list(qn.delegators.values()):
            if d.collection_id == collection_id:
                out |= set(d.distribution.sealed)
    return out


def wait_served(stack: Stack, client: Client, name: str, timeout: float = 30) -> None:
    """Until the delegators serve exactly the collection's flushed segments (handoffs done)."""
    cid = client.describe_collection(name)["collection_id"]

    def done() -> bool:
        flushed = {s["segment_id"] for s in flushed_segments(client, name)}
        state = client.get_load_state(name)["state"]
        return state == "Loaded" and served_sealed(stack, cid) == flushed

    wait_for(done, timeout, f"handoffs of {name}")


def brute_force(metric: str, X: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Milvus distances of every row of X to one query q."""
    if metric == "L2":
        return ((X.astype(np.float64) - q) ** 2).sum(axis=1)
    if metric == "IP":
        return X.astype(np.float64) @ q
    if metric == "COSINE":
        x = X.astype(np.float64)
        return (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))
    xb = np.unpackbits(X, axis=1).astype(bool)
    qb = np.unpackbits(np.asarray(q, np.uint8)).astype(bool)
    if metric == "HAMMING":
        return (xb != qb).sum(axis=1).astype(np.float64)
    assert metric == "JACCARD"
    inter = (xb & qb).sum(axis=1)
    union = (xb | qb).sum(axis=1)
    return 1.0 - inter / np.maximum(union, 1)


def check_hits(
    hits: list[dict[str, Any]],
    pks: np.ndarray,
    dist: np.ndarray,
    metric: str,
    limit: int,
    offset: int = 0,
    what: str = "",
) -> None:
    """``hits`` are ranks offset..offset+limit of the candidates (pks, true distances).

    Tie-aware: every hit's distance is its true distance and equals the expected distance
    at its rank; every candidate strictly inside the window (by more than TOL) is a hit.
    """
    larger = metric in LARGER
    order = np.argsort(-dist if larger else dist, kind="stable")
    window = dist[order][offset : offset + limit]
    assert len(hits) == len(window), f"{what}: {len(hits)} hits, expected {len(window)}"
    if not len(window):
        return
    true = dict(zip(pks.tolist(), dist.tolist(), strict=True))
    ids = [h["id"] for h in hits]
    assert len(set(ids)) == len(ids), f"{what}: a pk appears twice: {ids}"
    for rank, (h, want) in enumerate(zip(hits, window, strict=True)):
        assert h["id"] in true, f"{what}: hit {h['id']} is not a candidate (deleted/filtered?)"
        assert abs(h["distance"] - true[h["id"]]) <= TOL, (
            f"{what}: hit {h['id']} distance {h['distance']}, true {true[h['id']]}"
        )
        assert abs(h["distance"] - want) <= TOL, (
            f"{what}: rank {offset + rank} has distance {h['distance']}, expected {want}"
        )
    best, worst = window[0], window[-1]
    if larger:
        inside = dist > worst + TOL
        if offset:
            inside &= dist < best - TOL
    else:
        inside = dist < worst - TOL
        if offset:
            inside &= dist > best + TOL
    missing = set(pks[inside].tolist()) - set(ids)
    assert not missing, f"{what}: expected hits {sorted(missing)} are missing"


# -- the layout: growing, flushed and compacted data in two partitions ------------------------


@dataclass
class Data:
    """What one collection holds: vectors and tags by pk, partition, alive or deleted."""

    name: str
    field: str
    vectors: dict[int, np.ndarray] = field(default_factory=dict)
    tags: dict[int, int] = field(default_factory=dict)
    partition: dict[int, str] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)

    def candidates(
        self, pred: Callable[[int], bool] | None = None, partitions: list[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        pks = sorted(
            p
            for p in self.vectors
            if p not in self.deleted
            and (pred is None or pred(p))
            and (partitions is None or self.partition[p] in partitions)
        )
        return np.array(pks, np.int64), np.stack([self.vectors[p] for p in pks])


@dataclass
class Layout:
    stack: Stack
    client: Client
    float: Data
    binary: Data


def _rows(data: Data, lo: int, hi: int, rng: np.random.Generator, part: str) -> dict[str, Any]:
    pks = np.arange(lo, hi, dtype=np.int64)
    if data.field == "vector":
        vecs = rng.standard_normal((hi - lo, DIM)).astype(np.float32)
    else:
        vecs = rng.integers(0, 256, (hi - lo, BITS // 8), dtype=np.uint8)
    tags = (pks % 7).astype(np.int32)
    for p, v, t in zip(pks.tolist(), vecs, tags.tolist(), strict=True):
        data.vectors[p], data.tags[p], data.partition[p] = v, t, part
    return {"id": pks, "tag": tags, data.field: vecs}


def _schema(data: Data) -> Schema:
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field("tag", DataType.INT32)
    if data.field == "vector":
        return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    return s.add_field("bits", DataType.BINARY_VECTOR, dim=BITS)


def build(stack: Stack, client: Client, data: Data, metric: str, shards: int, load_first: bool):
    """Insert + flush twice per partition, compact, insert + flush once more, then insert
    growing rows; delete keys in every kind of segment (some before compaction)."""
    rng = np.random.default_rng(11 if data.field == "vector" else 12)
    name = data.name
    client.create_collection(
        name, schema=_schema(data), num_shards=shards, properties={"metric_type": metric}
    )
    client.create_partition(name, "p1")
    if load_first:
        client.load_collection(name)

    def put(lo: int, hi: int, part: str, flush: bool) -> None:
        client.insert(name, _rows(data, lo, hi, rng, part), partition_name=part)
        if flush:
            client.flush(name, timeout=30)

    put(0, 150, "_default", True)
    put(150, 300, "_default", True)
    client.delete(name, [10, 200])  # dropped for good by the compaction (retention 0)
    data.deleted |= {10, 200}
    put(300, 400, "p1", True)
    put(400, 450, "p1", True)
    wait_compacted(client, client.compact(name))
    put(450, 520, "_default", True)  # flushed, not compacted
    put(520, 600, "_default", False)  # growing
    put(600, 660, "p1", False)
    if not load_first:
        client.load_collection(name)
    wait_served(stack, client, name)
    kinds = {bool(s.get("compacted_from")) for s in flushed_segments(client, name)}
    assert kinds == {False, True}, f"expected compacted and plain flushed segments: {kinds}"
    cid = client.describe_collection(name)["collection_id"]

    def growing() -> int:
        return sum(
            g.num_rows
            for qn in stack.querynodes
            for d in list(qn.delegators.values())
            if d.collection_id == cid
            for g in list(d.growing.values())
        )

    wait_for(lambda: growing() == 140, what="140 growing rows in the delegators")
    gone = [3, 151, 305, 455, 530, 610]  # compacted, flushed and growing rows
    client.delete(name, gone)
    data.deleted |= set(gone)


@pytest.fixture(scope="module", params=TRANSPORTS)
def layout(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Layout]:
    """Two query nodes, segments of every kind; once with roles calling each other
    in-process, once with every request over NATS (``transport``)."""
    tmp = tmp_path_factory.mktemp("layout")
    settings = {"compaction_interval_s": 0, "retention_s": 0, "transport": request.param}
    with own_stack(tmp, "layout-loop", **settings) as stack:
        stack.add_querynode()  # segments and channels spread over two query nodes
        wait_querynodes(stack, 2)
        client = stack.client()
        fl = Data("fv", "vector")
        bi = Data("bv", "bits")
        build(stack, client, fl, "L2", shards=2, load_first=True)
        build(stack, client, bi, "HAMMING", shards=1, load_first=False)
        yield Layout(stack, client, fl, bi)


def _queries(data: Data, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if data.field == "vector":
        return rng.standard_normal((n, DIM)).astype(np.float32)
    return rng.integers(0, 256, (n, BITS // 8), dtype=np.uint8)


def _data(layout: Layout, metric: str) -> Data:
    return layout.float if metric in FLOAT_METRICS else layout.binary


# -- 1. exact search == brute force -----------------------------------------------------------


@pytest.mark.parametrize("metric", [*FLOAT_METRICS, *BINARY_METRICS])
@pytest.mark.parametrize("filtered", [False, True], ids=["all", "filter"])
def test_search_equals_brute_force(layout: Layout, metric: str, filtered: bool) -> None:
    data = _data(layout, metric)
    pred = (lambda p: data.tags[p] < 3) if filtered else None
    pks, X = data.candidates(pred)
    Q = _queries(data, 5, 100)
    default = metric in ("L2", "HAMMING")  # the collection property names these
    results = layout.client.search(
        data.name,
        Q,
        limit=10,
        filter="tag < {t}" if filtered else "",
        filter_params={"t": 3} if filtered else None,
        # a BinaryVector output field fails (see test_binary_vector_output_fields)
        output_fields=["tag", data.field] if data.field == "vector" else ["tag"],
        search_params=None if default else {"metric_type": metric},
        consistency_level=STRONG,
    )
    assert len(results) == len(Q)
    for i, (hits, q) in enumerate(zip(results, Q, strict=True)):
        check_hits(hits, pks, brute_force(metric, X, q), metric, 10, what=f"{metric} q{i}")
        for h in hits:
            assert h["entity"]["tag"] == data.tags[h["id"]]
            if data.field == "vector":
                assert np.allclose(h["entity"]["vector"], data.vectors[h["id"]], atol=1e-6)


def test_binary_vector_output_fields(layout: Layout) -> None:
    data = layout.binary
    q = data.vectors[20]
    (hits,) = layout.client.search(
        data.name, [q], limit=1, output_fields=["bits"], consistency_level=STRONG
    )
    assert hits[0]["id"] == 20 and bytes(hits[0]["entity"]["bits"]) == q.tobytes()
    (row,) = layout.client.query(data.name, "id == 20", ["bits"], consistency_level=STRONG)
    assert bytes(row["bits"]) == q.tobytes()


@pytest.mark.parametrize("metric", ["L2", "IP", "HAMMING"])
def test_search_limit_offset_pages_the_ranking(layout: Layout, metric: str) -> None:
    data = _data(layout, metric)
    pks, X = data.candidates()
    Q = _queries(data, 3, 200)
    pages = []
    for offset in (0, 7, 14):
        res = layout.client.search(
            data.name,
            Q,
            limit=7,
            offset=offset,
            search_params={"metric_type": metric},
            consistency_level=STRONG,
        )
        for i, (hits, q) in enumerate(zip(res, Q, strict=True)):
            check_hits(hits, pks, brute_force(metric, X, q), metric, 7, offset, f"q{i}+{offset}")
        pages.append(res)
    for i in range(len(Q)):  # pages never overlap
        ids = [h["id"] for page in pages for h in page[i]]
        assert len(ids) == len(set(ids)) == 21


@pytest.mark.parametrize("metric", ["L2", "IP"])
@pytest.mark.parametrize("with_range_filter", [False, True], ids=["radius", "radius+filter"])
def test_range_search(layout: Layout, metric: str, with_range_filter: bool) -> None:
    data = layout.float
    pks, X = data.candidates()
    q = _queries(data, 1, 300)[0]
    dist = brute_force(metric, X, q)
    larger = metric in LARGER
    ranked = np.sort(dist)[::-1] if larger else np.sort(dist)
    radius = float((ranked[40] + ranked[41]) / 2)  # midpoints: no row on a boundary
    params: dict[str, Any] = {"metric_type": metric, "radius": radius}
    keep = (dist > radius) if larger else (dist < radius)
    if with_range_filter:
        rf = float((ranked[5] + ranked[6]) / 2)
        params["range_filter"] = rf
        keep &= (dist <= rf) if larger else (dist >= rf)
    assert 30 <= keep.sum() <= 41
    for limit in (100, 12):
        (hits,) = layout.client.search(
            data.name, [q], limit=limit, search_params=params, consistency_level=STRONG
        )
        check_hits(hits, pks[keep], dist[keep], metric, limit, what=f"range limit {limit}")


@pytest.mark.parametrize("metric", ["COSINE", "JACCARD"])
def test_partition_names_restrict_search(layout: Layout, metric: str) -> None:
    data = _data(layout, metric)
    Q = _queries(data, 2, 400)
    for parts in (["p1"], ["_default"], ["p1", "_default"]):
        pks, X = data.candidates(partitions=parts)
        res = layout.client.search(
            data.name,
            Q,
            limit=15,
            search_params={"metric_type": metric},
            partition_names=parts,
            filter="tag != 6",
            consistency_level=STRONG,
        )
        keep = np.array([data.tags[p] != 6 for p in pks.tolist()])
        for i, (hits, q) in enumerate(zip(res, Q, strict=True)):
            check_hits(
                hits, pks[keep], brute_force(metric, X[keep], q), metric, 15, what=f"{parts} q{i}"
            )
            assert {data.partition[h["id"]] for h in hits} <= set(parts)


def test_layout_queries_see_every_segment_once(layout: Layout) -> None:
    for data in (layout.float, layout.binary):
        alive = sorted(set(data.vectors) - data.deleted)
        rows = layout.client.query(data.name, "id >= 0", ["id", "tag"], consistency_level=STRONG)
        assert [r["id"] for r in rows] == alive
        assert all(r["tag"] == data.tags[r["id"]] for r in rows)
        (count,) = layout.client.query(data.name, "id >= 0", ["count(*)"], consistency_level=STRONG)
        assert count["count(*)"] == len(alive)


# -- function-scoped stacks -------------------------------------------------------------------


make_stack = stack_fixture(serves_reads=True, compaction_interval_s=0)


def vec_rows(pks: np.ndarray, rng: np.random.Generator, **extra: Any) -> dict[str, Any]:
    return {"id": pks, "vector": rng.standard_normal((len(pks), DIM)).astype(np.float32), **extra}


def query_collection(client: Client, name: str = "q", shards: int = 2) -> None:
    schema = (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("tag", DataType.INT32)
        .add_field("name", DataType.VARCHAR, max_length=32)
        .add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    )
    client.create_collection(
        name, schema=schema, num_shards=shards, properties={"metric_type": "L2"}
    )


def loaded_q(
    make_stack: Callable[..., Stack], shards: int = 2, **settings: Any
) -> tuple[Stack, Client]:
    """A fresh stack with the query collection ``q`` made and loaded."""
    stack = make_stack(**settings)
    client = stack.client()
    query_collection(client, shards=shards)
    client.load_collection("q")
    return stack, client


@pytest.fixture(params=TRANSPORTS)
def q_on_each_transport(
    make_stack: Callable[..., Stack], request: pytest.FixtureRequest
) -> tuple[Stack, Client]:
    """``loaded_q`` once per transport, for the tests every transport must pass."""
    return loaded_q(make_stack, transport=request.param)


def count(client: Client, name: str, expr: str = "id >= 0", **kw: Any) -> int:
    (row,) = client.query(name, expr, ["count(*)"], consistency_level=STRONG, **kw)
    return int(row["count(*)"])


def all_ids(client: Client, name: str, expr: str = "id >= 0", **kw: Any) -> list[Any]:
    kw.setdefault("consistency_level", STRONG)
    return [r["id"] for r in client.query(name, expr, ["id"], **kw)]


# -- 2. query -----------------------------------------------------------------------------------


def test_query_filter_outputs_count_and_get(q_on_each_transport: tuple[Stack, Client]) -> None:
    stack, client = q_on_each_transport
    rng = np.random.default_rng(5)
    model: dict[int, dict[str, Any]] = {}
    for lo, hi, flush in ((0, 300, True), (300, 400, False)):
        pks = rng.permutation(np.arange(lo, hi))  # rows stored out of pk order
        rows = vec_rows(pks, rng, tag=(pks % 5).astype(np.int32), name=[f"n{p}" for p in pks])
        client.insert("q", rows)
        for i, p in enumerate(pks.tolist()):
            model[p] = {"id": p, "tag": p % 5, "name": f"n{p}", "vector": rows["vector"][i]}
        if flush:
            client.flush("q", timeout=30)
    wait_served(stack, client, "q")

    got = client.query(
        "q", "tag == 2 and id < 350", ["id", "tag", "name"], consistency_level=STRONG
    )
    want = [
        {k: model[p][k] for k in ("id", "tag", "name")}
        for p in sorted(model)
        if p % 5 == 2 and p < 350
    ]
    assert got == want  # ordered by primary key
    assert count(client, "q") == 400
    assert count(client, "q", "tag < 2") == 160
    assert count(client, "q", 'name like "n1%"') == sum(str(p).startswith("1") for p in model)

    rows = client.get(
        "q", [5, 305, 9999, 17], output_fields=["name", "vector"], consistency_level=STRONG
    )
    assert [r["name"] for r in rows] == ["n5", "n17", "n305"]
    for r in rows:
        assert np.allclose(r["vector"], model[int(r["name"][1:])]["vector"], atol=1e-6)
    star = client.query("q", "id in [1, 2]", ["*"], consistency_level=STRONG)
    assert [sorted(r) for r in star] == [["id", "name", "tag", "vector"]] * 2


def test_query_limit_offset_pages_by_primary_key(make_stack: Callable[..., Stack]) -> None:
    stack, client = loaded_q(make_stack, shards=1)
    rng = np.random.default_rng(6)
    client.insert(
        "q", vec_rows(np.arange(199, -1, -1), rng, tag=np.zeros(200, np.int32), name=["x"] * 200)
    )
    client.flush("q", timeout=30)
    client.insert(
        "q", vec_rows(np.arange(399, 199, -1), rng, tag=np.zeros(200, np.int32), name=["x"] * 200)
    )
    wait_served(stack, client, "q")
    assert all_ids(client, "q") == list(range(400))
    pages = [
        [
            r["id"]
            for r in client.query("q", "id >= 0", limit=10, offset=o, consistency_level=STRONG)
        ]
        for o in (0, 10, 195, 395)
    ]
    assert pages == [
        list(range(0, 10)),
        list(range(10, 20)),
        list(range(195, 205)),
        list(range(395, 400)),
    ]


def test_delete_and_upsert_are_seen_by_strong_reads(
    q_on_each_transport: tuple[Stack, Client],
) -> None:
    stack, client = q_on_each_transport
    rng = np.random.default_rng(7)
    pks = np.arange(300)
    rows = vec_rows(pks, rng, tag=np.zeros(300, np.int32), name=[f"old{p}" for p in pks])
    vectors = {p: rows["vector"][p] for p in range(300)}
    client.insert("q", {k: v[:200] for k, v in rows.items()})
    client.flush("q", timeout=30)
    client.insert("q", {k: v[200:] for k, v in rows.items()})  # growing
    wait_served(stack, client, "q")

    def check(gone: set[int], upserted: dict[int, np.ndarray]) -> None:
        assert all_ids(client, "q") == sorted(set(range(300)) - gone)
        assert count(client, "q") == 300 - len(gone)
        assert client.get("q", sorted(gone), consistency_level=STRONG) == []
        for p in gone:
            (hits,) = client.search("q", [vectors[p]], limit=5, consistency_level=STRONG)
            assert p not in [h["id"] for h in hits]
        for p, v in upserted.items():
            (row,) = client.get("q", [p], ["tag", "name", "vector"], consistency_level=STRONG)
            assert row["tag"] == 1 and row["name"] == f"new{p}"
            assert np.allclose(row["vector"], v, atol=1e-6)
            (hits,) = client.search(
                "q", [v], limit=3, output_fields=["name"], consistency_level=STRONG
            )
            assert hits[0]["id"] == p and hits[0]["distance"] < 1e-5
            assert hits[0]["entity"]["name"] == f"new{p}"
            assert [h["id"] for h in hits].count(p) == 1
            (old_hits,) = client.search("q", [vectors[p]], limit=5, consistency_level=STRONG)
            assert all(h["id"] != p or h["distance"] > 1e-3 for h in old_hits)
            assert client.query("q", f'name == "old{p}"', consistency_level=STRONG) == []

    gone = {3, 150, 210, 299}  # flushed and growing rows
    client.delete("q", sorted(gone))
    check(gone, {})
    new = {p: (rng.standard_normal(DIM) * 3).astype(np.float32) for p in (5, 160, 220)}
    client.upsert(
        "q",
        {
            "id": np.array(list(new)),
            "tag": np.ones(3, np.int32),
            "name": [f"new{p}" for p in new],
            "vector": np.stack(list(new.values())),
        },
    )
    check(gone, new)
    client.flush("q", timeout=30)  # the same answers once it all is sealed
    wait_served(stack, client, "q")
    check(gone, new)
    wait_compacted(client, client.compact("q"))
    wait_served(stack, client, "q")
    check(gone, new)


# -- 3. consistency ----------------------------------------------------------------------------


def test_strong_reads_see_every_acknowledged_write(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client = stack.client()
    client.create_collection("c", dimension=DIM, metric_type="L2", num_shards=2)
    client.load_collection("c")
    rng = np.random.default_rng(8)
    vectors: dict[int, np.ndarray] = {}
    for i in range(12):
        pks = np.arange(i * 20, (i + 1) * 20)
        rows = vec_rows(pks, rng)
        client.insert("c", rows)
        vectors.update(zip(pks.tolist(), rows["vector"], strict=True))
        got = client.get("c", pks.tolist(), consistency_level=STRONG)
        assert [r["id"] for r in got] == pks.tolist()
        (hits,) = client.search("c", [rows["vector"][7]], limit=1, consistency_level=STRONG)
        assert hits[0]["id"] == pks[7] and hits[0]["distance"] < 1e-5
        assert count(client, "c") == len(vectors)
        if i % 4 == 3:
            client.flush("c", timeout=30)
    for p in range(0, 240, 17):  # flushed and growing keys
        client.delete("c", [p])
        (hits,) = client.search("c", [vectors[p]], limit=3, consistency_level=STRONG)
        assert p not in [h["id"] for h in hits]
        assert client.get("c", [p], consistency_level=STRONG) == []


@pytest.mark.slow
def test_session_reads_see_the_clients_own_writes(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(timetick_interval_ms=200)  # tsafe lags a write by up to 200 ms
    client = stack.client()
    client.create_collection("s", dimension=DIM, metric_type="L2")
    client.load_collection("s")
    rng = np.random.default_rng(9)
    for i in range(10):
        pks = np.arange(i * 10, (i + 1) * 10)
        client.insert("s", vec_rows(pks, rng))
        got = client.get("s", pks.tolist(), consistency_level="Session")
        assert [r["id"] for r in got] == pks.tolist(), f"round {i}: own insert not seen"
        client.delete("s", [int(pks[0])])
        assert client.get("s", [int(pks[0])], consistency_level="Session") == []


def test_session_default_level_of_the_collection(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(timetick_interval_ms=200)
    client = stack.client()
    client.create_collection("s", dimension=DIM, metric_type="L2", consistency_level="Session")
    client.load_collection("s")
    rng = np.random.default_rng(10)
    for i in range(10):
        pks = np.arange(i * 10, (i + 1) * 10)
        client.insert("s", vec_rows(pks, rng))
        got = client.get("s", pks.tolist())  # the collection's level: Session
        assert [r["id"] for r in got] == pks.tolist(), f"round {i}: own insert not seen"


class Writer(threading.Thread):
    """Inserts fresh keys and deletes acknowledged ones; records what was started and what
    was acknowledged, so a reader can bound what it must and may see."""

    def __init__(self, client: Client, name: str, rounds: int) -> None:
        super().__init__(daemon=True)
        self.client, self.name, self.rounds = client, name, rounds
        self.lock = threading.Lock()
        self.ins_started: set[int] = set()
        self.ins_acked: set[int] = set()
        self.del_started: set[int] = set()
        self.del_acked: set[int] = set()
        self.vectors: dict[int, np.ndarray] = {}
        self.error: BaseException | None = None

    def snapshot(self) -> tuple[set[int], set[int], set[int], set[int]]:
        with self.lock:
            return (
                set(self.ins_started),
                set(self.ins_acked),
                set(self.del_started),
                set(self.del_acked),
            )

    def run(self) -> None:
        rng = np.random.default_rng(11)
        try:
            for i in range(self.rounds):
                pks = np.arange(i * 25, (i + 1) * 25)
                rows = vec_rows(pks, rng)
                with self.lock:
                    self.ins_started |= set(pks.tolist())
                    self.vectors.update(zip(pks.tolist(), rows["vector"], strict=True))
                self.client.insert(self.name, rows)
                with self.lock:
                    self.ins_acked |= set(pks.tolist())
                if i % 2:
                    with self.lock:
                        alive = sorted(self.ins_acked - self.del_started)
                    victims = [int(p) for p in rng.choice(alive, 6, replace=False)]
                    with self.lock:
                        self.del_started |= set(victims)
                    self.client.delete(self.name, victims)
                    with self.lock:
                        self.del_acked |= set(victims)
                if i % 10 == 9:
                    self.client.flush(self.name, timeout=30)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def test_reads_under_a_concurrent_writer(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client = stack.client()
    client.create_collection("w", dimension=DIM, metric_type="L2", num_shards=2)
    client.load_collection("w")
    writer = Writer(stack.client(), "w", rounds=40)
    writer.start()
    reads = 0
    rng = np.random.default_rng(12)
    while writer.is_alive() or reads < 5:
        _, acked_before, _, deleted_before = writer.snapshot()
        ids = all_ids(client, "w")
        n = count(client, "w")
        probe = sorted(acked_before - writer.snapshot()[2])
        hit = None
        if probe:
            p = int(rng.choice(probe))
            (hits,) = client.search("w", [writer.vectors[p]], limit=2, consistency_level=STRONG)
            hit = (p, hits)
        started_after, _, del_started_after, _ = writer.snapshot()
        must = acked_before - del_started_after
        assert len(ids) == len(set(ids)), "a pk appears twice in a query result"
        seen = set(ids)
        assert must <= seen, f"acknowledged rows missing: {sorted(must - seen)[:10]}"
        assert not seen & deleted_before, f"deleted rows seen: {sorted(seen & deleted_before)}"
        assert seen <= started_after, "rows that were never written"
        assert len(must) <= n <= len(started_after - deleted_before)
        if hit is not None:
            p, hits = hit
            if p not in del_started_after:
                assert hits[0]["id"] == p and hits[0]["distance"] < 1e-5
        reads += 1
    writer.join(60)
    assert writer.error is None, f"writer failed: {writer.error!r}"
    assert reads >= 5
    final = writer.snapshot()
    assert set(all_ids(client, "w")) == final[1] - final[3]


# -- 4. time travel ----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_as_of_reads_the_collection_as_it_was(
    make_stack: Callable[..., Stack], transport: str
) -> None:
    stack = make_stack(transport=transport, retention_s=3600)
    client = stack.client()
    client.create_collection("t", dimension=DIM, metric_type="L2", num_shards=2)
    rng = np.random.default_rng(13)
    tags: dict[int, int] = {}
    vecs: dict[int, np.ndarray] = {}
    history: list[tuple[str, int, dict[int, int], dict[int, np.ndarray]]] = [
        ("start", client.get_timestamp(), {}, {})
    ]

    def record(what: str, ts: int) -> None:
        history.append((what, ts, dict(tags), dict(vecs)))

    def insert(lo: int, hi: int, tag: int, op: str = "insert") -> None:
        pks = np.arange(lo, hi)
        rows = vec_rows(pks, rng, tag=np.full(hi - lo, tag))
        ts = getattr(client, op)("t", rows)["ts"]
        for i, p in enumerate(pks.tolist()):
            tags[p], vecs[p] = tag, rows["vector"][i]
        record(f"{op} {lo}..{hi}", ts)

    def delete(keys: list[int]) -> None:
        ts = client.delete("t", keys)["ts"]
        for p in keys:
            tags.pop(p), vecs.pop(p)
        record(f"delete {keys}", ts)

    insert(0, 100, 0)
    insert(100, 200, 1)
    client.flush("t", timeout=30)
    delete([*range(10), *range(100, 105)])
    insert(20, 25, 9, "upsert")
    insert(200, 250, 2)
    client.flush("t", timeout=30)
    wait_compacted(client, client.compact("t"))  # retention keeps the deleted rows
    delete([200, 201, 30])
    insert(150, 151, 7, "upsert")
    insert(250, 260, 3)  # growing
    client.load_collection("t")
    wait_served(stack, client, "t")
    assert all(s.get("compacted_from") for s in flushed_segments(client, "t"))

    for what, ts, tag_at, vec_at in history:
        rows = client.query("t", "id >= 0", ["id", "tag"], as_of=ts)
        assert {r["id"]: r["tag"] for r in rows} == tag_at, f"as_of {what}"
        assert len(rows) == len(tag_at), f"as_of {what}: a pk twice"
        assert count(client, "t", as_of=ts) == len(tag_at), f"count as_of {what}"
        assert client.query("t", "tag == 9", ["id"], as_of=ts) == [
            {"id": p} for p in sorted(tag_at) if tag_at[p] == 9
        ]
        for p in (5, 22, 150, 201, 255):  # deleted, upserted twice, inserted late
            if p in vec_at:
                (hits,) = client.search("t", [vec_at[p]], limit=3, as_of=ts, output_fields=["tag"])
                assert hits[0]["id"] == p and hits[0]["distance"] < 1e-5, f"{p} as_of {what}"
                assert hits[0]["entity"]["tag"] == tag_at[p]
            for _, _, _, v_other in history:  # no other version of p is visible then
                if p in v_other and (p not in vec_at or not np.array_equal(v_other[p], vec_at[p])):
                    (hits,) = client.search("t", [v_other[p]], limit=3, as_of=ts)
                    assert all(h["id"] != p or h["distance"] > 1e-3 for h in hits), (
                        f"another version of {p} visible as_of {what}"
                    )
    # just before an upsert, the old row; at its timestamp, the new one
    _, ts_up, _, _ = next(h for h in history if h[0] == "upsert 20..25")
    assert client.get("t", [22], ["tag"], as_of=ts_up - 1) == [{"id": 22, "tag": 0}]
    assert client.get("t", [22], ["tag"], as_of=ts_up) == [{"id": 22, "tag": 9}]


def test_as_of_older_than_the_retention_window_is_refused(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(retention_s=1)
    client = stack.client()
    client.create_collection("t", dimension=DIM, metric_type="L2")
    client.load_collection("t")
    ts = client.insert("t", vec_rows(np.arange(10), np.random.default_rng(1)))["ts"]
    assert count(client, "t", as_of=None) == 10
    time.sleep(2)
    for call in (
        lambda: client.query("t", "id >= 0", as_of=ts),
        lambda: client.search("t", [[0.0] * DIM], as_of=ts),
    ):
        with pytest.raises(ElanusError) as exc:
            call()
        assert exc.value.code == ErrorCode.INVALID_ARGUMENT
        assert "as_of" in exc.value.message and "retention" in exc.value.message


# -- 5. handoff under continuous reads ---------------------------------------------------------

SPECIAL = 1_000_000
SPECIAL_VECTOR = [5.0] * DIM  # far from every other row: the known top hit


class Reader(threading.Thread):
    """Strong count(*), full query and a known-top-hit search, in a loop; checks each answer
    against the insert counters the main thread keeps."""

    def __init__(self, client: Client, name: str, counters: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.client, self.name, self.counters = client, name, counters
        self.stop_event = threading.Event()
        self.reads = 0
        self.exact = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.read_once()
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                self.failures.append(repr(exc))
            if len(self.failures) > 20:
                return

    def read_once(self) -> None:
        acked = self.counters["acked"]
        n = count(self.client, self.name)
        ids = all_ids(self.client, self.name)
        (hits,) = self.client.search(
            self.name, [SPECIAL_VECTOR], limit=50, consistency_level=STRONG
        )
        started = self.counters["started"]
        if not acked <= n <= started:
            self.failures.append(f"count {n} outside [{acked}, {started}]")
        if acked == started and n != acked:
            self.failures.append(f"count {n}, acknowledged {acked}")
        self.exact += acked == started
        if len(ids) != len(set(ids)):
            self.failures.append(f"query result with a pk twice ({len(ids) - len(set(ids))})")
        if not acked <= len(set(ids)) <= started:
            self.failures.append(f"query returned {len(ids)} rows, acknowledged {acked}")
        got = [h["id"] for h in hits]
        if len(got) != len(set(got)):
            self.failures.append(f"search result with a pk twice: {got}")
        if not got or got[0] != SPECIAL or hits[0]["distance"] > 1e-5:
            self.failures.append(f"search top hit {hits[:1]}, expected {SPECIAL}")
        if not min(50, acked) <= len(got) <= min(50, started):
            self.failures.append(f"search returned {len(got)} hits")
        self.reads += 1


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_handoff_under_continuous_reads(make_stack: Callable[..., Stack], transport: str) -> None:
    stack = make_stack(transport=transport, retention_s=0)
    stack.add_querynode()
    wait_querynodes(stack, 2)
    client = stack.client()
    client.create_collection("h", dimension=DIM, metric_type="L2", num_shards=2)
    client.load_collection("h")
    rng = np.random.default_rng(14)
    counters = {"started": 1, "acked": 0}
    client.insert("h", {"id": [SPECIAL], "vector": [SPECIAL_VECTOR]})
    counters["acked"] = 1
    reader = Reader(stack.client(), "h", counters)
    reader.start()
    try:
        next_pk = 0
        for round_ in range(8):
            for _ in range(2):
                pks = np.arange(next_pk, next_pk + 150)
                next_pk += 150
                rows = vec_rows(pks, rng)
                counters["started"] += len(pks)
                client.insert("h", rows)
                counters["acked"] += len(pks)
            time.sleep(0.2)  # reads of growing data
            client.flush("h", timeout=30)
            time.sleep(0.3)  # reads while the flushed segments are handed over
            if round_ % 3 == 2:
                wait_compacted(client, client.compact("h"))
                time.sleep(0.3)  # reads while the compacted segments are handed over
        wait_served(stack, client, "h")
        time.sleep(0.3)
    finally:
        reader.stop_event.set()
        reader.join(60)
    assert not reader.failures, f"{len(reader.failures)} bad reads: {reader.failures[:5]}"
    assert reader.reads >= 10 and reader.exact >= 5, (reader.reads, reader.exact)
    print("handoff reads", reader.reads, "exact", reader.exact)
    assert count(client, "h") == counters["acked"]
    compacted = [s for s in flushed_segments(client, "h") if s.get("compacted_from")]
    assert compacted, "no compaction happened"


# -- 6. load and release -----------------------------------------------------------------------


def expect_error(code: ErrorCode, call: Callable[[], Any], *words: str) -> ElanusError:
    with pytest.raises(ElanusError) as exc:
        call()
    assert exc.value.code == code, exc.value
    for w in words:
        assert w in exc.value.message, exc.value.message
    return exc.value


def test_load_release_and_partition_loads(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client = stack.client()
    bare_collection(client, "l", DIM, metric_type="L2", num_shards=2)  # not loaded yet
    for p in ("p1", "p2"):
        client.create_partition("l", p)
    rng = np.random.default_rng(15)
    where: dict[int, str] = {}
    vectors: dict[int, np.ndarray] = {}
    for i, part in enumerate(["_default", "p1", "p2"]):
        pks = np.arange(i * 100, i * 100 + 100)
        rows = vec_rows(pks, rng)
        client.insert("l", rows, partition_name=part)
        where.update(dict.fromkeys(pks.tolist(), part))
        vectors.update(zip(pks.tolist(), rows["vector"], strict=True))
    client.flush("l", timeout=30)
    for i, part in enumerate(["_default", "p1", "p2"]):  # growing rows in each partition
        pks = np.arange(1000 + i * 10, 1000 + i * 10 + 10)
        rows = vec_rows(pks, rng)
        client.insert("l", rows, partition_name=part)
        where.update(dict.fromkeys(pks.tolist(), part))
        vectors.update(zip(pks.tolist(), rows["vector"], strict=True))

    q = [vectors[150]]
    state = client.get_load_state("l")
    assert state["state"] == "NotLoad" and state["progress"] == 0
    expect_error(ErrorCode.COLLECTION_NOT_LOADED, lambda: client.search("l", q), "load")
    expect_error(ErrorCode.COLLECTION_NOT_LOADED, lambda: client.query("l", "id >= 0"), "load")

    loaded = client.load_collection("l")
    assert loaded["state"] == "Loaded" and loaded["progress"] == 100
    state = client.get_load_state("l")
    assert state["state"] == "Loaded" and state["progress"] == 100
    assert state["loaded_rows"] == state["persisted_rows"] == 300
    assert count(client, "l") == 330
    (hits,) = client.search("l", q, limit=1, consistency_level=STRONG)
    assert hits[0]["id"] == 150
    assert client.load_collection("l")["state"] == "Loaded"  # loading again is a no-op

    client.release_collection("l")
    assert client.get_load_state("l")["state"] == "NotLoad"
    expect_error(ErrorCode.COLLECTION_NOT_LOADED, lambda: client.search("l", q), "load")
    expect_error(ErrorCode.COLLECTION_NOT_LOADED, lambda: client.query("l", "id >= 0"), "load")
    assert all(not qn.delegators and not qn.worker.segments for qn in stack.querynodes)

    loaded = client.load_collection("l", partition_names=["p1"])
    assert loaded["state"] == "Loaded" and loaded["progress"] == 100
    state = client.get_load_state("l")
    assert state["loaded_rows"] == 100 and state["persisted_rows"] == 300
    p1 = sorted(p for p, part in where.items() if part == "p1")
    assert all_ids(client, "l") == p1
    assert count(client, "l") == len(p1)
    for p in (50, 150, 250, 1005, 1015, 1025):
        (hits,) = client.search("l", [vectors[p]], limit=5, consistency_level=STRONG)
        assert {where[h["id"]] for h in hits} == {"p1"}
        assert (hits[0]["id"] == p) == (where[p] == "p1")

    client.release_collection("l")
    client.load_collection("l")  # the whole collection again
    assert count(client, "l") == 330
    assert all_ids(client, "l") == sorted(where)


def test_searching_a_partition_that_is_not_loaded(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client = stack.client()
    bare_collection(client, "l", DIM, metric_type="L2")  # only p1 gets loaded
    client.create_partition("l", "p1")
    client.create_partition("l", "p2")
    rng = np.random.default_rng(16)
    client.insert("l", vec_rows(np.arange(10), rng), partition_name="p1")
    client.insert("l", vec_rows(np.arange(10, 20), rng), partition_name="p2")
    client.load_collection("l", partition_names=["p1"])
    # Milvus answers "partition not loaded"; an empty answer would silently hide p2's rows.
    expect_error(
        ErrorCode.COLLECTION_NOT_LOADED,
        lambda: client.query("l", "id >= 0", partition_names=["p2"], consistency_level=STRONG),
        "p2",
        "not loaded",
    )


def test_rows_of_a_dropped_partition_are_never_returned(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack()
    client = stack.client()
    client.create_collection("dp", dimension=DIM, metric_type="L2")
    client.create_partition("dp", "p")
    rng = np.random.default_rng(20)
    client.insert("dp", vec_rows(np.arange(10), rng))
    client.insert("dp", vec_rows(np.arange(10, 20), rng), partition_name="p")
    client.flush("dp", timeout=30)
    client.insert("dp", vec_rows(np.arange(20, 25), rng), partition_name="p")  # growing
    client.load_collection("dp")
    assert count(client, "dp") == 25
    try:
        client.drop_partition("dp", "p")
    except ElanusError as exc:  # refusing (Milvus: release it first) is fine too
        assert exc.code == ErrorCode.INVALID_ARGUMENT and "p" in exc.message
        assert count(client, "dp") == 25
        return
    assert all_ids(client, "dp") == list(range(10))
    client.release_collection("dp")
    client.load_collection("dp")
    assert all_ids(client, "dp") == list(range(10))


# -- 7. a query node as its own OS process -----------------------------------------------------


@pytest.mark.chaos
def test_querynode_process_killed_and_replaced(
    nats_server: EmbeddedNats,
    loop_thread: LoopThread,
    tmp_path: Path,
    elanus_processes: Callable[[ElanusProcess], ElanusProcess],
) -> None:
    data_dir = tmp_path / "data"
    stack = Stack(loop_thread, nats_server, data_dir, compaction_interval_s=0)
    env = stack.role_env(ELANUS_SESSION_TTL_S="2", ELANUS_TIMETICK_INTERVAL_MS="50")

    def spawn(n: int) -> ElanusProcess:
        args = ["run", "querynode", "--nats", nats_server.url, "--data-dir", str(data_dir)]
        proc = ElanusProcess(*args, log_path=tmp_path / f"querynode-{n}.log", env=env)
        return elanus_processes(proc).start()

    try:  # coord, datanode and proxy in this process; the query node outside
        stack.coord = Coordinator(stack.settings, stack.bus)
        stack.call(stack.coord.start())
        stack.add_datanode()
        stack.add_proxy()
        first = spawn(0)
        wait_for(
            lambda: first.check_alive() or stack.coord.sessions.of_role("querynode"),  # type: ignore[union-attr]
            what="the query node process's session",
        )
        client = stack.client()
        client.create_collection("k", dimension=DIM, metric_type="L2", num_shards=2)
        rng = np.random.default_rng(17)
        vectors: dict[int, np.ndarray] = {}
        for lo, hi, flush in ((0, 300, True), (300, 400, True), (400, 450, False)):
            rows = vec_rows(np.arange(lo, hi), rng)
            client.insert("k", rows)
            vectors.update(zip(range(lo, hi), rows["vector"], strict=True))
            if flush:
                client.flush("k", timeout=30)
        client.delete("k", [5, 305])  # sealed rows, deleted before the load
        client.load_collection("k")
        client.delete("k", [6, 306, 410])  # sealed and growing rows, deleted after it
        alive = sorted(set(vectors) - {5, 305, 6, 306, 410})
        Q = np.stack([vectors[p] for p in (1, 5, 6, 301, 306, 420)]) + np.float32(0.01)

        def answers() -> tuple[Any, ...]:
            res = client.search("k", Q, limit=10, consistency_level=STRONG, output_fields=["id"])
            return (
                [[(h["id"], round(h["distance"], 4)) for h in hits] for hits in res],
                all_ids(client, "k"),
                count(client, "k"),
            )

        before = answers()
        assert before[1] == alive and before[2] == len(alive)
        for p, hits in zip((1, 5, 6, 301, 306, 420), before[0], strict=True):
            assert (hits[0][0] == p) == (p in alive)

        time.sleep(1.5)  # the datanode checkpoints the channel past the deletes
        first.send(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        # While no query node runs: a flush (its handoff fails) of rows far from the queries.
        far = {"id": np.arange(500, 520), "vector": rng.random((20, DIM), np.float32) + 100}
        client.insert("k", far)
        client.flush("k", timeout=30)
        alive += list(range(500, 520))
        before = (before[0], alive, len(alive))
        second = spawn(1)

        def same_again() -> bool:
            second.check_alive()
            try:
                return answers() == before
            except ElanusError:
                return False  # not placed again yet

        wait_for(same_again, timeout=60, what="the same answers from the new query node")
        rows = vec_rows(np.arange(1000, 1010), rng)  # and it follows new writes
        client.insert("k", rows)
        got = client.get("k", list(range(1000, 1010)), consistency_level=STRONG)
        assert [r["id"] for r in got] == list(range(1000, 1010))
        assert count(client, "k") == len(alive) + 10
    finally:
        stack.close()


# -- other key and vector types ----------------------------------------------------------------


def varchar_collection(stack: Stack) -> tuple[Client, dict[str, np.ndarray]]:
    client = stack.client()
    client.create_collection(
        "v", dimension=DIM, id_type="varchar", max_length=16, metric_type="L2", num_shards=2
    )
    client.load_collection("v")
    rng = np.random.default_rng(18)
    keys = [f"k{i:03d}" for i in rng.permutation(120)]
    vectors = rng.standard_normal((120, DIM)).astype(np.float32)
    client.insert("v", {"id": keys[:80], "vector": vectors[:80]})
    client.flush("v", timeout=30)
    client.insert("v", {"id": keys[80:], "vector": vectors[80:]})
    return client, dict(zip(keys, vectors, strict=True))


def test_varchar_primary_keys(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client, vectors = varchar_collection(stack)
    keys = np.array(sorted(vectors), dtype=object)
    X = np.stack([vectors[k] for k in keys])
    Q = _queries(Data("x", "vector"), 3, 500)
    res = client.search("v", Q, limit=10, consistency_level=STRONG)
    for i, (hits, q) in enumerate(zip(res, Q, strict=True)):
        check_hits(hits, keys, brute_force("L2", X, q), "L2", 10, what=f"varchar q{i}")
    assert all_ids(client, "v", 'id != ""') == sorted(vectors)  # ordered by the string key
    got = client.get("v", ["k100", "nope", "k005"], ["id", "vector"], consistency_level=STRONG)
    assert [r["id"] for r in got] == ["k005", "k100"]
    assert np.allclose(got[0]["vector"], vectors["k005"])
    assert np.allclose(got[1]["vector"], vectors["k100"])
    client.delete("v", ["k005", "k100"])
    assert client.get("v", ["k005", "k100"], consistency_level=STRONG) == []
    (hits,) = client.search("v", [vectors["k005"]], limit=3, consistency_level=STRONG)
    assert "k005" not in [h["id"] for h in hits]
    assert count(client, "v", 'id like "k0%"') == 99


def test_varchar_primary_keys_with_fewer_hits_than_limit(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack()
    client, vectors = varchar_collection(stack)
    (hits,) = client.search(
        "v", [vectors["k007"]], limit=10, filter='id in ["k007", "k008"]', consistency_level=STRONG
    )
    assert [h["id"] for h in hits][:1] == ["k007"] and len(hits) == 2


def test_sparse_vectors_search_equals_brute_force(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    client = stack.client()
    schema = (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    )
    client.create_collection("sp", schema=schema, properties={"metric_type": "IP"})
    client.load_collection("sp")
    rng = np.random.default_rng(19)
    dense = np.where(rng.random((200, 40)) < 0.15, rng.random((200, 40)), 0).astype(np.float32)

    def sparse(row: np.ndarray) -> dict[int, float]:
        return {int(i): float(row[i]) for i in np.flatnonzero(row)}

    rows = [{"id": i, "sp": sparse(dense[i])} for i in range(200)]
    client.insert("sp", rows[:120])
    client.flush("sp", timeout=30)
    client.insert("sp", rows[120:])
    client.delete("sp", [4, 150])
    keep = np.array([i not in (4, 150) for i in range(200)])
    Q = np.where(rng.random((3, 40)) < 0.3, rng.random((3, 40)), 0).astype(np.float32)
    res = client.search("sp", [sparse(q) for q in Q], limit=8, consistency_level=STRONG)
    for i, (hits, q) in enumerate(zip(res, Q, strict=True)):
        scores = dense[keep] @ q
        ok = scores > 0  # rows sharing no dimension with the query are no hits
        pks = np.arange(200)[keep][ok]
        check_hits(hits, pks, scores[ok], "IP", 8, what=f"sparse q{i}")
