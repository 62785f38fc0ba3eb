"""Chaos benchmark (issue 22): kill -9 one role at a time of a multi-process cluster under
load, and measure what clients saw.

    .venv/bin/python bench/chaos.py                            # every role, 20 s each
    .venv/bin/python bench/chaos.py --roles querynode,proxy --seconds-per-role 12
    .venv/bin/python bench/chaos.py --json chaos.json --env ELANUS_SESSION_TTL_S=2
    .venv/bin/python bench/chaos.py --nats 1 --replicas 1 --querynodes 2   # issue 33's

The cluster (``bench/_chaos.py``): 3 clustered nats-servers (``--nats``), a coord, 2
proxies, 2 data nodes, 3 query nodes, each an ``elanus run ROLE`` process; a 2-shard
collection loaded with ``replica_number=2``. A writer inserts batches of fresh ids through
proxy A (B while A is unreachable) and deletes some acknowledged ids; a reader per proxy
alternates Strong ``search`` and ``count(*)`` every 0.2 s. Per role: SIGKILL its process
group, 40 % of the phase down, restart, watch; then, with the writer paused, every
acknowledged row must be there once and every acknowledged delete absent. One table per
killed role, each figure beside the issue's bound for it.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chaos import ROLES, Config, run_chaos  # noqa: E402
from _chaos_figures import Phase, bounds  # noqa: E402
from _common import announce, print_table  # noqa: E402

from elanus.settings import Settings  # noqa: E402


def seconds(v: float | None) -> str:
    if v is None:
        return "not seen"
    return "never" if math.isinf(v) else f"{v:.2f} s"


def table(phase: Phase, tick_s: float) -> None:
    f = phase.figures
    rows: list[list[str]] = []
    for label, _key, value, bound in bounds(phase, tick_s):
        met = value is not None and value <= bound
        rows.append([label, seconds(value), f"<= {bound:g} s", "yes" if met else "NO"])
    rows.append(["write stall", seconds(f["write_stall_s"]), "", ""])
    for k in sorted(k for k in f if k.startswith("read_unavailable_s@")):
        p = k[-1]
        rows.append(
            [f"reads unavailable ({p})", seconds(f[k]), "", f"{f[f'reads_failed@{p}']} failed"]
        )
        rows.append([f"slowest read ({p})", seconds(f[f"slowest_read_s@{p}"]), "", ""])
    rows.append(["restart to healthy", seconds(f["restart_to_back_s"]), "", ""])
    rows.append(["restart to every stream back", seconds(f["back_after_restart_s"]), "", ""])
    rows.append(["failing after healthy", seconds(f["failing_after_back_s"]), "", ""])
    for exit in f["exits"]:
        rows.append(["exited by itself", exit, "", "restarted"])
    rows.append(["writes ok / failed", f"{f['writes_ok']} / {f['writes_failed']}", "", ""])
    if "check_error" in f:
        rows.append(["data check FAILED", f["check_error"][:70], "", "NO"])
    for key in ("rows_lost", "rows_duplicated", "deletes_undone", "rows_never_sent"):
        if key in f:
            rows.append([key.replace("_", " "), str(f[key]), "0", "yes" if f[key] == 0 else "NO"])
    rows.append(
        [
            "raw NATS/gRPC errors",
            str(len(f["raw_errors"])),
            "0",
            "yes" if not f["raw_errors"] else "NO",
        ]
    )
    for kind, n in f["errors"].items():
        rows.append([f"  error x{n}", kind[:70], "", ""])
    print_table(
        f"kill -9 {phase.name} (rows acked so far {f.get('rows_acked', '?')}, "
        f"deletes {f.get('deletes_acked', '?')})",
        ["figure", "measured", "bound", "met"],
        rows,
    )


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--roles", default=",".join(ROLES), help=f"comma-separated, of {ROLES}")
    ap.add_argument("--seconds-per-role", type=float, default=20.0)
    ap.add_argument("--nats", type=int, default=3, help="nats-servers (1: no NATS cluster)")
    ap.add_argument("--replicas", type=int, default=2, help="replica_number of the collection")
    ap.add_argument("--querynodes", type=int, default=3, help="query nodes")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every role")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", type=Path, help="run in this directory and keep the logs")
    args = ap.parse_args()
    # a SIGTERM (timeout, CI) unwinds like Ctrl-C, so every process started is stopped
    signal.signal(signal.SIGTERM, interrupt)
    roles = [r for r in args.roles.split(",") if r]
    env = dict(e.split("=", 1) for e in args.env)
    tick_ms = float(env.get("ELANUS_TIMETICK_INTERVAL_MS", Settings().timetick_interval_ms))
    announce("chaos", f"kill -9 of {', '.join(roles)}, {args.seconds_per_role:g} s each")
    with tempfile.TemporaryDirectory(prefix="elanus-bench-chaos-") as tmp:
        root = args.keep or Path(tmp)
        cfg = Config(
            root, nats=args.nats, env=env, replica_number=args.replicas,
            querynodes=args.querynodes,
        )  # fmt: skip
        phases = run_chaos(cfg, roles, args.seconds_per_role, log=lambda m: print(f"  {m}"))
    for phase in phases:
        table(phase, tick_ms / 1000)
    if args.json:
        doc: list[dict[str, Any]] = [{"role": p.role, "name": p.name, **p.figures} for p in phases]
        args.json.write_text(json.dumps(doc, indent=2, default=str))
    keys = ("rows_lost", "rows_duplicated", "deletes_undone", "check_error")
    bad = any(p.figures.get(k) for p in phases for k in keys)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
