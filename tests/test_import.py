"""Bulk import end to end on a real stack (NATS, coord, datanode, query node, Flight proxy):
files become segments directly; every file is checked before anything is written; the
rows land in the vchannel their key hashes to, searchable and queryable, and later
deletes of them reach the datanode's delta logs (also after a datanode restart)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import STEP_TIMEOUT_S, Stack, wait_for
from segment_reader import read_deltas, read_rows
from stack_factory import (  # noqa: F401  (fixtures)
    on_storage_fixture,
    shared_client_fixture,
    shared_stack,
    stack_factory_fixture,
)

import elanus.meta.importfiles as importfiles
import elanus.segments.datanode.importer as importer
from elanus import layout, objstore
from elanus.api.datanode import ImportTaken, RunImport
from elanus.api.imports import ImportAPI, PrepareImport
from elanus.channels.bus import Bus
from elanus.channels.runtime.sessions import Session, SessionInfo
from elanus.client.client import Client
from elanus.errors import ElanusError
from elanus.importroots import upload_area
from elanus.pkhash import shard_of
from elanus.schema import DataType, Schema

pytestmark = pytest.mark.timeout(120)

DIM = 8
MAX_ROWS = 700
STRONG = "Strong"


shared = shared_stack("import", segment_max_rows=MAX_ROWS)  # 2 shards per collection


def schema(auto_id: bool = False, dynamic: bool = False) -> Schema:
    s = Schema(enable_dynamic_field=dynamic)
    s.add_field("id", DataType.INT64, is_primary=True, auto_id=auto_id)
    s.add_field("title", DataType.VARCHAR, max_length=64)
    return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)


def create(client: Client, name: str, *, load: bool = True, **kw: Any) -> None:
    client.create_collection(
        name, schema=schema(**kw), num_shards=2, properties={"metric_type": "L2"}
    )
    if load:
        client.load_collection(name)


def vectors(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim), dtype=np.float32)


def rows_table(ids: range, seed: int = 0, dim: int = DIM, auto_id: bool = False) -> pa.Table:
    vec = vectors(len(ids), seed, dim)
    cols: dict[str, Any] = {} if auto_id else {"id": pa.array(ids, pa.int64())}
    cols["title"] = [f"title {i}" for i in ids]
    cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), dim)
    return pa.table(cols)


def parquet(path: Path, table: pa.Table) -> str:
    pq.write_table(table, path)
    return str(path)


def count(client: Client, name: str) -> int:
    (row,) = client.query(name, "", ["count(*)"], consistency_level=STRONG)
    return int(row["count(*)"])


def run_import(client: Client, name: str, files: list[Any], **kw: Any) -> dict[str, Any]:
    return client.wait_import(client.bulk_import(name, files, **kw), timeout=60)


def failed(client: Client, name: str, files: list[Any]) -> dict[str, Any]:
    job_id = client.bulk_import(name, files)
    with pytest.raises(ElanusError) as err:
        client.wait_import(job_id, timeout=60)
    state = client.get_import_state(job_id)
    assert state["state"] == "Failed" and state["reason"] in err.value.message
    assert err.value.code == state["reason_code"]
    return state


def assert_nothing_imported(client: Client, name: str, shared: Stack) -> None:
    assert client.get_collection_stats(name)["row_count"] == 0
    assert count(client, name) == 0
    segs = client.get_segment_info(name)
    assert all(s["state"] == "Dropped" for s in segs), segs


# -- Parquet ----------------------------------------------------------------------------------
def test_parquet_import_is_searchable_queryable_and_routed_by_key(
    shared: Stack, client: Client, tmp_path: Path
) -> None:
    create(client, "books")
    shuffle = np.random.default_rng(3).permutation(2000)  # each segment sorts its keys
    data = rows_table(range(2000), seed=1).take(pa.array(shuffle))
    job = run_import(client, "books", [parquet(tmp_path / "books.parquet", data)])

    assert job["state"] == "Completed" and job["rows"] == 2000 and job["progress"] == 1.0
    assert client.get_collection_stats("books")["row_count"] == 2000
    assert count(client, "books") == 2000
    got = client.query("books", "id in [7, 1999]", ["id", "title"], consistency_level=STRONG)
    assert sorted((r["id"], r["title"]) for r in got) == [(7, "title 7"), (1999, "title 1999")]
    vec = vectors(2000, seed=1)
    hits = client.search("books", [vec[1234].tolist()], limit=1, consistency_level=STRONG)
    assert hits[0][0]["id"] == 1234 and hits[0][0]["distance"] == pytest.approx(0.0, abs=1e-5)

    # Segments: Flushed and sorted, within the row limit, every key in the vchannel it
    # hashes to, and every row stamped with the job's one import timestamp.
    segs = client.get_segment_info("books")
    assert {s["segment_id"] for s in segs} == set(job["segment_ids"])
    assert {(s["state"], s["is_sorted"]) for s in segs} == {("Flushed", True)}
    assert max(s["num_rows"] for s in segs) <= MAX_ROWS and len(segs) >= 4
    rows = read_rows(shared.settings.storage_path, segs)
    assert sorted(rows.column("id").to_pylist()) == list(range(2000))
    for sid in job["segment_ids"]:  # in key order within each segment
        ids = rows.filter(pc.equal(rows.column("_segment"), sid)).column("id").to_pylist()
        assert ids == sorted(ids)
    assert set(rows.column("_ts").to_pylist()) == {job["ts"]}
    vchannels = client.describe_collection("books")["vchannels"]
    by_seg = {s["segment_id"]: vchannels.index(s["vchannel"]) for s in segs}
    expected = [by_seg[s] for s in rows.column("_segment").to_pylist()]
    assert shard_of(rows.column("id").combine_chunks(), 2).tolist() == expected


def test_deletes_of_imported_rows_reach_the_delta_logs_across_a_datanode_restart(
    shared: Stack, client: Client, tmp_path: Path
) -> None:
    create(client, "deltas")
    job = run_import(client, "deltas", [parquet(tmp_path / "d.parquet", rows_table(range(500)))])
    client.delete("deltas", [1, 2, 3])
    assert count(client, "deltas") == 497
    client.insert("deltas", rows_table(range(10_000, 10_010)))  # rows in both vchannels
    client.flush("deltas")  # each channel's datanode writes pending deltas with the flush
    storage = shared.settings.storage_path
    imported = client.get_segment_info(segment_ids=job["segment_ids"])
    assert set(read_deltas(storage, imported).column("pk").to_pylist()) == {1, 2, 3}

    # A delete while no datanode runs; the next datanode replays it from the checkpoint
    # and knows the imported segments from the coord.
    old = shared.datanodes.pop()
    shared.call(old.stop())
    client.delete("deltas", [4, 5])
    shared.add_datanode()
    client.insert("deltas", rows_table(range(10_010, 10_020)))
    client.flush("deltas", timeout=30)
    assert set(read_deltas(storage, imported).column("pk").to_pylist()) == {1, 2, 3, 4, 5}
    client.release_collection("deltas")
    client.load_collection("deltas")
    assert count(client, "deltas") == 500 - 5 + 20


# -- other formats ----------------------------------------------------------------------------
def test_jsonl_csv_and_numpy_imports(shared: Stack, client: Client, tmp_path: Path) -> None:
    create(client, "formats")
    vec = vectors(90, seed=3)
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"id": i, "title": f"j{i}", "vector": vec[i].tolist()}) + "\n"
            for i in range(30)
        )
    )
    csv = tmp_path / "rows.csv"
    pacsv.write_csv(
        pa.table(
            {
                "id": list(range(30, 60)),
                "title": [f"c{i}" for i in range(30, 60)],
                "vector": [json.dumps(vec[i].tolist()) for i in range(30, 60)],
            }
        ),
        csv,
        write_options=pacsv.WriteOptions(delimiter=";"),
    )
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(60, 90, dtype=np.int64))
    np.save(npy / "title.npy", np.array([f"n{i}" for i in range(60, 90)]))
    np.save(npy / "vector.npy", vec[60:90])
    numpy_set = [str(npy / f) for f in ("id.npy", "title.npy", "vector.npy")]

    job = run_import(client, "formats", [str(jsonl), str(csv), numpy_set], options={"sep": ";"})

    assert job["rows"] == 90 and count(client, "formats") == 90
    got = client.query("formats", "id in [0, 45, 89]", ["id", "title"], consistency_level=STRONG)
    assert sorted((r["id"], r["title"]) for r in got) == [(0, "j0"), (45, "c45"), (89, "n89")]
    for i in (5, 40, 75):
        hit = client.search("formats", [vec[i].tolist()], limit=1, consistency_level=STRONG)
        assert hit[0][0]["id"] == i


def test_auto_id_import_assigns_ids_and_refuses_a_key_column(
    shared: Stack, client: Client, tmp_path: Path
) -> None:
    create(client, "auto", auto_id=True)
    data = rows_table(range(300), auto_id=True)
    job = run_import(client, "auto", [parquet(tmp_path / "auto.parquet", data)])
    assert job["rows"] == 300
    got = client.query("auto", "id > 0", ["id", "title"], limit=1000, consistency_level=STRONG)
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)) == 300
    assert sorted(r["title"] for r in got) == sorted(f"title {i}" for i in range(300))

    with_keys = parquet(tmp_path / "keys.parquet", rows_table(range(10)))
    state = failed(client, "auto", [with_keys])
    assert "auto_id" in state["reason"] and "keys.parquet" in state["reason"]
    assert count(client, "auto") == 300


# -- bad files: a clear reason, nothing imported ----------------------------------------------
def _bad_files(tmp: Path) -> dict[str, tuple[list[Any], str, list[str]]]:
    good = parquet(tmp / "good.parquet", rows_table(range(100)))
    extra = rows_table(range(100, 110)).append_column("colour", pa.array(["red"] * 10))
    nan_vec = vectors(10)
    nan_vec[3, 2] = np.nan
    nan = rows_table(range(100, 110)).set_column(
        2, "vector", pa.FixedSizeListArray.from_arrays(pa.array(nan_vec.reshape(-1)), DIM)
    )
    npy = tmp / "npy"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(5, dtype=np.int64))
    np.save(npy / "title.npy", np.array(["a", "b", "c"]))
    np.save(npy / "vector.npy", vectors(5))
    return {
        "unknown field": (
            [good, parquet(tmp / "extra.parquet", extra)],
            "SCHEMA_MISMATCH",
            ["column(s) #3", "extra.parquet"],
        ),
        "wrong dim": (
            [good, parquet(tmp / "dim.parquet", rows_table(range(100, 110), dim=4))],
            "SCHEMA_MISMATCH",
            ["dim", "dim.parquet"],
        ),
        "NaN": ([good, parquet(tmp / "nan.parquet", nan)], "INVALID_ARGUMENT", ["NaN", "row 3"]),
        "missing field": (
            [good, parquet(tmp / "missing.parquet", rows_table(range(100, 110)).drop(["title"]))],
            "SCHEMA_MISMATCH",
            ["title", "missing"],
        ),
        "duplicate keys across files": (
            [good, parquet(tmp / "dup.parquet", rows_table(range(99, 105)))],
            "INVALID_ARGUMENT",
            ["duplicate primary key 99"],
        ),
        "numpy row counts": (
            [[str(npy / f) for f in ("id.npy", "title.npy", "vector.npy")]],
            "INVALID_ARGUMENT",
            ["same number of rows", "title.npy: 3"],
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown field",
        "wrong dim",
        "NaN",
        "missing field",
        "duplicate keys across files",
        "numpy row counts",
    ],
)
def test_a_bad_file_fails_the_job_and_imports_nothing(
    shared: Stack, client: Client, tmp_path: Path, case: str
) -> None:
    name = "bad_" + case.replace(" ", "_")
    create(client, name)
    files, code, words = _bad_files(tmp_path)[case]
    state = failed(client, name, files)
    assert state["reason_code"] == code, state
    for word in words:
        assert word in state["reason"], state["reason"]
    assert_nothing_imported(client, name, shared)
    storage = shared.settings.storage_path
    cid = client.describe_collection(name)["collection_id"]
    written = list((storage / "collections" / str(cid)).glob("*/*/data.lance"))
    assert written == []


def test_requests_refused_before_any_job(client: Client, tmp_path: Path) -> None:
    create(client, "refused", load=False)
    before = len(client.list_import_jobs())
    for files, words in [
        (["relative.parquet"], "'relative.parquet' does not exist under the import roots"),
        ([str(tmp_path / "absent.parquet")], "absent.parquet' is outside the import roots"),
    ]:
        with pytest.raises(ElanusError, match=words) as err:
            client.bulk_import("refused", files)
        assert err.value.code == "PATH_NOT_ALLOWED"
    cases = [
        ([str(tmp_path / "a.xlsx")], "unknown file type"),
        ([[str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]], "one row-based file"),
        ([], "empty"),
    ]
    for files, words in cases:
        with pytest.raises(ElanusError, match=words) as err:
            client.bulk_import("refused", files)
        assert err.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ElanusError) as err:
        client.bulk_import("refused", [str(tmp_path / "a.parquet")], partition_name="nope")
    assert err.value.code == "PARTITION_NOT_FOUND"
    assert len(client.list_import_jobs()) == before


def test_import_into_a_partition_and_list_jobs(client: Client, tmp_path: Path) -> None:
    create(client, "parted", load=False)
    client.create_partition("parted", "p1")
    files = [parquet(tmp_path / "p.parquet", rows_table(range(50)))]
    job = run_import(client, "parted", files, partition_name="p1")
    client.load_collection("parted")
    got = client.query("parted", "", ["count(*)"], partition_names=["p1"], consistency_level=STRONG)
    assert got[0]["count(*)"] == 50
    assert count(client, "parted") == 50
    jobs = client.list_import_jobs("parted")
    assert [j["job_id"] for j in jobs] == [job["job_id"]] and jobs[0]["state"] == "Completed"


# -- interruptions ----------------------------------------------------------------------------
class FakeExecutor:
    """A datanode session that takes import jobs and never finishes them."""

    def __init__(self, stack: Stack, node_id: str = "ghost") -> None:
        self.stack = stack
        self.node_id = node_id
        self.jobs: list[RunImport] = []
        self.session: Session | None = None
        self.served: Any = None

    def start(self) -> FakeExecutor:
        async def take(req: RunImport) -> ImportTaken:
            self.jobs.append(req)
            return ImportTaken(job_id=req.job_id)

        bus: Bus = self.stack.bus
        self.served = self.stack.call(
            bus.serve(f"elanus.datanode.{self.node_id}", {"import.run": take})
        )
        info = SessionInfo("datanode", self.node_id, "")
        self.session = self.stack.call(
            Session(bus, info, self.stack.settings.session_ttl_s).start()
        )
        return self

    def prepare(self, job_id: int, vchannel: str, partition_id: int) -> list[int]:
        req = PrepareImport(
            job_id=job_id,
            node_id=self.node_id,
            max_rows=MAX_ROWS,
            segments=[{"vchannel": vchannel, "partition_id": partition_id, "rows": 10}],
        )
        return self.stack.call(ImportAPI(self.stack.bus).prepare(req)).segment_ids

    def stop(self) -> None:
        session, served, self.session, self.served = self.session, self.served, None, None
        if session is not None:
            self.stack.call(session.stop())
        if served is not None:
            self.stack.call(served.unsubscribe())


def _no_executor(stack: Stack, name: str) -> Client:
    """A client on a new unloaded collection ``name``, the stack's data node stopped: its
    imports wait for an executor (a ``FakeExecutor`` or a data node the test adds)."""
    client = stack.client()
    create(client, name, load=False)
    dn = stack.datanodes.pop()
    stack.call(dn.stop())
    return client


def _wait(
    predicate: Any, timeout: float = 15.0, what: Callable[[], str] = lambda: "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what()} not met in time"
        time.sleep(0.05)


def test_a_job_interrupted_before_its_commit_fails_cleanly(stack: Stack, tmp_path: Path) -> None:
    """Executor gone, then a coord restart: failed with a reason, segments dropped."""
    client = _no_executor(stack, "ghosts")
    info = client.describe_collection("ghosts")
    ghost = FakeExecutor(stack).start()
    try:
        files = [parquet(tmp_path / "g.parquet", rows_table(range(10)))]
        first = client.bulk_import("ghosts", files)
        _wait(lambda: len(ghost.jobs) == 1)
        sids = ghost.prepare(first, info["vchannels"][0], info["partitions"][0]["partition_id"])
        assert client.get_import_state(first)["state"] == "Importing"
        assert {s["state"] for s in client.get_segment_info("ghosts")} == {"Importing"}
        # The coord restarts while the job runs: it fails, its segments are dropped.
        stack.restart()
        client = stack.client()
        state = client.get_import_state(first)
        assert state["state"] == "Failed" and "restarted" in state["reason"]
        assert {s["state"] for s in client.get_segment_info(segment_ids=sids)} == {"Dropped"}
        assert client.get_collection_stats("ghosts")["row_count"] == 0
    finally:
        ghost.stop()


def test_a_job_whose_executor_goes_away_fails(stack: Stack, tmp_path: Path) -> None:
    client = _no_executor(stack, "gone")
    ghost = FakeExecutor(stack).start()
    try:
        job = client.bulk_import("gone", [parquet(tmp_path / "g.parquet", rows_table(range(10)))])
        _wait(lambda: len(ghost.jobs) == 1)
        ghost.stop()
        _wait(lambda: client.get_import_state(job)["state"] == "Failed", timeout=20)
        assert "went away" in client.get_import_state(job)["reason"]
    finally:
        ghost.stop()


def test_pending_jobs_survive_a_coord_restart(stack: Stack, tmp_path: Path) -> None:
    client = _no_executor(stack, "later")
    job = client.bulk_import("later", [parquet(tmp_path / "l.parquet", rows_table(range(40)))])
    assert client.get_import_state(job)["state"] == "Pending"
    stack.restart()  # with a datanode again: the job runs
    client = stack.client()
    assert client.wait_import(job, timeout=30)["rows"] == 40
    client.load_collection("later")
    assert count(client, "later") == 40


def test_a_committed_job_is_finished_after_its_executor_fails(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the commit the job cannot fail: the coord has it finished on a datanode."""
    real = importer.finalize
    calls = []

    async def flaky(*args: Any) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise OSError("disk went away")
        await real(*args)

    monkeypatch.setattr(importer, "finalize", flaky)
    monkeypatch.setattr("elanus.segments.datanode.node.finalize", flaky)
    client = stack.client()
    create(client, "resumed")
    job = client.bulk_import("resumed", [parquet(tmp_path / "r.parquet", rows_table(range(80)))])
    assert client.wait_import(job, timeout=30)["rows"] == 80
    assert len(calls) == 2
    assert count(client, "resumed") == 80


def test_reads_wait_for_a_committed_import_instead_of_seeing_part_of_it(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the commit (IMPORT messages in the log) and the handoff, a Strong read
    waits at the delegators; it then sees every imported row, never a part."""
    real = importer.finalize
    release = threading.Event()

    async def held(*args: Any) -> None:
        await asyncio.to_thread(release.wait, 30)
        await real(*args)

    monkeypatch.setattr(importer, "finalize", held)
    # held wherever the job is finished: a job resumed on a datanode goes this way
    monkeypatch.setattr("elanus.segments.datanode.node.finalize", held)
    client = stack.client()
    create(client, "held")
    client.insert("held", rows_table(range(10_000, 10_010)))
    job = client.bulk_import("held", [parquet(tmp_path / "h.parquet", rows_table(range(600)))])
    seen: list[dict[str, Any]] = []

    def finishing() -> bool:
        seen.append(client.get_import_state(job))
        return seen[-1]["stage"] == "finishing"

    _wait(finishing, timeout=STEP_TIMEOUT_S, what=lambda: f"the job finishing, last {seen[-1]}")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reading = pool.submit(count, client, "held")
        time.sleep(0.5)
        assert not reading.done()  # held at the import's timestamp
        release.set()
        assert reading.result(timeout=30) == 610
    assert client.wait_import(job, timeout=30)["rows"] == 600


def test_a_pending_job_of_a_dropped_collection_fails(stack: Stack, tmp_path: Path) -> None:
    client = _no_executor(stack, "dropped")
    job = client.bulk_import("dropped", [parquet(tmp_path / "x.parquet", rows_table(range(5)))])
    client.drop_collection("dropped")
    stack.add_datanode()
    _wait(lambda: client.get_import_state(job)["state"] == "Failed")
    assert "does not exist" in client.get_import_state(job)["reason"]


# -- uploads on the storage: local and S3 -----------------------------------------------------
def test_uploads_live_on_the_storage_and_an_abandoned_one_expires(
    on_storage: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local file outside the roots is uploaded to ``<storage>/import/uploads`` (in the
    bucket on S3), imported from there (a Parquet file, and a numpy set the data node maps)
    and removed when its job ends; an upload no job took expires."""
    client = on_storage.client()
    create(client, "up")
    settings = on_storage.settings
    area = upload_area(settings)
    local = parquet(tmp_path / "rows.parquet", rows_table(range(300)))
    job = run_import(client, "up", [local])  # refused in place (outside the roots): uploaded
    (path,) = job["files"]
    assert path.startswith(area + "/") and path.endswith("/rows.parquet")
    assert count(client, "up") == 300
    npy = tmp_path / "set"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(1000, 1040, dtype=np.int64))
    np.save(npy / "title.npy", np.array([f"n{i}" for i in range(40)]))
    np.save(npy / "vector.npy", vectors(40))
    files = [[str(npy / f) for f in ("id.npy", "title.npy", "vector.npy")]]
    run_import(client, "up", files, upload=True)
    assert count(client, "up") == 340
    wait_for(lambda: objstore.list_dir(area) == [], 10, "the uploads to be removed")
    if objstore.is_remote(area):  # nothing in the proxy's own data dir
        assert not (settings.data_path / "import" / "uploads").exists()

    monkeypatch.setattr(importfiles, "UPLOAD_GRACE_S", 0.0)
    abandoned = client.upload_file("up", local)
    kept = client.upload_file("up", local)
    assert objstore.exists(abandoned) and abandoned.startswith(area + "/")
    time.sleep(1.1)  # an object's time has whole seconds
    busy = {layout.parent(kept)}
    removed = importfiles.collect_garbage(settings, 0.0, set(), lambda _: False, busy)
    assert removed == [layout.parent(abandoned)]
    assert not objstore.exists(abandoned) and objstore.exists(kept)
