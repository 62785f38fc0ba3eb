"""Flow-control benchmark: unthrottled writers against a standalone, Strong reads beside them.

    .venv/bin/python bench/flow.py                    # 4 writers, 30 s, default flow settings
    .venv/bin/python bench/flow.py --quick            # 2 writers, 5 s: smoke run
    .venv/bin/python bench/flow.py --off              # flow control off (every hard limit 0)
    .venv/bin/python bench/flow.py --tight            # tests/test_flow_control.py's limits
    .venv/bin/python bench/flow.py --writers 8 --batch 20000 --seconds 60

``--writers`` threads (one client each) insert ``--batch`` rows of ``--dim``-d vectors as
fast as the server acknowledges them (the SDK retries writes refused with RATE_LIMITED);
one reader alternates a Strong search and a Strong ``count(*)`` every 0.2 s; a monitor
reads every role's consumer figures from ``list_sessions`` each second. Printed: rows/s
acknowledged, Strong read p50 / p99 / max and failures, the worst tick lag and unfetched
messages seen, the client's waits, and whether the final count equals the rows
acknowledged. Issue 22's bound: every Strong read succeeds, p99 under 1 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.errors import ElanusError  # noqa: E402

OFF = {
    "ELANUS_FLOW_TICK_LAG_HARD_S": "0",
    "ELANUS_FLOW_PENDING_HARD": "0",
    "ELANUS_FLOW_MEMORY_HIGH": "0",
}
TIGHT = {
    "ELANUS_FLOW_TICK_LAG_SOFT_S": "0.1",
    "ELANUS_FLOW_TICK_LAG_HARD_S": "0.25",
    "ELANUS_FLOW_PENDING_SOFT": "8",
    "ELANUS_FLOW_PENDING_HARD": "32",
    "ELANUS_TIMETICK_INTERVAL_MS": "50",
}
"""The limits that keep Strong reads under a second under the fastest writers (the
settings' docs): the defaults only stop a runaway backlog."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--off", action="store_true", help="flow control off")
    ap.add_argument(
        "--tight", action="store_true", help="tick lag 0.1/0.25 s, 8/32 messages, 50 ms ticks"
    )
    ap.add_argument("--quick", action="store_true", help="2 writers, 5 s: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.writers, args.seconds, args.batch = 2, 5.0, 2000
    announce(
        "flow",
        f"{args.writers} writers x {args.batch} rows x {args.dim}-d, {args.seconds:g} s, "
        f"flow control {'off' if args.off else 'tight' if args.tight else 'on (defaults)'}",
    )
    with (
        tempfile.TemporaryDirectory(prefix="elanus-bench-flow-") as tmp,
        Standalone(
            Path(tmp) / "data", env=OFF if args.off else TIGHT if args.tight else None
        ) as server,
    ):
        figures = run(server.uri, args)
    for name, value in figures.items():
        print(f"  {name:<28} {value}")
    return 0 if figures["reads failed"] == 0 else 1


def run(uri: str, args: Any) -> dict[str, Any]:
    admin = Client(uri, timeout=60)
    admin.create_collection("flow", dimension=args.dim, auto_id=True)
    admin.load_collection("flow")
    stop = threading.Event()
    acked = [0] * args.writers
    waits = [0] * args.writers
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        data = {"vector": np.random.default_rng(i).random((args.batch, args.dim), np.float32)}
        with Client(uri, timeout=120) as c:

            def waited(exc: ElanusError, wait: float) -> None:
                waits[i] += 1

            c.on_retry = waited
            while not stop.is_set():
                try:
                    acked[i] += c.insert("flow", data)["insert_count"]
                except BaseException as exc:  # noqa: BLE001 - reported in the figures
                    errors.append(exc)
                    return

    worst = {"lag": 0.0, "pending": 0.0}

    def monitor() -> None:
        with Client(uri, timeout=30) as c:
            while not stop.wait(1.0):
                for s in c.list_sessions():
                    for f in ((s.get("meta") or {}).get("channels") or {}).values():
                        worst["lag"] = max(worst["lag"], f.get("tick_lag_s") or 0.0)
                        worst["pending"] = max(worst["pending"], f.get("pending") or 0.0)

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(args.writers)]
    threads.append(threading.Thread(target=monitor, daemon=True))
    started = time.monotonic()
    for t in threads:
        t.start()
    latencies: list[float] = []
    failed = 0
    query = [[0.5] * args.dim]
    n = 0
    while time.monotonic() - started < args.seconds:
        t0 = time.monotonic()
        try:
            if n % 2:
                admin.search("flow", query, limit=3, consistency_level="Strong")
            else:
                admin.query("flow", "", ["count(*)"], consistency_level="Strong")
            latencies.append(time.monotonic() - t0)
        except ElanusError as exc:
            failed += 1
            print(f"  read failed: {exc}", file=sys.stderr)
        n += 1
        time.sleep(max(0.0, 0.2 - (time.monotonic() - t0)))
    stop.set()
    for t in threads:
        t.join(180)
    elapsed = time.monotonic() - started
    total = admin.query("flow", "", ["count(*)"], consistency_level="Strong")[0]["count(*)"]
    admin.close()
    lat = np.array(latencies or [float("nan")])
    return {
        "rows acknowledged": f"{sum(acked):,} ({sum(acked) / elapsed:,.0f} rows/s)",
        "write errors": len(errors) and f"{len(errors)}: {errors[0]}",
        "client waits (RATE_LIMITED)": sum(waits),
        "Strong reads": len(latencies),
        "reads failed": failed,
        "Strong read p50 / p99 / max": (
            f"{np.percentile(lat, 50):.3f} / {np.percentile(lat, 99):.3f} / {lat.max():.3f} s"
        ),
        "worst tick lag (sessions)": f"{worst['lag']:.2f} s",
        "worst unfetched messages": f"{worst['pending']:.0f}",
        "count(*) == acknowledged": total == sum(acked),
    }


if __name__ == "__main__":
    sys.exit(main())
