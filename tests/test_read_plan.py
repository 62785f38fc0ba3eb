"""Snapshot read plans (GetFlightInfo / ``read_plan``) and their tickets (DoGet), with a bare
pyarrow Flight client and real roles: redeeming every ticket of a plan returns exactly the
rows of a query ``as_of`` the plan's timestamp, whatever is written, flushed or compacted
between planning and reading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack, wait_for
from stack_factory import stack_fixture

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client
from elanus.flight.search import readplan
from elanus.schema import Schema
from elanus.spark import segment_files

DIM = 8


make_stack = stack_fixture(serves_reads=True, compaction_interval_s=0, segment_max_rows=300)


def rows(start: int, n: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n)
    return {
        "id": ids,
        "vector": rng.random((n, DIM), dtype=np.float32),
        "tag": [f"t{i % 5}" for i in ids],
    }


def empty_c(
    make_stack: Callable[..., Stack], *, loaded: bool, **settings: Any
) -> tuple[Stack, Client]:
    """A fresh stack with an empty collection ``c``: loaded, or released (then a plan
    reads it from its files)."""
    stack = make_stack(**settings)
    c = stack.client()
    c.create_collection("c", dimension=DIM)
    if loaded:
        c.load_collection("c")
    else:
        c.release_collection("c")
    return stack, c


def filled(stack: Stack, shards: int = 2) -> Client:
    """1000 flushed rows (several sealed segments), 400 growing, deletes on both, an upsert."""
    c = stack.client()
    c.create_collection("c", dimension=DIM, num_shards=shards)
    c.load_collection("c")
    c.insert("c", rows(0, 1000))
    flush_and_hand_off(c, stack)
    c.insert("c", rows(1000, 400))
    c.delete("c", [3, 4, 500, 1001, 1300])
    c.upsert("c", rows(7, 1, seed=99))  # a flushed key rewritten into growing data
    return c


def flush_and_hand_off(c: Client, stack: Stack) -> None:
    """Flush, then wait until the delegators hold the flushed segments as sealed."""
    c.flush("c", timeout=30)
    flushed = [s["segment_id"] for s in c.get_segment_info("c") if s["state"] == "Flushed"]
    wait_for(lambda: all(handed_off(stack, s) for s in flushed), what="handoff")


def query_at(stack: Stack, ts: int, filter: str = "id >= 0", **extra: Any) -> pa.Table:
    """What a query as_of ``ts`` returns (all fields and ``$meta``), as Arrow."""
    fc = flight.FlightClient(stack.uri)
    ticket = {
        "collection": "c",
        "filter": filter,
        "output_fields": ["*", "tag"],
        "as_of": ts,
        **extra,
    }
    table = fc.do_get(flight.Ticket(json.dumps(ticket).encode())).read_all()
    fc.close()
    return table


def redeem(client: Client, plan: dict[str, Any]) -> pa.Table:
    tables = [
        pa.Table.from_batches(list(client.read_endpoint(e["ticket"])), plan["arrow_schema"])
        for e in plan["endpoints"]
    ]
    return pa.concat_tables(tables)


def assert_same_rows(got: pa.Table, want: pa.Table) -> None:
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a primary key came back twice"
    got, want = got.sort_by("id"), want.sort_by("id")
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    for name in got.column_names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


def test_flight_info_tickets_read_exactly_the_snapshot(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    c = filled(stack)
    fc = flight.FlightClient(stack.uri)
    command = json.dumps({"collection": "c"}).encode()
    info = fc.get_flight_info(flight.FlightDescriptor.for_command(command))
    meta = json.loads(info.app_metadata)
    ts = meta["ts"]
    assert info.schema.names == ["id", "vector", "$meta"] == meta["columns"]
    flushed = {s["segment_id"] for s in c.get_segment_info("c") if s["state"] == "Flushed"}
    kinds = [json.loads(e.app_metadata)["kind"] for e in info.endpoints]
    tickets = [json.loads(e.ticket.ticket) for e in info.endpoints]
    sealed = [t["segment_ids"][0] for t, k in zip(tickets, kinds, strict=True) if k == "sealed"]
    assert sorted(sealed) == sorted(flushed) and len(flushed) >= 4
    assert kinds.count("growing") == 2  # one per vchannel
    assert {t["ts"] for t in tickets} == {ts}
    assert info.total_records >= 1400
    got = pa.concat_tables(fc.do_get(e.ticket).read_all().cast(info.schema) for e in info.endpoints)
    want = query_at(stack, ts)
    assert got.num_rows == 1400 - 5
    assert_same_rows(got, want)
    assert fc.get_schema(flight.FlightDescriptor.for_command(command)).schema == info.schema
    fc.close()
    # The read_plan action is the same plan as JSON.
    plan = c._action("read_plan", {"collection": "c", "columns": ["id", "$meta"]})
    assert plan["columns"] == ["id", "$meta"] and len(plan["endpoints"]) == len(info.endpoints)


def test_writes_after_the_plan_are_not_read(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    c = filled(stack)
    plan = c.read_plan("c", columns=["id", "$meta"])
    c.insert("c", rows(2000, 50))
    c.delete("c", [10, 11, 1002])
    c.flush("c", timeout=30)
    c.insert("c", rows(3000, 10))
    got = redeem(c, plan)
    assert_same_rows(got, query_at(stack, plan["ts"]).select(["id", "$meta"]))
    assert {10, 11, 1002} <= set(got.column("id").to_pylist())
    assert max(got.column("id").to_pylist()) < 2000


def handed_off(stack: Stack, segment_id: int) -> bool:
    delegators = [d for qn in stack.querynodes for d in qn.delegators.values()]
    return any(segment_id in d.distribution.sealed for d in delegators)


def compact_and_hand_off(c: Client, stack: Stack) -> list[int]:
    before = {s["segment_id"] for s in c.get_segment_info("c") if s["state"] == "Flushed"}
    job = c.compact("c")
    wait_for(lambda: c.get_compaction_state(job) == "Completed", what="compaction")
    targets = [
        s["segment_id"]
        for s in c.get_segment_info("c")
        if s["state"] == "Flushed" and s["segment_id"] not in before
    ]
    assert targets, "the compaction made no target"
    wait_for(lambda: all(handed_off(stack, t) for t in targets), what="handoff of the targets")
    return targets


def test_flush_and_compaction_between_plan_and_read_duplicate_nothing(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(retention_s=3600)
    c = filled(stack, shards=1)
    plan = c.read_plan("c", filter="tag != {t}", filter_params={"t": "t1"})
    growing = [e for e in plan["endpoints"] if e["kind"] == "growing"]
    c.flush("c", timeout=30)  # the growing segments of the plan are sealed and handed off
    c.delete("c", [20, 1010])
    compact_and_hand_off(c, stack)  # ... and merged with the others into a new segment
    (delegator,) = stack.querynodes[0].delegators.values()
    retired = delegator.distribution.retired
    assert set(growing[0]["segment_ids"]) <= set(retired)  # read from their files
    want = query_at(stack, plan["ts"], "tag != 't1'")
    assert_same_rows(redeem(c, plan), want)  # through the proxy: from the retired files
    schema = Schema.from_dict(plan["schema"])
    direct = []
    for e in plan["endpoints"]:
        if e["kind"] == "sealed":
            assert segment_files.readable(e)
            direct += list(segment_files.read_sealed(c, e, schema, 100))
        else:
            direct += list(c.read_endpoint(e["ticket"]))
    assert_same_rows(pa.Table.from_batches(direct, plan["arrow_schema"]), want)
    assert growing and want.num_rows < 1400


def test_collected_segment_files_are_a_clear_error(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(gc_delay_s=0.2, retention_s=0)
    c = filled(stack, shards=1)
    plan = c.read_plan("c", columns=["id"])
    compact_and_hand_off(c, stack)
    sealed = [e for e in plan["endpoints"] if e["kind"] == "sealed"]
    wait_for(lambda: not any(Path(e["sealed"]["path"]).exists() for e in sealed), what="GC")
    with pytest.raises(ElanusError) as err:
        list(c.read_endpoint(sealed[0]["ticket"]))
    assert err.value.code == ErrorCode.SEGMENT_NOT_FOUND
    assert "plan the read again" in err.value.message
    assert not segment_files.readable(sealed[0])
    with pytest.raises(ElanusError, match="gone"):
        list(segment_files.read_sealed(c, sealed[0], Schema.from_dict(plan["schema"]), 100))


def test_deletes_ticket_lists_the_buffered_deletes_up_to_the_snapshot(
    make_stack: Callable[..., Stack],
) -> None:
    stack, c = empty_c(make_stack, loaded=True)
    c.insert("c", rows(0, 200))
    flush_and_hand_off(c, stack)
    c.delete("c", [5, 6, 150])
    plan = c.read_plan("c", columns=["id"])
    c.delete("c", [7])  # after the snapshot
    sealed = [e for e in plan["endpoints"] if e["kind"] == "sealed"]
    by_segment: dict[int, list[int]] = {}
    for e in sealed:
        sid = e["sealed"]["segment_id"]
        keys = segment_files.deletes(c, e, pa.int64()).column("pk").to_pylist()
        by_segment[sid] = sorted(set(keys))
    assert sorted(k for keys in by_segment.values() for k in keys) == [5, 6, 150]
    ticket = {
        "read": "deletes",
        **{k: sealed[0][k] for k in segment_files.DELETE_KEYS},
        "segment_id": sealed[0]["sealed"]["segment_id"],
    }
    table = pa.Table.from_batches(list(c.read_endpoint(json.dumps(ticket).encode())))
    assert table.schema.names == ["pk", "ts"] and table.schema.field("ts").type == pa.uint64()
    assert all(t <= plan["ts"] for t in table.column("ts").to_pylist())


@pytest.mark.parametrize("loaded", [True, False], ids=["delegator", "files"])
def test_segment_tickets_stream_in_pages(
    make_stack: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch, loaded: bool
) -> None:
    """Growing rows from their delegator, or (not loaded) a flushed segment read by a query
    node (``querynode.read.files``): the same pages either way."""
    monkeypatch.setattr(readplan, "PAGE_BYTES", 1)  # the smallest page: 256 rows
    stack = make_stack(segment_max_rows=100_000)
    c = stack.client()
    c.create_collection("c", dimension=DIM)
    if not loaded:
        c.release_collection("c")
    c.insert("c", rows(0, 1000))
    c.delete("c", list(range(0, 1000, 7)))
    plan = c.read_plan("c", filter="id % 2 == 0")
    (endpoint,) = plan["endpoints"]
    assert endpoint["read"] == ("segments" if loaded else "files")
    batches = list(c.read_endpoint(endpoint["ticket"]))
    want = [i for i in range(0, 1000, 2) if i % 7]
    # A full page of 256 stops before its last key, where the next page starts.
    assert [b.num_rows for b in batches] == [255, len(want) - 255]
    assert pa.Table.from_batches(batches).column("id").to_pylist() == want


def test_pages_keep_every_copy_of_a_repeated_key(
    make_stack: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two inserts of one key are two stored rows: a snapshot read returns both (a query
    answers the newest, tests/test_duplicate_keys.py); pages cut by key never lose a copy."""
    monkeypatch.setattr(readplan, "page_rows", lambda schema, columns, scale: 4)
    stack, c = empty_c(make_stack, loaded=True)
    c.insert("c", rows(0, 40))
    for k in range(5):
        c.insert("c", rows(7, 1, seed=k + 1))  # id 7 six times: pages of one key
    c.insert("c", rows(12, 2, seed=9))  # ids 12 and 13 twice
    c.delete("c", [20])
    plan = c.read_plan("c", columns=["id", "vector"], filter="id % 2 == 0 or id == 7")
    (growing,) = plan["endpoints"]
    batches = list(c.read_endpoint(growing["ticket"]))
    assert max(b.num_rows for b in batches[:-1]) <= 6 and len(batches) > 5
    got = pa.Table.from_batches(batches)
    want = query_at(stack, plan["ts"], "id % 2 == 0 or id == 7")
    ids = got.column("id").to_pylist()
    assert sorted(set(ids)) == sorted(want.column("id").to_pylist())
    assert ids.count(7) == 6 and ids.count(12) == 2 and len(ids) == len(want) + 6

    def pairs(t: pa.Table) -> set[tuple[int, tuple[float, ...]]]:
        ids, vectors = t["id"].to_pylist(), t["vector"].to_pylist()
        return {(i, tuple(v)) for i, v in zip(ids, vectors, strict=True)}

    assert pairs(want) <= pairs(got)  # the query's newest copies among them
    assert len(pairs(got)) == len(ids)  # every copy its own vector


def test_partitions_filter_and_columns_shape_the_plan(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    c = filled(stack)
    c.create_partition("c", "p1")
    c.insert("c", rows(5000, 30), partition_name="p1")
    plan = c.read_plan("c", partition_names=["p1"], columns=["$meta", "id"], filter="id < 5020")
    got = redeem(c, plan)
    assert got.column_names == ["$meta", "id"]
    assert sorted(got.column("id").to_pylist()) == list(range(5000, 5020))
    assert all(e["kind"] == "growing" for e in plan["endpoints"])


def call_error(fn: Callable[[], Any]) -> ElanusError:
    with pytest.raises(ElanusError) as err:
        fn()
    return err.value


def test_bad_plans_and_tickets_fail_cleanly(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(retention_s=1)
    c = filled(stack)
    cases = [
        (lambda: c.read_plan("nope"), ErrorCode.COLLECTION_NOT_FOUND, "nope"),
        (lambda: c.read_plan("c", columns=["id", "x"]), ErrorCode.INVALID_ARGUMENT, "'x'"),
        (lambda: c.read_plan("c", columns=[]), ErrorCode.INVALID_ARGUMENT, "columns"),
        (lambda: c.read_plan("c", filter="id >"), ErrorCode.BAD_EXPRESSION, ""),
        (lambda: c.read_plan("c", partition_names=["p9"]), ErrorCode.PARTITION_NOT_FOUND, "p9"),
        (lambda: c.read_plan("c", snapshot_ts=1 << 40), ErrorCode.INVALID_ARGUMENT, "retention"),
    ]
    for fn, code, word in cases:
        err = call_error(fn)
        assert err.code == code, err
        assert word in err.message, err
    ticket = json.loads(c.read_plan("c")["endpoints"][0]["ticket"])
    bad_tickets = [
        ({**ticket, "read": "all"}, ErrorCode.INVALID_ARGUMENT, "'read'"),
        ({**ticket, "segment_ids": []}, ErrorCode.INVALID_ARGUMENT, "segment_ids"),
        ({**ticket, "extra": 1}, ErrorCode.INVALID_ARGUMENT, "extra"),
        ({**ticket, "vchannel": "dml_0_9v0"}, ErrorCode.INVALID_ARGUMENT, "vchannel"),
        ({**ticket, "collection_id": 1}, ErrorCode.COLLECTION_NOT_FOUND, "since the read plan"),
        ({**ticket, "segment_ids": [424242]}, ErrorCode.SEGMENT_NOT_FOUND, "424242"),
        (
            {
                **{k: ticket[k] for k in segment_files.DELETE_KEYS},
                "read": "deletes",
                "segment_id": 9,
            },
            ErrorCode.SEGMENT_NOT_FOUND,
            "plan the read again",
        ),
    ]
    for doc, code, word in bad_tickets:
        err = call_error(lambda d=doc: list(c.read_endpoint(json.dumps(d).encode())))
        assert err.code == code, err
        assert word in err.message, err
