"""Transport benchmark: one client's searches through a proxy whose query node runs in
another process (every request over NATS), beside the same searches in one process.

    .venv/bin/python bench/transport.py              # 20k x 128-d, 5 s per case
    .venv/bin/python bench/transport.py --quick      # 5k rows, 2 s per case

On the same random vectors (ids 0..N-1, inserted, flushed, loaded; 2 shards), one thread
loops ``client.search(limit=10, consistency_level="Eventually")`` with one query per call:

* **in-process** (the baseline): ``elanus standalone``, every role in one process; the
  proxy calls the delegators and workers directly on its Flight thread.
* **one process, transport=nats**: the same standalone with ``ELANUS_TRANSPORT=nats``:
  every role-to-role request is encoded as a frame message and crosses the nats-server,
  though the roles share a process: what the wire costs.
* **query node in its own process**: a stock ``nats-server`` (1 MB messages) and one
  ``elanus run`` process per role (coord, datanode, querynode, proxy): the cluster layout.

Target (issue 14): the cross-process rate is at least 0.5x the in-process one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
from _common import Standalone

from elanus.channels.nats_server import EmbeddedNats, die_with_parent, free_port, terminate
from elanus.flight.client import Client

NAME = "bench"


def load_data(uri: str, rows: int, dim: int) -> np.ndarray:
    vectors = np.random.default_rng(7).random((rows, dim), dtype=np.float32)
    with Client(uri, timeout=120) as client:
        client.create_collection(NAME, dimension=dim, metric_type="L2", num_shards=2)
        for start in range(0, rows, 5000):
            chunk = slice(start, min(rows, start + 5000))
            client.insert(NAME, {"id": np.arange(rows)[chunk], "vector": vectors[chunk]})
        client.flush(NAME)
        client.load_collection(NAME)
    return vectors


def search_loop(uri: str, queries: np.ndarray, seconds: float) -> dict[str, float]:
    """One client, one query per call, for ``seconds``: qps and latency percentiles."""
    lat: list[float] = []
    with Client(uri, timeout=60) as client:
        for q in queries[:20]:  # warm up plans, routes and connections
            client.search(NAME, q[None], limit=10, consistency_level="Eventually")
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            hits = client.search(
                NAME, queries[i % len(queries)][None], limit=10, consistency_level="Eventually"
            )
            lat.append(time.perf_counter() - t0)
            assert len(hits[0]) == 10
            i += 1
    total = sum(lat)
    return {
        "qps": len(lat) / total,
        "p50_ms": float(np.percentile(lat, 50)) * 1e3,
        "p99_ms": float(np.percentile(lat, 99)) * 1e3,
    }


@contextmanager
def cluster(tmp: Path) -> Iterator[str]:
    """A stock nats-server and one ``elanus run`` process per role; the proxy's uri."""
    with ExitStack() as stack:
        nats = EmbeddedNats(tmp / "nats").start()  # stock limits: 1 MB messages
        stack.callback(nats.stop)
        creds = nats.credentials
        env = {
            **os.environ,
            "ELANUS_LOG_LEVEL": "WARNING",
            **(creds.env() if creds else {}),
        }
        port = free_port()
        procs: list[subprocess.Popen[bytes]] = []

        def start(role: str, *extra: str) -> None:
            cmd = [sys.executable, "-m", "elanus.cli", "run", role, "--nats", nats.url,
                   "--data-dir", str(tmp / "data"), *extra]  # fmt: skip
            log = (tmp / f"{role}.log").open("wb")
            stack.callback(log.close)
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            )  # fmt: skip
            procs.append(proc)
            stack.callback(terminate, proc)

        start("coord")
        time.sleep(1.0)
        start("datanode")
        start("querynode")
        start("proxy", "--port", str(port))
        uri = f"grpc://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with Client(uri, timeout=5) as client:
                    roles = {s["role"] for s in client.list_sessions()}
                if {"coord", "datanode", "querynode", "proxy"} <= roles:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the cluster did not come up; logs in {tmp}")
            time.sleep(0.2)
        yield uri


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="5k rows, 2 s per case")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.seconds = 5_000, 2.0
    queries = np.random.default_rng(11).random((256, args.dim), dtype=np.float32)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="elanus-bench-transport-") as tmp_dir:
        tmp = Path(tmp_dir)
        with Standalone(tmp / "inproc").start() as server:
            load_data(server.uri, args.rows, args.dim)
            results["in-process (standalone)"] = search_loop(server.uri, queries, args.seconds)
        env = {"ELANUS_TRANSPORT": "nats"}
        with Standalone(tmp / "wire", env=env).start() as server:
            load_data(server.uri, args.rows, args.dim)
            results["one process, transport=nats"] = search_loop(
                server.uri, queries, args.seconds
            )
        (tmp / "cluster").mkdir()
        with cluster(tmp / "cluster") as uri:
            load_data(uri, args.rows, args.dim)
            results["query node in its own process"] = search_loop(uri, queries, args.seconds)
    print_table(results, args.rows, args.dim)


def print_table(results: dict[str, dict[str, float]], rows: int, dim: int) -> None:
    from rich.console import Console
    from rich.table import Table

    base = results["in-process (standalone)"]["qps"]
    table = Table(
        title=f"single-client search, {rows:,} x {dim}-d, k=10, Eventually (1 query per call)",
        title_justify="left",
    )
    for h in ("case", "queries/s", "p50 ms", "p99 ms", "vs in-process"):
        table.add_column(h, justify="left" if h == "case" else "right")
    for case, r in results.items():
        table.add_row(
            case, f"{r['qps']:,.0f}", f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
            f"{r['qps'] / base:.2f}x",
        )  # fmt: skip
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
