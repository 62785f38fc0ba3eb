"""Transport benchmark: one client's single-query searches through a proxy whose query node
runs in another process (every request over NATS), beside the same searches in one process.

    .venv/bin/python bench/transport.py              # 50k x 64-d IVF_FLAT, nprobe 8, best of 3
    .venv/bin/python bench/transport.py --quick      # 5k rows, one 2 s run per case: smoke run
    .venv/bin/python bench/transport.py --repeat 5 --seconds 5 --json out.json
    .venv/bin/python bench/transport.py --baseline-python /old/checkout/.venv/bin/python

Each configuration runs alone: its stack is started, loaded with the same clustered vectors
(ids 0..N-1; inserted, flushed, indexed IVF_FLAT with ``--nlist`` lists, loaded), warmed
up, measured for ``--seconds`` and stopped before the next one starts, so the cases never
compete for the machine's cores. ``--repeat`` rounds run every configuration once each,
in alternating order (forwards, then backwards), and each keeps its best run: on a shared
machine the slow runs measure the neighbours. One client loops ``client.search(limit=10,
search_params={"params": {"nprobe": 8}}, consistency_level="Eventually")``, one query per
call:

* **in-process** (the ratios' denominator): ``elanus standalone``, every role in one
  process; the proxy calls the delegators and workers directly on its Flight thread.
* **in-process, baseline build** (with ``--baseline-python``): the same, run by another
  build of Elanus (say, the commit before a change): is the in-process rate still there?
* **one process, transport=nats**: the same standalone with ``ELANUS_TRANSPORT=nats``:
  every role-to-role request is encoded as a frame message and crosses the nats-server,
  though the roles share a process: what the wire costs.
* **query node in its own process**: a stock ``nats-server`` (1 MB messages) and one
  ``elanus run`` process per role (coord, datanode, querynode, indexnode, proxy): the
  cluster layout.

Target (issue 24): the cross-process rate is at least 0.5x the in-process one.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce  # noqa: E402
from search import Stat, print_table, run_loop  # noqa: E402

from elanus.channels.nats_server import (  # noqa: E402
    EmbeddedNats,
    die_with_parent,
    free_port,
    terminate,
)
from elanus.client.client import Client  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402
from index import clustered, nlist_for  # noqa: E402

NAME = "bench"
K = 10
IN_PROCESS = "in-process (standalone)"
BASELINE = "in-process, baseline build"
WIRE = "one process, transport=nats"
CLUSTER = "query node in its own process"


# -- the workload ---------------------------------------------------------------------------
@dataclass
class Workload:
    """The collection every configuration loads, and the queries it is searched with."""

    rows: int
    dim: int
    nlist: int
    nprobe: int
    vectors: np.ndarray
    queries: np.ndarray

    @classmethod
    def make(cls, rows: int, dim: int, nprobe: int = 8, nlist: int | None = None) -> Workload:
        data = clustered(rows + 256, dim, seed=7)
        return cls(rows, dim, nlist or nlist_for(rows), nprobe, data[256:].copy(), data[:256])

    @property
    def search_params(self) -> dict[str, Any]:
        return {"metric_type": "L2", "params": {"nprobe": self.nprobe}}

    def title(self) -> str:
        return (
            f"{self.rows:,} x {self.dim}-d clustered, IVF_FLAT nlist={self.nlist} "
            f"nprobe={self.nprobe}, k={K}, Eventually, 1 client, 1 query per call"
        )


def load_data(uri: str, work: Workload) -> None:
    """Insert, flush, index (and wait for it), load: the collection as every case sees it."""
    rows, dim = work.rows, work.dim
    table = pa.table(
        {"id": pa.array(np.arange(rows, dtype=np.int64)),
         "vector": pa.FixedSizeListArray.from_arrays(pa.array(work.vectors.ravel()), dim)}
    )  # fmt: skip
    with Client(uri, timeout=600) as client:
        # Quick setup's schema without its AUTOINDEX: the IVF_FLAT index below is the one.
        client.create_collection(NAME, schema=quick_schema(dim), properties={"metric_type": "L2"})
        client.insert(NAME, table)
        client.flush(NAME, timeout=600, poll_s=0.02)
        client.create_index(
            NAME, "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": work.nlist}
        )
        client.wait_for_index(NAME, timeout=600)
        client.load_collection(NAME, timeout=600)
        deadline = time.monotonic() + 120
        while client.get_load_state(NAME)["state"] != "Loaded":
            if time.monotonic() > deadline:
                raise TimeoutError("the collection did not load in 120 s")
            time.sleep(0.05)
        hits = client.search(NAME, work.queries[:1], limit=K, search_params=work.search_params)
        assert len(hits[0]) == K, hits


# -- the stacks -----------------------------------------------------------------------------
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
            "ELANUS_MILVUS_PORT": "0",
            **(creds.env() if creds else {}),
        }
        port = free_port()
        procs: list[subprocess.Popen[bytes]] = []
        stack.callback(stop_all, procs)

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

        start("coord")
        time.sleep(1.0)
        for role in ("datanode", "querynode", "indexnode"):
            start(role)
        start("proxy", "--port", str(port))
        uri = f"grpc://127.0.0.1:{port}"
        wanted = {"coord", "datanode", "querynode", "indexnode", "proxy"}
        deadline = time.monotonic() + 90
        while True:
            try:
                with Client(uri, timeout=5) as client:
                    roles = {s["role"] for s in client.list_sessions()}
                if wanted <= roles:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the cluster did not come up; logs in {tmp}")
            time.sleep(0.2)
        yield uri, nats


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every role at once, then wait for each (the stops overlap)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        terminate(proc)


@contextmanager
def stack(case: str, tmp: Path, baseline_python: str | None = None) -> Iterator[str]:
    """The configuration ``case`` up (in ``tmp``, which must not exist yet): its uri."""
    tmp.mkdir(parents=True)
    if case == CLUSTER:
        with cluster(tmp) as (uri, _nats):
            yield uri
        return
    server = Standalone(tmp / "data", env={"ELANUS_TRANSPORT": "nats"} if case == WIRE else None)
    if case == BASELINE:
        assert baseline_python, "the baseline case needs --baseline-python"
        server.launcher = [baseline_python, "-m", "elanus.cli"]
        server.cwd = tmp
    with server:
        yield server.uri


@contextmanager
def loaded_stack(
    case: str, tmp: Path, work: Workload, baseline_python: str | None = None
) -> Iterator[str]:
    """``stack`` with the workload's collection loaded."""
    with stack(case, tmp, baseline_python) as uri:
        load_data(uri, work)
        yield uri


# -- measuring ------------------------------------------------------------------------------
def sdk_single_queries(
    uri: str, work: Workload, seconds: float, runs: int = 1, warmup: float = 0.5, case: str = ""
) -> list[Stat]:
    """``runs`` loops of ``seconds`` of one SDK client's single-query searches, after a
    ``warmup`` loop (plans, routes, connections)."""
    queries = [work.queries[i : i + 1] for i in range(len(work.queries))]
    params = work.search_params
    with Client(uri, timeout=60) as client:

        def make(_thread: int) -> Callable[[int], Any]:
            return lambda i: client.search(
                NAME, queries[i % len(queries)], limit=K, search_params=params,
                consistency_level="Eventually",
            )  # fmt: skip

        run_loop(case, "elanus", 1, 1, warmup, make, quiet=True)
        return [run_loop(case, "elanus", 1, 1, seconds, make, quiet=True) for _ in range(runs)]


def best(stats: list[Stat]) -> Stat:
    return max(stats, key=lambda s: s.qps)


def rounds(cases: list[str], repeat: int) -> Iterator[tuple[int, str]]:
    """Every case once per round, forwards then backwards: no case always runs first."""
    for r in range(repeat):
        for case in cases if r % 2 == 0 else cases[::-1]:
            yield r, case


def slug(case: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in case).strip("-")


# -- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=None, help="rows in the collection (50,000)")
    ap.add_argument("--dim", type=int, default=64, help="vector dimension (64)")
    ap.add_argument("--nlist", type=int, default=None, help="IVF lists (4 * sqrt(rows), pow 2)")
    ap.add_argument("--nprobe", type=int, default=8, help="IVF lists searched (8)")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per run (3)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per case, best kept (3)")
    ap.add_argument("--quick", action="store_true", help="5k rows, one 2 s run per case")
    ap.add_argument(
        "--baseline-python",
        help="a Python whose elanus is an earlier build: its standalone is one more case",
    )
    ap.add_argument("--json", type=Path, default=None, metavar="FILE", help="write results here")
    args = ap.parse_args(argv)
    args.rows = args.rows or (5_000 if args.quick else 50_000)
    args.seconds = args.seconds or (2.0 if args.quick else 3.0)
    args.repeat = args.repeat or (1 if args.quick else 3)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    announce(
        "transport benchmark", f"best of {args.repeat} x {args.seconds:g} s per case, each alone"
    )
    work = Workload.make(args.rows, args.dim, args.nprobe, args.nlist)
    cases = [IN_PROCESS, WIRE, CLUSTER]
    if args.baseline_python:
        cases.insert(1, BASELINE)
    runs: dict[str, list[Stat]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory(prefix="elanus-bench-transport-") as tmp_dir:
        for r, case in rounds(cases, args.repeat):
            t0 = time.perf_counter()
            tmp = Path(tmp_dir) / f"{slug(case)}-{r}"
            with loaded_stack(case, tmp, work, args.baseline_python) as uri:
                (stat,) = sdk_single_queries(uri, work, args.seconds, case=case)
            runs[case].append(stat)
            print(
                f"  round {r + 1}: {case}: {stat.qps:,.0f} q/s, p50 {stat.pct(50):.2f} ms "
                f"({time.perf_counter() - t0:.1f}s with start, load and stop)",
                flush=True,
            )
    results = {case: summary(stats) for case, stats in runs.items()}
    print_results(results, work)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    if args.json is not None:
        out = {
            "rows": work.rows, "dim": work.dim, "index": "IVF_FLAT", "nlist": work.nlist,
            "nprobe": work.nprobe, "seconds": args.seconds, "repeat": args.repeat,
            "results": results,
            "cross_vs_in_process": results[CLUSTER]["qps"] / results[IN_PROCESS]["qps"],
        }  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def summary(stats: list[Stat]) -> dict[str, Any]:
    """The best run's rate and latencies, and every run's rate."""
    top = best(stats)
    return {
        "qps": round(top.qps, 1),
        "p50_ms": round(top.pct(50), 3),
        "p99_ms": round(top.pct(99), 3),
        "runs_qps": [round(s.qps, 1) for s in stats],
    }


def print_results(results: dict[str, dict[str, Any]], work: Workload) -> None:
    base = results[IN_PROCESS]["qps"]  # the ratios' denominator
    headers = ["case", "queries/s (best)", "p50 ms", "p99 ms", "vs in-process", "runs q/s"]
    body = [
        [
            case,
            f"{r['qps']:,.0f}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            f"{r['qps'] / base:.2f}x",
            " / ".join(f"{q:,.0f}" for q in r["runs_qps"]),
        ]  # fmt: skip
        for case, r in results.items()
    ]
    print_table(f"single-query search, {work.title()}", headers, body)


if __name__ == "__main__":
    sys.exit(main())
