"""Scalar index benchmark: selective filters on 1M rows, with and without a scalar index.

    .venv/bin/python bench/scalar_filter.py                 # 1M rows, ~5 min
    .venv/bin/python bench/scalar_filter.py --rows 100000   # a smoke run

One ``elanus standalone`` child process holds a collection of ``--rows`` rows: a unique
``k`` (Int64, a shuffled 0..N-1), ``tag`` (VarChar, ``u`` + ``k`` in 7 digits), ``j``
(JSON, ``{"a": k}``) and an 8-d vector, inserted, flushed and loaded. Each filter (0.01%
and 1% of the rows, on the Int64 field, the VarChar field by prefix and the JSON path) runs
as ``query`` (ids of the matching rows), ``count(*)`` and a filtered ``search`` (1 query,
top 10), first with no index, then after STL_SORT on ``k``, TRIE on ``tag`` and INVERTED on
``j["a"]`` (cast double) are built and loaded. Each case is the median of ``--repeat``
calls after one untimed warm-up (``Eventually`` consistency: no wait for a fresh
timestamp); the answers with and without the index must be equal, or the run fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Standalone, machine_load  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.client.compat import IndexParams  # noqa: E402

NAME = "scalar_bench"
DIM = 8
BATCH = 50_000


def make_rows(lo: int, hi: int, keys: np.ndarray) -> pa.Table:
    k = keys[lo:hi]
    rng = np.random.default_rng(lo)
    return pa.table(
        {
            "id": pa.array(np.arange(lo, hi), pa.int64()),
            "k": pa.array(k, pa.int64()),
            "tag": pa.array([f"u{x:07d}" for x in k.tolist()]),
            "j": pa.array([json.dumps({"a": x}) for x in k.tolist()], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=(hi - lo) * DIM).astype(np.float32)), DIM
            ),
        }
    )


def filters(n: int) -> list[tuple[str, str]]:
    """(label, filter) at 0.01% and 1% of ``n`` rows."""
    out = []
    for share in (0.0001, 0.01):
        m = max(1, int(n * share))
        label = f"{share:.2%}"
        out += [
            (f"Int64 k < {m} ({label})", f"k < {m}"),
            (f"JSON j['a'] < {m} ({label})", f'j["a"] < {m}'),
        ]
        p = len(str(m)) - 1
        if 10**p == m:  # tags are u + 7 digits: this prefix selects exactly m rows
            prefix = "u" + "0" * (7 - p)
            out.append((f"VarChar like '{prefix}%' ({label})", f"tag like '{prefix}%'"))
    return out


def median_time(call: Any, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run_cases(
    client: Client, cases: list[tuple[str, str]], query: np.ndarray, repeat: int
) -> dict[tuple[str, str], tuple[float, Any]]:
    out = {}
    level = {"consistency_level": "Eventually"}
    for label, flt in cases:
        out[(label, "query")] = median_time(
            lambda f=flt: sorted(
                r["id"] for r in client.query(NAME, f, output_fields=["id"], **level)
            ),
            repeat,
        )
        out[(label, "count")] = median_time(
            lambda f=flt: client.query(NAME, f, output_fields=["count(*)"], **level)[0]["count(*)"],
            repeat,
        )
        out[(label, "search")] = median_time(
            lambda f=flt: [
                h["id"] for h in client.search(NAME, query, limit=10, filter=f, **level)[0]
            ],
            repeat,
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.rows
    print(f"machine load (1/5/15 min): {machine_load()}", file=sys.stderr)
    keys = np.random.default_rng(7).permutation(n).astype(np.int64)
    cases = filters(n)
    query = np.random.default_rng(8).normal(size=(1, DIM)).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="elanus-bench-scalar-") as tmp:
        server = Standalone(Path(tmp) / "standalone")
        try:
            server.start()
            with Client(server.uri, timeout=900) as client:
                client.create_collection(
                    NAME,
                    schema={
                        "fields": [
                            {"name": "id", "type": "Int64", "is_primary": True},
                            {"name": "k", "type": "Int64"},
                            {"name": "tag", "type": "VarChar", "max_length": 16},
                            {"name": "j", "type": "JSON"},
                            {"name": "vector", "type": "FloatVector", "dim": DIM},
                        ]
                    },
                    properties={"metric_type": "L2"},
                )
                started = time.perf_counter()
                for lo in range(0, n, BATCH):
                    client.insert(NAME, make_rows(lo, min(n, lo + BATCH), keys))
                client.flush(NAME, timeout=900)
                client.load_collection(NAME, timeout=900)
                print(f"ingest+flush+load: {time.perf_counter() - started:.1f} s", file=sys.stderr)
                run_cases(client, cases, query, 1)  # warm-up, not timed
                plain = run_cases(client, cases, query, args.repeat)
                params = IndexParams()
                params.add_index("k", "STL_SORT", "k_sorted")
                params.add_index("tag", "TRIE", "tag_trie")
                params.add_index(
                    "j",
                    "INVERTED",
                    "j_a",
                    params={"json_path": 'j["a"]', "json_cast_type": "double"},
                )
                started = time.perf_counter()
                client.create_index(NAME, params)
                for name in ("k_sorted", "tag_trie", "j_a"):
                    client.wait_for_index(NAME, name, timeout=900)
                print(f"index builds: {time.perf_counter() - started:.1f} s", file=sys.stderr)
                time.sleep(10)  # the workers load the finished indexes
                run_cases(client, cases, query, 1)  # warm-up, not timed
                indexed = run_cases(client, cases, query, args.repeat)
        finally:
            server.stop()
    bad = [key for key in plain if plain[key][1] != indexed[key][1]]
    print(f"\nscalar filters on {n:,} rows (median of {args.repeat}; ms)")
    header = ("filter", "call", "no index", "with index", "speed-up")
    rows = [
        (label, call, f"{plain[(label, call)][0] * 1e3:.1f}",
         f"{indexed[(label, call)][0] * 1e3:.1f}",
         f"{plain[(label, call)][0] / indexed[(label, call)][0]:.1f}x")
        for (label, call) in plain
    ]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    if bad:
        print(f"DIFFERENT ANSWERS with the index: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
