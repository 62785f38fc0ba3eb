"""Read plans of a collection that is not loaded (``flight/search/fileplan.py``): the plan
flushes, has every delete up to its timestamp written to delta logs, and lists one
``files`` ticket per flushed segment; redeeming them (through a proxy, or from the files
as a Spark executor does) returns exactly what a query ``as_of`` the plan's timestamp
returns once the collection is loaded."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from conftest import Stack
from test_read_plan import (  # noqa: F401 - make_stack is a fixture
    DIM,
    assert_same_rows,
    call_error,
    empty_c,
    make_stack,
    query_at,
    redeem,
    rows,
)

from elanus import ErrorCode
from elanus.client.client import Client
from elanus.schema import Schema
from elanus.spark import segment_files


def unloaded(stack: Stack) -> Client:
    """1000 rows flushed, 400 never flushed, deletes of both kinds (the latest ones still
    only in the datanode's buffer), an upsert; never loaded."""
    c = stack.client()
    c.create_collection("c", dimension=DIM, num_shards=2)
    c.insert("c", rows(0, 1000))
    c.flush("c", timeout=30)
    c.insert("c", rows(1000, 400))
    c.delete("c", [3, 4, 500, 1001, 1300])
    c.upsert("c", rows(7, 1, seed=99))
    c.release_collection("c")  # quick setup loaded it
    return c


def test_a_collection_that_is_not_loaded_reads_from_its_files(
    make_stack: Callable[..., Stack],  # noqa: F811
) -> None:
    stack = make_stack()
    c = unloaded(stack)
    plan = c.read_plan("c")
    kinds = {e["kind"] for e in plan["endpoints"]}
    assert kinds == {"sealed"} and {e["read"] for e in plan["endpoints"]} == {"files"}
    flushed = {s["segment_id"] for s in c.get_segment_info("c") if s["state"] == "Flushed"}
    assert {e["segment_id"] for e in plan["endpoints"]} == flushed  # the plan flushed
    c.insert("c", rows(2000, 30))  # after the plan: not read
    c.delete("c", [10, 1010])
    through_proxy = redeem(c, plan)
    schema = Schema.from_dict(plan["schema"])
    direct = pa.Table.from_batches(
        [b for e in plan["endpoints"] for b in segment_files.read_sealed(c, e, schema, 100)],
        plan["arrow_schema"],
    )
    ids = through_proxy.column("id").to_pylist()
    assert len(ids) == 1400 - 5 and not {3, 4, 500, 1001, 1300} & set(ids)
    assert {10, 1010} <= set(ids) and max(ids) < 2000
    # What the rows must be, from what was written (not from a loaded query: see below).
    written = {
        **table_of(rows(0, 1000)),
        **table_of(rows(1000, 400)),
        **table_of(rows(7, 1, seed=99)),
    }
    want = pa.Table.from_pylist([written[i] for i in sorted(ids)], through_proxy.schema)
    assert sorted(ids) == sorted(set(range(1400)) - {3, 4, 500, 1001, 1300})
    assert_same_rows(through_proxy.select(["id", "vector"]), want.select(["id", "vector"]))
    assert_same_rows(direct.select(["id", "vector"]), want.select(["id", "vector"]))
    # Checked against what was written, not a query after a reload: this test found a
    # release racing a flush's handoff that brought a deleted key back on reload
    # (tests/test_handoff_release.py).


def table_of(columns: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Rows by key, as Arrow would give them back."""
    table = pa.table({"id": columns["id"], "vector": list(columns["vector"])})
    return {r["id"]: r for r in table.to_pylist()}


def test_a_files_plan_in_the_past_and_of_some_partitions(
    make_stack: Callable[..., Stack],  # noqa: F811
) -> None:
    _, c = empty_c(make_stack, loaded=False, retention_s=3600)
    c.create_partition("c", "p1")
    c.insert("c", rows(0, 100))
    c.insert("c", rows(100, 50), partition_name="p1")
    then = c.read_plan("c", columns=["id"])["ts"]
    c.delete("c", [1, 2, 120])
    c.insert("c", rows(200, 10))
    past = c.read_plan("c", columns=["id"], snapshot_ts=then)
    assert sorted(redeem(c, past).column("id").to_pylist()) == list(range(150))
    p1 = c.read_plan("c", columns=["id"], partition_names=["p1"])
    got = sorted(redeem(c, p1).column("id").to_pylist())
    assert got == [i for i in range(100, 150) if i != 120]


def test_a_files_ticket_reads_only_its_collections_segments(
    make_stack: Callable[..., Stack],  # noqa: F811
) -> None:
    stack = make_stack()
    c = stack.client()
    for name in ("c", "other"):
        c.create_collection(name, dimension=DIM)
        c.release_collection(name)
        c.insert(name, rows(0, 20))
    mine = c.read_plan("c", columns=["id"])["endpoints"][0]
    theirs = c.read_plan("other", columns=["id"])["endpoints"][0]
    ticket = json.loads(mine["ticket"])
    # The segment comes from the catalog by id; a path in the ticket is never used.
    forged = {**ticket, "segment_id": theirs["segment_id"], "sealed": theirs["sealed"]}
    err = call_error(lambda: list(c.read_endpoint(json.dumps(forged).encode())))
    assert err.code == ErrorCode.SEGMENT_NOT_FOUND and "'c'" in err.message
    assert "/" not in err.message  # no path in the error
    bad = {**ticket, "segment_id": "x"}
    err = call_error(lambda: list(c.read_endpoint(json.dumps(bad).encode())))
    assert err.code == ErrorCode.INVALID_ARGUMENT and "segment_id" in err.message
    with pytest.raises(Exception, match="columns"):
        list(c.read_endpoint(json.dumps({**ticket, "columns": []}).encode()))


def test_deletes_still_in_the_datanodes_buffer_are_written_before_the_plan(
    make_stack: Callable[..., Stack],  # noqa: F811
) -> None:
    _, c = empty_c(make_stack, loaded=False)
    c.insert("c", rows(0, 100))
    c.flush("c", timeout=30)
    c.delete("c", [5, 50, 99])  # nothing growing: the plan's flush writes nothing
    plan = c.read_plan("c", columns=["id"])
    (endpoint,) = plan["endpoints"]
    on_disk = segment_files.snapshot_files.deletes_on_disk(endpoint["sealed"]["path"], pa.int64())
    assert sorted(on_disk.column("pk").to_pylist()) == [5, 50, 99]
    got = sorted(redeem(c, plan).column("id").to_pylist())
    assert got == [i for i in range(100) if i not in (5, 50, 99)]


def test_files_only_on_a_loaded_collection(make_stack: Callable[..., Stack]) -> None:  # noqa: F811
    stack = make_stack()
    c = stack.client()
    c.create_collection("c", dimension=DIM, num_shards=2)  # loaded by quick setup
    c.insert("c", rows(0, 500))
    c.delete("c", [1, 2, 3])
    growing = c.read_plan("c", columns=["id"])
    assert {e["kind"] for e in growing["endpoints"]} == {"growing"}
    plan = c.read_plan("c", columns=["id"], files_only=True)
    assert {e["read"] for e in plan["endpoints"]} == {"files"}
    got = redeem(c, plan)
    assert_same_rows(got, query_at(stack, plan["ts"]).select(["id"]))
    assert got.num_rows == 497
