"""Clustering key and clustering compaction: a collection's clustering key field, the
compaction that rewrites its segments into L2 segments of contiguous key ranges, and the
reads that skip the segments whose range their filter rules out."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, raises_code, wait_for
from milvus_stack import MilvusStack, milvus_client, milvus_stack
from rich.console import Console

from elanus.channels.runtime.metrics import NO_LABELS, SEGMENTS_PRUNED
from elanus.cli.admin import _with_load, render_collection
from elanus.client.client import Client
from elanus.errors import ErrorCode
from elanus.expr import parse_cached
from elanus.expr.keyranges import key_intervals, may_match
from elanus.schema import DataType, Schema
from elanus.segments.flushcommon.writebuffer import WriteBuffer
from elanus.segments.storage.pkstats import PkStats

DIM = 8
ROWS = 300
SETTINGS: dict[str, Any] = {
    "segment_max_rows": 100,
    "compaction_interval_s": 0,
    "gc_delay_s": 0,
    "orphan_grace_s": 0,
    "retention_s": 0,
}
L2 = 3
INV = ErrorCode.INVALID_ARGUMENT


@pytest.fixture
def stack_settings() -> dict[str, Any]:
    """Small segments, and no compaction but the tests' own (conftest's ``stack``)."""
    return SETTINGS


def key_schema(key_type: DataType = DataType.INT64) -> Schema:
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("key", key_type, is_clustering_key=True, **_sized(key_type))
    return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)


def _sized(dtype: DataType) -> dict[str, Any]:
    return {"max_length": 16} if dtype == DataType.VARCHAR else {}


def rows(ids: range) -> list[dict[str, Any]]:
    """Keys scattered over the batches: every flushed segment spans the whole key range."""
    rng = np.random.default_rng(ids.start)
    vecs = rng.random((len(ids), DIM), dtype=np.float32)
    return [
        {"id": i, "key": (i * 37) % ROWS, "vector": v.tolist()}
        for i, v in zip(ids, vecs, strict=True)
    ]


def pruned() -> float:
    return SEGMENTS_PRUNED.value(NO_LABELS)


def wait_done(state: Any, job: int) -> None:
    deadline = time.monotonic() + 30
    while state(job) != "Completed":
        assert time.monotonic() < deadline, "the compaction did not complete"
        time.sleep(0.05)


FILTERS = [
    "key == 7",
    "key in [3, 7, 299]",
    "key < 40",
    "key <= 40 and key >= 10",
    "key > 250",
    "60 <= key and key < 90 and id % 2 == 0",
    "key == 5 or key == 280",
    "key >= 1000",
]
"""Each confines the key: after a clustering compaction, a read of it skips segments."""


def answers(client: Client) -> dict[str, Any]:
    q = np.random.default_rng(7).random(DIM, dtype=np.float32).tolist()
    out: dict[str, Any] = {"count": client.query("c", "", output_fields=["count(*)"])[0]}
    for f in [*FILTERS, "id >= 0", "not (key < 100)"]:
        got = client.query("c", f, output_fields=["key"], limit=1000)
        out[f] = sorted((r["id"], r["key"]) for r in got)
        out["count " + f] = client.query("c", f, output_fields=["count(*)"])[0]
        hits = client.search("c", [q], filter=f, limit=5, output_fields=["key"])[0]
        out["search " + f] = [(h["id"], round(h["distance"], 5)) for h in hits]
    return out


def test_clustering_compaction_cuts_key_ranges_and_reads_skip_segments(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("c", schema=key_schema(), properties={"metric_type": "L2"})
    client.load_collection("c")
    fields = client.describe_collection("c")["fields"]
    assert [f["name"] for f in fields if f.get("is_clustering_key")] == ["key"]
    console = Console(record=True, width=200)
    console.print(render_collection(_with_load(client, "c")))  # `elanus collection describe`
    assert re.search(r"clustering key\s*│?\s*key\b", console.export_text()), console.export_text()
    for start in range(0, ROWS, 100):
        client.insert("c", rows(range(start, start + 100)))
        client.flush("c", timeout=30)
    client.delete("c", list(range(0, ROWS, 10)))  # 30 rows, over every segment
    sources = {s["segment_id"] for s in client.get_segment_info("c") if s["state"] == "Flushed"}
    assert len(sources) == 3
    before = answers(client)
    job = client.compact("c", is_clustering=True)
    wait_done(client.get_compaction_state, job)
    segs = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    assert {s["level"] for s in segs} == {L2} and len(segs) == 3
    assert all(set(s["compacted_from"]) == sources for s in segs)
    assert sum(s["num_rows"] for s in segs) == ROWS - 30  # the deleted rows are gone
    ranges = sorted(s["key_range"] for s in segs)
    assert all(lo <= hi < nxt for (lo, hi), (nxt, _) in zip(ranges, ranges[1:], strict=False))
    assert ranges[0][0] == 1 and ranges[-1][1] == 299  # keys of deleted ids (0 mod 10) went
    # The targets serve once handed over; then every confining filter skips segments,
    # with the same answers as before.
    wait_for(lambda: answers(client) == before and _pruning(client), what="the handoff")
    for f in FILTERS:
        seen = pruned()
        client.query("c", f, output_fields=["key"], limit=10)
        assert pruned() > seen, f
    for read in (  # a count and a search skip them too
        lambda: client.query("c", "key < 40", output_fields=["count(*)"]),
        lambda: client.search("c", [[0.5] * DIM], filter="key > 250", limit=3),
    ):
        seen = pruned()
        read()
        assert pruned() > seen
    seen = pruned()
    client.query("c", "id >= 0", output_fields=["key"], limit=10)
    client.query("c", "not (key < 100)", output_fields=["key"], limit=10)
    assert pruned() == seen  # nothing confines the key: every segment is read
    # Deletes and inserts after the compaction land as before.
    client.delete("c", [1, 2])
    client.insert("c", rows(range(1000, 1010)))
    got = client.query("c", "key < 40", output_fields=["key"], limit=1000)
    want = {i for i, _ in before["key < 40"]} - {1, 2}
    want |= {r["id"] for r in rows(range(1000, 1010)) if r["key"] < 40}
    assert {r["id"] for r in got} == want


def _pruning(client: Client) -> bool:
    seen = pruned()
    client.query("c", "key == 7", output_fields=["key"], limit=10)
    return pruned() > seen


@pytest.mark.parametrize("stack", ["nats"], indirect=True)  # plans and reports cross NATS
def test_clustering_compaction_of_a_varchar_key(stack: Stack) -> None:
    """Keys repeat (three rows a value): no value spans two segments."""
    client = stack.client()
    schema = key_schema(DataType.VARCHAR)
    client.create_collection("c", schema=schema, properties={"metric_type": "L2"})
    client.load_collection("c")
    for start in range(0, 200, 100):
        batch = rows(range(start, start + 100))
        client.insert("c", [{**r, "key": f"k{r['key'] // 3:03d}"} for r in batch])
        client.flush("c", timeout=30)
    q = "key >= 'k040' and key < 'k045'"
    before = sorted(r["id"] for r in client.query("c", q, output_fields=["id"], limit=1000))
    job = client.compact("c", is_clustering=True)
    wait_done(client.get_compaction_state, job)
    segs = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    assert len(segs) == 2 and all(s["level"] == L2 for s in segs)
    (_, hi), (lo, _) = sorted(s["key_range"] for s in segs)
    assert hi < lo and sum(s["num_rows"] for s in segs) == 200

    def same_and_pruned() -> bool:
        seen = pruned()
        got = sorted(r["id"] for r in client.query("c", q, output_fields=["id"], limit=1000))
        return got == before and pruned() > seen

    wait_for(same_and_pruned, what="pruning by a VarChar key")


def test_clustering_keys_are_checked_and_compaction_without_one_is_refused(
    stack: Stack,
) -> None:
    client = stack.client()
    two = key_schema().add_field("other", DataType.INT32, is_clustering_key=True)
    raises_code(INV, lambda: client.create_collection("x", schema=two), "key, other")
    on_pk = Schema().add_field("id", DataType.INT64, is_primary=True, is_clustering_key=True)
    on_pk.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    raises_code(INV, lambda: client.create_collection("x", schema=on_pk), "'id'", "primary key")
    vec = Schema().add_field("id", DataType.INT64, is_primary=True)
    vec.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM, is_clustering_key=True)
    raises_code(INV, lambda: client.create_collection("x", schema=vec), "'vector'", "FloatVector")
    json_key = Schema().add_field("id", DataType.INT64, is_primary=True)
    json_key.add_field("j", DataType.JSON, is_clustering_key=True)
    json_key.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    raises_code(INV, lambda: client.create_collection("x", schema=json_key), "'j'")
    client.create_collection("keyed", schema=key_schema(), properties={"metric_type": "L2"})
    raises_code(
        INV,
        lambda: client.drop_collection_field("keyed", field_name="key"),
        "cannot drop clustering key field: key",
    )
    client.drop_collection("keyed")
    client.create_collection("plain", dimension=DIM)
    raises_code(INV, lambda: client.compact("plain", is_clustering=True), "clustering key")
    raises_code(
        INV,
        lambda: client.add_collection_field(
            "plain", "k", DataType.INT64, nullable=True, is_clustering_key=True
        ),
        "clustering key",
    )
    assert client.list_collections() == ["plain"]


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path, **SETTINGS)


@pytest.fixture
def mclient(mstack: MilvusStack) -> Iterator[Any]:
    yield from milvus_client(mstack)


def test_pymilvus_clustering_key_and_compaction(mclient: Any) -> None:
    from pymilvus import DataType as MDataType
    from pymilvus.client.types import CompactionType
    from pymilvus.exceptions import MilvusException
    from pymilvus.grpc_gen import common_pb2

    client = mclient
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", MDataType.INT64, is_primary=True)
    schema.add_field("key", MDataType.INT64, is_clustering_key=True)
    schema.add_field("vector", MDataType.FLOAT_VECTOR, dim=DIM)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection("c", schema=schema, index_params=index)
    described = client.describe_collection("c")["fields"]
    assert [f["name"] for f in described if f.get("is_clustering_key")] == ["key"]
    for start in range(0, 200, 100):
        client.insert("c", rows(range(start, start + 100)))
        client.flush("c")
    q = "key >= 100 and key < 130"
    before = sorted(r["id"] for r in client.query("c", q, output_fields=["id"]))
    job = client.compact("c", is_clustering=True)
    wait_done(client.get_compaction_state, job)
    [plan] = client.get_compaction_plans(job).plans
    assert plan.compaction_type == CompactionType.ClusteringCompaction
    assert len(plan.targets) == 2 and plan.target in plan.targets
    listed = client.list_persistent_segments("c")
    assert {s.segment_id for s in listed} == set(plan.targets)
    assert {s.level for s in listed} == {common_pb2.SegmentLevel.Value("L2")}
    wait_for(  # each target's index is built, as a mix compaction's target's is
        lambda: client.describe_index("c", "vector")["indexed_rows"] == 200,
        what="the targets' index builds",
    )
    wait_for(lambda: sorted(r["id"] for r in client.query("c", q, output_fields=["id"])) == before)
    client.create_collection("plain", dimension=DIM)
    with pytest.raises(MilvusException) as err:
        client.compact("plain", is_clustering=True)
    assert err.value.code == 1100 and "clustering key" in err.value.message
    with pytest.raises(MilvusException) as err:  # a key is fixed at creation, as in Milvus
        client.add_collection_field(
            "plain", "k", MDataType.INT64, nullable=True, is_clustering_key=True
        )
    assert err.value.code == 1100 and "clustering key" in err.value.message


def test_key_intervals_confine_only_what_surely_confines() -> None:
    schema = key_schema(DataType.FLOAT).add_field("n", DataType.INT64)
    key = schema.field("key")

    def may(text: str, lo: Any, hi: Any) -> bool:
        return may_match(key_intervals(parse_cached(text, schema, None), key), [lo, hi])

    assert may("key == 1.5", 1.0, 2.0) and not may("key == 2.5", 1.0, 2.0)
    assert may("key < 1.0", 1.0, 2.0)  # float32 rounding: the bound is loosened
    assert not may("key < 0.5", 1.0, 2.0) and not may("key > 2.5", 1.0, 2.0)
    assert not may("key > 3 and key < 4", 1.0, 2.0) and may("key > 3 or key < 1.5", 1.0, 2.0)
    assert not may("key in [0.1, 5.0]", 1.0, 2.0) and may("key in [0.1, 1.75]", 1.0, 2.0)
    assert not may("key > 2.5 and n == 1", 1.0, 2.0)
    for free in ("n == 1", "not (key < 5)", "key != 1.5", "key > 3 or n == 1", "key is null"):
        assert may(free, 1.0, 2.0), free
    assert not may("key > 0", None, None) and may("n == 1", None, None)  # only nulls
    none = key_intervals(parse_cached("key == 1.5", schema, None), key)
    assert may_match(none, None)  # an L1 segment (no range known) is always read


def test_late_deletes_follow_their_keys_into_the_targets() -> None:
    """Deletes that reached the sources during the merge go to the target holding their
    keys (by its pk stats); a target left empty takes none."""
    buffer = WriteBuffer(key_schema(), lambda pid, sid: f"/nowhere/{pid}/{sid}")
    buffer.add_flushed(1, 0, None)
    buffer.flushed[1].pending = [(pa.array([5, 150]), 100, 7), (pa.array([160]), 101, 8)]
    low, high = PkStats.build(pa.array(range(100))), PkStats.build(pa.array(range(100, 200)))
    buffer.compacted([1], [(10, low), (11, high), (12, None)], 0)
    pending = {
        sid: [(p[0].to_pylist(), p[2]) for p in buffer.flushed[sid].pending] for sid in (10, 11)
    }
    assert pending == {10: [([5], 7)], 11: [([150], 7), ([160], 8)]}
    assert 1 not in buffer.flushed and 12 not in buffer.flushed
    assert {10, 11, 12} <= buffer.done
