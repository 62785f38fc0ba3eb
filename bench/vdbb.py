"""VectorDBBench 2.0.0, unmodified, against a standalone's Milvus port: its Milvus HNSW (and
AUTOINDEX) case on a custom dataset, through its own command line.

VectorDBBench is heavy and not a dependency of Elanus: install it in a venv of its own,

    python3.11 -m venv /work/vdbb-venv
    /work/vdbb-venv/bin/pip install vectordb-bench==2.0.0

then

    .venv/bin/python bench/vdbb.py --vdbb-venv /work/vdbb-venv
    .venv/bin/python bench/vdbb.py --vdbb-venv /work/vdbb-venv --cases hnsw,autoindex

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
import json
import os
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


def run_case(
    vdbb: Path, case: str, uri: str, data: Path, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One VectorDBBench run; returns its result's metrics."""
    results = work / f"results-{case}"
    results.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(vdbb / "bin" / "vectordbbench"), *CASES[case],
        "--uri", uri,
        "--case-type", "PerformanceCustomDataset",
        "--custom-case-name", f"elanus-{case}",
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
        "--db-label", "elanus",
        "--task-label", f"elanus-{case}",
    ]  # fmt: skip
    env = {
        **os.environ,
        "RESULTS_LOCAL_DIR": str(results),
        "DATASET_LOCAL_DIR": str(work / "datasets"),
        "LOG_FILE": str(work / f"vdbb-{case}.log"),
    }
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    files = sorted(results.rglob("*.json"))
    result = json.loads(files[-1].read_text())["results"][0] if files else {}
    if done.returncode or result.get("label") != ":)":  # VectorDBBench's label for a success
        log = work / f"vdbb-{case}.log"
        tail = log.read_text(errors="replace")[-6000:] if log.exists() else done.stderr[-6000:]
        raise RuntimeError(f"VectorDBBench {case} did not finish ({done.returncode}):\n{tail}")
    metrics = dict(result["metrics"])
    return {**metrics, "wall_s": wall}


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
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {sorted(CASES)}")
    if not (args.vdbb_venv / "bin" / "vectordbbench").exists():
        ap.error(f"no vectordbbench in {args.vdbb_venv}: see this script's docstring")
    announce("vdbb", f"{args.rows} x {args.dim}-d, {args.queries} queries, k={args.k}")

    rows_out: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="elanus-vdbb-") as tmp:
        work = Path(tmp)
        data = work / "dataset"
        t = time.perf_counter()
        write_dataset(data, args.rows, args.dim, args.queries, args.k)
        print(f"dataset written in {time.perf_counter() - t:.1f} s", flush=True)
        for case in cases:
            port = free_port()
            server = Standalone(work / f"server-{case}", env={"ELANUS_MILVUS_PORT": str(port)})
            with server:
                m = run_case(args.vdbb_venv, case, f"http://127.0.0.1:{port}", data, work, args)
            pairs = zip(m.get("conc_num_list", []), m.get("conc_qps_list", []), strict=False)
            conc = ", ".join(f"{n}: {q:.0f}" for n, q in pairs)
            rows_out.append(
                [
                    case,
                    f"{m.get('insert_duration', 0):.1f}",
                    f"{m.get('optimize_duration', 0):.1f}",
                    f"{m.get('load_duration', 0):.1f}",
                    conc,
                    f"{m.get('recall', 0):.4f}",
                    f"{1000 * m.get('serial_latency_p99', 0):.1f}",
                    f"{m['wall_s']:.0f}",
                ]
            )
    print_table(
        f"VectorDBBench 2.0.0 custom dataset ({args.rows} x {args.dim}-d, COSINE, k={args.k})",
        [
            "case", "insert s", "optimize s", "load s", "q/s by concurrency",
            f"recall@{args.k}", "serial p99 ms", "wall s",
        ],
        rows_out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
