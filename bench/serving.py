"""Search q/s through the Milvus port as clients grow, by ``serving_processes`` (issue 35
item 1, docs/process-model.md): does a standalone's q/s rise with clients up to the cores
and hold beyond them?

Each configuration runs alone: a fresh standalone with ``serving_processes`` = P, a
collection of ``--rows`` × ``--dim`` clustered vectors (COSINE, HNSW M 16 /
efConstruction 128) inserted through pymilvus, flushed, indexed and loaded; then for each
client count, that many client processes each send single-query searches (k 100, ef 128,
as VectorDBBench's Milvus HNSW case) for ``--seconds``. Configurations alternate P by P,
``--repeat`` rounds, best round kept. Beside q/s: the server's CPU per query (every
serving process), the clients' CPU per query and the CPU left idle on the machine.

    .venv/bin/python bench/serving.py                        # P = 1, 2; 1, 4, 8 clients
    .venv/bin/python bench/serving.py --processes 1,2,4 --clients 1,2,4,8,16 --repeat 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce, print_table  # noqa: E402

from elanus.channels.nats_server import free_port  # noqa: E402

NAME = "bench_serving"
QUERIES = 256


def _vectors(rows: int, dim: int, seed: int = 1) -> np.ndarray:
    """Unit vectors around 64 centres: an HNSW graph with structure to find."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim)).astype(np.float32)
    x = centres[rng.integers(0, 64, rows)] + 0.3 * rng.normal(size=(rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _client(port: int, dim: int, seconds: float, out: Any, start: Any) -> None:
    """One client process: single-query searches for ``seconds``, from when every client
    is connected and warm (``start``, a barrier)."""
    from pymilvus import MilvusClient

    client = MilvusClient(f"http://127.0.0.1:{port}", timeout=60)
    queries = _vectors(QUERIES, dim, seed=2).tolist()
    params = {"params": {"ef": 128}}
    for q in queries[:5]:  # the connection and its first calls
        client.search(NAME, data=[q], limit=100, search_params=params)
    start.wait()
    n, cpu0, end = 0, time.process_time(), time.monotonic() + seconds
    while time.monotonic() < end:
        client.search(NAME, data=[queries[n % QUERIES]], limit=100, search_params=params)
        n += 1
    out.put((n, time.process_time() - cpu0))
    client.close()


def _fill(port: int, rows: int, dim: int) -> None:
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(f"http://127.0.0.1:{port}", timeout=120)
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=dim)
    index = client.prepare_index_params()
    index.add_index(
        "v", index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 128}
    )
    client.create_collection(NAME, schema=schema, index_params=index)
    x = _vectors(rows, dim)
    for i in range(0, rows, 10_000):
        batch = x[i : i + 10_000]
        client.insert(NAME, [{"id": i + j, "v": v} for j, v in enumerate(batch)])
    client.flush(NAME)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        described = client.describe_index(NAME, "v")
        if described.get("indexed_rows") == rows and not described.get("pending_index_rows"):
            break
        time.sleep(0.5)
    client.load_collection(NAME)
    client.close()


def _server_pids(sp: Standalone) -> list[int]:
    kids = psutil.Process(sp.pid).children()
    return [sp.pid, *(k.pid for k in kids if "serve-member" in " ".join(k.cmdline()))]


def _cpu(pids: list[int]) -> float:
    return sum(sum(psutil.Process(p).cpu_times()[:2]) for p in pids)


def run(
    processes: int, clients: list[int], args: argparse.Namespace
) -> dict[int, dict[str, float]]:
    """One standalone with ``processes`` serving processes: figures per client count."""
    port = free_port()
    env = {"ELANUS_MILVUS_PORT": str(port), "ELANUS_SERVING_PROCESSES": str(processes)}
    out: dict[int, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="elanus-serving-") as tmp,
        Standalone(Path(tmp) / "data", env=env) as sp,
    ):
        _fill(port, args.rows, args.dim)
        pids = _server_pids(sp)
        ctx = mp.get_context("spawn")
        for k in clients:
            queue, start = ctx.Queue(), ctx.Barrier(k + 1)
            procs = [
                ctx.Process(target=_client, args=(port, args.dim, args.seconds, queue, start))
                for _ in range(k)
            ]
            for p in procs:
                p.start()
            start.wait()  # the clients' start (imports, connection) is not measured
            cpu0, idle0, t0 = _cpu(pids), psutil.cpu_times().idle, time.monotonic()
            got = [queue.get() for _ in procs]
            wall = time.monotonic() - t0
            cpu1, idle1 = _cpu(pids), psutil.cpu_times().idle
            for p in procs:
                p.join()
            n = sum(g[0] for g in got)
            out[k] = {
                "qps": n / args.seconds,
                "server_us": 1e6 * (cpu1 - cpu0) / max(n, 1),
                "client_us": 1e6 * sum(g[1] for g in got) / max(n, 1),
                "idle": (idle1 - idle0) / wall / (psutil.cpu_count() or 1),
            }
            print(f"  P={processes} clients={k}: {out[k]['qps']:.0f} q/s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2", help="serving_processes values")
    ap.add_argument("--clients", default="1,4,8", help="client process counts")
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0, help="per client count")
    ap.add_argument("--repeat", type=int, default=2, help="rounds; the best is kept")
    args = ap.parse_args()
    processes = [int(p) for p in args.processes.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    announce("serving", f"{args.rows} x {args.dim}-d HNSW, k 100, P {processes}")
    best: dict[tuple[int, int], dict[str, float]] = {}
    for r in range(args.repeat):
        for p in processes:
            print(f"round {r + 1}, serving_processes={p}", flush=True)
            for k, fig in run(p, clients, args).items():
                if (p, k) not in best or fig["qps"] > best[(p, k)]["qps"]:
                    best[(p, k)] = fig
    rows = []
    for p in processes:
        for k in clients:
            f = best[(p, k)]
            base = best[(processes[0], k)]["qps"]
            rows.append(
                [
                    str(p), str(k), f"{f['qps']:.0f}", f"{f['qps'] / base:.2f}x",
                    f"{f['server_us']:.0f}", f"{f['client_us']:.0f}", f"{100 * f['idle']:.0f}%",
                ]
            )  # fmt: skip
    print_table(
        f"Search through the Milvus port by serving processes (best of {args.repeat})",
        [
            "serving processes", "clients", "q/s", f"vs P={processes[0]}",
            "server CPU µs/query", "client CPU µs/query", "idle CPU",
        ],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
