"""Segment-index engine benchmark: build time, memory, recall and QPS of ``SegmentIndex``
against the same FAISS index called directly.

    .venv/bin/python bench/index_engine.py               # 200k x 128-d clustered, L2, k=10
    .venv/bin/python bench/index_engine.py --quick       # 20k rows: a smoke run
    .venv/bin/python bench/index_engine.py --types HNSW,IVF_FLAT --rows 100000 --repeat 3

In-process only (no server). Data: deterministic gaussian blobs (2048 unit-normal centres,
sigma 1). For each index type the table gives:

* **build s**: ``build_index`` (training + adds, ``--build-threads`` OpenMP threads, 1 by
  default), and ``nbytes`` in MB;
* **recall@10** against the exact kernel (``VectorIndexExact``) on 200 queries;
* **1-query qps** and **batch-100 qps**: ``SegmentIndex.search`` vs FAISS's
  ``index.search`` on the same index object with the same ``SearchParameters`` and one
  OpenMP thread ("raw"), i.e. what the wrapper costs;
* **10% / 50% visible**: single-query qps and recall@10 (against the exact filtered
  answer) of ``SegmentIndex.search`` with a random visibility bitset.

Best of ``--repeat`` runs per cell (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

from elanus.index.build import build_index
from elanus.index.kernels import VectorIndexExact
from elanus.indexparams import make_index_spec, search_params

TYPES: dict[str, tuple[dict[str, int], dict[str, int]]] = {  # build params, search params
    "FLAT": ({}, {}),
    "IVF_FLAT": ({"nlist": 1024}, {"nprobe": 16}),
    "IVF_SQ8": ({"nlist": 1024}, {"nprobe": 16}),
    "IVF_PQ": ({"nlist": 1024, "m": 32, "nbits": 8}, {"nprobe": 16}),
    "HNSW": ({"M": 16, "efConstruction": 128}, {"ef": 64}),
}


def clustered(n: int, dim: int, seed: int, clusters: int = 2048) -> np.ndarray:
    centres = np.random.default_rng(1000 + clusters).standard_normal((clusters, dim), np.float32)
    rng = np.random.default_rng(seed)
    return centres[rng.integers(clusters, size=n)] + rng.standard_normal((n, dim), np.float32)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = sum(len(np.intersect1d(f[f >= 0], t[t >= 0])) for f, t in zip(found, truth, strict=True))
    return hits / max(1, int((truth >= 0).sum()))


def qps(fn: Callable[[int], Any], calls: int, per_call: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for i in range(calls):
            fn(i)
        best = min(best, time.perf_counter() - t)
    return calls * per_call / best


def caller(
    search: Callable[..., Any], Q: np.ndarray, batch: int, params: Any, valid: Any = None
) -> Callable[[int], Any]:
    """Call ``i`` searches the i-th block of ``batch`` queries (cycling through ``Q``)."""
    blocks = len(Q) // batch
    kwargs = {"params": params} if valid is None else {"params": params, "valid": valid}
    return lambda i: search(Q[(i % blocks) * batch : (i % blocks + 1) * batch], 10, **kwargs)


def raw_params(itype: str, sp: dict[str, int]) -> Any:
    if "ef" in sp:
        return faiss.SearchParametersHNSW(efSearch=sp["ef"])
    if "nprobe" in sp:
        return faiss.SearchParametersIVF(nprobe=sp["nprobe"])
    return None


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    X = clustered(args.rows, args.dim, seed=1)
    Q = clustered(1000, args.dim, seed=2)
    exact = VectorIndexExact(X, "L2")
    _, truth = exact.search(Q[:200], 10, "L2")
    rng = np.random.default_rng(3)
    masks = {f: rng.random(args.rows) < f for f in (0.1, 0.5)}
    masked_truth = {f: exact.search(Q[:200], 10, "L2", valid=m)[1] for f, m in masks.items()}
    rows = []
    for itype in args.types:
        build, search = TYPES[itype]
        spec = make_index_spec("FloatVector", args.dim, itype, "L2", build)
        t = time.perf_counter()
        ix = build_index(spec, X, threads=args.build_threads)
        build_s = time.perf_counter() - t
        sp = search_params(spec, search, 10)
        _, found = ix.search(Q[:200], 10, search)
        raw = ix._index  # the FAISS index SegmentIndex searches
        rp = raw_params(itype, sp)
        faiss.omp_set_num_threads(1)  # the raw baseline on one thread, like SegmentIndex
        row: dict[str, Any] = {
            "type": itype,
            "built_as": ix.built_as,
            "build_s": round(build_s, 2),
            "MB": round(ix.nbytes / 2**20, 1),
            "recall": round(recall(found, truth), 3),
            "1q_qps": qps(caller(ix.search, Q, 1, search), 500, 1, args.repeat),
            "1q_raw": qps(caller(raw.search, Q, 1, rp), 500, 1, args.repeat),
            "b100_qps": qps(caller(ix.search, Q, 100, search), 10, 100, args.repeat),
            "b100_raw": qps(caller(raw.search, Q, 100, rp), 10, 100, args.repeat),
        }
        for f, m in masks.items():
            _, got = ix.search(Q[:200], 10, search, valid=m)
            row[f"{int(f * 100)}%_recall"] = round(recall(got, masked_truth[f]), 3)
            one = caller(ix.search, Q, 1, search, m)
            row[f"{int(f * 100)}%_qps"] = qps(one, 200, 1, args.repeat)
        rows.append(row)
        print_row(row, header=len(rows) == 1)
    return rows


COLUMNS = [
    ("type", 9, "{}"),
    ("built_as", 9, "{}"),
    ("build_s", 8, "{:.2f}"),
    ("MB", 7, "{:.1f}"),
    ("recall", 7, "{:.3f}"),
    ("1q_qps", 8, "{:.0f}"),
    ("1q_raw", 8, "{:.0f}"),
    ("b100_qps", 9, "{:.0f}"),
    ("b100_raw", 9, "{:.0f}"),
    ("10%_recall", 11, "{:.3f}"),
    ("10%_qps", 8, "{:.0f}"),
    ("50%_recall", 11, "{:.3f}"),
    ("50%_qps", 8, "{:.0f}"),
]


def print_row(row: dict[str, Any], header: bool) -> None:
    if header:
        print(" ".join(name.rjust(w) for name, w, _ in COLUMNS))
    print(" ".join(fmt.format(row[name]).rjust(w) for name, w, fmt in COLUMNS), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--types", default=",".join(TYPES), help="comma-separated index types")
    p.add_argument("--repeat", type=int, default=1, help="best of N runs per cell")
    p.add_argument("--build-threads", type=int, default=1, help="OpenMP threads for builds")
    p.add_argument("--quick", action="store_true", help="20k rows")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.quick:
        args.rows = 20_000
    args.types = [t.strip().upper() for t in args.types.split(",") if t.strip()]
    unknown = [t for t in args.types if t not in TYPES]
    if unknown:
        p.error(f"unknown index types {unknown}; choose from {', '.join(TYPES)}")
    print(f"{args.rows} x {args.dim}-d clustered float32, L2, k=10, {args.build_threads}"
          " OpenMP thread(s) for builds, 1 for searches")  # fmt: skip
    rows = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "dim": args.dim, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
