"""A growing segment's read latency while it grows: rows appended in batches, one
single-query exact search after each (the first read after an append settles the rows).

    .venv/bin/python bench/growing.py                   # 1 M x 128-d, batches of 2,000
    .venv/bin/python bench/growing.py --rows 200000     # a quicker run

No server: ``MemSegment`` in process, as a delegator holds it. Two layouts, one after the
other in the same run: settled rows in blocks (``segments/querynode/blocks.py``, today's) and the
baseline, one table that every settle copies whole (the blocks' limits set to infinity,
which is what the segment did before blocks).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from elanus.schema import DataType, Field, Schema
from elanus.segments.querynode import blocks
from elanus.segments.querynode.memseg import MemSegment


def run(rows: int, batch: int, dim: int) -> np.ndarray:
    schema = Schema(
        [Field("id", DataType.INT64, is_primary=True), Field("v", DataType.FLOAT_VECTOR, dim=dim)]
    )
    rng = np.random.default_rng(1)
    seg = MemSegment(1, 1, schema)
    query = rng.random((1, dim), dtype=np.float32)
    times = []
    for lo in range(0, rows, batch):
        vecs = rng.random((batch, dim), dtype=np.float32)
        seg.append(
            pa.table(
                {
                    "id": pa.array(np.arange(lo, lo + batch), pa.int64()),
                    "v": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), dim),
                    "_ts": pa.array(np.full(batch, lo + 1, np.uint64)),
                }
            )
        )
        start = time.perf_counter()
        seg.search("v", query, 10, "L2", 1 << 62)
        times.append(time.perf_counter() - start)
    return np.array(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    figures = {"blocks": run(args.rows, args.batch, args.dim)}
    blocks.BLOCK_BYTES = blocks.MERGE_RATIO = 1 << 62  # every settle: one table again
    figures["one table"] = run(args.rows, args.batch, args.dim)
    print(f"{args.rows:,} x {args.dim}-d, appended {args.batch:,} at a time, a read after each")
    print("| layout | read p50 ms | p99 ms | max ms | all reads s |")
    print("|---|---:|---:|---:|---:|")
    for name, t in figures.items():
        p50, p99 = np.percentile(t, [50, 99])
        print(f"| {name} | {p50:.1f} | {p99:.1f} | {t.max():.1f} | {t.sum() / 1000:.1f} |")
    base, ours = np.percentile(figures["one table"], 99), np.percentile(figures["blocks"], 99)
    print(f"p99 ratio one table / blocks: {base / ours:.1f}x")


if __name__ == "__main__":
    main()
