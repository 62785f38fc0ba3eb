"""In-memory replicas (``meta/replicas.py``): ``replica_number`` copies of a collection,
each on query nodes of its own; reads spread over them, a read whose replica's node is
gone is sent to the next replica at once (counted), and the lost replica is placed again
when a query node is free."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pymilvus
import pytest
from conftest import (
    Stack,
    bare_collection,
    both_transports,
    cli,
    cli_json,
    raises_code,
    run_elanus,
    wait_for,
)
from milvus_stack import milvus_stack
from test_cli_read import one_line_error
from test_read_path import wait_querynodes

from elanus.channels.runtime.metrics import PROXY_FAILOVERS
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.segments.querynode.node import QueryNode

DIM = 8
STRONG = "Strong"
ROWS = 300


def _filled(stack: Stack, nodes: int) -> tuple[Client, np.ndarray]:
    """``nodes`` query nodes and a two-shard collection, not loaded: flushed rows and
    growing ones."""
    while len(stack.querynodes) < nodes:
        stack.add_querynode()
    wait_querynodes(stack, nodes)
    client = stack.client()
    bare_collection(client, "r", DIM, metric_type="L2", num_shards=2)
    rng = np.random.default_rng(3)
    vectors = rng.random((ROWS, DIM), dtype=np.float32)
    half = ROWS // 2
    client.insert("r", {"id": np.arange(half), "vector": vectors[:half]})
    client.flush("r", timeout=30)
    client.insert("r", {"id": np.arange(half, ROWS), "vector": vectors[half:]})
    return client, vectors


def _answers(client: Client, vectors: np.ndarray) -> list[Any]:
    """Searches, a query and a count, all strong."""
    hits = client.search("r", vectors[:5], limit=7, consistency_level=STRONG)
    rows = client.query("r", "id % 7 == 1", ["id"], consistency_level=STRONG)
    counted = client.query("r", "", ["count(*)"], consistency_level=STRONG)
    return [
        [[(h["id"], round(h["distance"], 4)) for h in q] for q in hits],
        sorted(r["id"] for r in rows),
        counted,
    ]


def _failovers() -> float:
    return sum(
        s.value for m in PROXY_FAILOVERS.collect() for s in m.samples if s.name.endswith("_total")
    )


def _crash(stack: Stack, node: QueryNode) -> None:
    """The node stops answering at once, as a frozen or cut-off process; its session
    lives on until it is stopped, so the coord still believes in it."""
    for served in node._served:
        stack.call(served.unsubscribe())


def test_two_replicas_on_two_nodes_answer_as_one(stack: Stack) -> None:
    client, vectors = _filled(stack, 2)
    client.load_collection("r")
    (one,) = client.describe_replica("r")
    assert one["serving"] and len(one["shard_leaders"]) == 2
    expected = _answers(client, vectors)
    assert expected[2] == [{"count(*)": ROWS}]

    loaded = client.load_collection("r", replica_number=2)
    assert loaded["state"] == "Loaded" and loaded["progress"] == 100
    replicas = client.describe_replica("r")
    assert len(replicas) == 2 and all(r["serving"] for r in replicas)
    assert len({r["replica_id"] for r in replicas}) == 2
    nodes = [set(r["node_ids"]) for r in replicas]
    assert nodes[0].isdisjoint(nodes[1])
    assert nodes[0] | nodes[1] == {qn.node_id for qn in stack.querynodes}
    vchannels = set(client.describe_collection("r")["vchannels"])
    for r in replicas:
        assert set(r["shard_leaders"]) == vchannels
        assert set(r["shard_leaders"].values()) <= set(r["node_ids"])
    flushed = {s["segment_id"] for s in client.get_segment_info("r") if s["state"] == "Flushed"}
    for qn in stack.querynodes:  # each node holds a whole copy
        assert set(qn.delegators) == vchannels
        assert set(qn.worker.segments) == flushed
    for _ in range(4):  # round robin: each replica answers twice
        assert _answers(client, vectors) == expected

    for _ in range(2):  # a read plan's tickets read the replica its plan came from
        plan = client.read_plan("r", columns=["id"])
        ids = [
            i
            for e in plan["endpoints"]
            for b in client.read_endpoint(e["ticket"])
            for i in b.column("id").to_pylist()
        ]
        assert sorted(ids) == list(range(ROWS))

    client.load_collection("r", replica_number=2)  # the same load again: a no-op
    assert {r["replica_id"] for r in client.describe_replica("r")} == {
        r["replica_id"] for r in replicas
    }


@both_transports
def test_a_lost_node_fails_over_and_its_replica_is_placed_again(stack: Stack) -> None:
    client, vectors = _filled(stack, 2)
    client.load_collection("r", replica_number=2)
    expected = _answers(client, vectors)
    before = _failovers()
    victim = stack.querynodes[1]
    _crash(stack, victim)
    for _ in range(6):  # no caller sees an error; half of them met the dead replica
        assert _answers(client, vectors) == expected
    assert _failovers() > before

    stack.call(victim.stop())  # its session ends: the coord learns the node is gone
    stack.querynodes.remove(victim)

    def lost() -> list[dict[str, Any]] | None:
        got = client.describe_replica("r")
        return got if sorted(r["serving"] for r in got) == [False, True] else None

    assert victim.node_id in {n for r in wait_for(lost, what="lost replica") for n in r["node_ids"]}
    assert client.get_load_state("r")["state"] == "Loaded"  # the other copy serves
    assert _answers(client, vectors) == expected

    fresh = stack.add_querynode()  # a free node: the lost replica is placed on it

    def placed() -> list[dict[str, Any]] | None:
        got = client.describe_replica("r")
        return got if all(r["serving"] for r in got) else None

    nodes = {n for r in wait_for(placed, what="replica placed again") for n in r["node_ids"]}
    assert nodes == {stack.querynodes[0].node_id, fresh.node_id}
    assert set(fresh.delegators) == set(client.describe_collection("r")["vchannels"])
    for _ in range(4):
        assert _answers(client, vectors) == expected


def test_without_replicas_a_lost_nodes_share_is_placed_again_within_2_s(stack: Stack) -> None:
    """Issue 22's bound: channels and segments of a query node whose session ended serve
    again from the other nodes within 2 s (one replica: nothing to fail over to)."""
    client, vectors = _filled(stack, 2)
    client.load_collection("r")
    expected = _answers(client, vectors)
    victim = next(n for n in stack.querynodes if n.delegators)
    _crash(stack, victim)
    stack.call(victim.stop())  # its session ends now
    ended = time.monotonic()
    stack.querynodes.remove(victim)

    def answered() -> bool:
        try:
            return _answers(client, vectors) == expected
        except ElanusError:
            return False

    wait_for(answered, what="answers from the other node")
    took = time.monotonic() - ended
    assert took < 2.0, f"served again {took:.2f} s after the session ended"


def test_more_replicas_than_query_nodes_is_refused_and_loads_nothing(stack: Stack) -> None:
    client, _ = _filled(stack, 2)
    message = raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.load_collection("r", replica_number=3),
        "3 replicas",
        "only 2 query nodes",
    )
    assert "'r'" in message or "r" in message
    assert client.get_load_state("r")["state"] == "NotLoad"
    assert all(not qn.delegators and not qn.worker.segments for qn in stack.querynodes)
    raises_code(ErrorCode.COLLECTION_NOT_LOADED, lambda: client.describe_replica("r"), "load")
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.load_collection("r", replica_number=0),
        "replica_number",
    )


@pytest.mark.parametrize("partitioned", [False, True])
def test_load_partitions_takes_a_replica_number(stack: Stack, partitioned: bool) -> None:
    client, vectors = _filled(stack, 2)
    if partitioned:
        client.load_partitions("r", ["_default"], replica_number=2)
    else:
        client.load_collection("r", replica_number=2)
    assert len(client.describe_replica("r")) == 2
    assert _answers(client, vectors)[2] == [{"count(*)": ROWS}]
    client.load_collection("r")  # back to one copy: the delegators it does not use go
    (only,) = client.describe_replica("r")

    def let_go() -> bool:
        return all(
            set(qn.delegators) == {v for v, n in only["shard_leaders"].items() if n == qn.node_id}
            for qn in stack.querynodes
        )

    wait_for(let_go, what="the second copy let go")
    assert _answers(client, vectors)[2] == [{"count(*)": ROWS}]


def test_a_node_that_joins_takes_segments_without_a_gap(stack: Stack) -> None:
    client, vectors = _filled(stack, 1)
    client.flush("r", timeout=30)  # two flushes of two shards: four sealed segments
    client.load_collection("r")
    (old,) = stack.querynodes
    assert len(old.worker.segments) == 4
    expected = _answers(client, vectors)
    fresh = stack.add_querynode()
    deadline = time.monotonic() + 30
    while len(fresh.worker.segments) < 2:  # reads all along: no error, no row missing
        assert time.monotonic() < deadline, "the new node took no segments"
        assert _answers(client, vectors) == expected
    wait_for(lambda: len(old.worker.segments) == 2, what="the moved segments released")
    assert set(old.worker.segments).isdisjoint(fresh.worker.segments)
    (only,) = client.describe_replica("r")
    assert set(only["node_ids"]) == {old.node_id, fresh.node_id}
    assert _answers(client, vectors) == expected


def test_replicas_outlive_a_coord_restart(stack: Stack) -> None:
    """The replicas (ids, nodes) are kept in DuckDB: a restarted coord places each again;
    with one query node left only one copy serves until a second node comes."""
    client, vectors = _filled(stack, 2)
    client.load_collection("r", replica_number=2)
    expected = _answers(client, vectors)
    ids = {r["replica_id"] for r in client.describe_replica("r")}
    stack.restart()  # the coord, the proxy and the nodes anew: one query node
    client = stack.client()

    def serving(n: int) -> list[dict[str, Any]] | None:
        got = client.describe_replica("r")
        return got if sum(r["serving"] for r in got) == n else None

    assert {r["replica_id"] for r in wait_for(lambda: serving(1), what="one copy")} == ids
    assert _answers(client, vectors) == expected
    stack.add_querynode()
    wait_for(lambda: serving(2), what="both copies")
    assert _answers(client, vectors) == expected


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    yield from milvus_stack(request, tmp_path)


def test_pymilvus_loads_replicas_and_describes_them(mstack: Any) -> None:
    mstack.add_querynode()
    wait_querynodes(mstack, 2)
    client = pymilvus.MilvusClient(uri=mstack.milvus_uri, timeout=60)
    try:
        client.create_collection("m", dimension=DIM, num_shards=2)  # loaded: one copy
        client.release_collection("m")
        client.load_collection("m", replica_number=2)
        replicas = client.describe_replica("m")
        assert len(replicas) == 2
        assert {len(r.shards) for r in replicas} == {2}
        nodes = [set(r.group_nodes) for r in replicas]
        assert nodes[0].isdisjoint(nodes[1]) and all(len(n) == 1 for n in nodes)
        for r in replicas:
            assert all(s.shard_leader in r.group_nodes for s in r.shards)
        with pytest.raises(pymilvus.MilvusException, match="only 2 query nodes"):
            client.load_collection("m", replica_number=3)
        assert len(client.describe_replica("m")) == 2  # the refused load changed nothing
    finally:
        client.close()


@pytest.mark.slow
def test_cli_load_takes_replicas(server: Any, tmp_path: Path) -> None:
    """``elanus load --replicas``: one query node holds one copy; two are refused, clearly."""
    cli(server, "collection", "create", "cr", "--dim", str(DIM))  # quick setup: loaded
    cli(server, "release", "cr")
    refused = run_elanus("load", "cr", "--replicas", "2", "--uri", server.uri)
    line = one_line_error(refused, "INVALID_ARGUMENT")
    assert "2 replicas" in line and "only 1 query node is running" in line
    state = cli_json(server, "load", "cr", "--replicas", "1")
    assert state["state"] == "Loaded"
    status = cli(server, "status")  # where the replica is: its query node, its shard leaders
    assert "replica(s) of the loaded collections" in status
    (node,) = [s["node_id"] for s in cli_json(server, "status") if s["role"] == "querynode"]
    row = next(line for line in status.splitlines() if " cr " in line)
    assert node in row and "yes" in row
