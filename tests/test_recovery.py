"""kill -9 mid-ingest, of the datanode and of the coord, each its own OS process: after a
restart and a flush, every acknowledged row is stored, exactly once, and nothing else is
but rows of inserts that failed ambiguously (they reached the log before the proxy lost its
lease on the coord, so the proxy refused to acknowledge them)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import ElanusProcess, Stack, bare_collection, both_transports
from nats.errors import TimeoutError as NatsTimeout

from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.client.client import Client
from elanus.errors import ElanusError

ENV = {
    "ELANUS_SESSION_TTL_S": "2",
    "ELANUS_COORD_LEASE_TTL_S": "2",  # the coord restarted after kill -9 waits this out
    "ELANUS_TIMETICK_INTERVAL_MS": "50",
    "ELANUS_SEGMENT_MAX_ROWS": "4000",  # segments seal and flush while the ingest runs
}
DIM = 16
BATCH = 500
BATCHES = 60


class Cluster:
    """NATS in the test; coord, datanode and proxy as separate ``elanus run`` processes."""

    def __init__(
        self,
        tmp: Path,
        track: Callable[[ElanusProcess], ElanusProcess],
        env: dict[str, str] | None = None,
        datanodes: int = 1,
    ) -> None:
        self.tmp = tmp
        self.track = track
        self.env = ENV if env is None else env
        self.nats = EmbeddedNats(tmp / "nats").start()
        self.port = free_port()
        self.uri = f"grpc://127.0.0.1:{self.port}"
        self.procs: dict[str, ElanusProcess] = {}
        self.spawn("coord")
        for _ in range(datanodes):
            self.spawn("datanode")
        self.spawn("proxy").wait_ready()

    def spawn(self, role: str) -> ElanusProcess:
        args = ["run", role, "--nats", self.nats.url, "--data-dir", str(self.tmp / "data")]
        if role == "proxy":
            args += ["--port", str(self.port)]
        n = sum(1 for k in self.procs if k.startswith(role))
        proc = ElanusProcess(
            *args,
            log_path=self.tmp / f"{role}-{n}.log",
            uri=self.uri if role == "proxy" else None,
            env={**self.env, **self.nats.client_env()},
        )
        self.procs[f"{role}-{n}"] = self.track(proc).start()
        return proc

    def kill9(self, role: str) -> None:
        live = [
            p
            for k, p in self.procs.items()
            if k.startswith(role) and p.proc is not None and p.proc.poll() is None
        ]
        for p in live:
            p.send(signal.SIGKILL)
            assert p.wait(10) == -signal.SIGKILL

    def close(self) -> None:
        for p in reversed(list(self.procs.values())):
            p.stop(timeout=5)
        self.nats.stop()


@pytest.fixture
def cluster(
    tmp_path: Path, elanus_processes: Callable[[ElanusProcess], ElanusProcess]
) -> Iterator[Cluster]:
    c = Cluster(tmp_path, elanus_processes)
    try:
        yield c
    finally:
        c.close()


class Ingest(threading.Thread):
    """Inserts batches with fresh keys; remembers exactly the keys that were acknowledged."""

    def __init__(self, client: Client, collection: str) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.collection = collection
        self.acked: list[int] = []
        self.failures = 0
        self.ambiguous: list[int] = []
        self.rng = np.random.default_rng(7)

    def run(self) -> None:
        next_pk = 0
        for _ in range(BATCHES):
            pks = np.arange(next_pk, next_pk + BATCH, dtype=np.int64)
            next_pk += BATCH
            data = {"id": pks, "vector": self.rng.random((BATCH, DIM), dtype=np.float32)}
            try:
                result = self.client.insert(self.collection, data)
            except ElanusError:
                # Not acknowledged. A write that reached the log before the proxy lost its
                # lease is refused but may still be stored (an ambiguous failure, as in
                # Milvus): it may show up, once, but nothing else may.
                self.failures += 1
                self.ambiguous.extend(pks.tolist())
                time.sleep(0.2)
                continue
            assert result["ids"] == pks.tolist()
            self.acked.extend(result["ids"])
            time.sleep(0.01)

    def wait_for(self, rows: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < rows:
            assert self.is_alive(), "the ingest ended early"
            assert time.monotonic() < deadline, f"only {len(self.acked)} rows acknowledged"
            time.sleep(0.05)


def stored_pks(client: Client, collection: str) -> list[int]:
    """Primary keys of every flushed segment, read straight from the Lance files."""
    pks: list[pa.Array] = []
    for seg in client.get_segment_info(collection):
        if seg["state"] == "Flushed":
            table = lance.dataset(seg["path"]).to_table(columns=["id"])
            pks.append(table.column("id").combine_chunks())
    return sorted(pa.concat_arrays(pks).to_pylist()) if pks else []


def flush_with_retry(client: Client, collection: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.flush(collection, timeout=max(1.0, deadline - time.monotonic()))
            return
        except ElanusError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_crash(cluster: Cluster, role: str) -> Ingest:
    client = Client(cluster.uri, timeout=30)
    bare_collection(client, "crash", DIM, num_shards=2)  # no query node to load into
    ingest = Ingest(client, "crash")
    ingest.start()
    ingest.wait_for(BATCHES * BATCH // 3)
    cluster.kill9(role)
    time.sleep(0.5)
    cluster.spawn(role)
    ingest.join(180)
    assert not ingest.is_alive()
    flush_with_retry(client, "crash")
    stored = stored_pks(client, "crash")
    assert len(stored) == len(set(stored)), "a row was written twice"
    extra = set(stored) - set(ingest.acked)
    assert set(ingest.acked) <= set(stored), "an acknowledged row was lost"
    assert extra <= set(ingest.ambiguous), (
        f"stored {len(stored)} rows, acknowledged {len(ingest.acked)}; "
        f"{len(extra - set(ingest.ambiguous))} stored rows were never sent"
    )
    client.close()
    return ingest


@pytest.mark.chaos
def test_kill_9_of_the_datanode_loses_and_duplicates_nothing(cluster: Cluster) -> None:
    ingest = run_crash(cluster, "datanode")
    assert ingest.failures == 0  # the log takes writes while no datanode runs
    assert len(ingest.acked) == BATCHES * BATCH


@pytest.mark.chaos
def test_kill_9_of_the_coord_loses_and_duplicates_nothing(cluster: Cluster) -> None:
    ingest = run_crash(cluster, "coord")
    assert len(ingest.acked) > BATCHES * BATCH // 3
    # Grants in an existing segment are not in the catalog: the restarted coord cannot
    # know how full the growing segment it found is, so it must take nothing more there
    # (it seals it at the next grant) rather than fill it past its size.
    client = Client(cluster.uri, timeout=30)
    sizes = [s["num_rows"] for s in client.get_segment_info("crash")]
    client.close()
    assert max(sizes) <= int(ENV["ELANUS_SEGMENT_MAX_ROWS"]), sizes


@both_transports
def test_a_delivery_gap_is_read_again_from_the_last_position(stack: Stack) -> None:
    """Unacknowledged delivery can drop messages under load; the datanode notices the gap
    in consumer sequence numbers and reads the channel again from where it was."""
    client = stack.client()
    client.create_collection("gap", dimension=DIM)
    rng = np.random.default_rng(3)
    acked: list[int] = []
    for k in range(6):
        pks = np.arange(k * 100, (k + 1) * 100)
        acked += client.insert("gap", {"id": pks, "vector": rng.random((100, DIM), "f4")})["ids"]
        if k == 2:  # as if the next delivery skipped messages
            channels = stack.datanodes[0].channels
            deadline = time.monotonic() + 10
            while not channels:  # the coord assigns the vchannel once it sees the datanode
                assert time.monotonic() < deadline
                time.sleep(0.05)
            (writer,) = channels.values()
            writer.consumer._consumer_seq -= 5
    client.flush("gap", timeout=30)
    assert stored_pks(client, "gap") == sorted(acked)


def test_a_delivery_gap_while_jetstream_does_not_answer_is_read_again_later(stack: Stack) -> None:
    """A gap seen while a stream elects a leader (a NATS server died): re-creating the
    consumer times out at first. The consumer tries again until it works; before, its task
    died and the channel was consumed no more (Strong reads through it waited 30 s)."""
    client = stack.client()
    client.create_collection("gap2", dimension=DIM)
    rng = np.random.default_rng(4)

    def insert(k: int) -> list[int]:
        pks = np.arange(k * 100, (k + 1) * 100)
        data = {"id": pks, "vector": rng.random((100, DIM), "f4")}
        return list(client.insert("gap2", data)["ids"])

    acked = insert(0) + insert(1)
    channels = stack.datanodes[0].channels
    deadline = time.monotonic() + 10
    while not channels:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (writer,) = channels.values()
    consumer = writer.consumer
    subscribe, failures = consumer._subscribe, [2]

    async def electing(from_seq: int | None) -> None:
        if failures[0] > 0:
            failures[0] -= 1
            raise NatsTimeout
        await subscribe(from_seq)

    consumer._subscribe = electing  # type: ignore[method-assign]
    consumer._consumer_seq -= 5  # the next delivery looks as if messages were skipped
    acked += insert(2) + insert(3)
    client.flush("gap2", timeout=30)
    assert failures == [0]
    assert consumer.failure is None
    assert stored_pks(client, "gap2") == sorted(acked)
