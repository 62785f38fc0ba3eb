"""Reads at every consistency level see all data already safe.

Milvus waits until a delegator's tsafe passes the guarantee of the level and then reads at
that tsafe, so a weaker level may miss the newest writes but never rows that are already
flushed. Elanus does the same: a count right after flush+load is complete at Strong,
Bounded, Session and Eventually; so are search, get and query; and Session and Strong see
a write at once while Eventually does not wait.

The in-process stack (direct search path) runs with slow ticks and wide rows: the load
then comes before the datanode reports the tick after its flush, and the new delegator
starts from a checkpoint older than the flushed rows, replaying megabytes before it passes
them. A real ``elanus standalone`` process covers the ordinary path and a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import ElanusProcess, Stack, StandaloneProcess, wait_for

from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.meta.coord import Coordinator

# Every test waits out flushes and loads with slow ticks, or runs real elanus processes.
pytestmark = pytest.mark.slow

LEVELS = ("Strong", "Bounded", "Session", "Eventually")
WIDE = 256
"""Wide enough that replaying the inserted rows takes the new delegator a while."""
SLOW_TICK_MS = 2000
COUNT = "count(*)"


def table(n: int, dim: int, start: int = 0, seed: int = 0) -> pa.Table:
    vectors = np.random.default_rng(seed).random((n, dim), dtype=np.float32)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        }
    )


def vector_of(pk: int, dim: int, batch: int, seed_of: Callable[[int], int]) -> list[float]:
    """The vector ``table`` gave key ``pk`` (rows come in batches of ``batch``)."""
    rng = np.random.default_rng(seed_of(pk // batch))
    return list(rng.random((batch, dim), dtype=np.float32)[pk % batch].tolist())


def count(client: Client, name: str, level: str) -> int:
    return int(client.query(name, output_fields=[COUNT], consistency_level=level)[0][COUNT])


def counts(client: Client, name: str) -> dict[str, int]:
    return {level: count(client, name, level) for level in LEVELS}


@pytest.fixture
def slow_stack(
    nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
) -> Iterator[Stack]:
    s = Stack(
        loop_thread,
        nats_server,
        tmp_path / "data",
        timetick_interval_ms=SLOW_TICK_MS,
        session_ttl_s=10,  # a proxy's write lease (0.8 x this) must outlast a report interval
        bounded_staleness_ms=5000,  # Milvus's default (common.gracefulTime)
        compaction_interval_s=0,
    )
    try:
        yield s.start()
    finally:
        s.close()


BATCH = 10_000
BATCHES = 2


def flushed_and_loaded(stack: Stack) -> tuple[Client, Client]:
    """(writer, reader) after inserting BATCHES x BATCH wide rows, a flush and a load; the
    reader has written nothing, so its Session reads wait for nothing."""
    writer = stack.client()
    writer.create_collection("c", dimension=WIDE, metric_type="L2")
    for b in range(BATCHES):
        writer.insert("c", table(BATCH, WIDE, b * BATCH, seed=b))
    writer.flush("c")
    writer.load_collection("c")
    return writer, stack.client()


@pytest.mark.parametrize("level", LEVELS)
def test_count_right_after_flush_and_load_is_complete(slow_stack: Stack, level: str) -> None:
    _, reader = flushed_and_loaded(slow_stack)
    assert count(reader, "c", level) == BATCH * BATCHES


def test_search_at_bounded_right_after_flush_and_load_finds_a_flushed_row(
    slow_stack: Stack,
) -> None:
    _, reader = flushed_and_loaded(slow_stack)
    pk = BATCH + 123
    (hits,) = reader.search(
        "c", [vector_of(pk, WIDE, BATCH, lambda b: b)], limit=1, consistency_level="Bounded"
    )
    assert [h["id"] for h in hits] == [pk]
    assert hits[0]["distance"] < 1e-4


@pytest.mark.parametrize("level", ["Eventually", "Session"])
def test_get_and_query_right_after_flush_and_load_see_flushed_rows(
    slow_stack: Stack, level: str
) -> None:
    _, reader = flushed_and_loaded(slow_stack)
    keys = [0, BATCH - 1, BATCH, 2 * BATCH - 1]
    assert [r["id"] for r in reader.get("c", keys, consistency_level=level)] == keys
    rows = reader.query("c", "id >= 19990", consistency_level=level)
    assert sorted(r["id"] for r in rows) == list(range(19990, 20000))


def test_strong_and_session_see_a_write_at_once_eventually_does_not_wait(
    slow_stack: Stack,
) -> None:
    """Ticks every 2 s: Strong forces one, Session waits for the writer's own timestamp
    (forcing one too, as it is newer than the last periodic tick), Eventually answers at the
    current tsafe without waiting for either."""
    writer = slow_stack.client()
    writer.create_collection("w", dimension=8, metric_type="L2")
    writer.load_collection("w")
    other = slow_stack.client()
    for round_ in range(3):
        start = round_ * 100
        writer.insert("w", table(100, 8, start, seed=round_))
        began = time.monotonic()
        seen = count(other, "w", "Eventually")
        assert time.monotonic() - began < SLOW_TICK_MS / 1000 / 2, "Eventually waited"
        before = start + round_  # 100 rows and one single row per earlier round
        assert seen in (before, before + 100)
        began = time.monotonic()
        assert [r["id"] for r in writer.get("w", [start + 7], consistency_level="Session")] == [
            start + 7
        ]
        assert time.monotonic() - began < SLOW_TICK_MS / 1000 / 2, "Session waited for a tick"
        writer.insert("w", table(1, 8, 10_000 + round_, seed=9))
        assert other.get("w", [10_000 + round_], consistency_level="Strong") != []
        assert count(other, "w", "Strong") == before + 101


def test_a_client_reads_its_own_writes_when_it_names_no_level(slow_stack: Stack) -> None:
    """Ticks every 2 s, Bounded staleness 5 s: a read naming no level waits for the
    collection's level and for the client's own newest write (``session_ts``), so the
    writer counts its rows at once, as the README's examples need, without waiting for the
    next periodic tick (its read asks for one, as a Strong read does); a client that wrote
    nothing reads at the collection's Bounded, without waiting for the next tick. An
    Eventually collection keeps the writer's own writes visible too."""
    writer = slow_stack.client()
    writer.create_collection("own", dimension=8, metric_type="L2")
    writer.create_collection("loose", dimension=8, metric_type="L2", consistency_level="Eventually")
    other = slow_stack.client()

    def count_default(client: Client, name: str) -> int:
        return int(client.query(name, output_fields=[COUNT])[0][COUNT])

    for round_ in range(3):
        for name in ("own", "loose"):
            writer.insert(name, table(10, 8, round_ * 10, seed=round_))
            began = time.monotonic()
            assert count_default(writer, name) == (round_ + 1) * 10
            assert time.monotonic() - began < SLOW_TICK_MS / 1000 / 2, "the writer waited"
        began = time.monotonic()
        assert count_default(other, "own") <= (round_ + 1) * 10
        assert time.monotonic() - began < SLOW_TICK_MS / 1000 / 2, "the other client waited"


def test_every_level_is_complete_after_load_release_and_a_restart(
    standalone_factory: Callable[..., StandaloneProcess],
) -> None:
    """Through ``elanus standalone`` (the ordinary, out-of-thread path): right after
    flush+load, after release+load, and after a restart (the delegator then starts from
    the checkpoint saved in DuckDB)."""
    sp = standalone_factory().start().wait_ready()
    n = 20_000
    with Client(sp.uri, timeout=60) as c:
        c.create_collection("r", dimension=WIDE, metric_type="L2", num_shards=2)
        c.insert("r", table(n, WIDE))
        c.flush("r")
        c.load_collection("r")
        with Client(sp.uri, timeout=60) as reader:
            assert counts(reader, "r") == dict.fromkeys(LEVELS, n)
        c.release_collection("r")
        c.load_collection("r")
        with Client(sp.uri, timeout=60) as reader:
            assert counts(reader, "r") == dict.fromkeys(LEVELS, n)
    sp.stop()
    again = standalone_factory(data_dir=sp.data_dir).start().wait_ready()
    with Client(again.uri, timeout=60) as c:
        c.load_collection("r")
        got: dict[str, Any] = counts(c, "r")
        assert got == dict.fromkeys(LEVELS, n)
        (hits,) = c.search(
            "r", [vector_of(4321, WIDE, n, lambda b: b)], limit=1, consistency_level="Bounded"
        )
        assert hits[0]["id"] == 4321


def test_count_after_flush_and_load_with_the_query_node_in_its_own_process(
    nats_server: EmbeddedNats,
    loop_thread: LoopThread,
    tmp_path: Path,
    elanus_processes: Callable[[ElanusProcess], ElanusProcess],
) -> None:
    """The same load race with the delegator in another OS process (the watch and every
    read go over NATS); the reader has no writes, so Session waits for nothing."""
    data_dir = tmp_path / "data"
    settings = {"timetick_interval_ms": SLOW_TICK_MS, "session_ttl_s": 10}
    stack = Stack(loop_thread, nats_server, data_dir, compaction_interval_s=0, **settings)
    env = stack.role_env(ELANUS_SESSION_TTL_S="10", ELANUS_TIMETICK_INTERVAL_MS=str(SLOW_TICK_MS))
    args = ["run", "querynode", "--nats", nats_server.url, "--data-dir", str(data_dir)]
    try:
        stack.coord = Coordinator(stack.settings, stack.bus)
        stack.call(stack.coord.start())
        stack.add_datanode()
        stack.add_proxy()
        node = elanus_processes(
            ElanusProcess(*args, log_path=tmp_path / "querynode.log", env=env)
        ).start()
        wait_for(
            lambda: node.check_alive() or stack.coord.sessions.of_role("querynode"),  # type: ignore[union-attr]
            what="the query node process's session",
        )
        _, reader = flushed_and_loaded(stack)
        assert count(reader, "c", "Session") == BATCH * BATCHES
        assert counts(reader, "c") == dict.fromkeys(LEVELS, BATCH * BATCHES)
    finally:
        stack.close()
