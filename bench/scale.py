"""Memory at scale: each role's resident memory through insert, flush, index and load.

    .venv/bin/python bench/scale.py                       # 1 M x 128-d, IVF_FLAT
    .venv/bin/python bench/scale.py --rows 200000         # smaller, quicker
    .venv/bin/python bench/scale.py --index HNSW          # or FLAT
    .venv/bin/python bench/scale.py --mmap                # the index mapped (mmap.enabled)
    .venv/bin/python bench/scale.py --rows 1000000,4000000,10000000   # a size sweep

A cluster of one process per role (coord, datanode, indexnode, querynode, proxy) on an
embedded NATS, as ``elanus run`` starts them; ``--rows`` clustered ``--dim``-d float32
vectors with int64 keys go in by 100,000-row batches, are flushed, indexed and loaded.
After each phase every process's RSS is read (psutil). Printed: that table, then the query
node's marginal RSS (loaded minus before the load) per million vectors, and its anonymous
part (RssAnon: with ``--mmap`` the rest is mapped index file pages), against the
vectors and keys it serves and, for HNSW, against the size of FAISS's own index files;
and ``get_load_state``'s ``memory_bytes`` (what the query node counts of its structures)
and ``mapped_bytes`` (what it maps from index files, with ``--mmap``), and the load's time.
Issue 35's bound: the marginal RSS at most 1.3x vectors + keys (FLAT, IVF_FLAT), 1.3x
the FAISS index (HNSW).

Several sizes (``--rows 1000000,4000000``) run one after another, each on a fresh cluster,
and end with one line per size (issue 35 item 4): each phase's time, load seconds per GB
of vectors and keys, the query node's RSS, the disk under the storage root (Lance segments
and index files) and the log's (JetStream), and single-query q/s from 1 and from 4
clients (each its own connection, ``SEARCH_S`` seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MB, announce, print_table  # noqa: E402

import elanus  # noqa: E402
from elanus.channels.nats_server import EmbeddedNats  # noqa: E402
from elanus.channels.runtime.ports import free_port  # noqa: E402

ROLES = ("coord", "datanode", "indexnode", "querynode", "proxy")
BATCH = 100_000
PARAMS = {"IVF_FLAT": {"nlist": 1024}, "HNSW": {"M": 16, "efConstruction": 128}, "FLAT": {}}


class Cluster:
    """One process per role, logging under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nats = EmbeddedNats(root / "nats").start()
        self.port = free_port()
        env = {**os.environ, **self.nats.client_env()}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for role in ROLES:
            args = [sys.executable, "-m", "elanus.cli", "run", role, "--nats", self.nats.url]
            args += ["--data-dir", str(root / role), "--storage", str(root / "storage")]
            if role == "proxy":
                args += ["--port", str(self.port), "--milvus-port", "0"]
            with open(root / f"{role}.log", "wb") as log:
                self.procs[role] = subprocess.Popen(
                    args, stdout=log, stderr=subprocess.STDOUT, env=env
                )

    def connect(self) -> Any:
        deadline = time.monotonic() + 120
        while True:
            try:
                client = elanus.connect(f"grpc://127.0.0.1:{self.port}", timeout=1800)
                if len(client.list_sessions()) >= len(ROLES):
                    return client
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.3)

    def rss(self) -> dict[str, float]:
        """MiB resident, by role (and NATS)."""
        out = {r: psutil.Process(p.pid).memory_info().rss / MB for r, p in self.procs.items()}
        out["nats"] = psutil.Process(self.nats.pid).memory_info().rss / MB
        out["querynode anon"] = _anon(self.procs["querynode"].pid) / MB
        return out

    def stop(self) -> None:
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.nats.stop()


def _anon(pid: int) -> int:
    """Bytes of a process's anonymous resident memory (its heap: what must fit in memory;
    the rest of its RSS is file pages, mapped index files among them, which the kernel
    drops again under pressure)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def _insert(client: Any, rows: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    centers = rng.random((1000, dim), dtype=np.float32)
    for at in range(0, rows, BATCH):
        n = min(BATCH, rows - at)
        noise = rng.normal(0, 0.05, (n, dim)).astype(np.float32)
        client.insert(
            "m", {"id": np.arange(at, at + n), "vector": centers[rng.integers(0, 1000, n)] + noise}
        )


QUERIES = 100
RECALL_UP_TO = 2_000_000
"""Rows up to which the exact answers are computed here, for recall (numpy, by batch)."""


def _queries(dim: int) -> np.ndarray:
    """Queries near the data's clusters (the centers ``_insert`` draws, other noise)."""
    centers = np.random.default_rng(0).random((1000, dim), dtype=np.float32)
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.05, (QUERIES, dim)).astype(np.float32)
    return centers[rng.integers(0, 1000, QUERIES)] + noise


def _exact(rows: int, dim: int, queries: np.ndarray, k: int = 10) -> np.ndarray:
    """The true top ``k`` ids of each query (L2), over the rows ``_insert`` wrote."""
    rng = np.random.default_rng(0)
    centers = rng.random((1000, dim), dtype=np.float32)
    best_d = np.full((len(queries), k), np.inf, np.float32)
    best_i = np.full((len(queries), k), -1, np.int64)
    for at in range(0, rows, BATCH):
        n = min(BATCH, rows - at)
        noise = rng.normal(0, 0.05, (n, dim)).astype(np.float32)
        x = centers[rng.integers(0, 1000, n)] + noise
        d = (queries**2).sum(1)[:, None] - 2 * queries @ x.T + (x**2).sum(1)[None, :]
        all_d = np.concatenate([best_d, d], 1)
        all_i = np.concatenate([best_i, np.broadcast_to(np.arange(at, at + n), d.shape)], 1)
        top = np.argsort(all_d, 1)[:, :k]
        best_d, best_i = np.take_along_axis(all_d, top, 1), np.take_along_axis(all_i, top, 1)
    return best_i


def _searches(client: Any, queries: np.ndarray) -> tuple[float, list[list[int]]]:
    """Single-query searches one after another (nprobe 16, ef 64): q/s, and the ids."""
    params = {"params": {"nprobe": 16, "ef": 64}}
    started = time.perf_counter()
    found = [
        [h["id"] for h in client.search("m", q[None], limit=10, search_params=params)[0]]
        for q in queries
    ]
    return len(queries) / (time.perf_counter() - started), found


SEARCH_S = 5.0
"""Seconds of the 1- and 4-client single-query rounds."""


def _clients_qps(port: int, queries: np.ndarray, clients: int) -> float:
    """Single-query searches from ``clients`` threads, each with its own connection, for
    ``SEARCH_S`` seconds: queries per second, all clients together."""
    params = {"params": {"nprobe": 16, "ef": 64}}
    conns = [elanus.connect(f"grpc://127.0.0.1:{port}", timeout=600) for _ in range(clients)]
    done = [0] * clients
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def run(i: int) -> None:
        c, n = conns[i], i
        start.wait()
        while time.perf_counter() < deadline[0]:
            c.search("m", queries[n % len(queries)][None], limit=10, search_params=params)
            n += 1
            done[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + SEARCH_S
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    spent = time.perf_counter() - began
    for c in conns:
        c.close()
    return sum(done) / spent


def _disk(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _index_files(root: Path) -> int:
    """Bytes of the built vector indexes' FAISS files."""
    return sum(f.stat().st_size for f in (root / "storage").rglob("index.faiss"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1000000", help="rows, or several sizes: 1000000,4000000")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--index", choices=sorted(PARAMS), default="IVF_FLAT")
    ap.add_argument("--mmap", action="store_true", help="set mmap.enabled before the load")
    args = ap.parse_args()
    sizes = [int(r) for r in args.rows.split(",")]
    mode = f"{args.index}{' mmap' if args.mmap else ''}"
    announce("scale", f"{', '.join(f'{n:,}' for n in sizes)} x {args.dim}-d, {mode}")
    summary = [one_size(n, args.dim, args.index, args.mmap) for n in sizes]
    if len(sizes) > 1:
        print_table(
            f"By size ({args.dim}-d, {mode})",
            [
                "rows", "insert s", "flush s", "index s", "load s", "load s/GB",
                "query node RSS MiB", "MiB per M", "storage GB", "log GB (end)",
                "q/s 1 client", "q/s 4 clients",
            ],
            summary,
        )  # fmt: skip


def one_size(n_rows: int, dim: int, index: str, mmap: bool) -> list[str]:
    """One size on a fresh cluster: prints its tables, returns its line of the summary."""
    root = Path(tempfile.mkdtemp(prefix="elanus-scale-"))
    cluster = Cluster(root)
    phases: list[tuple[str, dict[str, float], float]] = []
    try:
        client = cluster.connect()
        started = time.perf_counter()

        def phase(name: str) -> None:
            phases.append((name, cluster.rss(), time.perf_counter() - started))

        phase("started")
        schema = client.create_schema()
        schema.add_field("id", elanus.DataType.INT64, is_primary=True)
        schema.add_field("vector", elanus.DataType.FLOAT_VECTOR, dim=dim)
        client.create_collection("m", schema=schema)
        if mmap:
            client.alter_collection_properties("m", {"mmap.enabled": True})
        _insert(client, n_rows, dim)
        phase("inserted")
        client.flush("m")
        phase("flushed")
        ip = client.prepare_index_params()
        ip.add_index("vector", index_type=index, metric_type="L2", params=PARAMS[index])
        client.create_index("m", ip)
        client.wait_for_index("m", timeout=3600)
        phase("indexed")
        loading = time.perf_counter()
        client.load_collection("m")
        load_s = time.perf_counter() - loading
        time.sleep(5)  # a keepalive publishes the query node's figures
        phase("loaded")
        query = np.zeros((1, dim), np.float32)
        client.search("m", query, limit=10, consistency_level="Strong")
        queries = _queries(dim)
        _searches(client, queries[:10])  # warm: the first searches page a mapped index in
        qps, found = _searches(client, queries)
        phase("searched")
        qps_1 = _clients_qps(cluster.port, queries, 1)
        qps_4 = _clients_qps(cluster.port, queries, 4)
        state = client.get_load_state("m")
        held, mapped = int(state.get("memory_bytes", 0)), int(state.get("mapped_bytes", 0))
        index_bytes = _index_files(root)
        storage_bytes, log_bytes = _disk(root / "storage"), _disk(root / "nats")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    names = [*ROLES, "querynode anon", "nats"]
    body = [[p, f"{s:.0f}", *(f"{rss[r]:.0f}" for r in names)] for p, rss, s in phases]
    print_table(
        f"{n_rows:,} rows: RSS per role (MiB) after each phase", ["phase", "s", *names], body
    )

    rss = {name: r for name, r, _ in phases}
    at = {name: s for name, _, s in phases}
    marginal = (rss["searched"]["querynode"] - rss["indexed"]["querynode"]) * MB
    anon = (rss["searched"]["querynode anon"] - rss["indexed"]["querynode anon"]) * MB
    served = n_rows * (dim * 4 + 8)  # float32 vectors + int64 keys
    bound, against = (
        (index_bytes, "FAISS index files") if index == "HNSW" else (served, "vectors + keys")
    )
    per_million = 1e6 / n_rows
    rows = [
        [
            "query node RSS added by the load",
            f"{marginal * per_million / MB:.0f}",
            f"{marginal / bound:.2f}x",
        ],
        [
            "... of it anonymous (heap, not file pages)",
            f"{anon * per_million / MB:.0f}",
            f"{anon / bound:.2f}x",
        ],
        ["memory_bytes (its structures)", f"{held * per_million / MB:.0f}", f"{held / bound:.2f}x"],
        [
            "mapped_bytes (index files)",
            f"{mapped * per_million / MB:.0f}",
            f"{mapped / bound:.2f}x",
        ],
        ["vectors + keys", f"{served * per_million / MB:.0f}", f"{served / bound:.2f}x"],
        [
            "FAISS index files",
            f"{index_bytes * per_million / MB:.0f}",
            f"{index_bytes / bound:.2f}x",
        ],
    ]
    for role in ("datanode", "indexnode", "coord", "proxy"):
        kept = rss["searched"][role] - rss["started"][role]
        rows.append([f"{role} RSS kept (end - start)", f"{kept * per_million:.0f}", "-"])
    rows.append(["load_collection (s)", f"{load_s:.1f}", "-"])
    rows.append(["single-query searches (q/s, nprobe 16)", f"{qps:.0f}", "-"])
    rows.append(["... from 1 / 4 clients for 5 s (q/s)", f"{qps_1:.0f} / {qps_4:.0f}", "-"])
    rows.append(
        ["disk: storage / log (MiB)", f"{storage_bytes / MB:.0f} / {log_bytes / MB:.0f}", "-"]
    )
    if n_rows <= RECALL_UP_TO:
        truth = _exact(n_rows, dim, queries)
        hit = sum(len(set(f) & set(t)) for f, t in zip(found, truth.tolist(), strict=True))
        rows.append(["recall@10", f"{hit / truth.size:.3f}", "-"])
    print_table(
        f"{n_rows:,} rows, per million {dim}-d vectors ({index}{', mmap' if mmap else ''}; "
        f"ratio against {against})",
        ["what", "MiB per M", "ratio"],
        rows,
    )
    gb = 1e9
    return [
        f"{n_rows:,}",
        f"{at['inserted'] - at['started']:.0f}",
        f"{at['flushed'] - at['inserted']:.0f}",
        f"{at['indexed'] - at['flushed']:.0f}",
        f"{load_s:.1f}",
        f"{load_s / (served / gb):.2f}",
        f"{rss['searched']['querynode']:,.0f}",
        f"{marginal * per_million / MB:.0f}",
        f"{storage_bytes / gb:.2f}",
        f"{log_bytes / gb:.2f}",
        f"{qps_1:.0f}",
        f"{qps_4:.0f}",
    ]


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
