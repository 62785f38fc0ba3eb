"""The Flight proxy's DDL API over the wire: bare Flight clients (no SDK), restarts, the meta
cache across proxies, serial DDL in timestamp order, and bad input that changes nothing."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.flight as flight
import pytest
from conftest import own_stack

from elanus import ElanusError, ErrorCode
from elanus.api.base import as_body
from elanus.api.rootcoord import (
    CollectionDescription,
    DescribeCollection,
    RootCoordAPI,
    TsoAlloc,
)
from elanus.channels.runtime.supervisor import Supervisor
from elanus.flight.actions import catalogue
from elanus.flight.ddqueue import DdQueue
from elanus.flight.metacache import MetaCache

if TYPE_CHECKING:
    from conftest import Stack

Body = dict[str, Any] | bytes


# -- bare Flight helpers (what a Java/Go/Rust client would do) ------------------------------
def call(fc: flight.FlightClient, action: str, body: Body | None = None) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    results = list(fc.do_action(flight.Action(action, data)))
    assert len(results) == 1
    reply = json.loads(results[0].body.to_pybytes())
    assert isinstance(reply, dict)
    return reply


def call_error(fc: flight.FlightClient, action: str, body: Body | None = None) -> tuple[str, str]:
    """The (code, message) of a failing call, checking both wire forms agree."""
    with pytest.raises(flight.FlightServerError) as err:
        call(fc, action, body)
    info = json.loads(err.value.extra_info)
    assert set(info) == {"code", "message"}
    assert str(err.value).startswith(f"[{info['code']}] {info['message']}")
    assert "Traceback" not in str(err.value)
    return info["code"], info["message"]


@pytest.fixture
def fc(stack: Stack) -> Any:
    client = flight.FlightClient(stack.uri)
    try:
        yield client
    finally:
        client.close()


def test_every_action_over_bare_flight(stack: Stack, fc: flight.FlightClient) -> None:
    listed = {a.type: a.description for a in fc.list_actions()}
    assert set(listed) == set(catalogue()) and all(listed.values())

    schema = {
        "fields": [
            {"name": "pk", "type": "VarChar", "is_primary": True, "max_length": 36},
            {"name": "vec", "type": "FloatVector", "dim": 3},
        ]
    }
    created = call(
        fc, "create_collection", {"name": "raw", "schema": schema, "consistency_level": "strong"}
    )
    assert created["consistency_level"] == "Strong"
    assert [f["name"] for f in created["schema"]["fields"]] == ["pk", "vec"]
    assert call(fc, "describe_collection", {"name": "raw"}) == created
    assert call(fc, "has_collection", {"name": "raw", "db": "default"}) == {"value": True}
    assert call(fc, "list_collections", {}) == {"names": ["raw"]}
    quick = call(fc, "create_collection", {"name": "q", "dimension": 2, "auto_id": True})
    assert quick["schema"]["fields"][0]["auto_id"] is True

    pid = call(fc, "create_partition", {"collection": "raw", "partition": "p"})["partition_id"]
    assert isinstance(pid, int)
    assert call(fc, "has_partition", {"collection": "raw", "partition": "p"}) == {"value": True}
    listed_parts = call(fc, "list_partitions", {"collection": "raw"})
    assert listed_parts["names"] == ["_default", "p"]
    assert listed_parts["partitions"][1]["partition_id"] == pid
    call(fc, "drop_partition", {"collection": "raw", "partition": "p"})
    assert call(fc, "has_partition", {"collection": "raw", "partition": "p"}) == {"value": False}

    call(fc, "create_database", {"name": "lab"})
    assert call(fc, "list_databases")["names"] == ["default", "lab"]
    call(fc, "rename_collection", {"name": "raw", "new_name": "moved", "new_db": "lab"})
    assert call(fc, "list_collections", {"db": "lab"}) == {"names": ["moved"]}
    assert (
        call(fc, "describe_collection", {"db": "lab", "name": "moved"})["collection_id"]
        == (created["collection_id"])
    )
    call(fc, "drop_collection", {"db": "lab", "name": "moved"})
    call(fc, "drop_database", {"name": "lab"})
    call(fc, "drop_collection", {"name": "q"})
    assert call(fc, "list_collections") == {"names": []}

    ts = call(fc, "get_timestamp", {"count": 3})
    assert ts["count"] == 3 and call(fc, "get_timestamp")["ts"] >= ts["ts"] + 3
    assert call(fc, "health")["status"] == "ok"
    roles = {s["role"] for s in call(fc, "list_sessions")["sessions"]}
    assert {"proxy", "coord"} <= roles


def test_other_flight_methods_fail_cleanly(fc: flight.FlightClient) -> None:
    with pytest.raises(flight.FlightServerError) as err:  # a DoGet ticket missing its keys
        fc.do_get(flight.Ticket(b"{}")).read_all()
    assert str(err.value).startswith("[INVALID_ARGUMENT] query:")
    assert "Traceback" not in str(err.value)
    with pytest.raises(flight.FlightServerError) as err:  # a read plan needs a collection
        fc.get_flight_info(flight.FlightDescriptor.for_command(b"{}"))
    assert str(err.value).startswith("[INVALID_ARGUMENT] read_plan: missing required key")
    with pytest.raises(flight.FlightServerError) as err:
        fc.get_flight_info(flight.FlightDescriptor.for_path("docs"))
    assert str(err.value).startswith("[INVALID_ARGUMENT] GetFlightInfo takes a command")
    assert list(fc.list_flights()) == []


def test_catalog_survives_restart(stack: Stack) -> None:
    c = stack.client()
    c.create_collection("kept", dimension=16, num_shards=2, properties={"owner": "me"})
    c.create_partition("kept", "p1")
    c.create_database("second")
    c.create_collection("other", dimension=4, db="second")
    c.create_collection("gone", dimension=4)
    c.drop_collection("gone")
    before = {name: c.describe_collection(name) for name in c.list_collections()}
    before_other = c.describe_collection("other", db="second")
    old_uri = stack.uri

    stack.restart()
    assert stack.uri != old_uri or stack.proxy.port is not None
    c2 = stack.client()
    assert c2.list_databases() == ["default", "second"]
    assert c2.list_collections() == ["kept"]
    assert {name: c2.describe_collection(name) for name in c2.list_collections()} == before
    assert c2.describe_collection("other", db="second") == before_other
    fresh = c2.create_collection("fresh", dimension=4)
    old_ids = [before["kept"]["collection_id"], before_other["collection_id"]]
    assert fresh["collection_id"] > max(old_ids)
    assert fresh["created_ts"] > max(before["kept"]["created_ts"], before_other["created_ts"])


def test_meta_cache_invalidation_across_proxies(stack: Stack) -> None:
    a = stack.proxy
    b = stack.add_proxy(own_bus=True)
    ca, cb = stack.client(a.uri), stack.client(b.uri)
    cid = ca.create_collection("shared", dimension=4)["collection_id"]

    assert cb.describe_collection("shared")["collection_id"] == cid
    assert b.cache.get("default", "shared") is not None
    hits = b.cache.hits
    cb.describe_collection("shared")
    assert b.cache.hits > hits, "a second describe should be served from the cache"

    ca.create_partition("shared", "p")
    assert cb.list_partitions("shared") == ["_default", "p"]
    ca.rename_collection("shared", "renamed")
    with pytest.raises(ElanusError) as err:
        cb.describe_collection("shared")
    assert err.value.code == ErrorCode.COLLECTION_NOT_FOUND
    assert cb.describe_collection("renamed")["collection_id"] == cid
    ca.drop_collection("renamed")
    assert not cb.has_collection("renamed")
    with pytest.raises(ElanusError) as err:
        cb.list_partitions("renamed")
    assert err.value.code == ErrorCode.COLLECTION_NOT_FOUND
    cid2 = ca.create_collection("renamed", dimension=8)["collection_id"]
    assert cb.describe_collection("renamed")["collection_id"] == cid2 != cid


def test_serial_ddl_gets_increasing_timestamps(stack: Stack) -> None:
    c = stack.client()
    created = [c.create_collection(f"s{i}", dimension=4) for i in range(8)]
    stamps = [d["created_ts"] for d in created]
    assert all(x < y for x, y in zip(stamps, stamps[1:], strict=False))
    ids = [d["collection_id"] for d in created]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    c.drop_collection("s0")
    again = c.create_collection("s0", dimension=4)
    assert again["created_ts"] > stamps[-1] and again["collection_id"] not in ids
    assert stack.proxy.ddl.queue.last_ts >= again["created_ts"]


def run_threads(n: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * n
    start = threading.Barrier(n)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - collected and checked by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    return results


def test_concurrent_ddl_is_serial_and_consistent(stack: Stack) -> None:
    def churn(t: int) -> list[dict[str, Any]]:
        c = stack.client()
        made = []
        for k in range(4):
            made.append(c.create_collection(f"t{t}_{k}", dimension=4))
            if k % 2:
                c.drop_collection(f"t{t}_{k}")
        return made

    results = run_threads(6, churn)
    assert not [r for r in results if isinstance(r, BaseException)], results
    made = [d for r in results for d in r]
    assert sorted(stack.client().list_collections()) == sorted(
        f"t{t}_{k}" for t in range(6) for k in (0, 2)
    )
    # One task at a time, in timestamp order: ids (allocated when a task runs) follow ts.
    by_ts = sorted(made, key=lambda d: d["created_ts"])
    assert len({d["created_ts"] for d in made}) == len(made)
    assert [d["collection_id"] for d in by_ts] == sorted(d["collection_id"] for d in made)

    def contend(_: int) -> Any:
        return stack.client().create_collection("contested", dimension=4)

    outcomes = run_threads(6, contend)
    winners = [o for o in outcomes if isinstance(o, dict)]
    losers = [o for o in outcomes if isinstance(o, ElanusError)]
    assert len(winners) == 1 and len(losers) == 5
    assert {e.code for e in losers} == {ErrorCode.COLLECTION_ALREADY_EXISTS}


def test_ddqueue_runs_one_task_at_a_time_in_ts_order(stack: Stack) -> None:
    """The queue itself, fed by the real TSO: no overlap, execution order == ts order."""

    async def scenario() -> tuple[list[int], int]:
        async def alloc() -> int:
            return (await RootCoordAPI(stack.bus).alloc_ts(TsoAlloc())).ts

        queue = await DdQueue(alloc).start(Supervisor("test proxy"))
        order: list[int] = []
        active = 0
        most = 0

        async def task(ts: int) -> int:
            nonlocal active, most
            active += 1
            most = max(most, active)
            await asyncio.sleep(0.002)
            order.append(ts)
            active -= 1
            return ts

        try:
            got = await asyncio.gather(*(queue.submit(f"t{i}", task) for i in range(30)))
        finally:
            await queue.stop()
        assert sorted(got) == order
        return order, most

    order, most = stack.call(scenario())
    assert most == 1 and len(order) == 30
    assert order == sorted(order) and len(set(order)) == 30


def test_meta_cache_ignores_a_load_that_raced_an_invalidation() -> None:
    cache = MetaCache()
    described = CollectionDescription(
        collection_id=7,
        db="default",
        name="c",
        description="",
        schema={"fields": [{"name": "id", "type": "Int64", "is_primary": True}]},
        num_shards=1,
        consistency_level="Bounded",
        properties={},
        created_ts=0,
        vchannels=[],
        pchannels=[],
        partitions=[],
        aliases=[],
    )

    async def racing_loader() -> CollectionDescription:
        cache.on_invalidate({"db": "default", "name": "c", "collection_id": 7, "kind": "x"})
        return described

    async def loader() -> CollectionDescription:
        return described

    info = asyncio.run(cache.fetch("default", "c", racing_loader))
    assert info.collection_id == 7 and cache.get("default", "c") is None
    asyncio.run(cache.fetch("default", "c", loader))
    assert cache.get("default", "c") is not None
    assert cache.on_invalidate({"collection_id": 7, "kind": "collection.drop"}) == 1
    asyncio.run(cache.fetch("default", "c", loader))
    assert cache.on_invalidate({"db": "default", "kind": "database.drop"}) == 1
    assert len(cache) == 0


# -- bad input: a clear error naming the problem, and nothing changes -------------------------
PK = {"name": "id", "type": "Int64", "is_primary": True}
VEC = {"name": "v", "type": "FloatVector", "dim": 4}


def schema_body(*fields: dict[str, Any], name: str = "bad") -> dict[str, Any]:
    return {"name": name, "schema": {"fields": list(fields)}}


def static(case_id: str, action: str, body: Body, code: str, *words: str) -> Any:
    """Bad input the proxy must reject alone: no timestamp taken, nothing sent to the coord."""
    return pytest.param(action, body, code, list(words), True, id=case_id)


def dynamic(case_id: str, action: str, body: Body, code: str, *words: str) -> Any:
    """Bad input only the coord can see (exists / does not exist); its error passes through."""
    return pytest.param(action, body, code, list(words), False, id=case_id)


# action, body, the error code, words the message must contain
INVALID = "INVALID_ARGUMENT"
# fmt: off
BAD_INPUT = [
    static("name_starts_with_digit", "create_collection", {"name": "1abc", "dimension": 4},
           INVALID, "collection name", "'1abc'"),
    static("name_with_dash", "create_collection", {"name": "has-dash", "dimension": 4},
           INVALID, "collection name", "'has-dash'"),
    static("name_too_long", "create_collection", {"name": "a" * 256, "dimension": 4},
           INVALID, "collection name", "longer than 255"),
    static("name_not_a_string", "create_collection", {"name": 5, "dimension": 4},
           INVALID, "'name'", "string"),
    static("missing_name", "create_collection", {"dimension": 4},
           INVALID, "missing required key 'name'"),
    static("duplicate_fields", "create_collection", schema_body(PK, VEC, {**VEC, "dim": 8}),
           INVALID, "duplicate field name 'v'"),
    static("no_primary_key", "create_collection", schema_body(VEC, {"name": "x", "type": "Int64"}),
           INVALID, "primary key", "found 0"),
    static("two_primary_keys", "create_collection",
           schema_body(PK, {"name": "id2", "type": "Int64", "is_primary": True}, VEC),
           INVALID, "primary key", "found 2", "id2"),
    static("no_vector_field", "create_collection", schema_body(PK, {"name": "x", "type": "Float"}),
           INVALID, "vector field"),
    static("dim_zero", "create_collection", {"name": "bad", "dimension": 0},
           INVALID, "'vector'", "dim 0"),
    static("dim_100000", "create_collection", schema_body(PK, {**VEC, "dim": 100000}),
           INVALID, "'v'", "dim 100000", "out of range"),
    static("binary_dim_not_multiple_of_8", "create_collection",
           schema_body(PK, {"name": "b", "type": "BinaryVector", "dim": 12}),
           INVALID, "'b'", "multiple of 8"),
    static("unknown_type", "create_collection",
           schema_body(PK, VEC, {"name": "x", "type": "Float128"}),
           INVALID, "unknown data type", "Float128"),
    static("field_name_not_a_string", "create_collection",
           schema_body(PK, VEC, {"name": ["x"], "type": "Int64"}),
           INVALID, "field name", "string"),
    static("varchar_without_max_length", "create_collection",
           schema_body(PK, VEC, {"name": "title", "type": "VarChar"}),
           INVALID, "'title'", "max_length"),
    static("float_primary_key", "create_collection", schema_body({**PK, "type": "Float"}, VEC),
           INVALID, "primary key", "'id'", "Int64 or VarChar"),
    static("auto_id_varchar_primary_key", "create_collection",
           schema_body({**PK, "type": "VarChar", "max_length": 8, "auto_id": True}, VEC),
           INVALID, "auto_id", "'id'", "Int64"),
    static("schema_and_dimension", "create_collection", {**schema_body(PK, VEC), "dimension": 4},
           INVALID, "'schema'", "'dimension'"),
    static("num_shards_0", "create_collection", {"name": "bad", "dimension": 4, "num_shards": 0},
           INVALID, "'num_shards'", "0"),
    static("num_shards_99", "create_collection", {"name": "bad", "dimension": 4, "num_shards": 99},
           INVALID, "'num_shards'", "99"),
    static("bad_consistency_level", "create_collection",
           {"name": "bad", "dimension": 4, "consistency_level": "Sometimes"},
           INVALID, "consistency level", "'Sometimes'"),
    static("unknown_body_key", "create_collection",
           {"name": "bad", "dimension": 4, "colour": "red"},
           INVALID, "unknown key", "'colour'"),
    static("nested_property", "create_collection",
           {"name": "bad", "dimension": 4, "properties": {"k": {"x": 1}}},
           INVALID, "property 'k'", "string"),
    static("quick_metric_not_float", "create_collection",
           {"name": "bad", "dimension": 4, "metric_type": "HAMMING"},
           INVALID, "metric_type", "'HAMMING'"),
    static("malformed_json", "create_collection", b'{"name": "bad", "dimension": ',
           INVALID, "malformed JSON"),
    static("body_not_an_object", "create_collection", b'["bad", 4]',
           INVALID, "JSON object", "array"),
    static("unknown_action", "create_colection", {"name": "bad"},
           "UNKNOWN_ACTION", "'create_colection'", "did you mean 'create_collection'"),
    dynamic("drop_missing_collection", "drop_collection", {"name": "ghost"},
            "COLLECTION_NOT_FOUND", "'ghost'"),
    dynamic("create_existing_collection", "create_collection", {"name": "existing", "dimension": 4},
            "COLLECTION_ALREADY_EXISTS", "'existing'"),
    dynamic("rename_onto_existing", "rename_collection", {"name": "existing", "new_name": "other"},
            "COLLECTION_ALREADY_EXISTS", "'other'"),
    static("rename_to_same_name", "rename_collection", {"name": "existing", "new_name": "existing"},
           INVALID, "'existing'", "current name"),
    dynamic("create_in_missing_database", "create_collection",
            {"db": "nowhere", "name": "bad", "dimension": 4},
            "DATABASE_NOT_FOUND", "'nowhere'"),
    dynamic("partition_on_missing_collection", "create_partition",
            {"collection": "ghost", "partition": "p"},
            "COLLECTION_NOT_FOUND", "'ghost'"),
    dynamic("duplicate_partition", "create_partition",
            {"collection": "existing", "partition": "p1"},
            "PARTITION_ALREADY_EXISTS", "'p1'"),
    static("drop_default_partition", "drop_partition",
           {"collection": "existing", "partition": "_default"},
           INVALID, "'_default'", "cannot be dropped"),
    dynamic("drop_missing_partition", "drop_partition",
            {"collection": "existing", "partition": "nope"},
            "PARTITION_NOT_FOUND", "'nope'"),
    static("partition_key_missing", "has_partition", {"partition": "p1"},
           INVALID, "missing required key 'collection'"),
    static("drop_default_database", "drop_database", {"name": "default"},
           INVALID, "'default'", "cannot be dropped"),
    dynamic("drop_nonempty_database", "drop_database", {"name": "side"},
            INVALID, "'side'", "still has collections"),
    static("timestamp_count_0", "get_timestamp", {"count": 0}, INVALID, "'count'", "0"),
]
# fmt: on


def catalog_snapshot(stack: Stack, fc: flight.FlightClient) -> dict[str, Any]:
    """The catalog as clients see it (through the proxy) and as the coord holds it."""
    snap: dict[str, Any] = {}
    for db in call(fc, "list_databases")["names"]:
        for name in call(fc, "list_collections", {"db": db})["names"]:
            coord_view = as_body(
                stack.call(
                    RootCoordAPI(stack.bus).describe_collection(
                        DescribeCollection(db=db, name=name)
                    )
                )
            )
            proxy_view = call(fc, "describe_collection", {"db": db, "name": name})
            assert proxy_view == coord_view
            snap[f"{db}.{name}"] = proxy_view
    return snap


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, flight.FlightClient]]:
    """One stack for every bad input, holding what they name: each case changes nothing
    (it asserts so against a snapshot taken just before it), so they need no fresh one."""
    with own_stack(tmp_path_factory.mktemp("bad-input"), "flight-ddl-bad-input") as stack:
        fc = flight.FlightClient(stack.uri)
        try:
            call(fc, "create_collection", {"name": "existing", "dimension": 4})
            call(fc, "create_collection", {"name": "other", "dimension": 4})
            call(fc, "create_partition", {"collection": "existing", "partition": "p1"})
            call(fc, "create_database", {"name": "side"})
            call(fc, "create_collection", {"db": "side", "name": "inside", "dimension": 4})
            yield stack, fc
        finally:
            fc.close()


@pytest.mark.slow
@pytest.mark.parametrize(("action", "body", "code", "words", "static"), BAD_INPUT)
def test_bad_input_is_rejected_and_changes_nothing(
    seeded: tuple[Stack, flight.FlightClient],
    action: str,
    body: Body,
    code: str,
    words: list[str],
    static: bool,
) -> None:
    stack, fc = seeded
    before = catalog_snapshot(stack, fc)
    queue = stack.proxy.ddl.queue
    ddl_seen = (queue.executed, queue.last_ts)

    got_code, message = call_error(fc, action, body)

    assert got_code == code, message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    if static:  # the proxy answered alone: no timestamp taken, nothing sent to the coord
        assert (queue.executed, queue.last_ts) == ddl_seen
    assert catalog_snapshot(stack, fc) == before
    assert call(fc, "list_databases")["names"] == ["default", "side"]


def test_protocol_doc_covers_every_action_and_code() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    documented = set(re.findall(r"^### `([a-z_]+)`$", doc, re.M))
    assert documented == set(catalogue())
    missing = [code.value for code in ErrorCode if f"`{code.value}`" not in doc]
    assert not missing
