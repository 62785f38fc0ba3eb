"""TSO, ID allocator and catalog migrations on real DuckDB files, and the coord over NATS."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from elanus import tsutil
from elanus.api.base import as_body
from elanus.api.coord import CoordAPI, ListSessions
from elanus.api.rootcoord import (
    CreateCollection,
    CreatePartition,
    DescribeCollection,
    IdAlloc,
    RootCoordAPI,
    TsoAlloc,
)
from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats, die_with_parent
from elanus.channels.runtime.loop import LoopThread
from elanus.meta import migrations, segmentmeta
from elanus.meta.coord import Coordinator
from elanus.meta.counters import ID_HIGH_WATER, TSO_BOUND, CounterStore
from elanus.meta.db import Database, migrate, schema_version
from elanus.meta.idalloc import IDAllocator
from elanus.meta.tso import TimestampOracle
from elanus.settings import Settings
from elanus.states import SegmentLevel


def open_tso(path: Path) -> tuple[Database, CounterStore, TimestampOracle]:
    db = Database(path)
    store = db.call(CounterStore)
    tso = TimestampOracle(store.get(TSO_BOUND), store.setter(TSO_BOUND))
    return db, store, tso


def test_tso_strictly_increasing_from_many_threads(tmp_path: Path) -> None:
    db, store, tso = open_tso(tmp_path / "c.duckdb")
    per_thread: dict[int, list[int]] = {}
    wall: dict[int, list[tuple[int, int]]] = {}

    def worker(n: int) -> None:
        out, samples = [], []
        for i in range(25_000):
            before = tsutil.now_ms()
            out.append(tso.alloc())
            if i % 1000 == 0:
                samples.append((before, tsutil.physical_ms(out[-1])))
        per_thread[n] = out
        wall[n] = samples

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [ts for out in per_thread.values() for ts in out]
    assert len(everything) == 100_000
    assert len(set(everything)) == 100_000, "a timestamp was handed out twice"
    for out in per_thread.values():
        assert all(a < b for a, b in zip(out, out[1:], strict=False)), "went backwards"
    # The physical part follows the wall clock (never behind it, at most a little ahead).
    for samples in wall.values():
        for before, physical in samples:
            assert before <= physical <= before + 50
    # A batch reserves consecutive timestamps that nobody else gets.
    first = tso.alloc(1000)
    assert tso.alloc() >= first + 1000
    store.close()
    db.close()


def test_tso_restart_never_goes_back(tmp_path: Path) -> None:
    path = tmp_path / "c.duckdb"
    db, store, tso = open_tso(path)
    issued = [tso.alloc(10) for _ in range(1000)]
    bound = store.get(TSO_BOUND)
    assert bound is not None and bound >= tsutil.physical_ms(issued[-1])
    store.close()
    db.close()
    db, store, tso = open_tso(path)
    after = tso.alloc()
    # Restarted within the persisted window: it must start above the saved bound.
    assert after > issued[-1] + 9
    assert tsutil.physical_ms(after) > bound
    store.close()
    db.close()


def test_id_allocator_unique_across_threads_and_restarts(tmp_path: Path) -> None:
    path = tmp_path / "c.duckdb"
    seen: list[int] = []
    for _round in range(2):
        db = Database(path)
        store = db.call(CounterStore)
        ids = IDAllocator(store.get(ID_HIGH_WATER), store.setter(ID_HIGH_WATER), block=1000)
        lock = threading.Lock()

        def worker(ids: IDAllocator = ids, lock: threading.Lock = lock) -> None:
            local = []
            for _ in range(2000):
                start = ids.alloc(3)
                local.extend([start, start + 1, start + 2])
            with lock:
                seen.extend(local)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        store.close()
        db.close()
    assert len(seen) == 2 * 4 * 2000 * 3
    assert len(set(seen)) == len(seen)


def test_migrations_are_versioned_and_applied_once(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    con = duckdb.connect(str(path))
    latest = migrations.MIGRATIONS[-1][0]
    assert migrate(con) == latest
    assert migrate(con) == latest  # idempotent
    extra = (latest + 1, "test column", ["ALTER TABLE collections ADD COLUMN extra_col INTEGER"])
    migrations.MIGRATIONS.append(extra)
    try:
        assert migrate(con) == latest + 1
        assert migrate(con) == latest + 1
        cols = [r[0] for r in con.execute("DESCRIBE collections").fetchall()]
        assert "extra_col" in cols
        assert schema_version(con) == latest + 1
    finally:
        migrations.MIGRATIONS.remove(extra)
        con.close()


def test_segments_of_an_older_catalog_read_as_unsorted_l1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catalog version 13: segments recorded before it (level 0 when flushed, 1 when
    compacted) become L1 as Milvus numbers it, and unsorted until a compaction."""
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    older = [m for m in migrations.MIGRATIONS if m[0] < 13]
    monkeypatch.setattr(migrations, "MIGRATIONS", older)
    monkeypatch.setattr("elanus.meta.db.MIGRATIONS", older)
    assert migrate(con) == 12
    for sid, level in ((1, 0), (2, 1)):
        con.execute(
            "INSERT INTO segments (segment_id, collection_id, partition_id, vchannel, state, "
            "max_rows, created_ts, level) VALUES (?, 1, 1, 'v', 'Flushed', 10, 1, ?)",
            [sid, level],
        )
    monkeypatch.undo()
    assert migrate(con) >= 13
    segs = segmentmeta.load(con, str(tmp_path))
    assert [(s.level, s.is_sorted) for s in segs] == [(SegmentLevel.L1, False)] * 2
    con.close()


# -- the coord as a separate OS process, killed with SIGKILL ------------------------------------

# The coords below hold a 2 s lease (3 s by default): a coord restarted after kill -9 waits
# for the dead one's lease to expire.
COORD_PROCESS = textwrap.dedent(
    """
    import asyncio, os, sys
    from elanus.channels.bus import Bus
    from elanus.channels.natsauth import NatsCredentials
    from elanus.meta.coord import Coordinator
    from elanus.segments.datanode.node import DataNode
    from elanus.settings import Settings

    async def main():
        creds = NatsCredentials(os.environ["ELANUS_NATS_USER"], os.environ["ELANUS_NATS_PASSWORD"])
        bus = await Bus(sys.argv[1], credentials=creds).connect()
        role = DataNode if sys.argv[3:] == ["datanode"] else Coordinator
        coord = role(Settings(data_dir=sys.argv[2], session_ttl_s=2, coord_lease_ttl_s=2), bus)
        await coord.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.fixture
def nats(tmp_path: Path):
    server = EmbeddedNats(tmp_path / "nats").start()
    yield server
    server.stop()


def _spawn_coord(nats: EmbeddedNats, data_dir: Path, role: str = "coord") -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", COORD_PROCESS, nats.url, str(data_dir), role],
        env={**os.environ, **nats.client_env()},  # credentials never on the command line
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=die_with_parent,  # never outlives a test run that was killed
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"{role} did not start: {line!r}"
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.fixture
def bus_on_loop(nats: EmbeddedNats) -> Iterator[tuple[LoopThread, Bus]]:
    """The test's own loop thread and bus on ``nats``, beside the processes it spawns."""
    loop = LoopThread().start()
    try:
        bus = loop.call(Bus(nats.url, credentials=nats.credentials).connect())
        try:
            yield loop, bus
        finally:
            loop.call(bus.close())
    finally:
        loop.stop()


@pytest.fixture
def spawn(
    nats: EmbeddedNats, bus_on_loop: tuple[LoopThread, Bus]
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``_spawn_coord`` on ``nats``; whichever of its processes still run are killed after
    the test (before the test's bus closes)."""
    procs: list[subprocess.Popen[str]] = []

    def start(data_dir: Path, role: str = "coord") -> subprocess.Popen[str]:
        procs.append(_spawn_coord(nats, data_dir, role))
        return procs[-1]

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)


@pytest.mark.chaos
def test_tso_and_ids_survive_kill_9_of_the_coord(
    bus_on_loop: tuple[LoopThread, Bus], spawn: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    loop, bus = bus_on_loop
    data = tmp_path / "data"
    proc = spawn(data)
    root = RootCoordAPI(bus)
    issued = [loop.call(root.alloc_ts(TsoAlloc(count=7))).ts for _ in range(300)]
    ids = [loop.call(root.alloc_ids(IdAlloc(count=5))).start for _ in range(300)]
    assert issued == sorted(issued)
    _kill(proc)
    # Restart at once, well inside the TSO's persisted window.
    coord = Coordinator(Settings(data_dir=str(data), session_ttl_s=2, coord_lease_ttl_s=2), bus)
    loop.call(coord.start())
    try:
        ts = loop.call(root.alloc_ts(TsoAlloc())).ts
        new_id = loop.call(root.alloc_ids(IdAlloc(count=1))).start
        assert ts > issued[-1] + 6
        assert new_id > ids[-1] + 4
        assert abs(tsutil.physical_ms(ts) - tsutil.now_ms()) < 5_000
    finally:
        loop.call(coord.stop())


@pytest.mark.chaos
def test_coord_catalog_survives_kill_9(
    bus_on_loop: tuple[LoopThread, Bus], spawn: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    loop, bus = bus_on_loop
    data = tmp_path / "data"
    proc = spawn(data)
    schema = {
        "fields": [
            {"name": "pk", "type": "VarChar", "is_primary": True, "max_length": 64},
            {"name": "v", "type": "BinaryVector", "dim": 64},
            {
                "name": "tags",
                "type": "Array",
                "element_type": "Int32",
                "max_capacity": 8,
                "nullable": True,
            },
            {"name": "doc", "type": "JSON", "nullable": True},
        ]
    }
    root = RootCoordAPI(bus)
    created = loop.call(
        root.create_collection(CreateCollection(name="kept", schema=schema, num_shards=3))
    )
    loop.call(root.create_partition(CreatePartition(collection="kept", name="p2024")))
    _kill(proc)
    spawn(data)
    described = loop.call(root.describe_collection(DescribeCollection(name="kept")))
    assert described.collection_id == created.collection_id
    assert described.schema == created.schema
    assert described.vchannels == created.vchannels
    assert [p.name for p in described.partitions] == ["_default", "p2024"]
    assert json.dumps(as_body(described), sort_keys=True) != ""


@pytest.mark.chaos
def test_sessions_report_live_roles_and_expire(
    bus_on_loop: tuple[LoopThread, Bus], spawn: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    loop, bus = bus_on_loop
    coord = Coordinator(Settings(data_dir=str(tmp_path / "d"), session_ttl_s=1.5), bus)
    loop.call(coord.start())
    try:
        # a second role process (a second coord would wait as a standby, unseen)
        proc = spawn(tmp_path / "other", "datanode")
        coord_api = CoordAPI(bus)
        sessions = loop.call(coord_api.list_sessions(ListSessions())).sessions
        assert {s["pid"] for s in sessions} == {os.getpid(), proc.pid}
        _kill(proc)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            sessions = loop.call(coord_api.list_sessions(ListSessions())).sessions
            if len(sessions) == 1:
                break
            time.sleep(0.2)
        assert [s["pid"] for s in sessions] == [os.getpid()]
    finally:
        loop.call(coord.stop())
