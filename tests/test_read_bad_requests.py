"""Bad reads get a clear error — a stable code and a message naming the problem — and change
nothing (DESIGN.md, non-negotiables): bad filter expressions, output fields, query vectors,
limits, metrics, range parameters, search parameters, collections, partitions, read options.

Every case runs against one real stack; before and after each, a snapshot of what the
cluster holds (collections, load states, row counts) must be the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Stack, bare_collection, own_stack

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.flight.metacache import CollectionInfo
from elanus.flight.search.service import in_shard_words
from elanus.meta.coord import Coordinator
from elanus.schema import quick_schema

DIM = 8
STRONG = "Strong"
Q = [[0.1] * DIM]
BQ = [[1] * 8]  # one 64-bit binary query
COLLECTIONS = ("strict", "multi", "bin", "sparse", "unloaded")


@dataclass
class Env:
    stack: Stack
    client: Client


def _wait_for(pred: Callable[[], Any], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with own_stack(tmp_path_factory.mktemp("bad"), "bad-requests-loop") as stack:
        _wait_for(
            lambda: stack.coord.sessions.of_role("querynode"),  # type: ignore[union-attr]
            what="the query node session",
        )
        client = stack.client()
        rng = np.random.default_rng(0)
        strict = (
            Schema(enable_dynamic_field=False)
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("tag", DataType.INT32)
            .add_field("name", DataType.VARCHAR, max_length=20)
            .add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        )
        client.create_collection("strict", schema=strict, properties={"metric_type": "L2"})
        client.insert(
            "strict",
            {
                "id": np.arange(20),
                "tag": np.arange(20, dtype=np.int32),
                "name": [f"n{i}" for i in range(20)],
                "vector": rng.random((20, DIM), dtype=np.float32),
            },
        )
        client.flush("strict", timeout=30)
        client.insert(
            "strict",
            {
                "id": np.arange(20, 30),
                "tag": np.arange(20, 30, dtype=np.int32),
                "name": [f"n{i}" for i in range(20, 30)],
                "vector": rng.random((10, DIM), dtype=np.float32),
            },
        )
        multi = (
            Schema()
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
            .add_field("b", DataType.BINARY_VECTOR, dim=64)
        )
        client.create_collection("multi", schema=multi)
        client.insert(
            "multi",
            {
                "id": np.arange(10),
                "v": rng.random((10, DIM), dtype=np.float32),
                "b": rng.integers(0, 256, (10, 8), dtype=np.uint8),
            },
        )
        binary = (
            Schema()
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("b", DataType.BINARY_VECTOR, dim=64)
        )
        client.create_collection("bin", schema=binary)
        client.insert(
            "bin", {"id": np.arange(10), "b": rng.integers(0, 256, (10, 8), dtype=np.uint8)}
        )
        sparse = (
            Schema()
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
        )
        client.create_collection("sparse", schema=sparse, properties={"metric_type": "IP"})
        client.insert("sparse", [{"id": i, "sp": {i: 1.0, 50: 0.5}} for i in range(10)])
        bare_collection(client, "unloaded", DIM)
        client.insert("unloaded", {"id": np.arange(5), "vector": rng.random((5, DIM), "f4")})
        for name in COLLECTIONS[:-1]:
            client.load_collection(name)
        yield Env(stack, client)


def snapshot(c: Client) -> dict[str, Any]:
    """What the cluster holds: collections, partitions, load states and row counts."""
    out: dict[str, Any] = {"collections": sorted(c.list_collections())}
    for name in COLLECTIONS:
        state = c.get_load_state(name)
        out[name] = {
            "state": state["state"],
            "partitions": sorted(c.list_partitions(name)),
            "loaded_rows": state["loaded_rows"],
        }
        if state["state"] == "Loaded":
            (row,) = c.query(name, "id >= 0", ["count(*)"], consistency_level=STRONG)
            out[name]["count"] = row["count(*)"]
    return out


@dataclass
class Case:
    name: str
    call: Callable[[Client], Any]
    code: ErrorCode
    words: tuple[str, ...]

    def __str__(self) -> str:
        return self.name


def q(filter: str, **kw: Any) -> Callable[[Client], Any]:
    return lambda c: c.query("strict", filter, ["id"], consistency_level=STRONG, **kw)


def s(collection: str = "strict", data: Any = None, **kw: Any) -> Callable[[Client], Any]:
    kw.setdefault("consistency_level", STRONG)
    return lambda c: c.search(collection, Q if data is None else data, **kw)


def action(name: str, **body: Any) -> Callable[[Client], Any]:
    """A raw DoAction, for bodies the SDK would not build."""
    return lambda c: c._action(name, body)


BAD = ErrorCode.BAD_EXPRESSION
INV = ErrorCode.INVALID_ARGUMENT

CASES = [
    # filter expressions
    Case("unknown field in query filter", q("nope > 1"), BAD, ("nope",)),
    Case("unknown field in search filter", s(filter="nope > 1"), BAD, ("nope",)),
    Case("type clash int vs string", q("tag == 'abc'"), BAD, ("tag", "abc")),
    Case("type clash varchar vs number", q("name > 3"), BAD, ("name",)),
    Case("unbalanced parenthesis", q("(id > 1 and tag < 3"), BAD, ("')'",)),
    Case("stray closing parenthesis", q("id > 1)"), BAD, ("')'",)),
    Case("like with a number", q("name like 3"), BAD, ("like",)),
    Case("like on an integer field", q("tag like 'a%'"), BAD, ("like", "tag")),
    Case("unknown function", q("foo(tag) > 1"), BAD, ("foo",)),
    Case("unknown template parameter", q("tag > {x}", filter_params={"y": 1}), BAD, ("{x}",)),
    Case("filter that is not boolean", q("id + 1"), BAD, ("boolean",)),
    Case("division by zero", q("tag / 0 > 1"), BAD, ("zero",)),
    Case("integer literal out of range", q("tag > 99999999999999999999999"), BAD, ("range",)),
    Case("garbage operator", q("id >>> 3"), BAD, ("'>'",)),
    # output fields
    Case(
        "unknown output field in query",
        lambda c: c.query("strict", "id > 1", ["nope"]),
        INV,
        ("nope",),
    ),
    Case("unknown output field in search", s(output_fields=["nope"]), INV, ("nope",)),
    Case("count(*) in search", s(output_fields=["count(*)"]), INV, ("count(*)",)),
    # query vectors
    Case("dimension mismatch", s(data=[[0.1] * (DIM - 1)]), INV, ("dim", "8", "7")),
    Case("ragged query vectors", s(data=[[0.1] * DIM, [0.1] * 3]), INV, ("data",)),
    Case("NaN in a query vector", s(data=[[float("nan")] + [0.1] * 7]), INV, ("NaN",)),
    Case("infinity in a query vector", s(data=[[float("inf")] + [0.1] * 7]), INV, ("infinity",)),
    Case("strings as a query vector", s(data=[["a"] * DIM]), INV, ("data",)),
    Case("empty data", s(data=[]), INV, ("data",)),
    Case("scalars as data", action("search", collection="strict", data=[1, 2, 3]), INV, ("dim",)),
    Case(
        "data that is not a list", action("search", collection="strict", data="x"), INV, ("data",)
    ),
    Case(
        "too many query vectors",
        action("search", collection="strict", data=[[0.1] * DIM] * 16385),
        INV,
        ("16384",),
    ),
    Case("binary query of the wrong width", s("bin", data=[[1] * 7]), INV, ("8 bytes",)),
    # limit and offset
    Case("limit 0 (k=0)", s(limit=0), INV, ("limit",)),
    Case("negative limit", s(limit=-1), INV, ("limit",)),
    Case("limit over 16384", s(limit=16385), INV, ("limit", "16384")),
    Case("limit + offset over 16384", s(limit=16000, offset=1000), INV, ("limit + offset",)),
    Case("negative offset", s(offset=-1), INV, ("offset",)),
    Case("query limit 0", q("id > 1", limit=0), INV, ("limit",)),
    Case("query negative offset", q("id > 1", offset=-1), INV, ("offset",)),
    # vector fields and metrics
    Case("anns_field not a vector", s("multi", anns_field="id"), INV, ("anns_field", "id")),
    Case("anns_field unknown", s("multi", anns_field="zzz"), INV, ("zzz",)),
    Case("several vector fields, no anns_field", s("multi"), INV, ("anns_field", "v", "b")),
    Case("unknown metric", s(search_params={"metric_type": "EUCLID"}), INV, ("EUCLID",)),
    Case(
        "HAMMING on a float field", s(search_params={"metric_type": "HAMMING"}), INV, ("HAMMING",)
    ),
    Case(
        "JACCARD on a float field", s(search_params={"metric_type": "JACCARD"}), INV, ("JACCARD",)
    ),
    Case(
        "L2 on a binary field", s("bin", data=BQ, search_params={"metric_type": "L2"}), INV, ("L2",)
    ),
    Case(
        "IP on a binary field", s("bin", data=BQ, search_params={"metric_type": "IP"}), INV, ("IP",)
    ),
    Case(
        "COSINE on a sparse field",
        s("sparse", data=[{1: 1.0}], search_params={"metric_type": "COSINE"}),
        INV,
        ("COSINE",),
    ),
    # range search and search parameters
    Case(
        "range_filter above radius for L2",
        s(search_params={"metric_type": "L2", "radius": 1.0, "range_filter": 2.0}),
        INV,
        ("range_filter", "radius"),
    ),
    Case(
        "range_filter below radius for IP",
        s(  # an IP collection: the L2 one refuses IP itself (metric type not match)
            "sparse",
            data=[{1: 1.0}],
            search_params={"metric_type": "IP", "radius": 2.0, "range_filter": 1.0},
        ),
        INV,
        ("range_filter", "radius"),
    ),
    Case("unknown search_params key", s(search_params={"nprobe": 3}), INV, ("nprobe",)),
    Case(
        "unknown request key", action("search", collection="strict", data=Q, topk=3), INV, ("topk",)
    ),
    Case(
        "filter_params not an object",
        action("search", collection="strict", data=Q, filter_params=[1]),
        INV,
        ("filter_params",),
    ),
    # collections and partitions
    Case(
        "search an unloaded collection", s("unloaded"), ErrorCode.COLLECTION_NOT_LOADED, ("load",)
    ),
    Case(
        "query an unloaded collection",
        lambda c: c.query("unloaded", "id >= 0"),
        ErrorCode.COLLECTION_NOT_LOADED,
        ("load",),
    ),
    Case("unknown collection", s("nope"), ErrorCode.COLLECTION_NOT_FOUND, ("nope",)),
    Case(
        "unknown partition in search",
        s(partition_names=["nope"]),
        ErrorCode.PARTITION_NOT_FOUND,
        ("nope",),
    ),
    Case(
        "unknown partition in query",
        q("id >= 0", partition_names=["nope"]),
        ErrorCode.PARTITION_NOT_FOUND,
        ("nope",),
    ),
    Case("bad partition name", s(partition_names=["bad name!"]), INV, ("bad name!",)),
    Case(
        "load an unknown partition",
        lambda c: c.load_collection("unloaded", partition_names=["nope"]),
        ErrorCode.PARTITION_NOT_FOUND,
        ("nope",),
    ),
    Case(
        "load an unknown collection",
        lambda c: c.load_collection("nope"),
        ErrorCode.COLLECTION_NOT_FOUND,
        ("nope",),
    ),
    Case(
        "release an unknown collection",
        lambda c: c.release_collection("nope"),
        ErrorCode.COLLECTION_NOT_FOUND,
        ("nope",),
    ),
    # query shape
    Case(
        "query with neither filter nor ids",
        action("query", collection="strict"),
        INV,
        ("filter", "ids"),
    ),
    Case(
        "query with both filter and ids",
        action("query", collection="strict", filter="id > 1", ids=[1]),
        INV,
        ("not both",),
    ),
    Case("ids of the wrong type", lambda c: c.get("strict", ["a"]), BAD, ("id",)),
    # read options
    Case(
        "bad consistency level",
        action("search", collection="strict", data=Q, consistency_level="Weird"),
        INV,
        ("Weird",),
    ),
    Case("as_of older than the retention", s(as_of=1), INV, ("as_of", "retention")),
    Case(
        "negative guarantee_timestamp",
        action("search", collection="strict", data=Q, guarantee_timestamp=-1),
        INV,
        ("guarantee_timestamp",),
    ),
    Case(
        "negative as_of",
        action("query", collection="strict", filter="id > 1", as_of=-5),
        INV,
        ("as_of",),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_read_request(env: Env, case: Case) -> None:
    before = snapshot(env.client)
    with pytest.raises(ElanusError) as exc:
        case.call(env.client)
    err = exc.value
    assert err.code == case.code, f"{case.name}: [{err.code}] {err.message}"
    for w in case.words:
        assert w in err.message, f"{case.name}: {w!r} not in {err.message!r}"
    assert snapshot(env.client) == before, f"{case.name} changed something"


def test_the_stack_still_answers_after_the_bad_requests(env: Env) -> None:
    (hits,) = env.client.search("strict", Q, limit=3, consistency_level=STRONG)
    assert len(hits) == 3
    assert env.client.get_load_state("unloaded")["state"] == "NotLoad"


# -- cases that were INTERNAL errors or silently accepted until b3cedd8 -----------------------

FORMER_BUGS = [
    pytest.param(
        Case("binary query byte over 255", s("bin", data=[[256] * 8]), INV, ("byte",)),
        id="binary query byte over 255",
    ),
    pytest.param(
        Case("binary query negative byte", s("bin", data=[[-1] * 8]), INV, ("byte",)),
        id="binary query negative byte",
    ),
    pytest.param(
        Case("binary query of floats", s("bin", data=[[0.5] * 8]), INV, ("byte",)),
        id="binary query of floats",
    ),
    pytest.param(
        Case(
            "radius that is not a number",
            s(search_params={"metric_type": "L2", "radius": "x"}),
            INV,
            ("radius",),
        ),
        id="radius not a number",
    ),
    pytest.param(
        Case(
            "range_filter that is not a number",
            s(search_params={"metric_type": "L2", "radius": 5.0, "range_filter": [1]}),
            INV,
            ("range_filter",),
        ),
        id="range_filter not a number",
    ),
    pytest.param(
        Case(
            "sparse query that is a dense list",
            s("sparse", data=[[1, 2, 3]]),
            INV,
            ("sparse",),
        ),
        id="sparse query dense list",
    ),
    pytest.param(
        Case("sparse query negative index", s("sparse", data=[{-1: 1.0}]), INV, ("index",)),
        id="sparse query negative index",
    ),
    pytest.param(
        Case("sparse query NaN value", s("sparse", data=[{1: float("nan")}]), INV, ("NaN",)),
        id="sparse query NaN",
    ),
]


@pytest.mark.parametrize("case", FORMER_BUGS)
def test_bad_read_request_former_bugs(env: Env, case: Case) -> None:
    test_bad_read_request(env, case)


def test_sdk_bad_consistency_level_is_an_elanus_error(env: Env) -> None:
    with pytest.raises(ElanusError) as exc:
        env.client.search("strict", Q, consistency_level="Weird")
    assert exc.value.code == INV and "Weird" in exc.value.message


def test_as_of_in_the_future_is_refused(env: Env) -> None:
    # Ten seconds ahead only (past the 3 s slack): were it taken, the server would keep
    # waiting after this client gave up, and an hour-long wait would hold up the shutdown.
    future = env.client.get_timestamp() + (10_000 << 18)
    impatient = Client(env.stack.uri, timeout=2)
    try:
        with pytest.raises(ElanusError) as exc:
            impatient.query("strict", "id >= 0", as_of=future)
        assert exc.value.code == INV, exc.value
        assert "as_of" in exc.value.message
    finally:
        impatient.close()


@pytest.mark.parametrize("level", ["Session", "Strong"])
def test_guarantee_timestamp_in_the_future_is_refused_at_once(env: Env, level: str) -> None:
    """A guarantee no TSO handed out yet would hold the read until it timed out (30 s);
    it is refused at once, whatever the level (issue 33)."""
    soon = env.client.get_timestamp() + (60_000 << 18)
    for guarantee in (soon, 2**64 - 1):
        for read in (
            lambda g: env.client.query("strict", "id >= 0", consistency_level=level,
                                       guarantee_timestamp=g),
            lambda g: env.client.search("strict", Q, consistency_level=level,
                                        guarantee_timestamp=g),
        ):  # fmt: skip
            started = time.monotonic()
            with pytest.raises(ElanusError) as exc:
                read(guarantee)
            assert time.monotonic() - started < 2
            assert exc.value.code == INV and "guarantee_timestamp" in exc.value.message


QUERY_NODE_WAIT_S = 0.5
"""How long the loads below wait for a query node that never comes (5 s in a server)."""


@pytest.mark.slow
def test_load_without_a_query_node_is_unavailable(
    nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
) -> None:
    stack = Stack(loop_thread, nats_server, tmp_path / "data", query_node_wait_s=QUERY_NODE_WAIT_S)
    try:  # a coord, a datanode and a proxy; no query node
        stack.coord = Coordinator(stack.settings, stack.bus)
        stack.call(stack.coord.start())
        stack.add_datanode()
        stack.add_proxy()
        client = stack.client()
        bare_collection(client, "c", DIM)  # loading is what is tested
        with pytest.raises(ElanusError) as exc:
            client.load_collection("c")
        assert exc.value.code == ErrorCode.UNAVAILABLE and "query node" in exc.value.message
        with pytest.raises(ElanusError) as exc:
            client.search("c", Q)
        assert exc.value.code == ErrorCode.COLLECTION_NOT_LOADED
    finally:
        stack.close()


@pytest.mark.slow
def test_failed_load_leaves_no_trace(
    nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
) -> None:
    stack = Stack(loop_thread, nats_server, tmp_path / "data", query_node_wait_s=QUERY_NODE_WAIT_S)
    try:
        stack.coord = Coordinator(stack.settings, stack.bus)
        stack.call(stack.coord.start())
        stack.add_proxy()
        client = stack.client()
        bare_collection(client, "c", DIM)  # loading is what is tested
        with pytest.raises(ElanusError):
            client.load_collection("c")
        assert client.get_load_state("c")["state"] == "NotLoad"
    finally:
        stack.close()


def test_a_query_node_error_names_the_shard_not_its_vchannel() -> None:
    """What a delegator says of its vchannel reaches the user as a shard of the collection
    (the vchannel id is internal); other errors pass unchanged."""
    info = CollectionInfo(
        db="default", name="books", collection_id=7, schema=quick_schema(4),
        partitions={"_default": 8}, vchannels=("elanus-dml_3_7v0", "elanus-dml_4_7v1"),
        pchannels=("elanus-dml_3", "elanus-dml_4"), consistency_level="Bounded",
        created_ts=1, described=None,  # type: ignore[arg-type]
    )  # fmt: skip
    told = in_shard_words(info, ElanusError(ErrorCode.TIMEOUT, "elanus-dml_4_7v1 did not reach"))
    assert (told.code, told.message) == (ErrorCode.TIMEOUT, "shard 1 of 'books' did not reach")
    other = ElanusError(ErrorCode.TIMEOUT, "something else")
    assert in_shard_words(info, other) is other
