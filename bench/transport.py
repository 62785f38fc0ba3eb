"""Transport benchmark: one client's searches through a proxy whose query node runs in
another process (every request over NATS), beside the same searches in one process.

    .venv/bin/python bench/transport.py              # 20k x 128-d, 10 s per case
    .venv/bin/python bench/transport.py --quick      # 5k rows, 4 s per case
    .venv/bin/python bench/transport.py --baseline-python /old/checkout/.venv/bin/python

Every case runs at once, on the same random vectors (ids 0..N-1, inserted, flushed,
loaded; default shards); each has one client looping ``client.search(limit=10,
consistency_level="Eventually")`` with one query per call, the cases taking turns in
one-second slices so that the machine's drifting load falls on all of them alike.
queries/s is the median slice's rate; latencies are over all calls:

* **in-process** (the ratios' denominator): ``elanus standalone``, every role in one
  process; the proxy calls the delegators and workers directly on its Flight thread.
* **in-process, baseline build** (with ``--baseline-python``): the same, run by another
  build of Elanus (say, the commit before a change): is the in-process rate still there?
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
from elanus.client.client import Client

NAME = "bench"


def load_data(uri: str, rows: int, dim: int) -> np.ndarray:
    vectors = np.random.default_rng(7).random((rows, dim), dtype=np.float32)
    with Client(uri, timeout=120) as client:
        client.create_collection(NAME, dimension=dim, metric_type="L2")
        for start in range(0, rows, 5000):
            chunk = slice(start, min(rows, start + 5000))
            client.insert(NAME, {"id": np.arange(rows)[chunk], "vector": vectors[chunk]})
        client.flush(NAME)
        client.load_collection(NAME)
    return vectors


class Searcher:
    """One client of one case, searching one query per call; latencies per slice."""

    def __init__(self, name: str, uri: str, queries: np.ndarray) -> None:
        self.name, self.queries = name, queries
        self.client = Client(uri, timeout=60)
        self.lat: list[float] = []
        self.rates: list[float] = []
        self.i = 0
        for q in queries[:20]:  # warm up plans, routes and connections
            self.client.search(NAME, q[None], limit=10, consistency_level="Eventually")

    def run_slice(self, seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        start, n = time.perf_counter(), 0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            q = self.queries[self.i % len(self.queries)][None]
            hits = self.client.search(NAME, q, limit=10, consistency_level="Eventually")
            self.lat.append(time.perf_counter() - t0)
            assert len(hits[0]) == 10
            self.i += 1
            n += 1
        self.rates.append(n / (time.perf_counter() - start))

    def summary(self) -> dict[str, float]:
        return {
            "qps": float(np.median(self.rates)),
            "p50_ms": float(np.percentile(self.lat, 50)) * 1e3,
            "p99_ms": float(np.percentile(self.lat, 99)) * 1e3,
        }


@contextmanager
def cluster(tmp: Path) -> Iterator[tuple[str, EmbeddedNats]]:
    """A stock nats-server and one ``elanus run`` process per role: the proxy's uri, and
    the server."""
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
        yield uri, nats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0, help="per case, in 1 s slices")
    ap.add_argument("--quick", action="store_true", help="5k rows, 4 s per case")
    ap.add_argument(
        "--baseline-python",
        help="a Python whose elanus is an earlier build: its standalone is one more case",
    )
    args = ap.parse_args()
    if args.quick:
        args.rows, args.seconds = 5_000, 4.0
    queries = np.random.default_rng(11).random((256, args.dim), dtype=np.float32)
    with (
        tempfile.TemporaryDirectory(prefix="elanus-bench-transport-") as tmp_dir,
        ExitStack() as stack,
    ):
        tmp = Path(tmp_dir)
        uris: dict[str, str] = {}
        if args.baseline_python:
            old = Standalone(tmp / "baseline")
            old.launcher = [args.baseline_python, "-m", "elanus.cli"]
            old.cwd = tmp
            uris["in-process, baseline build"] = stack.enter_context(old.start()).uri
        uris["in-process (standalone)"] = stack.enter_context(
            Standalone(tmp / "inproc").start()
        ).uri
        wire = Standalone(tmp / "wire", env={"ELANUS_TRANSPORT": "nats"})
        uris["one process, transport=nats"] = stack.enter_context(wire.start()).uri
        (tmp / "cluster").mkdir()
        uris["query node in its own process"] = stack.enter_context(cluster(tmp / "cluster"))[0]
        searchers = []
        for name, uri in uris.items():
            load_data(uri, args.rows, args.dim)
            searchers.append(stack.enter_context(closing_searcher(name, uri, queries)))
        # Alternating one-second slices: drift in the machine's load hits every case alike.
        for _ in range(max(1, int(args.seconds))):
            for searcher in searchers:
                searcher.run_slice(1.0)
        results = {s.name: s.summary() for s in searchers}
    print_table(results, args.rows, args.dim)


@contextmanager
def closing_searcher(name: str, uri: str, queries: np.ndarray) -> Iterator[Searcher]:
    searcher = Searcher(name, uri, queries)
    try:
        yield searcher
    finally:
        searcher.client.close()


def print_table(results: dict[str, dict[str, float]], rows: int, dim: int) -> None:
    from rich.console import Console
    from rich.table import Table

    base = results["in-process (standalone)"]["qps"]  # the ratios' denominator
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
