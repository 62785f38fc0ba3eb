"""What Milvus's protocol costs: insert rows/s and single-query search q/s through pymilvus
against Elanus's Milvus port, beside the Elanus SDK over Arrow Flight and pymilvus against
Milvus Lite, on the same data. Each configuration runs alone, one after another (its server
started, loaded, warmed up, measured, stopped); Milvus Lite last, once no server is forked.

    python bench/milvus_face.py --rows 20000 --dim 64 --seconds 10

The issue's bar: single-query search through pymilvus >= 0.8x the same through the SDK.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce  # noqa: E402
from search import print_table  # noqa: E402

from elanus.channels.nats_server import free_port  # noqa: E402

NAME = "bench_face"


@dataclass
class Figures:
    config: str
    insert_rows_s: float
    search_qps: float
    p50_ms: float


def _data(rows: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    return rng.random((rows, dim), dtype=np.float32), rng.random((256, dim), dtype=np.float32)


def _search_loop(search: Callable[[np.ndarray], Any], queries: np.ndarray, seconds: float):
    """(q/s, p50 ms) of one query at a time for ``seconds`` (after a short warm-up)."""
    for q in queries[:20]:
        search(q)
    lat: list[float] = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        t = time.perf_counter()
        search(queries[i % len(queries)])
        lat.append(time.perf_counter() - t)
        i += 1
    return len(lat) / sum(lat), 1000 * float(np.median(lat))


def _pymilvus(client: Any, vectors: np.ndarray, queries: np.ndarray, args: Any) -> tuple:
    """The same pymilvus code for Elanus's Milvus port and for Milvus Lite."""
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=args.dim)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection(NAME, schema=schema, index_params=params)
    t = time.perf_counter()
    for lo in range(0, len(vectors), args.batch):
        batch = vectors[lo : lo + args.batch]
        client.insert(NAME, [{"id": lo + j, "vector": v} for j, v in enumerate(batch)])
    inserted = len(vectors) / (time.perf_counter() - t)
    client.flush(NAME)
    qps, p50 = _search_loop(
        lambda q: client.search(NAME, data=[q], limit=10), queries, args.seconds
    )
    return inserted, qps, p50


def run_sdk(vectors: np.ndarray, queries: np.ndarray, args: Any, tmp: Path) -> Figures:
    from elanus.client.client import Client
    from elanus.schema import DataType, Schema

    server = Standalone(tmp / "sdk").start()
    try:
        with Client(server.uri, timeout=120) as client:
            schema = Schema()
            schema.add_field("id", DataType.INT64, is_primary=True)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=args.dim)
            client.create_collection(NAME, schema=schema)
            client.create_index(NAME, "vector", index_type="FLAT", metric_type="L2")
            client.load_collection(NAME)
            t = time.perf_counter()
            for lo in range(0, len(vectors), args.batch):
                batch = vectors[lo : lo + args.batch]
                client.insert(NAME, {"id": np.arange(lo, lo + len(batch)), "vector": batch})
            inserted = len(vectors) / (time.perf_counter() - t)
            client.flush(NAME)
            qps, p50 = _search_loop(
                lambda q: client.search(NAME, [q], limit=10), queries, args.seconds
            )
    finally:
        server.stop()
    return Figures("Elanus SDK over Flight", inserted, qps, p50)


def run_face(vectors: np.ndarray, queries: np.ndarray, args: Any, tmp: Path) -> Figures:
    from pymilvus import MilvusClient

    port = free_port()
    server = Standalone(tmp / "face", env={"ELANUS_MILVUS_PORT": str(port)}).start()
    try:
        client = MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=120)
        try:
            figures = _pymilvus(client, vectors, queries, args)
        finally:
            client.close()
    finally:
        server.stop()
    return Figures("pymilvus -> Elanus's Milvus port", *figures)


def run_lite(vectors: np.ndarray, queries: np.ndarray, args: Any, tmp: Path) -> Figures:
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp / "lite.db"))
    try:
        figures = _pymilvus(client, vectors, queries, args)
    finally:
        client.close()
    return Figures("pymilvus -> Milvus Lite", *figures)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=1000, help="rows per insert call")
    p.add_argument("--seconds", type=float, default=10.0, help="search time per config")
    p.add_argument("--no-lite", action="store_true", help="leave Milvus Lite out")
    args = p.parse_args(argv)
    announce("milvus_face", f"{args.rows} rows x {args.dim}-d, FLAT L2, top 10, nq 1")
    vectors, queries = _data(args.rows, args.dim)
    runs = [run_sdk, run_face] + ([] if args.no_lite else [run_lite])
    results = []
    with tempfile.TemporaryDirectory(prefix="elanus-face-") as tmp:
        for run in runs:
            results.append(run(vectors, queries, args, Path(tmp)))
            print(f"  done: {results[-1].config}", flush=True)
    base = results[0]
    body = [
        [
            r.config,
            f"{r.insert_rows_s:,.0f}",
            f"{r.search_qps:,.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.search_qps / base.search_qps:.2f}x",
        ]
        for r in results
    ]
    headers = ["configuration", "insert rows/s", "search q/s", "p50 ms", "q/s vs SDK"]
    print_table("Milvus's protocol beside Flight", headers, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
