"""The replicated log: three nats-servers with routes on loopback, streams at 3 replicas.

kill -9 of one server under sustained writes and Strong reads loses and duplicates no
acknowledged row, and stalls writes for less than 2 s; a cluster that lost its quorum
gives a clear error on the failing call, never a hang.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Stack

from elanus.channels.bus import Bus
from elanus.channels.dml import ensure_streams, stream_name
from elanus.channels.nats_cluster import NatsCluster
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.errors import ElanusError

pytestmark = pytest.mark.slow

DIM = 8
BATCH = 200
STALL_LIMIT_S = 2.0


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    with NatsCluster(tmp_path / "nats", 3) as cluster:
        yield cluster


@contextlib.contextmanager
def stack_on(nats_cluster: NatsCluster, data_dir: Path, **settings: Any) -> Iterator[Stack]:
    loop = LoopThread("cluster-stack").start()
    creds = nats_cluster.credentials
    stack = Stack(
        loop,
        nats_cluster.url,
        data_dir,
        nats_user=creds.user,
        nats_password=creds.password,
        stream_replicas=3,
        num_pchannels=2,
        **settings,
    )
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
        loop.stop()


@pytest.fixture
def cluster_stack(nats_cluster: NatsCluster, tmp_path: Path) -> Iterator[Stack]:
    with stack_on(nats_cluster, tmp_path / "data") as stack:
        yield stack


QUORUMLESS_WINDOW_S = 5.0
"""The log's retry window where no election is waited out (15 s in a server): writes
queued behind the failing one each wait a short window at stop, so both the failing
insert and the teardown are shorter."""


@pytest.fixture
def short_window_stack(nats_cluster: NatsCluster, tmp_path: Path) -> Iterator[Stack]:
    with stack_on(nats_cluster, tmp_path / "data", log_retry_window_s=QUORUMLESS_WINDOW_S) as stack:
        yield stack


class Writer(threading.Thread):
    """Inserts batches of fresh keys; remembers the acknowledged ones and when each was."""

    def __init__(self, client: Client, collection: str) -> None:
        super().__init__(daemon=True)
        self.client, self.collection = client, collection
        self.acked: list[int] = []
        self.ack_times: list[float] = []
        self.failed: list[tuple[list[int], str]] = []
        self.stop = threading.Event()
        self.rng = np.random.default_rng(5)

    def run(self) -> None:
        next_pk = 0
        while not self.stop.is_set():
            pks = np.arange(next_pk, next_pk + BATCH, dtype=np.int64)
            next_pk += BATCH
            data = {"id": pks, "vector": self.rng.random((BATCH, DIM), dtype=np.float32)}
            try:
                ids = self.client.insert(self.collection, data)["ids"]
            except ElanusError as exc:
                self.failed.append((pks.tolist(), str(exc)))
                continue
            assert ids == pks.tolist()
            self.acked.extend(ids)
            self.ack_times.append(time.monotonic())

    def longest_gap(self, since: float) -> float:
        times = [since] + [t for t in self.ack_times if t >= since]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


class Reader(threading.Thread):
    """Strong counts, which must never go down."""

    def __init__(self, client: Client, collection: str) -> None:
        super().__init__(daemon=True)
        self.client, self.collection = client, collection
        self.counts: list[int] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                rows = self.client.query(
                    self.collection, output_fields=["count(*)"], consistency_level="Strong"
                )
                self.counts.append(int(rows[0]["count(*)"]))
            except ElanusError as exc:
                self.errors.append(str(exc))
            time.sleep(0.05)


def raft_groups(stack: Stack) -> list[tuple[str, str | None]]:
    """(stream, consumer or None) of every stream and consumer on the cluster."""
    js = stack.bus.js
    groups: list[tuple[str, str | None]] = []
    for info in stack.call(js.streams_info()):
        groups.append((info.config.name, None))
        for c in stack.call(js.consumers_info(info.config.name)):
            groups.append((info.config.name, c.name))
    return groups


def leader_of(stack: Stack, stream: str, consumer: str | None) -> str | None:
    js = stack.bus.js
    if consumer is None:
        info = stack.call(js.stream_info(stream))
        assert info.config.num_replicas == 3, stream
    else:
        info = stack.call(js.consumer_info(stream, consumer))
    return info.cluster.leader if info.cluster else None


def move_leaders_off(stack: Stack, server: str, other: str) -> None:
    """Step down every stream and consumer leader on ``server`` in favour of ``other``."""
    for _ in range(20):
        led = [g for g in raft_groups(stack) if leader_of(stack, *g) == server]
        if not led:
            return
        for stream, consumer in led:
            subject = (
                f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}"
                if consumer is None
                else f"$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"
            )
            body = json.dumps({"placement": {"preferred": other}}).encode()
            stack.call(stack.bus.nc.request(subject, body, timeout=5))
        time.sleep(1.0)
    raise AssertionError(f"{server} still leads {led}")


def server_index(cluster: NatsCluster, name: str) -> int:
    return next(i for i, s in enumerate(cluster.servers) if f'"{name}"' in s.extra_config)


def ingest_through_a_kill(
    cluster: NatsCluster, stack: Stack, victim: int, before_kill: Callable[[], None] = lambda: None
) -> tuple[Writer, Reader, float]:
    """Write and read Strong, kill -9 server ``victim`` midway (``before_kill`` first);
    return the threads and the kill time."""
    client = stack.client()
    writer, reader = Writer(client, "replicated"), Reader(client, "replicated")
    writer.start()
    reader.start()
    deadline = time.monotonic() + 30
    while len(writer.acked) < 10 * BATCH:
        assert time.monotonic() < deadline and writer.is_alive()
        time.sleep(0.05)
    before_kill()
    killed_at = time.monotonic()
    cluster.kill(victim)
    deadline = time.monotonic() + 40
    while writer.ack_times[-1] < killed_at + 3 or len(reader.counts) < 5:
        assert time.monotonic() < deadline, (
            f"writes or reads did not resume: {len(writer.acked)} acked, last "
            f"{writer.ack_times[-1] - killed_at:.1f}s after the kill; {len(reader.counts)} "
            f"reads, errors {reader.errors[-2:]}, failures {[f for _, f in writer.failed[-2:]]}"
        )
        time.sleep(0.1)
    writer.stop.set()
    reader.stop.set()
    writer.join(30)
    reader.join(30)
    return writer, reader, killed_at


def check_rows(stack: Stack, writer: Writer) -> None:
    """Every acknowledged row is there exactly once (Strong count and by key)."""
    client = stack.client()
    assert writer.failed == [], writer.failed[0][1]
    rows = client.query("replicated", output_fields=["count(*)"], consistency_level="Strong")
    assert rows[0]["count(*)"] == len(writer.acked)
    got = client.query(
        "replicated", filter=f"id < {len(writer.acked)}", output_fields=["id"],
        consistency_level="Strong", limit=len(writer.acked) + 10,
    )  # fmt: skip
    assert sorted(r["id"] for r in got) == sorted(writer.acked)


def setup_collection(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("replicated", dimension=DIM, num_shards=2)
    client.load_collection("replicated")


@pytest.mark.chaos
@pytest.mark.serial
def test_kill_9_of_a_server_under_writes_loses_nothing_and_stalls_under_2s(
    nats_cluster: NatsCluster, cluster_stack: Stack
) -> None:
    """A server that leads nothing dies (JetStream's metadata leader spared, the stream
    and consumer leaders moved off it), preferably the one the roles are connected to:
    the connection moves, writes go on within 2 s, reads never fail."""
    setup_collection(cluster_stack)
    connected = cluster_stack.bus.nc.connected_url
    assert connected is not None
    meta = nats_cluster.meta_leader()
    candidates = [i for i in range(3) if i != meta]
    victim = next(
        (i for i in candidates if nats_cluster.servers[i].port == connected.port), candidates[0]
    )
    other = next(i for i in candidates if i != victim) if len(candidates) > 1 else meta
    server, to = f"elanus-n{victim + 1}", f"elanus-n{(other or 0) + 1}"
    move_leaders_off(cluster_stack, server, to)
    # Once writes run, each consumer makes its JetStream consumer anew to read headers only
    # (the payloads are handed over in this process); a new consumer's leader may be the
    # victim, so the leaders are moved off once more right before the kill.
    writer, reader, killed_at = ingest_through_a_kill(
        nats_cluster, cluster_stack, victim, lambda: move_leaders_off(cluster_stack, server, to)
    )
    stall = writer.longest_gap(killed_at)
    print(f"\nwrite stall after kill -9 of a follower server: {stall:.3f}s")
    assert stall < STALL_LIMIT_S
    assert reader.errors == []
    assert reader.counts == sorted(reader.counts), "a Strong count went down"
    check_rows(cluster_stack, writer)


@pytest.mark.chaos
@pytest.mark.serial
def test_kill_9_of_a_stream_leader_loses_nothing(
    nats_cluster: NatsCluster, cluster_stack: Stack
) -> None:
    """The leader of the DML streams dies: writes wait out the Raft election (nats-server
    waits 4-9 s for a lost leader) and are then taken, none lost or written twice."""
    setup_collection(cluster_stack)
    streams = [stream_name(p) for p in cluster_stack.coord.pchannels]  # type: ignore[union-attr]
    leaders = collections.Counter(leader_of(cluster_stack, s, None) for s in streams)
    victim = server_index(nats_cluster, str(leaders.most_common(1)[0][0]))
    writer, reader, killed_at = ingest_through_a_kill(nats_cluster, cluster_stack, victim)
    stall = writer.longest_gap(killed_at)
    print(f"\nwrite stall after kill -9 of the streams' leader: {stall:.3f}s")
    # One election (nats-server waits 4-9 s for a lost leader) and the retry that follows;
    # when the dead server also led the coord lease's bucket, the lease lapses until that
    # election ends too (timestamps wait for it): 13 s seen once in 20 runs on 2 cores.
    assert stall < 20.0
    assert reader.counts == sorted(reader.counts), "a Strong count went down"
    check_rows(cluster_stack, writer)


@pytest.mark.chaos
@pytest.mark.serial
def test_a_cluster_without_quorum_gives_a_clear_error(
    nats_cluster: NatsCluster, short_window_stack: Stack
) -> None:
    """Two of three servers killed: an insert fails with UNAVAILABLE naming the cause,
    well before the client's timeout; never a hang."""
    setup_collection(short_window_stack)
    client = short_window_stack.client()
    rng = np.random.default_rng(1)
    client.insert("replicated", {"id": [1], "vector": rng.random((1, DIM), dtype=np.float32)})
    connected = short_window_stack.bus.nc.connected_url
    assert connected is not None
    survivor = next(i for i, s in enumerate(nats_cluster.servers) if s.port == connected.port)
    for i in range(3):
        if i != survivor:
            nats_cluster.kill(i)
    started = time.monotonic()
    with pytest.raises(ElanusError) as err:
        client.insert("replicated", {"id": [2], "vector": rng.random((1, DIM), dtype=np.float32)})
    took = time.monotonic() - started
    assert err.value.code.name == "UNAVAILABLE", err.value
    assert "majority of the NATS servers" in str(err.value)
    assert took < 25, f"the failing insert took {took:.1f}s"


def test_replicas_a_lone_server_cannot_hold_are_refused_naming_the_setting(
    nats_server: EmbeddedNats, loop_thread: LoopThread
) -> None:
    bus = loop_thread.call(Bus(nats_server.url, credentials=nats_server.credentials).connect())
    try:
        with pytest.raises(ElanusError) as err:
            loop_thread.call(ensure_streams(bus.js, ["dml_0"], replicas=3))
        assert "stream_replicas=3" in str(err.value) and "cluster" in str(err.value)
    finally:
        loop_thread.call(bus.close())


def test_a_port_taken_before_the_server_binds_it_is_replaced(tmp_path: Path) -> None:
    """Ports found free can be taken before a server binds them (an ephemeral port of
    another socket): the cluster starts on other ones."""
    cluster = NatsCluster(tmp_path / "nats", 3)
    taken = cluster.servers[2].port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with cluster:
            assert taken not in [s.port for s in cluster.servers]
            assert all(s.proc is not None and s.proc.poll() is None for s in cluster.servers)
