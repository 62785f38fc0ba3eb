"""``elanus cluster up`` as a user runs it: a subprocess that starts three nats-servers and
every role as processes of their own; a client works through it; SIGINT stops them all."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import ELANUS_BIN, cli_env, process_gone, wait_for, wait_healthy

from elanus.channels.nats_server import free_port
from elanus.client.client import Client
from elanus.errors import ElanusError

pytestmark = [pytest.mark.slow, pytest.mark.chaos]  # it kills a role process

DIM = 8


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_cluster_up_serves_a_client_and_ctrl_c_stops_every_child(tmp_path: Path) -> None:
    port = free_port()
    root = tmp_path / "cluster"
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [ELANUS_BIN, "cluster", "up", "--data-dir", str(root), "--nats", "3",
             "--proxies", "1", "--datanodes", "1", "--querynodes", "1", "--indexnodes", "0",
             "--port", str(port), "--milvus-port", "0"],
            stdout=out, stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True,
        )  # fmt: skip
    children: list[psutil.Process] = []
    try:
        uri = f"grpc://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while "Ctrl-C stops everything" not in log.read_text(errors="replace"):
            assert up.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        wait_healthy(uri, 10)
        children = psutil.Process(up.pid).children(recursive=True)
        names = sorted(c.name() for c in children)
        assert names.count("nats-server") == 3, names
        assert len(children) == 3 + 5  # and two coords (one a standby), datanode, querynode, proxy
        nats_ports = [c.laddr.port for k in children if k.name() == "nats-server"
                      for c in k.net_connections("tcp") if c.status == "LISTEN"]  # fmt: skip

        started = log.read_text()
        assert "milvus: off" in started and "metrics" in started  # every endpoint in the panel
        client = Client(uri, timeout=30)

        def roles() -> list[tuple[str, bool]]:
            return sorted(
                (s["role"], bool(s["meta"].get("standby"))) for s in client.list_sessions()
            )

        # The standby registers once its lease attempt is refused, which may come after the
        # cluster reports ready (CI: a loaded runner had not yet): wait for it.
        # Likewise a role whose session lands a beat after the proxy answers (CI once saw the
        # data node's missing): wait for the whole set, then assert it exactly.
        expected = [
            ("coord", False), ("coord", True), ("datanode", False), ("proxy", False),
            ("querynode", False),
        ]  # fmt: skip
        wait_for(lambda: roles() == expected, timeout=20, what="every role's session")
        assert roles() == expected
        shown = subprocess.run([ELANUS_BIN, "status", "--uri", uri], capture_output=True,
                               text=True, env=cli_env(), timeout=60)  # fmt: skip
        assert "coord (standby)" in shown.stdout, shown.stdout + shown.stderr
        client.create_collection("up", dimension=DIM)
        vectors = np.random.default_rng(0).random((100, DIM), dtype=np.float32)
        client.insert("up", {"id": np.arange(100), "vector": vectors})
        client.flush("up")
        client.load_collection("up")
        hits = client.search("up", [vectors[7].tolist()], limit=1, consistency_level="Strong")
        assert hits[0][0]["id"] == 7

        # a role process that dies is started again, and says so in its session
        (querynode,) = [s for s in client.list_sessions() if s["role"] == "querynode"]
        psutil.Process(querynode["pid"]).kill()
        again = wait_for(
            lambda: [s for s in client.list_sessions()
                     if s["role"] == "querynode" and s["pid"] != querynode["pid"]],
            timeout=30, what="the query node started again",
        )  # fmt: skip
        assert again[0]["meta"]["restarts"] == 1
        assert "querynode-0 exited with -9" in log.read_text()
        status = subprocess.run([ELANUS_BIN, "status", "--uri", uri], capture_output=True,
                                text=True, env=cli_env(), timeout=60)  # fmt: skip
        assert status.returncode == 0 and "restarts" in status.stdout, status.stderr

        def finds_7() -> bool:
            try:
                hits = client.search("up", [vectors[7].tolist()], limit=1,
                                     consistency_level="Strong")  # fmt: skip
            except ElanusError:  # its only query node is starting again
                return False
            return bool(hits[0][0]["id"] == 7)

        wait_for(finds_7, timeout=30, what="reads after the restart")
        children = psutil.Process(up.pid).children(recursive=True)
        client.close()

        logs = {p: p.stat().st_size for p in (root / "logs").glob("*.log")}
        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0, log.read_text()
        for c in children:
            assert process_gone(c.pid), f"{c.pid} outlived cluster up"
        assert port_free(port)
        assert all(port_free(p) for p in nats_ports)
        assert (root / "storage").is_dir() and (root / "nats" / "n1").is_dir()  # kept
        for role_log, size in logs.items():  # a clean stop: no role said ERROR on its way out
            said = role_log.read_bytes()[size:].decode(errors="replace")
            assert " ERROR " not in said and "Traceback" not in said, f"{role_log}:\n{said}"
    finally:  # clean-up after a failure only: terminate what is still running
        if up.poll() is None:
            up.terminate()
            up.wait(10)
        for c in children:
            try:
                c.terminate()
            except psutil.Error:
                pass
