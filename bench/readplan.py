"""Read-plan latency: how long ``read_plan`` takes before a reader (Spark) can start.

    .venv/bin/python bench/readplan.py              # 20 plans of each kind
    .venv/bin/python bench/readplan.py --plans 50

One ``elanus standalone`` child process holds a small flushed collection (2 shards). Each
kind of plan is asked for ``--plans`` times, one after another, with a pause of 0-0.19 s
between (so the calls fall at every phase of the time-tick interval):

* **loaded**: the collection loaded; the plan names the delegators' segments (no flush);
* **files only** (``files_only=True``, the collection released): the plan flushes, has
  the datanodes write every delete up to its timestamp and waits for that
  (``flight/search/fileplan.py``). The baseline is the loaded plan: what the files-only
  one costs beyond it is its wait for the datanodes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import served_client  # noqa: E402

from elanus.client.client import Client  # noqa: E402


def timed_plans(client: Client, plans: int, **options: object) -> list[float]:
    times = []
    for i in range(plans):
        started = time.perf_counter()
        client.read_plan("plans", **options)  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
        time.sleep((i % 20) * 0.01)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plans", type=int, default=20)
    args = p.parse_args(argv)
    rows = []
    with served_client("elanus-bench-plan-", timeout=120) as c:
        c.create_collection("plans", dimension=8, num_shards=2, metric_type="L2")
        vectors = np.random.default_rng(0).random((10_000, 8), dtype=np.float32)
        c.insert("plans", {"id": np.arange(10_000), "vector": vectors})
        c.flush("plans")
        c.load_collection("plans")
        rows.append(("loaded", timed_plans(c, args.plans)))
        c.release_collection("plans")
        rows.append(("files only", timed_plans(c, args.plans, files_only=True)))
    print(f"## read_plan latency, {args.plans} plans each (ms)")
    print("| plan | p50 | p90 | max |")
    print("|---|---:|---:|---:|")
    for label, times in rows:
        ms = sorted(t * 1000 for t in times)
        p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
        print(f"| {label} | {statistics.median(ms):.0f} | {p90:.0f} | {ms[-1]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
