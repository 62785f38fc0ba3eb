"""Staged writes (the server side of the Spark writer): DoPut with ``stage`` checks rows like
an insert but keeps them in staging files; nothing is visible until ``commit_write``,
which makes all of them visible at one timestamp (an upsert replacing older rows at that
same timestamp), once, however often it is repeated; ``abort_write`` and the garbage
collector remove what nobody commits."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, wait_for
from stack_factory import (  # noqa: F401  (fixtures)
    on_storage_fixture,
    shared_client_fixture,
    shared_stack,
    stack_factory_fixture,
)

from elanus import layout, objstore
from elanus.client.client import Client
from elanus.errors import ElanusError
from elanus.meta.importfiles import collect_garbage
from elanus.schema import DataType, Schema

pytestmark = pytest.mark.timeout(120)

DIM = 4
STRONG = "Strong"


shared = shared_stack("staged")


def create(client: Client, name: str, auto_id: bool = False) -> None:
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True, auto_id=auto_id)
    s.add_field("version", DataType.INT32)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection(name, schema=s, num_shards=2, properties={"metric_type": "L2"})
    client.load_collection(name)


def rows(ids: range, version: int, auto_id: bool = False, dim: int = DIM) -> pa.Table:
    vec = np.random.default_rng(version).random((len(ids), dim), dtype=np.float32)
    cols: dict[str, Any] = {} if auto_id else {"id": pa.array(ids, pa.int64())}
    cols["version"] = pa.array([version] * len(ids), pa.int32())
    cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), dim)
    return pa.table(cols)


def count(client: Client, name: str, **kw: Any) -> int:
    (row,) = client.query(name, "", ["count(*)"], consistency_level=STRONG, **kw)
    return int(row["count(*)"])


def versions(client: Client, name: str, **kw: Any) -> dict[int, int]:
    got = client.query(
        name, "id >= 0", ["id", "version"], limit=10_000, consistency_level=STRONG, **kw
    )
    return {r["id"]: r["version"] for r in got}


def staged_files(shared: Stack, write_id: str) -> list[Path]:
    return sorted(Path(layout.staging_dir(shared.settings.storage_path, write_id)).rglob("*.arrow"))


def test_staged_rows_are_invisible_until_commit_then_all_at_once(
    shared: Stack, client: Client
) -> None:
    create(client, "staged")
    a = client.stage_insert("staged", rows(range(0, 300), 1), "w1", part="task-0")
    b = client.stage_insert("staged", rows(range(300, 500), 1), "w1", part="task-1")
    assert a["insert_count"] == 300 and a["ids"] == list(range(300)) and b["insert_count"] == 200
    assert len(staged_files(shared, "w1")) >= 2
    assert count(client, "staged") == 0
    assert client.get_collection_stats("staged")["row_count"] == 0

    done = client.commit_write("staged", "w1")

    assert done["state"] == "Completed" and done["rows"] == 500 and done["ts"] > 0
    assert count(client, "staged") == 500
    before = client.query(
        "staged", "", ["count(*)"], as_of=done["ts"] - 1, consistency_level=STRONG
    )
    assert before[0]["count(*)"] == 0  # one timestamp: nothing of it just before
    assert staged_files(shared, "w1") == []  # the staging area is cleaned up

    again = client.commit_write("staged", "w1")  # a retried commit writes nothing twice
    assert again["job_id"] == done["job_id"] and again["rows"] == 500
    assert count(client, "staged") == 500
    with pytest.raises(ElanusError, match="already committed"):
        client.abort_write("w1")


def test_upsert_commit_replaces_older_rows_at_the_commit_timestamp(client: Client) -> None:
    create(client, "upserts")
    old = client.insert("upserts", rows(range(0, 100), 1))
    client.stage_insert("upserts", rows(range(50, 150), 2), "w2", upsert=True)
    assert versions(client, "upserts") == dict.fromkeys(range(100), 1)

    done = client.commit_write("upserts", "w2", upsert=True)

    now = versions(client, "upserts")
    assert now == {**dict.fromkeys(range(50), 1), **dict.fromkeys(range(50, 150), 2)}
    assert count(client, "upserts") == 150
    then = versions(client, "upserts", as_of=done["ts"] - 1)  # time travel: the old rows
    assert then == dict.fromkeys(range(100), 1) and old["ts"] < done["ts"]
    client.commit_write("upserts", "w2", upsert=True)
    assert count(client, "upserts") == 150


def test_abort_leaves_nothing(shared: Stack, client: Client) -> None:
    create(client, "aborted")
    client.stage_insert("aborted", rows(range(40), 1), "w3")
    assert staged_files(shared, "w3")
    assert client.abort_write("w3") is True
    assert staged_files(shared, "w3") == []
    assert client.abort_write("w3") is False
    with pytest.raises(ElanusError, match="nothing is staged"):
        client.commit_write("aborted", "w3", expected_rows=40)
    done = client.commit_write("aborted", "w3")  # nothing left to commit
    assert done["state"] == "Completed" and done["rows"] == 0
    assert count(client, "aborted") == 0


def test_parts_arriving_after_an_abort_are_refused(shared: Stack, client: Client) -> None:
    """A failed Spark job aborts while other tasks may still stream their parts: those
    parts must not leave staging files behind."""
    create(client, "late")
    client.stage_insert("late", rows(range(10), 1), "w10", part="p0_a0")
    assert client.abort_write("w10") is True
    with pytest.raises(ElanusError, match="'w10' was aborted"):
        client.stage_insert("late", rows(range(10, 20), 1), "w10", part="p1_a0")
    assert staged_files(shared, "w10") == []
    assert count(client, "late") == 0


def test_auto_ids_are_assigned_at_staging_and_kept(client: Client) -> None:
    create(client, "autos", auto_id=True)
    staged = client.stage_insert("autos", rows(range(60), 3, auto_id=True), "w4")
    ids = staged["ids"]
    assert len(set(ids)) == 60
    client.commit_write("autos", "w4")
    got = client.get("autos", ids, ["id", "version"], consistency_level=STRONG)
    assert sorted(r["id"] for r in got) == sorted(ids)


def test_commit_of_some_parts_only(shared: Stack, client: Client) -> None:
    create(client, "parts")
    client.stage_insert("parts", rows(range(0, 30), 1), "w5", part="attempt-0")
    client.stage_insert("parts", rows(range(0, 30), 1), "w5", part="attempt-1")  # a retry
    client.stage_insert("parts", rows(range(30, 60), 1), "w5", part="attempt-2")
    with pytest.raises(ElanusError, match="60 row.s. are staged but the writer staged 61"):
        client.commit_write("parts", "w5", parts=["attempt-1", "attempt-2"], expected_rows=61)
    assert count(client, "parts") == 0
    done = client.commit_write("parts", "w5", parts=["attempt-1", "attempt-2"], expected_rows=60)
    assert done["rows"] == 60 and count(client, "parts") == 60


def test_a_field_added_between_staging_and_commit(client: Client) -> None:
    """A staged file of the schema before the field was added is conformed at the commit
    (the field reads null); files of the current schema are taken as the proxy wrote them."""
    create(client, "widened")
    client.stage_insert("widened", rows(range(0, 40), 1), "w8", part="before")
    client.add_collection_field("widened", "note", DataType.VARCHAR, max_length=16, nullable=True)
    later = rows(range(40, 60), 1).append_column("note", pa.array(["x"] * 20))
    client.stage_insert("widened", later, "w8", part="after")
    assert client.commit_write("widened", "w8")["rows"] == 60
    got = client.query("widened", "id >= 0", ["id", "note"], limit=100, consistency_level=STRONG)
    assert {r["id"]: r["note"] for r in got} == {i: None if i < 40 else "x" for i in range(60)}


def test_bad_rows_are_refused_when_staged(shared: Stack, client: Client) -> None:
    create(client, "refusals")
    with pytest.raises(ElanusError, match="dim") as err:
        client.stage_insert("refusals", rows(range(10), 1, dim=DIM + 1), "w6")
    assert err.value.code == "SCHEMA_MISMATCH"
    assert staged_files(shared, "w6") == []
    with pytest.raises(ElanusError, match="'stage' '../escape' must be"):
        client.stage_insert("refusals", rows(range(10), 1), "../escape")


def test_duplicate_keys_across_a_write_fail_the_commit_visibly(
    shared: Stack, client: Client
) -> None:
    create(client, "dups")
    client.stage_insert("dups", rows(range(0, 20), 1), "w7", part="a")
    client.stage_insert("dups", rows(range(10, 30), 1), "w7", part="b")
    with pytest.raises(ElanusError, match="duplicate primary key") as err:
        client.commit_write("dups", "w7")
    assert err.value.code == "INVALID_ARGUMENT"
    assert count(client, "dups") == 0
    assert staged_files(shared, "w7")  # kept: the writer may commit some parts, or abort
    assert client.abort_write("w7") is True


def test_stale_staging_is_garbage_collected(shared: Stack, client: Client) -> None:
    create(client, "stale")
    client.stage_insert("stale", rows(range(5), 1), "w8")
    client.stage_insert("stale", rows(range(5, 10), 1), "w9")
    past = time.time() - 2 * shared.settings.gc_delay_s
    for f in staged_files(shared, "w8"):
        for p in (f, *f.parents):
            if p == shared.settings.storage_path:
                break
            os.utime(p, (past, past))
    assert shared.coord is not None
    removed = shared.call(shared.coord.gc.collect())
    assert any(r.endswith("/staging/w8") for r in removed)
    assert staged_files(shared, "w8") == [] and staged_files(shared, "w9")


# -- on the storage: local and S3 -------------------------------------------------------------
def test_a_staged_write_on_the_storage_commits_and_stale_staging_expires(
    on_storage: Stack,
) -> None:
    """The staged files are written to ``<storage>/staging`` (in the bucket on S3), the
    data node reads them from there, the commit removes them, and the garbage collector
    removes a write nobody committed."""
    client = on_storage.client()
    create(client, "st")
    storage = on_storage.settings.storage_uri
    client.stage_insert("st", rows(range(0, 120), 1), "s1", part="task-0")
    client.stage_insert("st", rows(range(120, 200), 1), "s1", part="task-1")
    staged = objstore.list_tree(layout.staging_dir(storage, "s1"))
    assert len(staged) >= 2 and all(f.endswith(".arrow") for f in staged)
    if objstore.is_remote(storage):  # nothing in the proxy's own data dir
        assert not (on_storage.settings.data_path / "staging").exists()
    done = client.commit_write("st", "s1")
    assert done["state"] == "Completed" and done["rows"] == 200
    assert count(client, "st") == 200
    wait_for(lambda: not objstore.list_tree(layout.staging_dir(storage, "s1")), 10, "cleanup")

    client.stage_insert("st", rows(range(500, 510), 2), "s2")
    time.sleep(1.1)  # an object's time has whole seconds
    # A gc_delay_s of 0 still leaves a fresh write its grace: its commit may be under way.
    assert collect_garbage(on_storage.settings, 0.0, set(), lambda _: False, set()) == []
    removed = collect_garbage(
        on_storage.settings, 0.0, set(), lambda _: False, set(), staging_grace_s=0.0
    )
    assert removed == [layout.staging_dir(storage, "s2")]
    assert objstore.list_tree(layout.staging_dir(storage, "s2")) == {}
