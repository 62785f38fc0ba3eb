"""Issue 33: Elanus heals after its log (nats-server) restarts, and after a query node's
death without replicas, as fast as the issue asks.

- The coord's lease lapses while NATS is away and is taken again when it is back (no other
  coord holds it); one another coord holds is lost. The catalog journal tells an entry of
  its own whose ack a restart lost from a second writer, and a log that went back (lost
  entries it had acknowledged) from both.
- A standalone starts its killed nats-server again at once: writes and Strong reads go on
  (within 3 s), nothing acknowledged is lost; one whose nats-server cannot come back exits
  with one line.
- Roles on one nats-server, killed for 5 s under writes and Strong reads: both are back
  within 3 s of its restart, no acknowledged row lost or stored twice. Then a query node
  killed without replicas: its share is served again within 2 s (the proxy's failed read,
  not the session TTL, detects it).

Bounds are asserted with ``SLACK``: the processes share CI's two cores, where a restart's
imports alone vary by a second.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from conftest import ElanusProcess, StandaloneProcess, wait_for
from nats.js.api import StreamConfig
from role_processes import role_process

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.journal import STREAM, SUBJECT, CatalogJournal, encode
from elanus.meta.lease import CoordLease, LeaseState

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(180)]
SERIAL = pytest.mark.serial
"""Every test here but the one that waits for a standalone to give up (no time bound)."""

SLACK = 1.5
DIM = 8


# -- the lease and the journal, against a nats-server killed and started again ---------------
@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[EmbeddedNats]:
    server = EmbeddedNats(tmp_path / "own-nats").start()
    try:
        yield server
    finally:
        server.stop()


def connected(nats: EmbeddedNats, loop: LoopThread, name: str) -> Bus:
    bus = Bus(nats.url, name=name, credentials=nats.credentials)
    loop.call(bus.connect())
    return bus


@SERIAL
def test_lease_lapses_while_the_log_is_away_and_is_taken_again(
    own_nats: EmbeddedNats, loop_thread: LoopThread
) -> None:
    bus = connected(own_nats, loop_thread, "lease")
    lost: list[bool] = []
    retaken: list[bool] = []

    async def on_retaken() -> bool:
        retaken.append(True)
        return True

    lease = CoordLease(bus, "c1", 1.5, lambda: lost.append(True), on_retaken=on_retaken)
    try:
        loop_thread.call(lease.acquire())
        lease.check()
        own_nats.kill()
        wait_for(lambda: lease.state is LeaseState.LAPSED, 10, "the lease to lapse")
        with pytest.raises(ElanusError) as refused:
            lease.check()  # what the TSO asks before each timestamp
        assert refused.value.code is ErrorCode.UNAVAILABLE
        time.sleep(2.0)  # past the TTL: the entry expires as the log comes back
        own_nats.start()
        wait_for(lambda: lease.state is LeaseState.HELD, 10, "the lease taken again")
        assert retaken == [True], "a lapse past the TTL asks whether the catalog is ours"
        assert lost == []
        lease.check()
    finally:
        loop_thread.call(lease.release())
        loop_thread.call(bus.close())


@SERIAL
def test_a_lease_another_coord_holds_is_lost(
    own_nats: EmbeddedNats, loop_thread: LoopThread
) -> None:
    bus = connected(own_nats, loop_thread, "lease")
    lost: list[bool] = []
    lease = CoordLease(bus, "c1", 1.5, lambda: lost.append(True))
    try:
        loop_thread.call(lease.acquire())

        async def take_over() -> None:
            kv = await bus.js.key_value(subjects.COORD_LEASE_BUCKET)
            await kv.put(subjects.COORD_LEASE_KEY, b"c2 standby")

        loop_thread.call(take_over())
        wait_for(lambda: lost, 5, "the lease lost to the other holder")
        assert lease.state is LeaseState.LOST
    finally:
        loop_thread.call(lease.release())
        loop_thread.call(bus.close())


@SERIAL
def test_journal_keeps_its_own_entry_whose_ack_a_restart_lost(
    tmp_path: Path, own_nats: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """The entry reached the stream, then nats-server died before its ack: sent again to
    the restarted log, it is recognised as ours (not another coord's), and kept once."""
    bus = connected(own_nats, loop_thread, "journal")
    journal = CatalogJournal(bus, str(tmp_path / "storage"))
    fenced: list[bool] = []
    journal.on_fenced = lambda: fenced.append(True)
    try:
        loop_thread.call(journal.open())
        entry = [("INSERT INTO t VALUES (?)", [1], False)]
        journal.append(entry)
        msg_id = f"{journal.created}-{journal.last_seq + 1}"
        headers = {
            "Nats-Msg-Id": msg_id,
            "Elanus-Part": "1/1",
            "Elanus-Writer": journal.writer,
            "Nats-Expected-Last-Sequence": str(journal.last_seq),
        }
        loop_thread.call(bus.js.publish(SUBJECT, encode(entry), headers=headers))  # no ack kept
        own_nats.kill()
        own_nats.start()
        journal.append(entry)  # the same entry again, expecting the old last sequence
        assert fenced == []
        assert journal.last_seq == 2
        info = loop_thread.call(bus.js.stream_info(STREAM))
        assert info.state.last_seq == 2, "kept once"
        journal.append(entry)
        assert journal.last_seq == 3 and fenced == []
    finally:
        loop_thread.call(journal.close())
        loop_thread.call(bus.close())


@SERIAL
def test_journal_waits_for_a_snapshot_after_the_log_went_back(
    tmp_path: Path, own_nats: EmbeddedNats, loop_thread: LoopThread
) -> None:
    """The log lost entries it had acknowledged (here: its stream made anew): changes are
    refused (retryable) until a snapshot holds the whole catalog, then go on after the
    log's last entry; snapshots past it are dropped."""
    bus = connected(own_nats, loop_thread, "journal")
    journal = CatalogJournal(bus, str(tmp_path / "storage"))
    due: list[bool] = []
    journal.snapshot_due = lambda: due.append(True)
    con = duckdb.connect(str(tmp_path / "catalog.duckdb"))
    con.execute("CREATE TABLE t (a INTEGER)")
    try:
        loop_thread.call(journal.open())
        entry = [("INSERT INTO t VALUES (?)", [1], False)]
        for _ in range(3):
            journal.append(entry)
        journal.snapshot(con, tmp_path)
        assert [seq for _, seq in journal.snapshots()] == [3]

        async def make_anew() -> None:
            config = (await bus.js.stream_info(STREAM)).config
            await bus.js.delete_stream(STREAM)
            await bus.js.add_stream(StreamConfig.from_response(config.as_dict()))

        loop_thread.call(make_anew())
        with pytest.raises(ElanusError) as refused:
            journal.append(entry)
        assert refused.value.code is ErrorCode.UNAVAILABLE
        assert "snapshot" in refused.value.message
        assert due == [True] and journal.last_seq == 0
        with pytest.raises(ElanusError):
            journal.append(entry)  # still waiting for the snapshot
        journal.snapshot(con, tmp_path)
        journal.append(entry)
        assert journal.last_seq == 1
        assert [seq for _, seq in journal.snapshots()] == [0]
    finally:
        con.close()
        loop_thread.call(journal.close())
        loop_thread.call(bus.close())


# -- load: a writer and a Strong reader, every outcome timed ---------------------------------
@dataclass
class Load:
    """One thread inserting 100 new keys per call, one counting with Strong consistency."""

    uri: str
    collection: str = "heal"
    acked: list[int] = field(default_factory=list)
    tried: int = 0
    events: list[tuple[float, str, bool, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Load:
        self.threads = [threading.Thread(target=t, daemon=True) for t in (self._w, self._r)]
        for t in self.threads:
            t.start()
        return self

    def _run(self, kind: str, call: Callable[[Client], Any]) -> None:
        client = Client(self.uri, timeout=5)
        while not self.stop.is_set():
            try:
                call(client)
                self.events.append((time.monotonic(), kind, True, ""))
            except ElanusError as exc:
                self.events.append((time.monotonic(), kind, False, str(exc)[:200]))
                time.sleep(0.05)
        client.close()

    def _w(self) -> None:
        def insert(client: Client) -> None:
            ids = np.arange(self.tried, self.tried + 100)
            self.tried += 100
            vectors = np.random.default_rng(len(self.acked)).random((100, DIM), np.float32)
            client.insert(self.collection, {"id": ids, "vector": vectors})
            self.acked.extend(ids.tolist())

        self._run("write", insert)

    def _r(self) -> None:
        self._run("read", lambda c: c.query(self.collection, "", ["count(*)"],
                                            consistency_level="Strong"))  # fmt: skip

    def halt(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def back_after(self, since: float) -> dict[str, float]:
        """Per kind, seconds from ``since`` to the first success after its last failure."""
        out = {}
        for kind in ("write", "read"):
            after = [e for e in self.events if e[1] == kind and e[0] >= since]
            failed = [e[0] for e in after if not e[2]]
            ok = [e[0] for e in after if e[2] and (not failed or e[0] > failed[-1])]
            assert ok, f"no {kind} succeeded after the event: {[e for e in after if not e[2]][-3:]}"
            out[kind] = ok[0] - since
        return out

    def check_nothing_lost(self, client: Client) -> None:
        """Every acknowledged key is stored, once; only keys sent are."""
        stored: list[int] = []
        for lo in range(0, self.tried, 10_000):  # pages under the query window of 16384
            rows = client.query(self.collection, f"id >= {lo} and id < {lo + 10_000}", ["id"],
                                limit=16384, consistency_level="Strong")  # fmt: skip
            stored += [r["id"] for r in rows]
        assert len(stored) == len(set(stored)), "a key stored twice"
        assert set(self.acked) <= set(stored), "an acknowledged key lost"
        assert set(stored) < set(range(self.tried + 1)), "a key never sent"


def prepare(uri: str) -> Client:
    client = Client(uri, timeout=30)
    client.create_collection("heal", dimension=DIM)
    return client


# -- a standalone's own nats-server -----------------------------------------------------------
@SERIAL
def test_standalone_starts_its_killed_nats_server_again_under_load(tmp_path: Path) -> None:
    sp = StandaloneProcess(tmp_path / "data", "--milvus-port", "0")
    try:
        sp.start().wait_ready()
        client = prepare(sp.uri)
        load = Load(sp.uri).start()
        wait_for(lambda: len(load.acked) >= 2000, 30, "writes before the kill")
        (nats,) = sp.nats_children()
        nats.kill()
        killed = time.monotonic()
        time.sleep(4)
        load.halt()
        back = load.back_after(killed)
        assert max(back.values()) < 3 * SLACK, back
        assert sp.proc is not None and sp.proc.poll() is None
        (again,) = sp.nats_children()
        assert again.pid != nats.pid and sp.info()["nats_pid"] == again.pid
        load.check_nothing_lost(client)
        assert "nats-server (pid" in sp.log() and "started again" in sp.log()
        client.close()
        assert sp.stop() == 0
    finally:
        sp.stop()


def test_standalone_exits_with_one_line_when_its_nats_server_cannot_come_back(
    tmp_path: Path,
) -> None:
    sp = StandaloneProcess(tmp_path / "data", "--milvus-port", "0")
    try:
        sp.start().wait_ready()
        (nats,) = sp.nats_children()
        store = tmp_path / "data" / "nats" / "jetstream"
        assert store.is_dir(), sorted(p.name for p in (tmp_path / "data").iterdir())
        shutil.rmtree(store)
        store.write_text("not a directory")  # JetStream cannot start on it any more
        nats.kill()
        assert sp.wait(60) == 1, sp.log()[-3000:]
        last = sp.log().strip().splitlines()[-1]
        assert last.startswith("error: [UNAVAILABLE] nats-server could not be started again")
        assert not sp.info_path.exists()
    finally:
        sp.stop()


# -- roles on one nats-server: the log and a query node die --------------------------------
def role(
    tmp_path: Path, nats: EmbeddedNats, name: str, index: int = 0, *extra: str
) -> ElanusProcess:
    return role_process(
        name, nats.url, tmp_path / f"{name}-{index}", tmp_path / f"{name}-{index}.log",
        nats.client_env(), "--storage", str(tmp_path / "storage"), *extra,
    )  # fmt: skip


@SERIAL
def test_roles_heal_after_their_nats_server_restarts_and_a_query_node_dies(
    tmp_path: Path,
) -> None:
    nats = EmbeddedNats(tmp_path / "nats").start()
    port = free_port()
    procs = [
        role(tmp_path, nats, "coord"),
        role(tmp_path, nats, "datanode"),
        role(tmp_path, nats, "querynode", 0),
        role(tmp_path, nats, "querynode", 1),
        role(tmp_path, nats, "proxy", 0, "--port", str(port), "--milvus-port", "0"),
    ]
    uri = f"grpc://127.0.0.1:{port}"
    procs[-1].uri = uri
    try:
        for p in procs:
            p.start()
        procs[-1].wait_ready(60)
        client = prepare(uri)
        wait_for(lambda: len(client.list_sessions()) == 5, 30, "every role's session")

        # the log: killed for 5 s, then started again on its store
        load = Load(uri).start()
        wait_for(lambda: len(load.acked) >= 2000, 30, "writes before the kill")
        nats.kill()
        time.sleep(5)
        nats.start()
        restarted = time.monotonic()
        time.sleep(5)
        back = load.back_after(restarted)
        assert max(back.values()) < 3 * SLACK, back
        dead = [p.args[1] for p in procs if p.proc is not None and p.proc.poll() is not None]
        assert dead == [], "no role exits when its log restarts"
        assert "lost the coordinator lease" not in procs[0].log()

        # a query node without replicas: the one leading the shard
        (replica,) = client.describe_replica("heal")
        leader = next(iter(replica["shard_leaders"].values()))
        victim = next(p for p in procs[2:4] if f"querynode {leader}" in status_line(uri, p))
        assert victim.proc is not None
        victim.proc.kill()
        killed = time.monotonic()
        time.sleep(4)
        load.halt()
        back = load.back_after(killed)
        assert back["read"] < 2 * SLACK, back
        (replica,) = client.describe_replica("heal")
        assert leader not in replica["node_ids"]
        load.check_nothing_lost(client)
        client.close()
    finally:
        for p in reversed(procs):
            if p.proc is not None:
                p.stop()
        nats.stop()


def status_line(uri: str, p: ElanusProcess) -> str:
    """``querynode <node id>`` of the role process ``p`` (its session's pid), or ''."""
    with Client(uri, timeout=10) as client:
        sessions = client.list_sessions()
    return next((f"{s['role']} {s['node_id']}" for s in sessions if s["pid"] == p.pid), "")
