"""Compaction of segments from every writer: datanode flushes, bulk imports and staged
writes (and segments older versions wrote) share one Arrow schema, so they merge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import Stack

from elanus import layout
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.schema import DataType, Schema
from elanus.segments import storage
from elanus.segments.storage.compactor import compact_segments

pytestmark = pytest.mark.timeout(120)

DIM = 8
STRONG = "Strong"


def collection_schema() -> Schema:
    """Not-null and nullable fields and dynamic fields: everything nullability touches."""
    s = Schema(enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("title", DataType.VARCHAR, max_length=64, nullable=True)
    s.add_field("score", DataType.DOUBLE)
    return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)


def rows(ids: range, *, titles: bool = True) -> pa.Table:
    vec = np.random.default_rng(ids.start).random((len(ids), DIM), dtype=np.float32)
    cols: dict[str, Any] = {"id": pa.array(ids, pa.int64())}
    if titles:
        cols["title"] = [f"t{i}" for i in ids]
    cols["score"] = pa.array([float(i) for i in ids])
    cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), DIM)
    return pa.table(cols)


@pytest.fixture
def stack_settings() -> dict[str, Any]:
    """No background compaction and no grace before garbage goes (conftest's ``stack``)."""
    return {"compaction_interval_s": 0, "gc_delay_s": 0, "retention_s": 0}


def wait_compacted(client: Client, job: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (state := client.get_compaction_state(job)) != "Completed":
        assert state == "Executing", state
        assert time.monotonic() < deadline, "compaction did not complete"
        time.sleep(0.05)


def count(client: Client) -> int:
    (row,) = client.query("c", "", ["count(*)"], consistency_level=STRONG)
    return int(row["count(*)"])


def test_flushed_imported_and_staged_segments_compact_into_one(
    stack: Stack, client_tmp: Path
) -> None:
    client = stack.client()
    client.create_collection("c", schema=collection_schema(), properties={"metric_type": "L2"})
    client.load_collection("c")
    # An insert (with a dynamic key), flushed by the datanode.
    inserted = rows(range(0, 100)).append_column("colour", pa.array(["red"] * 100))
    client.insert("c", inserted)
    client.flush("c", timeout=30)
    # A bulk import whose file has no nullable column: its rows get nulls there.
    path = client_tmp / "rows.parquet"
    pq.write_table(rows(range(100, 200), titles=False), path)
    client.wait_import(client.bulk_import("c", [str(path)]), timeout=60)
    # A staged write (the Spark connector's path).
    client.stage_insert("c", rows(range(200, 300)), "w1", part="task-0")
    client.commit_write("c", "w1")
    client.delete("c", [0, 150, 250])
    before = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    assert len(before) == 3

    wait_compacted(client, client.compact("c"))

    (target,) = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    assert sorted(target["compacted_from"]) == sorted(s["segment_id"] for s in before)
    assert target["num_rows"] == 297
    on_disk = lance.dataset(target["path"]).schema
    assert on_disk.equals(storage.segment_schema(collection_schema()))
    assert count(client) == 297
    got = client.query(
        "c", "id in [1, 101, 201]", ["id", "title", "score", "colour"], consistency_level=STRONG
    )
    by_id = {r["id"]: r for r in got}
    assert by_id[1]["title"] == "t1" and by_id[1]["colour"] == "red"
    assert by_id[101]["title"] is None and by_id[101]["score"] == 101.0
    assert by_id[201]["title"] == "t201"
    # The channel still runs: a later insert flushes, and compacts with the merged segment.
    client.insert("c", rows(range(300, 310)))
    client.flush("c", timeout=30)
    assert count(client) == 307
    wait_compacted(client, client.compact("c"))
    flushed = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    assert [s["num_rows"] for s in flushed] == [307]


@pytest.fixture
def client_tmp(tmp_path: Path) -> Path:
    d = tmp_path / "files"
    d.mkdir()
    return d


def _old_segment(seg_dir: Path, table: pa.Table) -> None:
    """A segment as an older version wrote it: Lance as is, no conforming."""
    seg_dir.mkdir(parents=True)
    lance.write_dataset(table, str(layout.data_path(seg_dir)))
    storage.write_pk_stats(seg_dir, table.column("id"))


def test_segments_written_by_older_versions_still_compact(tmp_path: Path) -> None:
    schema = collection_schema()
    base = rows(range(0, 4))
    ts = pa.array(np.full(4, 7, dtype=np.uint64))
    # An old flush: every column nullable, no field metadata, _ts nullable, $meta present.
    flushed = pa.table(
        {**{n: base.column(n) for n in base.column_names}, "$meta": pa.nulls(4, pa.string())}
    ).append_column("_ts", ts)
    # An old import: not-null columns, written before the collection had dynamic fields.
    imported = (
        storage.conform(rows(range(4, 8)), storage.segment_schema(schema, with_ts=False))
        .drop_columns(["$meta"])
        .append_column(pa.field("_ts", pa.uint64()), ts)
    )
    assert not flushed.schema.equals(imported.schema)
    _old_segment(tmp_path / "a", flushed)
    _old_segment(tmp_path / "b", imported)

    result = compact_segments([tmp_path / "a", tmp_path / "b"], tmp_path / "t", schema, 0)

    assert result["num_rows"] == 8 and result["min_ts"] == result["max_ts"] == 7
    merged = lance.dataset(str(layout.data_path(tmp_path / "t"))).to_table()
    assert merged.schema.equals(storage.segment_schema(schema))
    assert merged.column("id").to_pylist() == list(range(8))
    assert merged.column("$meta").null_count == 8


def test_a_segment_that_cannot_fit_the_schema_fails_naming_the_problem(tmp_path: Path) -> None:
    schema = collection_schema()
    bad = rows(range(0, 2)).set_column(2, "score", pa.array([1.0, None]))
    _old_segment(tmp_path / "a", bad.append_column("_ts", pa.array([1, 1], pa.uint64())))
    with pytest.raises(ElanusError) as err:
        compact_segments([tmp_path / "a"], tmp_path / "t", schema, 0)
    assert err.value.code == ErrorCode.INTERNAL and "score" in err.value.message
    assert not (tmp_path / "t").exists()
