"""Single queries streamed over one DoExchange (``Client.search_stream``) beside one
``search`` call per query, on the same standalone, one client, Eventually.

    .venv/bin/python bench/stream.py                    # 50k x 64-d clustered, HNSW, ef 64
    .venv/bin/python bench/stream.py --rows 20000 --repeat 1   # smoke run

The collection (clustered vectors, HNSW M 16 / efConstruction 128) is built once; recall@10
of the streamed answers is checked against brute force. Each case runs alone, best of
``--repeat``: ``search_stream`` over ``--queries`` vectors with ``max_batch`` 1 (every
query its own Arrow batch, pipelined), 8 and 32 (the default: queries that are ready go
together), and one ``search`` DoAction per query. Target (issue 24): >= 5,000 q/s at
recall >= 0.95.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce, print_table  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402

NAME = "stream"
PARAMS = {"params": {"ef": 64}}


def data(rows: int, dim: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centers = rng.random((200, dim), dtype=np.float32)
    noise = 0.05

    def around(n: int) -> np.ndarray:
        picked = centers[rng.integers(0, len(centers), n)]
        return (picked + noise * rng.standard_normal((n, dim))).astype(np.float32)

    return around(rows), around(queries)


def recall(client: Client, vectors: np.ndarray, queries: np.ndarray) -> float:
    sample = queries[:100]
    d2 = ((sample[:, None, :] - vectors[None, :, :]) ** 2).sum(-1)
    truth = np.argsort(d2, axis=1)[:, :10]
    got = list(client.search_stream(NAME, sample, limit=10, search_params=PARAMS))
    pairs = zip(got, truth, strict=True)
    return float(np.mean([len(set(h.ids) & set(t.tolist())) / 10 for h, t in pairs]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--queries", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    announce("stream", f"{args.rows:,} x {args.dim}-d clustered, HNSW ef 64, top 10")
    vectors, queries = data(args.rows, args.dim, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        server = Standalone(Path(tmp) / "data").start()
        try:
            with Client(server.uri, timeout=600) as client:
                schema = quick_schema(args.dim)
                client.create_collection(NAME, schema=schema, properties={"metric_type": "L2"})
                for lo in range(0, args.rows, 10_000):
                    ids = np.arange(lo, min(lo + 10_000, args.rows))
                    client.insert(NAME, {"id": ids, "vector": vectors[ids]})
                client.flush(NAME)
                client.create_index(
                    NAME, "vector", index_type="HNSW", metric_type="L2",
                    params={"M": 16, "efConstruction": 128},
                )  # fmt: skip
                client.wait_for_index(NAME, timeout=600)
                client.load_collection(NAME, timeout=600)
                found = recall(client, vectors, queries)
                rows = []
                for max_batch in (1, 8, 32):
                    best = 0.0
                    for _ in range(args.repeat):
                        t = time.perf_counter()
                        n = sum(
                            1
                            for _ in client.search_stream(
                                NAME, queries, limit=10, search_params=PARAMS,
                                consistency_level="Eventually", max_batch=max_batch,
                            )
                        )  # fmt: skip
                        best = max(best, n / (time.perf_counter() - t))
                    rows.append([f"search_stream, max_batch {max_batch}", best])
                best = 0.0
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    for q in queries[:500]:
                        client.search(
                            NAME, [q], limit=10, search_params=PARAMS,
                            consistency_level="Eventually",
                        )  # fmt: skip
                    best = max(best, 500 / (time.perf_counter() - t))
                rows.append(["search, one DoAction per query", best])
        finally:
            server.stop()
    per_call = rows[-1][1]
    body = [[case, f"{qps:,.0f}", f"{qps / per_call:.2f}x"] for case, qps in rows]
    print_table(
        f"single queries, recall@10 {found:.3f} (streamed answers vs brute force)",
        ["case", "queries/s (best)", "vs one call per query"],
        body,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
