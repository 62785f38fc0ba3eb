"""Backups (issue 21): ``backup_create`` under writes copies the data as it stood at one
timestamp; a restore into an empty place, served by a fresh stack on its own NATS, answers
as the original did at that timestamp; ``backup list`` shows it; restore refuses a
non-empty place. (A copied data dir is tested in tests/test_storage.py.)"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, bare_collection, cli_env, raises_code, run_elanus, wait_for

from elanus import ErrorCode, objstore
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.meta import backupfiles, segmentmeta
from elanus.meta.db import Database
from elanus.meta.gc import GarbageCollector
from elanus.meta.segmentmeta import Segment
from elanus.settings import Settings
from elanus.states import IndexTaskState, SegmentState

DIM = 8
QUERY = np.random.default_rng(7).random((3, DIM), dtype=np.float32)


def insert(client: Client, lo: int, hi: int) -> None:
    vectors = np.random.default_rng(lo).random((hi - lo, DIM), dtype=np.float32)
    client.insert("c", {"id": np.arange(lo, hi), "vector": vectors})


def answers(client: Client, as_of: int | None = None) -> dict[str, Any]:
    """What the collection answers: every id, the count, and a search's ids and distances."""
    level = None if as_of else "Strong"
    rows = client.query(
        "c", "id >= 0", output_fields=["id"], limit=16384, as_of=as_of, consistency_level=level
    )
    ids = sorted(int(r["id"]) for r in rows)
    counted = client.query(
        "c", "id >= 0", output_fields=["count(*)"], as_of=as_of, consistency_level=level
    )
    hits = client.search(
        "c", QUERY, limit=5, as_of=as_of, consistency_level=level, output_fields=["id"]
    )
    return {
        "ids": ids,
        "count": int(counted[0]["count(*)"]),
        "search": [[(int(h["id"]), round(float(h["distance"]), 5)) for h in q] for q in hits],
    }


@pytest.fixture
def restore_nats(tmp_path: Path) -> Iterator[EmbeddedNats]:
    """A second NATS server: the restored copy starts with streams of its own."""
    server = EmbeddedNats(tmp_path / "nats-restored").start()
    try:
        yield server
    finally:
        server.stop()


def restored_stack(loop: LoopThread, nats: EmbeddedNats, data_dir: Path, **settings: Any) -> Stack:
    return Stack(loop, nats, data_dir, **settings).start()


class Writer(threading.Thread):
    """Inserts batches from ``start`` (and deletes the id 1000 below each batch's last)
    until stopped; ``acked`` is the highest id whose insert was acknowledged."""

    def __init__(self, uri: str, start: int) -> None:
        super().__init__(daemon=True)
        self.client = Client(uri, timeout=30)
        self.next, self.acked, self.stop_flag = start, start - 1, threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                insert(self.client, self.next, self.next + 10)
                self.next += 10
                self.acked = self.next - 1
                self.client.delete("c", [self.next - 1000])  # older rows: 10, 20, ...
                time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.client.close()

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(30)
        assert self.error is None, self.error


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_backup_under_writes_restores_to_the_answers_at_its_timestamp(
    nats_server: EmbeddedNats, loop_thread: LoopThread, restore_nats: EmbeddedNats, tmp_path: Path
) -> None:
    original = Stack(loop_thread, nats_server, tmp_path / "data", gc_delay_s=0).start()
    try:
        client = original.client()
        bare_collection(client, "c", DIM)
        insert(client, 0, 600)
        client.flush("c", timeout=60)
        client.delete("c", [1, 2, 3])
        client.load_collection("c")
        writer, other = Writer(original.uri, 1000), Writer(original.uri, 1_000_000)
        writer.start()
        other.start()
        time.sleep(0.5)
        acked_before = writer.acked
        target = tmp_path / "backups"
        made = client.create_backup(str(target), name="b1", timeout_s=120)
        time.sleep(0.5)
        writer.finish()
        other.finish()
        ts = made["ts"]
        assert made["location"] == str(target / "b1")
        assert [c["name"] for c in made["collections"]] == ["c"] and made["files"] > 0
        at_backup = answers(client, as_of=ts)
        assert {i for i in range(4, 600) if i % 10} <= set(at_backup["ids"])
        assert acked_before in at_backup["ids"]  # acknowledged before the backup began
        assert writer.acked not in at_backup["ids"]  # written after its timestamp
        assert answers(client) != at_backup
        raises_code(
            ErrorCode.INVALID_ARGUMENT,
            lambda: client.create_backup(str(target), name="b1"),
            "already exists",
        )
        raises_code(
            ErrorCode.INVALID_ARGUMENT, lambda: client.create_backup("relative/dir"), "absolute"
        )
        by_cli = run_elanus(
            "backup", "create", "backups", "-n", "b2", "--uri", original.uri, "--json",
            env=cli_env(), cwd=tmp_path,
        )  # fmt: skip  # a relative path, taken from the current directory
        assert by_cli.returncode == 0, by_cli.stderr
        assert json.loads(by_cli.stdout)["ts"] > ts
        assert json.loads(by_cli.stdout)["location"] == str(target / "b2")
    finally:
        original.close()

    listed = run_elanus("backup", "list", str(target), "--json", env=cli_env())
    assert listed.returncode == 0, listed.stderr
    shown, _ = json.loads(listed.stdout)  # b1, then b2
    assert (shown["name"], shown["ts"], shown["complete"]) == ("b1", ts, True)

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "something").write_text("x")
    refused = run_elanus(
        "backup", "restore", str(target / "b1"), "--data-dir", str(busy), env=cli_env()
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: [INVALID_ARGUMENT]") and "not empty" in refused.stderr

    fresh = tmp_path / "restored"
    done = run_elanus(
        "backup", "restore", str(target / "b1"), "--data-dir", str(fresh), "--json", env=cli_env()
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ts"] == ts
    assert [c["loaded"] for c in json.loads(done.stdout)["collections"]] == [True]
    copy = restored_stack(loop_thread, restore_nats, fresh)
    try:
        client = copy.client()  # "c" was loaded at the backup: the copy loads it by itself
        wait_for(lambda: client.get_load_state("c")["state"] == "Loaded", 30, "the reload")
        assert answers(client) == at_backup
        insert(client, 100_000, 100_010)  # and the copy takes writes of its own
        assert answers(client)["count"] == at_backup["count"] + 10
    finally:
        copy.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_backup_on_s3_restores_into_another_prefix(
    nats_server: EmbeddedNats,
    loop_thread: LoopThread,
    restore_nats: EmbeddedNats,
    tmp_path: Path,
    moto_server: Any,
) -> None:
    bucket = moto_server.new_bucket()
    s3 = moto_server.settings(bucket, "live")
    original = Stack(loop_thread, nats_server, tmp_path / "data", **s3).start()
    try:
        client = original.client()
        bare_collection(client, "c", DIM)
        insert(client, 0, 300)
        client.flush("c", timeout=60)
        original.add_indexnode()
        client.create_index("c", "vector", index_type="FLAT", metric_type="L2")
        client.wait_for_index("c", timeout=60)
        client.delete("c", [5, 6])
        client.load_collection("c")
        made = client.create_backup(f"s3://{bucket}/backups", name="nightly", timeout_s=120)
        expected = answers(client, as_of=made["ts"])
        assert expected["count"] == 298
    finally:
        original.close()
    assert made["location"] == f"s3://{bucket}/backups/nightly"
    listed = backupfiles.list_backups(f"s3://{bucket}/backups")
    assert [b["name"] for b in listed] == ["nightly"]

    settings = Settings(data_dir=str(tmp_path / "restored"), **moto_server.settings(bucket, "copy"))
    restored = backupfiles.restore(made["location"], settings, load=False)  # --no-load
    assert [c["loaded"] for c in restored["collections"]] == [False]
    assert objstore.list_dir(f"s3://{bucket}/copy") == ["collections", "indexes"]
    copy = restored_stack(
        loop_thread, restore_nats, tmp_path / "restored", **moto_server.settings(bucket, "copy")
    )
    try:
        assert copy.coord is not None  # the index came along, its files under the new root
        tasks = list(copy.coord.index.tasks.values())
        assert tasks and all(t.state is IndexTaskState.FINISHED for t in tasks)
        assert all(
            f.startswith(f"s3://{bucket}/copy/indexes/") for t in tasks for f in t.file_paths
        )
        client = copy.client()
        assert client.get_load_state("c")["state"] == "NotLoad"  # restored with --no-load
        client.load_collection("c")
        assert answers(client) == expected
    finally:
        copy.close()
    with pytest.raises(Exception, match="not empty"):
        backupfiles.restore(made["location"], settings)


# -- the catalog at the backup's timestamp (no server) ----------------------------------------


def _segment(sid: int, collection: int, **fields: Any) -> Segment:
    base: dict[str, Any] = {
        "partition_id": collection * 10,
        "vchannel": f"v{collection}",
        "state": SegmentState.FLUSHED,
        "max_rows": 100,
        "num_rows": 10,
        "created_ts": 1,
        "seal_ts": 5,
        "path": f"collections/{collection}/{collection * 10}/{sid}/data.lance",
    }
    return Segment(segment_id=sid, collection_id=collection, **{**base, **fields})


def test_the_catalog_as_of_the_backup_timestamp(tmp_path: Path) -> None:
    """Objects made after T go, objects dropped after T come back; segments are those
    live at T whose rows all precede it (a compaction after T is undone)."""
    db = Database(tmp_path / "catalog.duckdb")
    T = 50
    dropped = SegmentState.DROPPED

    def fill(con: Any) -> None:
        con.execute("INSERT INTO databases VALUES (1, 'default', '{}', 1, NULL)")
        for cid, created, gone in ((1, 2, None), (2, 60, None), (3, 2, 70), (4, 2, 30)):
            con.execute(
                "INSERT INTO collections VALUES (?, 1, ?, '', '{}', 1, 'Bounded', '{}', ?, ?)",
                [cid, f"c{cid}", created, gone],
            )
            con.execute(
                "INSERT INTO partitions VALUES (?, ?, '_default', ?, ?)",
                [cid * 10, cid, created, gone],
            )
        con.execute("INSERT INTO channel_checkpoints VALUES ('v1', 99, 99)")
        con.execute("INSERT INTO vchannels VALUES (1, 0, 'v1', 'dml_3')")
        segmentmeta.save(
            con,
            [
                _segment(101, 1),  # sealed before T: kept
                _segment(102, 1, seal_ts=55, min_ts=52),  # sealed after T, rows later
                _segment(107, 1, seal_ts=55, min_ts=45, max_ts=58),  # partly before T
                _segment(103, 1, state=SegmentState.GROWING, seal_ts=None),
                _segment(104, 1, state=dropped, dropped_ts=60),  # compacted after T: kept
                _segment(105, 1, created_ts=60, compacted_from=[104]),  # that compaction
                _segment(106, 1, state=dropped, dropped_ts=40, path=None),  # gone before T
                _segment(201, 2),  # of a collection made after T
                _segment(301, 3, state=dropped, dropped_ts=70),  # its collection dropped later
                _segment(401, 4, state=dropped, dropped_ts=30),
            ],
        )

    db.call(fill)
    snap = str(tmp_path / "snap.duckdb")
    db.call(backupfiles.snapshot, snap)
    db.close()
    contents = backupfiles.as_of(snap, T, upper=60)
    kept = ["collections/1/10/101", "collections/1/10/104", "collections/3/30/301"]
    assert contents.segments == [*kept[:2], "collections/1/10/107", kept[2]]
    assert contents.partial == {"collections/1/10/107": 107}
    assert [c["name"] for c in contents.collections] == ["c1", "c3"]
    con = duckdb.connect(snap)
    try:
        states = con.execute("SELECT DISTINCT state, dropped_ts FROM segments").fetchall()
        assert states == [("Flushed", None)]
        assert con.execute("SELECT count(*) FROM channel_checkpoints").fetchone() == (0,)
        live = con.execute("SELECT name FROM collections WHERE dropped_ts IS NULL").fetchall()
        assert sorted(live) == [("c1",), ("c3",)]
    finally:
        con.close()

    # A restore needs the original's pchannels, and leaves nothing behind when refused.
    backup = tmp_path / "backups" / "b"
    backup.mkdir(parents=True)
    (backup / "catalog.duckdb").write_bytes(Path(snap).read_bytes())
    (backup / "manifest.json").write_text(json.dumps({"format": 1, "name": "b", "ts": T}))
    (backup / "storage" / kept[0]).mkdir(parents=True)
    (backup / "storage" / kept[0] / "pk_stats.arrow").write_bytes(b"x")
    small = Settings(data_dir=str(tmp_path / "small"), num_pchannels=2)
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: backupfiles.restore(str(backup), small),
        "num_pchannels = 4",
    )
    assert not small.catalog_path.exists() and not Path(small.storage_uri).exists()
    enough = Settings(data_dir=str(tmp_path / "enough"), num_pchannels=4)
    assert backupfiles.restore(str(backup), enough)["files"] == 1
    assert enough.catalog_path.exists()
    assert (Path(enough.storage_uri) / kept[0] / "pk_stats.arrow").read_bytes() == b"x"


def test_a_partial_segment_and_delta_logs_are_cut_at_the_timestamp(tmp_path: Path) -> None:
    """Rows stamped after the backup's timestamp leave a partial segment's copy, deletes
    after it leave every delta log; a segment with nothing before it goes whole."""
    root, dest = str(tmp_path / "storage"), str(tmp_path / "backup")
    rows = pa.table({"id": [1, 2, 3], "_ts": pa.array([10, 20, 60], pa.uint64())})
    lance.write_dataset(rows, f"{root}/collections/1/2/7/data.lance")
    lance.write_dataset(rows.slice(2), f"{root}/collections/1/2/8/data.lance")
    deletes = pa.table({"pk": [1, 2], "ts": pa.array([30, 70], pa.uint64())})
    objstore.write_ipc(f"{root}/collections/1/2/7/delta/0-1.arrow", deletes)
    contents = backupfiles.Contents(
        ts=50,
        segments=["collections/1/2/7", "collections/1/2/8"],
        partial={"collections/1/2/7": 7, "collections/1/2/8": 8},
    )
    copied = backupfiles.copy_contents(contents, root, dest)
    assert copied.trimmed == {7: (2, 20), 8: (0, 0)}
    kept = lance.dataset(f"{dest}/collections/1/2/7/data.lance").to_table()
    assert kept.column("id").to_pylist() == [1, 2]
    delta = objstore.read_ipc(f"{dest}/collections/1/2/7/delta/0-1.arrow")
    assert delta.column("pk").to_pylist() == [1]
    assert not objstore.exists(f"{dest}/collections/1/2/8")


def test_garbage_collection_removes_nothing_while_held() -> None:
    gc = GarbageCollector(None, None, None, None)  # type: ignore[arg-type]  # never reached

    async def run() -> None:
        async with gc.hold():
            assert await gc.collect() == []

    asyncio.run(run())
