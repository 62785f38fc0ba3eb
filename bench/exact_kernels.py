"""Exact-search kernel benchmark: ``VectorIndexExact.search`` and the top-k reduce
(``merge_topk``) in process, next to ``faiss.knn`` on the same vectors.

    .venv/bin/python bench/exact_kernels.py               # 200k x 128-d float32
    .venv/bin/python bench/exact_kernels.py --quick       # 20k rows: a smoke run
    .venv/bin/python bench/exact_kernels.py --repeat 10

No server. Random unit-normal float32 rows; for 1 and 100 queries per call, k=10 over all
rows for each metric, L2 with 50 % and 5 % of the rows visible (a random bitset), L2 with
k=1000, and ``faiss.knn`` (L2, k=10) as the reference. Then ``merge_topk`` of 8 sorted
per-segment results of 2000 queries x k=100 (what a delegator reduces). Each cell is the
best of ``--repeat`` calls after one untimed warm-up (the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table  # noqa: E402

from elanus.index.kernels import VectorIndexExact  # noqa: E402
from elanus.reduce import merge_topk  # noqa: E402

METRICS = ("L2", "IP", "COSINE")


def row(case: str, nq: int, metric: str, ms: float) -> list[str]:
    return [case, str(nq), metric, f"{ms:.2f}", f"{nq / ms * 1e3:,.0f}"]


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` calls after one warm-up, in ms."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def exact_cases(
    ix: VectorIndexExact, X: np.ndarray, Q: np.ndarray, half: np.ndarray, sparse: np.ndarray
) -> list[tuple[str, str, Callable[[], Any]]]:
    """(case, metric, call) of the exact kernel on queries ``Q``, and faiss.knn beside it."""
    return [
        *(("exact k=10, all rows", m, lambda m=m: ix.search(Q, 10, m)) for m in METRICS),
        ("exact k=10, 50% visible", "L2", lambda: ix.search(Q, 10, "L2", valid=half)),
        ("exact k=10, 5% visible", "L2", lambda: ix.search(Q, 10, "L2", valid=sparse)),
        ("exact k=1000, all rows", "L2", lambda: ix.search(Q, 1000, "L2")),
        ("faiss.knn k=10 (reference)", "L2", lambda: faiss.knn(Q, X, 10)),
    ]


def exact_rows(rows: int, dim: int, repeat: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, dim), dtype=np.float32)
    ix = VectorIndexExact(pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), dim))
    half = rng.random(rows) < 0.5
    sparse = rng.random(rows) < 0.05
    out = []
    for nq, reps in ((1, repeat), (100, max(1, repeat // 3))):
        Q = rng.standard_normal((nq, dim), dtype=np.float32)
        cases = exact_cases(ix, X, Q, half, sparse)
        for case, metric, fn in cases:
            out.append(row(case, nq, metric, best_ms(fn, reps)))
    return out


def merge_row(repeat: int, nq: int = 2000, k: int = 100, parts: int = 8) -> list[str]:
    rng = np.random.default_rng(0)
    results = [
        (np.sort(rng.random((nq, k), dtype=np.float32), axis=1), rng.integers(0, 10**9, (nq, k)))
        for _ in range(parts)
    ]
    ms = best_ms(lambda: merge_topk(results, k, "L2"), repeat)
    return row(f"merge_topk, {parts} parts, k={k}", nq, "L2", ms)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--repeat", type=int, default=10, help="best of N calls per cell")
    p.add_argument("--quick", action="store_true", help="20k rows")
    args = p.parse_args()
    if args.quick:
        args.rows = 20_000
    body = [*exact_rows(args.rows, args.dim, args.repeat), merge_row(args.repeat)]
    title = f"exact search, {args.rows:,} x {args.dim} float32 (best of {args.repeat})"
    print_table(title, ["case", "queries/call", "metric", "ms/call", "queries/s"], body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
