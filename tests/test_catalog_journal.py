"""The catalog survives its machine (issue 21): every change is journaled to JetStream
before it is acknowledged, snapshots go to the storage, and a coord with an empty data
dir (another machine), or a standby that takes the lease, rebuilds the catalog."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from conftest import ElanusProcess, Stack, wait_for

from elanus.api.coord import CoordAPI, ListSessions
from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.journal import CatalogJournal, decode, encode
from elanus.meta.recorder import Recorder, mutates


def test_entries_round_trip_and_only_changes_are_recorded() -> None:
    entry = [("INSERT INTO t VALUES (?, ?)", [1, b"\x00\xff"], False), ("BEGIN", None, False)]
    assert decode(encode(entry)) == entry
    assert mutates("  insert into t values (1)") and mutates("UPDATE t SET a = 1")
    assert not mutates("SELECT 1") and not mutates(" with x as (select 1) select * from x")

    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER)")
    sink: list[Any] = []
    rec = Recorder(con, sink, journal=None)  # type: ignore[arg-type]
    rec.execute("INSERT INTO t VALUES (?)", [1])
    rec.executemany("INSERT INTO t VALUES (?)", [(2,), (3,)])
    assert rec.execute("SELECT count(*) FROM t").fetchone() == (3,)
    try:
        rec.execute("INSERT INTO t VALUES ('not a number')")
    except duckdb.Error:
        pass
    assert sink == [
        ("INSERT INTO t VALUES (?)", [1], False),
        ("INSERT INTO t VALUES (?)", [[2], [3]], True),
    ]


def catalog_answers(c: Client) -> dict[str, Any]:
    """What ``fill`` wrote, as the catalog answers it."""
    return {
        "collections": sorted(c.list_collections()),
        "partitions": sorted(c.list_partitions("kept")),
        "count": c.query("kept", output_fields=["count(*)"], consistency_level="Strong")[0],
        "alias": c.describe_alias("kept_alias")["collection_name"],
        "users": sorted(c.list_users()),
    }


def fill(stack: Stack) -> dict[str, Any]:
    """DDL, DML and users through the proxy; what a rebuilt catalog must answer again."""
    c = stack.client()
    c.create_collection("kept", dimension=4)
    c.insert("kept", {"id": np.arange(300), "vector": np.random.default_rng(1).random((300, 4))})
    c.flush("kept")
    c.create_partition("kept", "p2")
    c.create_alias("kept", "kept_alias")
    c.create_collection("second", dimension=8)
    c.create_user("journal_user", "Journal-Pw1")
    return catalog_answers(c)


def answers(stack: Stack) -> dict[str, Any]:
    c = stack.client()
    wait_for(lambda: c.get_load_state("kept")["state"] == "Loaded", what="reload of kept")
    return catalog_answers(c)


def test_a_journal_another_coord_wrote_to_refuses_further_changes(
    tmp_path: Path, nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """A coord paused while a standby took over must not add to the catalog when it wakes:
    each entry is published expecting the last sequence this coord saw (JetStream fences)."""
    buses, journals, fenced = [], [], []
    try:
        for name in ("woke", "active"):
            bus = Bus(nats_server.url, name=name, credentials=nats_server.credentials)
            loop_thread.call(bus.connect())
            buses.append(bus)
            journal = CatalogJournal(bus, str(tmp_path / "storage"))
            journal.on_fenced = lambda name=name: fenced.append(name)
            loop_thread.call(journal.open())
            journals.append(journal)
        woke, active = journals
        entry = [("INSERT INTO t VALUES (?)", [1], False)]
        active.append(entry)
        with pytest.raises(ElanusError) as refused:
            woke.append(entry)
        assert refused.value.code is ErrorCode.UNAVAILABLE
        assert "another coordinator" in refused.value.message
        assert fenced == ["woke"]
        with pytest.raises(ElanusError):
            woke.append(entry)  # and every later one
        active.append(entry)
        assert active.last_seq == 2 and fenced == ["woke"]
    finally:
        for journal in journals:
            loop_thread.call(journal.close())
        for bus in buses:
            loop_thread.call(bus.close())


def test_snapshots_prune_the_journal_and_an_unreadable_one_falls_back(
    tmp_path: Path, nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """After each snapshot the entries the one before it holds are purged and older
    snapshots deleted; a rebuild whose newest snapshot is unreadable uses the one before."""
    storage = str(tmp_path / "storage")
    bus = Bus(nats_server.url, name="pruner", credentials=nats_server.credentials)
    loop_thread.call(bus.connect())
    journal = CatalogJournal(bus, storage)
    loop_thread.call(journal.open())
    con = duckdb.connect(str(tmp_path / "catalog.duckdb"))
    try:
        con.execute("CREATE TABLE t (a INTEGER)")
        for n in (1, 2, 3):
            insert = ("INSERT INTO t VALUES (?)", [n], False)
            con.execute(insert[0], insert[1])
            journal.append([insert])
            journal.snapshot(con, tmp_path)
            loop_thread.call(journal.prune())
        assert [seq for _, seq in journal.snapshots()] == [2, 3]
        info = loop_thread.call(bus.js.stream_info("ELANUS_CATALOG"))
        assert (info.state.first_seq, info.state.last_seq) == (3, 3)

        newest = Path(journal.snapshots()[-1][0])
        newest.write_bytes(b"not a database")
        rebuilt = tmp_path / "rebuilt" / "catalog.duckdb"
        again = CatalogJournal(bus, storage)
        loop_thread.call(again.open())
        assert loop_thread.call(again.rebuild(rebuilt))
        with duckdb.connect(str(rebuilt), read_only=True) as check:
            assert check.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (2,), (3,)]
        loop_thread.call(again.close())
    finally:
        con.close()
        loop_thread.call(journal.close())
        loop_thread.call(bus.close())


def test_a_coord_with_an_empty_data_dir_rebuilds_the_catalog(tmp_path: Path) -> None:
    """The coord's machine is lost (its whole data dir deleted); a coord started elsewhere,
    with an empty data dir, on the same NATS and storage, answers as before."""
    storage = tmp_path / "storage"
    with EmbeddedNats(tmp_path / "nats") as nats:
        loop = LoopThread("journal").start()
        try:
            first = Stack(loop, nats, tmp_path / "machine-a", storage=str(storage)).start()
            try:
                before = fill(first)
            finally:
                first.close()
            shutil.rmtree(tmp_path / "machine-a")  # the machine is gone
            second = Stack(loop, nats, tmp_path / "machine-b", storage=str(storage)).start()
            try:
                assert answers(second) == before
                c = second.client()
                c.create_collection("after", dimension=4)  # and it carries on
                assert "after" in c.list_collections()
            finally:
                second.close()
        finally:
            loop.stop()


@pytest.mark.chaos
def test_a_standby_coord_takes_over_after_kill_9(tmp_path: Path, elanus_processes: Any) -> None:
    """``elanus run coord`` twice: the second waits on the lease; kill -9 of the active one
    and the standby serves within 5 s (a 2 s lease here: its expiry, the rebuild and the
    start, with room for a loaded machine), with every acknowledged change."""
    storage = tmp_path / "storage"
    with EmbeddedNats(tmp_path / "nats") as nats:
        loop = LoopThread("standby").start()
        stack = Stack(loop, nats, tmp_path / "nodes", storage=str(storage), session_ttl_s=2)
        api = CoordAPI(stack.bus)

        def coord_pids(standby: bool = False) -> set[int]:
            """The pids of the active coord (or of the standbys)."""
            try:
                found = stack.call(api.list_sessions(ListSessions())).sessions
            except Exception:  # noqa: BLE001 - no coord answers yet
                return set()
            return {
                s["pid"]
                for s in found
                if s["role"] == "coord" and bool(s["meta"].get("standby")) == standby
            }

        def start_coord(name: str) -> ElanusProcess:
            return elanus_processes(
                ElanusProcess(
                    "run", "coord", "--nats", nats.url, "--storage", str(storage),
                    "--data-dir", str(tmp_path / f"coord-{name}"),
                    log_path=tmp_path / f"coord-{name}.log",
                    env={**nats.client_env(), "ELANUS_SESSION_TTL_S": "2",
                         "ELANUS_COORD_LEASE_TTL_S": "2"},
                )
            ).start()  # fmt: skip

        try:
            coords = [start_coord("a")]  # a takes the lease first: it serves before b starts
            assert wait_for(lambda: coord_pids() == {coords[0].pid}, what="coord a active")
            coords.append(start_coord("b"))
            wait_for(lambda: coord_pids(standby=True) == {coords[1].pid}, what="b, a standby")
            stack.add_datanode()
            stack.add_querynode()
            stack.add_proxy()
            before = fill(stack)

            os.killpg(coords[0].pid, signal.SIGKILL)
            killed = time.monotonic()
            c = stack.client()

            failures: list[str] = []

            def serving() -> bool:
                try:  # a name no proxy has cached: the lookup needs the coord
                    c.has_collection(f"probe_{len(failures)}", timeout=1)
                except Exception as exc:  # noqa: BLE001 - UNAVAILABLE until the standby serves
                    failures.append(str(exc))
                    return False
                return True

            try:
                wait_for(serving, timeout=30, what="the standby serving")
            except AssertionError:
                alive = coords[1].proc is not None and coords[1].proc.poll() is None
                raise AssertionError(
                    f"{failures[:2]} ... {failures[-3:]}; coord b alive={alive}, its log ends:\n"
                    + "\n".join(coords[1].log().splitlines()[-30:])
                ) from None
            takeover = time.monotonic() - killed
            assert takeover < 5.0, f"the standby served after {takeover:.1f}s: {failures}"
            c.create_collection("after_takeover", dimension=4)
            after = answers(stack)
            assert after["collections"] == sorted([*before["collections"], "after_takeover"])
            assert {k: v for k, v in after.items() if k != "collections"} == {
                k: v for k, v in before.items() if k != "collections"
            }
            assert coord_pids() == {coords[1].pid}
        finally:
            stack.close()
            loop.stop()
            elanus_processes.stop_all()  # while NATS is up
