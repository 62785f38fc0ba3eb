"""VectorDBBench 2.0.0, unmodified, against a standalone's Milvus port: its Milvus HNSW (and
AUTOINDEX) case on a custom dataset, through its own command line.

VectorDBBench is heavy and not a dependency of Elanus: install it in a venv of its own,

    python3.11 -m venv /work/vdbb-venv
    /work/vdbb-venv/bin/pip install vectordb-bench==2.0.0

then

    .venv/bin/python bench/vdbb.py --vdbb-venv /work/vdbb-venv
    .venv/bin/python bench/vdbb.py --vdbb-venv /work/vdbb-venv --cases hnsw,autoindex

Issue 35's comparison puts a real Milvus 2.3.5 standalone beside Elanus: PyPI's ``milvus``
wheel (2.3.5: a Milvus binary with embedded etcd and local storage, ``milvus-server``) in a
venv of its own, run first, then Elanus, one after the other on the same machine and data:

    python3.11 -m venv /work/milvus235-venv
    /work/milvus235-venv/bin/pip install milvus==2.3.5
    .venv/bin/python bench/vdbb.py --vdbb-venv /work/vdbb-venv \
        --against-milvus /work/milvus235-venv --concurrency 1,4,8

The dataset is synthetic, written in VectorDBBench's custom format (a directory with
``train.parquet`` of ``id``/``emb``, ``test.parquet`` of queries and ``neighbors.parquet``
of their exact top-``k`` ids by cosine, computed here with numpy): clustered unit vectors,
so an HNSW graph has real structure to find. VectorDBBench then does what it does against
Milvus: create the collection and index, insert in batches (load), flush, wait for every
segment to be sorted and indexed, compact and force-merge (optimize), load, then search
concurrently and serially. Its result file gives the table: load and optimize seconds,
q/s at each concurrency, serial recall@k and p99.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce, print_table  # noqa: E402

from elanus.channels.nats_server import free_port  # noqa: E402

CASES = {
    "hnsw": ["milvushnsw", "--m", "16", "--ef-construction", "128", "--ef-search", "128"],
    "autoindex": ["milvusautoindex"],
}
"""VectorDBBench's command per case, with its index parameters."""


SORTED_SHIM = """
# bench/vdbb.py, for the Milvus 2.3.5 baseline only. Two things VectorDBBench 2.0.0 expects
# of a Milvus that 2.3.5 predates; every other step of the case runs as VectorDBBench wrote it.
from vectordb_bench.backend.clients.milvus import milvus as _milvus

# Its optimize waits until every segment says is_sorted, a field 2.3.5's segment info does
# not have (sorted segments came with Milvus 2.5): it would wait forever.
_milvus.Milvus._wait_for_segments_sorted = lambda self: None

# 2.3.5's search results do not name the primary key field, so pymilvus keys it "id", where
# VectorDBBench reads the field's name ("pk").
_search = _milvus.Milvus.search_embedding


def _search_by_id(self, *args, **kwargs):
    named, self._primary_field = self._primary_field, "id"
    try:
        return _search(self, *args, **kwargs)
    finally:
        self._primary_field = named


_milvus.Milvus.search_embedding = _search_by_id
"""
"""Loaded into VectorDBBench's processes (``sitecustomize``) when Milvus 2.3.5 serves."""


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def write_dataset(root: Path, rows: int, dim: int, queries: int, k: int) -> None:
    """Clustered unit vectors, queries from the same clusters, and their exact top-k."""
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((max(16, rows // 500), dim)).astype(np.float32)

    def draw(n: int) -> np.ndarray:
        picked = centers[rng.integers(0, len(centers), n)]
        return unit(picked + 0.35 * rng.standard_normal((n, dim)).astype(np.float32))

    train, test = draw(rows), draw(queries)
    top = np.empty((queries, k), np.int64)
    for start in range(0, queries, 256):  # cosine of unit vectors: the dot product
        scores = test[start : start + 256] @ train.T
        part = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        top[start : start + 256] = np.take_along_axis(part, order, axis=1)

    def vectors(v: np.ndarray) -> pa.Array:
        return pa.array(list(v), pa.list_(pa.float32()))

    root.mkdir(parents=True, exist_ok=True)
    ids = pa.array(np.arange(rows, dtype=np.int64))
    pq.write_table(pa.table({"id": ids, "emb": vectors(train)}), root / "train.parquet")
    qids = pa.array(np.arange(queries, dtype=np.int64))
    pq.write_table(pa.table({"id": qids, "emb": vectors(test)}), root / "test.parquet")
    gt = pa.array(list(top), pa.list_(pa.int64()))
    pq.write_table(pa.table({"id": qids, "neighbors_id": gt}), root / "neighbors.parquet")


class MilvusServer:
    """``milvus-server`` (PyPI's ``milvus`` wheel) in a session of its own, every port free.

    The wrapper starts the Milvus binary as its child and does not stop it when it dies, so
    the whole process group is signalled on the way out.
    """

    PORTS = (
        "etcd-port", "root-coord-port", "proxy-internal-port", "query-coord-port",
        "query-node-port", "index-coord-port", "index-node-port", "data-coord-port",
        "data-node-port",
    )  # fmt: skip

    def __init__(self, venv: Path, data_dir: Path) -> None:
        self.venv, self.data_dir = venv, data_dir
        self.port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}-milvus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MilvusServer:
        cmd = [str(self.venv / "bin" / "milvus-server"), "--data", str(self.data_dir)]
        cmd += ["--proxy-port", str(self.port)]
        for name in self.PORTS:
            cmd += [f"--{name}", str(free_port())]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"milvus-server exited; see {self.log_path}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                time.sleep(5)  # the port opens before every coordinator is up
                return self
            time.sleep(1)
        self.__exit__()
        raise RuntimeError(f"milvus-server did not open its port; see {self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # the Milvus binary may outlive the wrapper: the group goes regardless
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None


def run_case(
    vdbb: Path,
    case: str,
    uri: str,
    data: Path,
    work: Path,
    args: argparse.Namespace,
    server: str = "elanus",
) -> dict[str, Any]:
    """One VectorDBBench run against ``server``; returns its result's metrics."""
    server = server.replace(" ", "-")
    results = work / f"results-{server}-{case}"
    results.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(vdbb / "bin" / "vectordbbench"), *CASES[case],
        "--uri", uri,
        "--case-type", "PerformanceCustomDataset",
        "--custom-case-name", f"{server}-{case}",
        "--custom-dataset-name", "elanus-synthetic",
        "--custom-dataset-dir", str(data),
        "--custom-dataset-size", str(args.rows),
        "--custom-dataset-dim", str(args.dim),
        "--custom-dataset-metric-type", "COSINE",
        "--custom-dataset-file-count", "1",
        "--skip-custom-dataset-use-shuffled",
        "--k", str(args.k),
        "--num-concurrency", args.concurrency,
        "--concurrency-duration", str(args.duration),
        "--db-label", server,
        "--task-label", f"{server}-{case}",
    ]  # fmt: skip
    env = {
        **os.environ,
        "RESULTS_LOCAL_DIR": str(results),
        "DATASET_LOCAL_DIR": str(work / "datasets"),
        "LOG_FILE": str(work / f"vdbb-{server}-{case}.log"),
    }
    if not server.startswith("elanus"):  # Milvus 2.3.5 cannot say is_sorted: SORTED_SHIM
        shim = work / "shim-milvus235"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(SORTED_SHIM)
        env["PYTHONPATH"] = str(shim)
    started = time.monotonic()
    # its own session: VectorDBBench's worker processes inherit our pipes, and all of them
    # go when the case ends or times out
    proc = subprocess.Popen(
        cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=args.case_timeout)
    except subprocess.TimeoutExpired:
        stderr = f"timed out after {args.case_timeout} s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = subprocess.CompletedProcess(cmd, proc.returncode, "", stderr)
    wall = time.monotonic() - started
    files = sorted(results.rglob("*.json"))
    result = json.loads(files[-1].read_text())["results"][0] if files else {}
    if done.returncode or result.get("label") != ":)":  # VectorDBBench's label for a success
        log = work / f"vdbb-{server}-{case}.log"
        tail = log.read_text(errors="replace")[-6000:] if log.exists() else done.stderr[-6000:]
        raise RuntimeError(
            f"VectorDBBench {case} on {server} did not finish ({done.returncode}):\n{tail}"
        )
    metrics = dict(result["metrics"])
    return {**metrics, "wall_s": wall}


def serve_and_run(
    server: str, case: str, data: Path, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Start ``server`` alone on a fresh data directory, run the case, stop it."""
    if server.startswith("elanus"):
        port = free_port()
        processes = server.partition("x")[2] or "1"
        env = {"ELANUS_MILVUS_PORT": str(port), "ELANUS_SERVING_PROCESSES": processes}
        elanus = Standalone(work / f"server-{case}-{processes}", env=env)
        with elanus:
            uri = f"http://127.0.0.1:{port}"
            return run_case(args.vdbb_venv, case, uri, data, work, args, server=server)
    with MilvusServer(args.against_milvus, work / f"milvus-{case}") as milvus:
        uri = f"http://127.0.0.1:{milvus.port}"
        return run_case(args.vdbb_venv, case, uri, data, work, args, server="milvus")


def table_row(server: str, case: str, m: dict[str, Any], base: dict[str, Any] | None) -> list[str]:
    """One row of the table; q/s with its ratio to the baseline's at each concurrency."""
    qps = dict(zip(m.get("conc_num_list", []), m.get("conc_qps_list", []), strict=False))
    before = dict(
        zip((base or {}).get("conc_num_list", []), (base or {}).get("conc_qps_list", []),
            strict=False)
    )  # fmt: skip
    conc = ", ".join(
        f"{n}: {q:.0f}" + (f" ({q / before[n]:.2f}x)" if before.get(n) else "")
        for n, q in qps.items()
    )
    return [
        server,
        case,
        f"{m.get('insert_duration', 0):.1f}",
        f"{m.get('optimize_duration', 0):.1f}",
        f"{m.get('load_duration', 0):.1f}",
        conc,
        f"{m.get('recall', 0):.4f}",
        f"{1000 * m.get('serial_latency_p99', 0):.1f}",
        f"{m['wall_s']:.0f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vdbb-venv", type=Path, required=True, help="venv with vectordb-bench")
    ap.add_argument("--cases", default="hnsw", help="comma-separated: hnsw, autoindex")
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--concurrency", default="1,4", help="VectorDBBench's --num-concurrency")
    ap.add_argument("--duration", type=int, default=15, help="seconds per concurrency")
    ap.add_argument("--case-timeout", type=int, default=1800, help="seconds per case")
    ap.add_argument(
        "--against-milvus",
        type=Path,
        metavar="VENV",
        help="also run each case on Milvus 2.3.5 (a venv with PyPI's milvus==2.3.5), first",
    )
    ap.add_argument(
        "--serving-processes",
        default="1",
        help="comma-separated: run Elanus once per value of its setting serving_processes",
    )
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {sorted(CASES)}")
    if not (args.vdbb_venv / "bin" / "vectordbbench").exists():
        ap.error(f"no vectordbbench in {args.vdbb_venv}: see this script's docstring")
    if args.against_milvus and not (args.against_milvus / "bin" / "milvus-server").exists():
        ap.error(f"no milvus-server in {args.against_milvus}: see this script's docstring")
    announce("vdbb", f"{args.rows} x {args.dim}-d, {args.queries} queries, k={args.k}")

    rows_out: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="elanus-vdbb-") as tmp:
        work = Path(tmp)
        data = work / "dataset"
        t = time.perf_counter()
        write_dataset(data, args.rows, args.dim, args.queries, args.k)
        print(f"dataset written in {time.perf_counter() - t:.1f} s", flush=True)
        for case in cases:
            base: dict[str, Any] | None = None
            elanus = [f"elanus x{p.strip()}" for p in args.serving_processes.split(",")]
            servers = (["milvus-2.3.5"] if args.against_milvus else []) + elanus
            for server in servers:
                m = serve_and_run(server, case, data, work, args)
                rows_out.append(table_row(server, case, m, base))
                base = base or (m if not server.startswith("elanus") else None)
    print_table(
        f"VectorDBBench 2.0.0 custom dataset ({args.rows} x {args.dim}-d, COSINE, k={args.k})",
        [
            "server", "case", "insert s", "optimize s", "load s", "q/s by concurrency (/ Milvus)",
            f"recall@{args.k}", "serial p99 ms", "wall s",
        ],
        rows_out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
