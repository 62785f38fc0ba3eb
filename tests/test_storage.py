"""The storage root as a URI (issue 21): every role on a local path and on S3 (a real
S3-protocol server, ``moto_server``, started by the tests): write, flush, load, search,
delete, index build, compaction, GC, a query node with an empty data dir; the catalog's
relative paths; clear errors for bad S3 settings."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import Stack, StandaloneProcess, bare_collection, cli_env, run_elanus
from s3 import MotoServer, start_moto
from test_read_path import wait_for

from elanus import ElanusError, ErrorCode, layout, objstore
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.meta.coord import Coordinator
from elanus.schema import TIMESTAMP_FIELD, quick_schema
from elanus.segments import storage
from elanus.segments.datanode.node import DataNode
from elanus.segments.querynode.node import QueryNode
from elanus.settings import Settings, load_settings

DIM = 8


@pytest.fixture
def stack_settings(storage_settings: dict[str, Any]) -> dict[str, Any]:
    """conftest's ``stack`` on each storage root, with no background compaction and no
    grace before garbage goes."""
    return {"compaction_interval_s": 0, "gc_delay_s": 0, "retention_s": 0, **storage_settings}


def insert(client: Client, lo: int, hi: int) -> None:
    rng = np.random.default_rng(lo)
    vectors = rng.random((hi - lo, DIM), dtype=np.float32)
    client.insert("c", {"id": np.arange(lo, hi), "vector": vectors})


def flushed(client: Client) -> list[dict[str, Any]]:
    return [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]


def count(client: Client) -> int:
    rows = client.query("c", "id >= 0", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"]) if isinstance(rows, list) else int(rows.column(0)[0].as_py())


def catalog_paths(stack: Stack) -> list[str]:
    assert stack.coord is not None
    rows = stack.coord.db.call(
        lambda con: con.execute("SELECT path FROM segments WHERE path IS NOT NULL").fetchall()
    )
    return [r[0] for r in rows]


def test_objstore_files(storage_settings: dict[str, Any], tmp_path: Path) -> None:
    """The file operations every role uses, on both kinds of root."""
    settings = Settings(data_dir=str(tmp_path), **storage_settings)
    store = objstore.configure(settings)
    store.probe()
    root = settings.storage_uri
    d = layout.join(root, "a", "b")
    objstore.write_bytes(layout.join(d, "x.bin"), b"12345")
    objstore.write_ipc(layout.join(d, "t.arrow"), pa.table({"v": [1, 2]}))
    assert objstore.read_bytes(layout.join(d, "x.bin")) == b"12345"
    assert objstore.read_ipc(layout.join(d, "t.arrow")).column("v").to_pylist() == [1, 2]
    assert objstore.list_dir(d) == ["t.arrow", "x.bin"]
    assert objstore.list_tree(layout.join(root, "a"))["b/x.bin"] == 5
    assert objstore.is_dir(d) and objstore.exists(layout.join(d, "x.bin"))
    assert time.time() - (objstore.modified(d) or 0) < 60
    objstore.remove_tree(layout.join(root, "a"))
    assert not objstore.exists(layout.join(d, "x.bin")) and objstore.list_dir(d) == []
    objstore.remove_tree(layout.join(root, "a"))  # gone already: no error


def test_roles_on_the_storage(stack: Stack, tmp_path: Path) -> None:
    """Write, flush, load, search, delete, index, compact, GC and a new query node with an
    empty data dir, all through the storage root; the catalog keeps relative paths."""
    client = stack.client()
    bare_collection(client, "c", DIM)
    for lo in (0, 200):
        insert(client, lo, lo + 200)
        client.flush("c", timeout=60)
    before = flushed(client)
    assert len(before) == 2
    root = stack.settings.storage_uri
    for s in before:
        assert s["path"].startswith(root + "/collections/")
        assert objstore.exists(s["path"])
    assert all(p.startswith("collections/") for p in catalog_paths(stack))
    client.delete("c", list(range(0, 400, 4)))  # 100 rows, in both segments
    client.flush("c", timeout=60)
    client.load_collection("c")
    assert count(client) == 300
    hits = client.search("c", np.ones((1, DIM), np.float32), limit=3, consistency_level="Strong")
    assert len(hits[0]) == 3 and all(h["id"] % 4 for h in hits[0])

    # an index built by an index node lands under the root and is served
    stack.add_indexnode()
    client.create_index("c", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 4})
    client.wait_for_index("c", timeout=60)
    assert stack.coord is not None
    for t in stack.coord.index.tasks.values():
        assert t.file_paths and all(f.startswith(root + "/indexes/") for f in t.file_paths)
        assert all(objstore.exists(f) for f in t.file_paths)

    # compaction merges both segments and drops the deleted rows; GC removes the sources
    job = client.compact("c")
    deadline = time.monotonic() + 60
    while client.get_compaction_state(job) != "Completed":
        assert time.monotonic() < deadline, "compaction did not complete"
        time.sleep(0.1)
    (target,) = flushed(client)
    assert target["num_rows"] == 300
    stack.call(stack.coord.gc.collect())
    for s in before:
        assert not objstore.exists(s["path"])
    assert objstore.exists(target["path"])

    # a query node with an empty data dir of its own loads everything from the storage
    client.release_collection("c")
    old = stack.querynodes.pop()
    stack.call(old.stop())
    fresh = QueryNode(stack.settings.replace(data_dir=str(tmp_path / "fresh")), stack.bus)
    stack.call(fresh.start())
    stack.querynodes.append(fresh)
    sessions = stack.coord.sessions
    wait_for(
        lambda: [s.node_id for s in sessions.of_role("querynode")] == [fresh.node_id],
        what="only the new query node",
    )
    client.load_collection("c")
    assert count(client) == 300
    wait_for(lambda: any(fresh.worker.segments.values()), what="the segment on the new node")


def test_import_lands_on_the_storage(stack: Stack, tmp_path: Path) -> None:
    """A bulk import (uploaded, as from a client elsewhere) writes its segments under the
    root; they load and answer, and the job's scratch files are gone afterwards."""
    client = stack.client()
    bare_collection(client, "c", DIM)
    vectors = np.random.default_rng(7).random((500, DIM), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(range(500), pa.int64()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    job = client.wait_import(
        client.bulk_import("c", [str(tmp_path / "rows.parquet")], upload=True), timeout=60
    )
    assert job["state"] == "Completed" and job["rows"] == 500
    root = stack.settings.storage_uri
    segs = client.get_segment_info("c")
    assert segs and all(s["path"].startswith(root + "/collections/") for s in segs)
    assert all(objstore.exists(s["path"]) for s in segs)
    client.load_collection("c")
    assert count(client) == 500
    hits = client.search("c", vectors[[42]], limit=1, consistency_level="Strong")
    assert hits[0][0]["id"] == 42
    assert objstore.list_dir(layout.join(root, "imports")) == []


def test_a_data_node_with_a_data_dir_of_its_own_imports_uploads_and_staged_writes(
    moto_server: MotoServer, nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
) -> None:
    """Roles on different machines share only the storage: the proxy puts an upload and a
    staged write in the bucket, and a data node with a data dir of its own imports both."""
    settings = moto_server.settings(moto_server.new_bucket())
    stack = Stack(loop_thread, nats_server, tmp_path / "proxy", **settings)
    try:
        stack.start()
        old = stack.datanodes.pop()
        stack.call(old.stop())
        node = DataNode(stack.settings.replace(data_dir=str(tmp_path / "datanode")), stack.bus)
        stack.call(node.start())
        stack.datanodes.append(node)
        assert stack.coord is not None
        sessions = stack.coord.sessions
        wait_for(
            lambda: [s.node_id for s in sessions.of_role("datanode")] == [node.node_id],
            what="only the new data node",
        )
        client = stack.client()
        bare_collection(client, "c", DIM)
        rng = np.random.default_rng(3)
        table = pa.table(
            {
                "id": pa.array(range(500), pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.random(500 * DIM, dtype=np.float32)), DIM
                ),
            }
        )
        pq.write_table(table, tmp_path / "rows.parquet")
        job = client.wait_import(client.bulk_import("c", [str(tmp_path / "rows.parquet")]), 60)
        root = stack.settings.storage_uri
        assert job["rows"] == 500 and job["files"][0].startswith(root + "/import/uploads/")
        staged = pa.table(
            {"id": pa.array(range(500, 600), pa.int64()), "vector": table["vector"][:100]}
        )
        client.stage_insert("c", staged, "w1", part="task-0")
        assert client.commit_write("c", "w1")["rows"] == 100
        client.load_collection("c")
        assert count(client) == 600
        for own in (tmp_path / "proxy", tmp_path / "datanode"):  # only their own state
            assert not [p for p in own.rglob("*") if p.is_file() and "import" in p.parts]
            assert not (own / "staging").exists()
    finally:
        stack.close()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("storage_settings", ["s3"], indirect=True)
def test_spark_index_run_on_the_storage(stack: Stack, storage_settings: dict[str, Any]) -> None:
    """``elanus index build`` (a Spark run, its own processes) reads the segments and
    writes the index files through the storage root; the S3 settings reach the executors
    through the environment (``ELANUS_S3_*``). On local storage the same run is
    ``test_index_spark.py::test_cli_spark_index_run_builds_every_segment``."""
    pytest.importorskip("pyspark")
    client = stack.client()
    bare_collection(client, "c", DIM)
    insert(client, 0, 400)
    client.flush("c", timeout=60)
    client.create_index("c", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 4})
    s3_env = {
        f"ELANUS_{k.upper()}": str(v) for k, v in storage_settings.items() if k.startswith("s3_")
    }
    env = cli_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **s3_env)
    done = run_elanus(
        "index", "build", "c", "--spark-master", "local[1]", "--uri", stack.uri, "--json",
        env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["built"] == 1
    assert stack.coord is not None
    root = stack.settings.storage_uri
    for t in stack.coord.index.tasks.values():
        assert all(f.startswith(root + "/indexes/") and objstore.exists(f) for f in t.file_paths)
    assert client.describe_index("c")[0]["state"] == "Finished"


# -- clear errors -----------------------------------------------------------------------------


def probe_error(settings: Settings) -> str:
    with pytest.raises(ElanusError) as exc:
        objstore.Storage(settings.storage_uri, objstore.S3Config.of(settings)).probe()
    assert exc.value.code == ErrorCode.UNAVAILABLE
    return exc.value.message


def test_a_segment_is_created_and_a_replay_writes_it_over(
    storage_settings: dict[str, Any], tmp_path: Path
) -> None:
    """A new segment's dataset is created (Lance then warns of nothing); its first write
    again, a datanode's replay after a crash, starts it over; later writes append."""
    settings = Settings(data_dir=str(tmp_path), **storage_settings)
    objstore.configure(settings)
    target = storage.segment_schema(quick_schema(2))
    seg = layout.join(settings.storage_uri, "collections", "1", "2", "3")

    def rows(*ids: int) -> pa.Table:
        n = len(ids)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array([0.5] * 2 * n, pa.float32()), 2)
        return pa.table({"id": list(ids), "vector": vectors, TIMESTAMP_FIELD: [1] * n})

    path = storage.write_rows(seg, rows(1, 2), target, first=True)
    storage.write_rows(seg, rows(3), target, first=False)
    assert sorted(storage.dataset(path).to_table()["id"].to_pylist()) == [1, 2, 3]
    storage.write_rows(seg, rows(7), target, first=True)  # the replay
    assert storage.dataset(path).to_table()["id"].to_pylist() == [7]


def test_bad_s3_settings_give_one_clear_error(moto_server: MotoServer, tmp_path: Path) -> None:
    good = moto_server.settings(moto_server.new_bucket())
    base = Settings(data_dir=str(tmp_path), **good)
    missing = probe_error(base.replace(storage="s3://no-such-bucket-here/x"))
    assert "bucket 'no-such-bucket-here' does not exist" in missing
    unreachable = probe_error(base.replace(s3_endpoint="http://127.0.0.1:9"))
    assert "s3_endpoint" in unreachable
    started = time.monotonic()
    probe_error(base.replace(s3_endpoint="http://127.0.0.1:9"))
    assert time.monotonic() - started < 30  # never a hang


def test_wrong_credentials_name_the_key_settings(tmp_path: Path) -> None:
    server = start_moto(tmp_path / "moto.log", check_credentials=True)
    try:
        settings = Settings(data_dir=str(tmp_path), **server.settings("any-bucket"))
        message = probe_error(settings)
        assert "access denied: check s3_access_key_id and s3_secret_access_key" in message
    finally:
        server.stop()


def test_a_role_refuses_to_start_on_a_missing_bucket(
    moto_server: MotoServer, nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
) -> None:
    settings = moto_server.settings("no-such-bucket-either")
    stack = Stack(loop_thread, nats_server, tmp_path / "data", **settings)
    try:
        coord = Coordinator(stack.settings, stack.bus)
        with pytest.raises(ElanusError) as exc:
            stack.call(coord.start())
        assert "no-such-bucket-either" in exc.value.message
        assert "does not exist (setting storage)" in exc.value.message
        stack.call(coord.stop())
    finally:
        stack.close()


def test_s3_settings_come_from_env_or_aws_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-aws")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("ELANUS_S3_ENDPOINT", "http://minio:9000")
    settings = load_settings(config_file=None, storage="s3://bucket/prefix")
    config = objstore.S3Config.of(settings)
    assert (config.access_key_id, config.endpoint) == ("from-aws", "http://minio:9000")
    monkeypatch.setenv("ELANUS_S3_ACCESS_KEY_ID", "from-elanus")
    assert objstore.S3Config.of(load_settings()).access_key_id == "from-elanus"
    options = config.lance_options()
    assert options["aws_endpoint"] == "http://minio:9000" and options["allow_http"] == "true"
    assert settings.storage_uri == "s3://bucket/prefix"
    with pytest.raises(ValueError, match="s3://bucket"):
        Settings(storage="s3:/bucket")


# -- a copied data dir ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_copied_data_dir_starts_and_answers_the_same(
    standalone_factory: Callable[..., StandaloneProcess], tmp_path: Path
) -> None:
    """The catalog keeps paths relative to the storage root: a stopped standalone's data
    dir copied elsewhere (the obvious backup) starts and answers as the original did."""
    sp = standalone_factory().start().wait_ready()
    with Client(sp.uri, timeout=60) as client:
        bare_collection(client, "c", DIM)
        insert(client, 0, 300)
        client.flush("c", timeout=60)
        client.delete("c", [1, 2, 3])
        client.flush("c", timeout=60)
        client.load_collection("c")
        query = np.full((1, DIM), 0.5, np.float32)
        before = client.search("c", query, limit=5, consistency_level="Strong")
        assert count(client) == 297
    assert sp.stop() == 0
    copy = tmp_path / "elsewhere" / "data"
    shutil.copytree(sp.data_dir, copy, ignore=shutil.ignore_patterns("standalone.json"))
    shutil.rmtree(sp.data_dir)  # nothing may still point at the original
    again = standalone_factory(data_dir=copy).start().wait_ready()
    with Client(again.uri, timeout=60) as client:
        client.load_collection("c")
        assert count(client) == 297
        after = client.search("c", query, limit=5, consistency_level="Strong")
        assert [h["id"] for h in after[0]] == [h["id"] for h in before[0]]
    assert "not found" not in again.log()
    assert again.stop() == 0
