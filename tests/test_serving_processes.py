"""A standalone's serving processes (setting ``serving_processes``, cli/serving.py): each
further process hosts a proxy and a query node of one node group (meta/nodegroups.py),
holds every replica placed on the group, and answers the requests it receives itself.

Each process is asked through its own Flight port, so both are covered whatever the kernel
does with the shared Milvus port; pymilvus goes through that shared port."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pymilvus
import pytest
from conftest import StandaloneProcess, bare_collection, wait_for
from test_replicas import _answers

from elanus.channels.nats_server import free_port
from elanus.client.client import Client

pytestmark = pytest.mark.integration

DIM = 8
ROWS = 400
STRONG = "Strong"


def _proxies(client: Client) -> dict[int, str]:
    """Flight uri of each live serving process's proxy, by its pid (a killed one's session
    outlives it for a TTL)."""
    out = {}
    for s in client.list_sessions():
        if s["role"] == "proxy":
            port = (s.get("meta") or {}).get("flight_port")
            pid = _pid_on(port)
            if pid is not None:
                out[pid] = f"grpc://127.0.0.1:{port}"
    return out


def _pid_on(port: int) -> int | None:
    for c in psutil.net_connections("tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid:
            return c.pid
    return None


@pytest.fixture
def two(tmp_path: Any) -> Iterator[tuple[StandaloneProcess, int]]:
    milvus = free_port()
    sp = StandaloneProcess(
        tmp_path / "data",
        "--milvus-port",
        str(milvus),
        env={"ELANUS_SERVING_PROCESSES": "2"},
    )
    try:
        yield sp.start().wait_ready(90), milvus
    finally:
        sp.stop()


def test_each_serving_process_answers_as_one_standalone(
    two: tuple[StandaloneProcess, int],
) -> None:
    sp, milvus = two
    with Client(sp.uri) as first:
        proxies = _proxies(first)
        assert len(proxies) == 2 and sp.pid in proxies
        (member_pid,) = set(proxies) - {sp.pid}
        assert psutil.Process(member_pid).ppid() == sp.pid
        bare_collection(first, "r", DIM, metric_type="L2", num_shards=2)
        vectors = np.random.default_rng(5).random((ROWS, DIM), dtype=np.float32)
        half = ROWS // 2
        first.insert("r", {"id": np.arange(half), "vector": vectors[:half]})
        first.flush("r", timeout=30)
        first.load_collection("r")
        replicas = first.describe_replica("r")
        assert len(replicas) == 1  # the user's one replica, copied on every member
        with Client(proxies[member_pid]) as member:
            # written through the member's proxy, growing in both processes
            member.insert("r", {"id": np.arange(half, ROWS), "vector": vectors[half:]})
            want = _answers(first, vectors)
            assert want[2][0]["count(*)"] == ROWS
            assert _answers(member, vectors) == want
            first.flush("r", timeout=30)  # handed over to both members
            first.delete("r", filter="id < 10")
            want = _answers(first, vectors)
            assert want[2][0]["count(*)"] == ROWS - 10
            assert _answers(member, vectors) == want
    mc = pymilvus.MilvusClient(uri=f"http://127.0.0.1:{milvus}", timeout=30)
    try:
        got = mc.query("r", filter="id >= 0", output_fields=["count(*)"], consistency_level=STRONG)
        assert got[0]["count(*)"] == ROWS - 10
    finally:
        mc.close()


@pytest.mark.chaos
@pytest.mark.serial
def test_a_killed_serving_process_comes_back_and_serves_again(
    two: tuple[StandaloneProcess, int],
) -> None:
    sp, _ = two
    with Client(sp.uri) as first:
        (member_pid,) = set(_proxies(first)) - {sp.pid}
        bare_collection(first, "r", DIM, metric_type="L2", num_shards=1)
        vectors = np.random.default_rng(6).random((ROWS, DIM), dtype=np.float32)
        first.insert("r", {"id": np.arange(ROWS), "vector": vectors})
        first.flush("r", timeout=30)
        first.load_collection("r")
        with Client(_proxies(first)[member_pid]) as member:  # acknowledged, then killed
            member.insert("r", {"id": np.arange(ROWS, ROWS + 50), "vector": vectors[:50]})
        want = _answers(first, vectors)
        assert want[2][0]["count(*)"] == ROWS + 50
        os.kill(member_pid, signal.SIGKILL)
        killed = time.monotonic()
        assert _answers(first, vectors) == want  # the first process never needed it
        # nor waited for its time ticks: the coord found its proxy gone
        assert time.monotonic() - killed < 3.0, "Strong reads waited for the killed proxy"
        # the first process saw it exit and took its sessions out, a TTL (6 s) early
        wait_for(
            lambda: all(s["pid"] != member_pid for s in first.list_sessions()),
            timeout=10, what="the killed process's sessions gone",
        )  # fmt: skip
        assert time.monotonic() - killed < 3.0, "the sessions waited for their TTL"

        def back() -> dict[int, str] | None:
            proxies = _proxies(first)
            new = set(proxies) - {sp.pid, member_pid}
            return proxies if new and len(proxies) == 2 else None

        proxies = wait_for(back, timeout=60, what="the serving process started again")
        (new_pid,) = set(proxies) - {sp.pid}
        time.sleep(0.5)
        with Client(proxies[new_pid]) as member:
            assert _answers(member, vectors) == want
    sp.stop()
    assert not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == "zombie"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) > 4, reason="one process per core: many here")
def test_zero_serving_processes_means_one_per_core(tmp_path: Any) -> None:
    sp = StandaloneProcess(tmp_path / "data", env={"ELANUS_SERVING_PROCESSES": "0"})
    try:
        sp.start().wait_ready(90)
        with Client(sp.uri) as client:
            assert len(_proxies(client)) == len(os.sched_getaffinity(0))
        assert len(sp.info()["serving_pids"]) == len(os.sched_getaffinity(0)) - 1
    finally:
        sp.stop()
