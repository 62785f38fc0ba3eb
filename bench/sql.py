"""SQL scan rate: statements through the proxy's Flight SQL against DuckDB reading the same
Lance files directly.

    .venv/bin/python bench/sql.py                  # 1,000,000 rows, best of 3
    .venv/bin/python bench/sql.py --rows 200000 --repeat 1

One ``elanus standalone`` child process holds a flushed, loaded collection (id, year,
price, tag, an 8-d vector; 2 shards, no deletes). Each statement runs through the SDK's
``client.sql`` (Flight SQL: plan, then the rows of every segment at one timestamp, page by
page from the query node, into a DuckDB of the statement's own) and, as the baseline, in
an in-process DuckDB over the segments' own Lance datasets (the files the plan lists,
scanned with projection pushdown, no snapshot filter and no Flight). Both DuckDBs run on
one thread (``sql_threads``' default). Rows/s = the collection's rows / the statement's
wall time, best of ``--repeat``; ``SELECT 1``'s time is what any statement costs (its
Flight SQL round trips, parsing, a DuckDB of its own).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import served_client  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.segments import storage  # noqa: E402

STATEMENTS = [
    ("count", "SELECT count(*) FROM scan"),
    ("filter+sum", "SELECT sum(price) FROM scan WHERE year >= 2000"),
    ("group by", "SELECT tag, count(*), avg(price) FROM scan GROUP BY tag ORDER BY tag"),
    ("vectors", "SELECT max(list_sum(vector)) FROM scan"),
]
SCHEMA = {
    "fields": [
        {"name": "id", "type": "Int64", "is_primary": True},
        {"name": "year", "type": "Int64"},
        {"name": "price", "type": "Double"},
        {"name": "tag", "type": "VarChar", "max_length": 8},
        {"name": "vector", "type": "FloatVector", "dim": 8},
    ]
}


def fill(c: Client, rows: int) -> None:
    c.create_collection("scan", schema=SCHEMA, num_shards=2, consistency_level="Strong")
    c.create_index("scan", field_name="vector", metric_type="L2")
    rng = np.random.default_rng(0)
    step = 100_000
    for start in range(0, rows, step):
        n = min(step, rows - start)
        ids = np.arange(start, start + n)
        c.insert(
            "scan",
            {
                "id": ids,
                "year": 1970 + ids % 50,
                "price": rng.random(n) * 100,
                "tag": [f"t{i % 16}" for i in ids],
                "vector": rng.random((n, 8), dtype=np.float32),
            },
        )
    c.flush("scan")
    c.load_collection("scan")


def direct(c: Client) -> duckdb.DuckDBPyConnection:
    """DuckDB over the segments' Lance datasets (as the read plan lists them): a view
    ``scan`` that is their union."""
    deadline = time.monotonic() + 120
    while True:  # the flushed segments are handed to the query node a moment later
        plan = c.read_plan("scan")
        if all(e["kind"] == "sealed" for e in plan["endpoints"]):
            break
        assert time.monotonic() < deadline, "the flushed segments were never handed off"
        time.sleep(0.2)
    paths = [json.loads(e["ticket"])["sealed"]["path"] for e in plan["endpoints"]]
    con = duckdb.connect(config={"threads": 1})
    parts = []
    for i, path in enumerate(paths):
        con.register(f"seg{i}", storage.dataset(path))
        parts.append(f"SELECT id, year, price, tag, vector FROM seg{i}")
    con.execute(f"CREATE VIEW scan AS {' UNION ALL '.join(parts)}")
    return con


def _rounded(table: Any) -> list[list[Any]]:
    """A result's values, floats to 6 significant digits (sums differ in their last bits
    with the order of the additions)."""
    return [
        [float(f"{v:.6g}") if isinstance(v, float) else v for v in row.values()]
        for row in table.to_pylist()
    ]


def best(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    out = []
    with served_client("elanus-bench-sql-", timeout=600) as c:
        fill(c, args.rows)
        con = direct(c)
        c.sql("SELECT count(*) FROM scan")  # warm: routes, plans, imports
        for label, sql in STATEMENTS:
            ours, got = best(lambda sql=sql: c.sql(sql), args.repeat)
            theirs, want = best(lambda sql=sql: con.sql(sql).to_arrow_table(), args.repeat)
            assert _rounded(got) == _rounded(want), (label, got, want)
            out.append((label, ours, theirs))
        segments = len(c.read_plan("scan")["endpoints"])
        fixed, _ = best(lambda: c.sql("SELECT 1"), args.repeat)
    print(f"## SQL scan rate, {args.rows:,} rows in {segments} segments (best of {args.repeat})")
    print(
        "| statement | Elanus SQL (rows/s) | DuckDB on the Lance files (rows/s) | Elanus / DuckDB |"
    )
    print("|---|---:|---:|---:|")
    for label, ours, theirs in out:
        print(
            f"| {label} | {args.rows / ours:,.0f} | {args.rows / theirs:,.0f} "
            f"| {theirs / ours:.2f} |"
        )
    print(f"\nA statement reading no collection (SELECT 1) takes {fixed * 1e3:.1f} ms.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
