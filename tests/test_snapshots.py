"""Collection snapshots (issue 36): taken at a timestamp, kept through compaction and
garbage collection of their source, restored into a new collection with exactly their
rows and indexes; through pymilvus (Milvus 2.6's snapshot API; Milvus Lite has none, so
semantics follow Milvus's snapshot design doc), the Elanus SDK and the CLI. One stack."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_elanus
from milvus_stack import milvus_stack
from pymilvus import DataType, MilvusClient, MilvusException

from elanus import layout
from elanus.api.snapshot import GetSnapshot
from elanus.errors import ElanusError, ErrorCode

ROWS = 100


@pytest.fixture
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from milvus_stack(request, tmp_path, gc_delay_s=0, orphan_grace_s=0)


def _rows(ids: range) -> list[dict[str, Any]]:
    return [{"id": i, "vec": [float(i), 1.0, 0.0, 0.0], "n": i * 2} for i in ids]


def _cli(stack: Any, *args: str) -> str:
    result = run_elanus(*args, "--uri", stack.uri)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _wait_restored(c: MilvusClient, job_id: int) -> Any:
    deadline = time.monotonic() + 60
    while True:
        state = c.get_restore_snapshot_state(job_id)
        if state.state in ("RestoreSnapshotCompleted", "RestoreSnapshotFailed"):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


def _snapshot_dirs(stack: Any, collection: str, name: str) -> list[str]:
    info = stack.proxy.dml.collection("default", collection)
    detail = stack.call(
        stack.coord.snapshots.get(GetSnapshot(collection_id=info.collection_id, name=name))
    )
    return [layout.parent(f.path) for f in detail.files]


def test_snapshot_restores_exactly_its_rows_through_compaction_and_gc(stack: Any) -> None:
    c = MilvusClient(uri=stack.milvus_uri, timeout=60)
    schema = c.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("n", DataType.INT64)
    c.create_collection("src", schema=schema, consistency_level="Strong")
    index = c.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    c.create_index("src", index)
    c.create_partition("src", "p1")
    c.load_collection("src")
    c.insert("src", _rows(range(0, 50)))
    c.flush("src")
    c.insert("src", _rows(range(50, ROWS)), partition_name="p1")  # growing: a flush takes it
    c.delete("src", ids=list(range(10)))

    c.create_snapshot("s1", "src", description="before the changes")
    assert c.list_snapshots("src") == ["s1"]
    described = c.describe_snapshot("s1", "src")
    assert (described.name, described.collection_name) == ("s1", "src")
    assert described.description == "before the changes"
    assert described.partition_names == ["_default", "p1"]
    with pytest.raises(MilvusException, match="already exists"):
        c.create_snapshot("s1", "src")

    # Changes after the snapshot, then compaction and garbage collection of the source.
    c.insert("src", _rows(range(ROWS, ROWS + 50)))
    c.delete("src", ids=list(range(10, 20)))
    c.flush("src")
    dirs = _snapshot_dirs(stack, "src", "s1")
    assert dirs
    job = c.compact("src")
    deadline = time.monotonic() + 60
    while c.get_compaction_state(job) != "Completed":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    stack.call(stack.coord.gc.collect())
    assert all(Path(d).is_dir() for d in dirs)  # kept for the snapshot

    # Restore into a new collection: exactly the snapshot's rows, with its index.
    job_id = c.restore_snapshot("s1", "src", "dst")
    state = _wait_restored(c, job_id)
    assert state.state == "RestoreSnapshotCompleted", state.reason
    assert (state.snapshot_name, state.collection_name) == ("s1", "dst")
    assert [j.job_id for j in c.list_restore_snapshot_jobs("dst")] == [job_id]
    assert c.describe_index("dst", "vec")["index_type"] == "FLAT"
    c.load_collection("dst")
    count = c.query("dst", filter="", output_fields=["count(*)"])[0]["count(*)"]
    assert count == ROWS - 10
    in_p1 = c.query("dst", filter="", output_fields=["count(*)"], partition_names=["p1"])
    assert in_p1[0]["count(*)"] == ROWS - 50
    got = c.get("dst", ids=[5, 10, 15, 99, 120], output_fields=["n"])
    assert sorted((r["id"], r["n"]) for r in got) == [(10, 20), (15, 30), (99, 198)]

    # Refusals: an existing target, a missing snapshot, an option not honoured.
    with pytest.raises(MilvusException, match="already exists"):
        c.restore_snapshot("s1", "src", "src")
    with pytest.raises(MilvusException, match="snapshot not found") as missing:
        c.drop_snapshot("nope", "src")
    assert missing.value.code == 1100
    with pytest.raises(MilvusException, match="compaction_protection_seconds"):
        c.create_snapshot("s2", "src", compaction_protection_seconds=60)
    assert c.list_snapshots("src") == ["s1"]

    # A pin keeps the files of a dropped snapshot until it is released.
    pin = c.pin_snapshot_data("s1", "src", ttl_seconds=600)
    c.drop_snapshot("s1", "src")
    assert c.list_snapshots("src") == []
    stack.call(stack.coord.gc.collect())
    assert all(Path(d).is_dir() for d in dirs)
    c.unpin_snapshot_data(pin)
    with pytest.raises(MilvusException, match="does not exist"):
        c.unpin_snapshot_data(pin)
    stack.call(stack.coord.gc.collect())
    assert not any(Path(d).is_dir() for d in dirs)  # compacted away: now collected

    # The SDK and its actions.
    sdk = stack.client()
    made = sdk.create_snapshot("s3", "dst")
    assert made["rows"] == ROWS - 10 and made["segments"] >= 1
    assert [s["name"] for s in sdk.list_snapshots("dst")] == ["s3"]
    assert sdk.describe_snapshot("s3", "dst")["shape"]["indexes"][0]["index_type"] == "FLAT"
    restored = sdk.restore_snapshot("s3", "dst", "dst2")
    assert sdk.get_restore_snapshot_state(restored)["snapshot"] == "s3"
    with pytest.raises(ElanusError) as gone:
        sdk.drop_snapshot("s9", "dst")
    assert gone.value.code == ErrorCode.SNAPSHOT_NOT_FOUND

    # The CLI: restore follows the job to its end.
    assert "s3" in _cli(stack, "snapshot", "list", "dst")
    done = json.loads(_cli(stack, "snapshot", "restore", "dst", "s3", "dst3", "--json"))
    assert done["state"] == "RestoreSnapshotCompleted" and done["rows"] == ROWS - 10
    assert "dropped snapshot s3" in _cli(stack, "snapshot", "drop", "dst", "s3")
    assert c.list_snapshots() == []
