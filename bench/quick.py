"""Quick benchmark: issue 24's key ratios in under a minute, beside the ratios last recorded
in ``bench/README.md``; a ratio that fell by more than 15 % is flagged (exit status 1).

    make bench-quick
    .venv/bin/python bench/quick.py                  # ~1 min on a quiet 2-core machine
    .venv/bin/python bench/quick.py --record         # and write the figures into the README
    .venv/bin/python bench/quick.py --repeat 1 --rows 20000 --search-rows 5000   # smoke run

Every case runs alone (no other server alive), best of ``--repeat`` short runs, with the
building blocks of the full benchmarks:

* **ingest** (``ingest.py``): 100k x 128-d published raw to JetStream, then inserted
  through a fresh ``elanus standalone`` (to last ack; + flush), alternating run by run.
* **empty Flight** (``search.py``'s server, ``index.py``'s loop): one client sending
  single-query ``search`` actions with prebuilt bodies to a do-nothing Flight server.
* **in-process** (``transport.py``'s stack): a standalone holding 20k x 64-d IVF_FLAT;
  the same raw ``search`` action loop (against the empty server's) and one SDK client's
  single-query searches.
* **query node in its own process** (``transport.py``'s cluster): the same SDK searches.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest  # noqa: E402
import transport  # noqa: E402
from _common import announce  # noqa: E402
from _record import compare, parse_block, render_block, replace_block  # noqa: E402
from search import EmptyFlight, Stat, print_table  # noqa: E402

from index import body, flight_loop  # noqa: E402

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
BUDGET_S = 60.0

WHAT = {
    "ingest_ack": "insert to last ack / raw JetStream",
    "ingest_flush": "insert+flush / raw JetStream",
    "search_vs_empty": "single-query search / empty Flight server (same action loop)",
    "sdk_vs_action": "single-query search, SDK / raw Flight action",
    "cross_process": "query node in its own process / in-process (SDK)",
}
"""The ratios, in table order; higher is better for every one."""


def measure_ingest(rows: int, dim: int, repeat: int, workdir: Path) -> dict[str, float]:
    """Best rows/s of raw JetStream, Elanus to last ack and Elanus + flush."""
    table = ingest.make_table(rows, dim)
    js: list[float] = []
    ack: list[float] = []
    flush: list[float] = []
    for _ in range(repeat):  # the baseline and Elanus alternate run by run
        js.append(ingest.run_raw_jetstream(table, dim, workdir).rows_per_s)
        to_ack, to_flushed = ingest.run_elanus(table, dim, 1, 1, workdir, None, False)
        if not (to_ack.ok and to_flushed.ok):
            raise RuntimeError("Elanus lost rows in the ingest case (see above)")
        ack.append(to_ack.rows_per_s)
        flush.append(to_flushed.rows_per_s)
    return {"raw_js_rows_s": max(js), "ack_rows_s": max(ack), "flush_rows_s": max(flush)}


def action_bodies(work: transport.Workload) -> list[bytes]:
    """The SDK's single-query request bodies (``transport``'s searches), prebuilt."""
    search = {"nprobe": work.nprobe}
    return [body(work.queries[i : i + 1], search, transport.NAME, "Eventually") for i in range(64)]


def best_qps(stats: list[Stat]) -> float:
    return transport.best(stats).qps


def measure_empty(work: transport.Workload, repeat: int, seconds: float) -> float:
    bodies = action_bodies(work)
    with EmptyFlight() as empty:
        flight_loop("warm-up", empty.uri, bodies, 1, 0.3, quiet=True)
        return best_qps(
            [flight_loop("empty", empty.uri, bodies, 1, seconds, quiet=True) for _ in range(repeat)]
        )


def measure_stack(
    case: str, work: transport.Workload, repeat: int, seconds: float, tmp: Path
) -> dict[str, float]:
    """SDK single-query q/s on ``case``'s stack; in-process, the raw action loop's too."""
    out: dict[str, float] = {}
    with transport.loaded_stack(case, tmp / transport.slug(case), work) as uri:
        if case == transport.IN_PROCESS:
            bodies = action_bodies(work)
            flight_loop("warm-up", uri, bodies, 1, 0.3, quiet=True)
            out["action_qps"] = best_qps(
                [flight_loop(case, uri, bodies, 1, seconds, quiet=True) for _ in range(repeat)]
            )
        out["sdk_qps"] = best_qps(transport.sdk_single_queries(uri, work, seconds, runs=repeat))
    return out


def ratios_of(f: dict[str, float]) -> dict[str, float]:
    """Every ratio whose figures were measured (``--only`` measures some)."""
    made = {
        "ingest_ack": ("ack_rows_s", "raw_js_rows_s"),
        "ingest_flush": ("flush_rows_s", "raw_js_rows_s"),
        "search_vs_empty": ("in_action_qps", "empty_qps"),
        "sdk_vs_action": ("in_sdk_qps", "in_action_qps"),
        "cross_process": ("cluster_sdk_qps", "in_sdk_qps"),
    }
    return {k: f[a] / f[b] for k, (a, b) in made.items() if a in f and b in f}


def notes_of(f: dict[str, float], args: argparse.Namespace) -> dict[str, str]:
    """What stands behind each ratio (written after it in the recorded block)."""
    return {
        "ingest_ack": f"{WHAT['ingest_ack']} ({f['ack_rows_s']:,.0f} / "
        f"{f['raw_js_rows_s']:,.0f} rows/s, {args.rows:,} x {args.dim}-d)",
        "ingest_flush": f"{WHAT['ingest_flush']} ({f['flush_rows_s']:,.0f} rows/s)",
        "search_vs_empty": f"{WHAT['search_vs_empty']} ({f['in_action_qps']:,.0f} / "
        f"{f['empty_qps']:,.0f} q/s, {args.search_rows:,} x 64-d IVF_FLAT nprobe 8)",
        "sdk_vs_action": f"{WHAT['sdk_vs_action']} ({f['in_sdk_qps']:,.0f} q/s)",
        "cross_process": f"{WHAT['cross_process']} ({f['cluster_sdk_qps']:,.0f} / "
        f"{f['in_sdk_qps']:,.0f} q/s)",
    }


def commit_label(root: Path) -> str:
    """HEAD's short hash, with ``+changes`` when files other than the README differ."""

    def git(*cmd: str) -> str:
        return subprocess.run(
            ["git", *cmd], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/README.md")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def print_rows(ratios: dict[str, float], readme_text: str) -> bool:
    """The table of ratios beside the recorded ones; True if any fell too far."""
    recorded = parse_block(readme_text)
    where = (
        f"recorded at {recorded.commit}, {recorded.date}"
        if recorded
        else "nothing recorded yet in bench/README.md (run with --record on a quiet machine)"
    )
    rows = compare(ratios, recorded)
    body = [
        [
            row.key,
            f"{row.now:.2f}",
            "-" if row.recorded is None else f"{row.recorded:.2f}",
            "-" if row.change is None else f"{100 * row.change:+.0f}%",
            "FELL > 15%" if row.fell else "",
            WHAT[row.key],
        ]
        for row in rows
    ]
    print_table(
        f"quick benchmark; {where}", ["ratio", "now", "recorded", "change", "", "what"], body
    )
    return any(row.fell for row in rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="ingest rows (100,000)")
    p.add_argument("--dim", type=int, default=128, help="ingest dimension (128)")
    p.add_argument("--search-rows", type=int, default=20_000, help="searched rows, 64-d (20k)")
    p.add_argument("--repeat", type=int, default=3, help="short runs per case, best kept (3)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per search run (1)")
    p.add_argument("--record", action="store_true", help="write the ratios into the README")
    p.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write results here")
    p.add_argument(
        "--only",
        type=lambda text: [r.strip() for r in text.split(",") if r.strip()],
        default=None,
        metavar="RATIO[,RATIO]",
        help=f"measure only these ratios ({', '.join(WHAT)}); --record is then refused",
    )
    args = p.parse_args(argv)
    unknown = sorted(set(args.only or []) - set(WHAT))
    if unknown:
        p.error(f"unknown ratio(s) {', '.join(unknown)}; known: {', '.join(WHAT)}")
    if args.only and args.record:
        p.error("--record writes every ratio: run without --only")
    return args


NEEDS = {
    "ingest_ack": {"ingest"},
    "ingest_flush": {"ingest"},
    "search_vs_empty": {"empty", "in"},
    "sdk_vs_action": {"in"},
    "cross_process": {"in", "cluster"},
}
"""The cases each ratio is made of."""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    announce("quick benchmark", f"each case alone, best of {args.repeat}")
    work = transport.Workload.make(args.search_rows, 64, nprobe=8)
    figures: dict[str, float] = {}
    phases: dict[str, float] = {}

    def phase(name: str, t0: float) -> None:
        phases[name] = time.perf_counter() - t0
        print(f"  {name}: {phases[name]:.1f}s", flush=True)

    wanted = args.only or list(WHAT)
    cases = set().union(*(NEEDS[r] for r in wanted))
    with tempfile.TemporaryDirectory(prefix="elanus-bench-quick-") as tmp_dir:
        tmp = Path(tmp_dir)
        if "ingest" in cases:
            t0 = time.perf_counter()
            figures.update(measure_ingest(args.rows, args.dim, args.repeat, tmp))
            phase("ingest", t0)
        if "empty" in cases:
            t0 = time.perf_counter()
            figures["empty_qps"] = measure_empty(work, args.repeat, args.seconds)
            phase("empty Flight", t0)
        if "in" in cases:
            t0 = time.perf_counter()
            for key, value in measure_stack(
                transport.IN_PROCESS, work, args.repeat, args.seconds, tmp
            ).items():
                figures[f"in_{key}"] = value
            phase("in-process", t0)
        if "cluster" in cases:
            t0 = time.perf_counter()
            stack = measure_stack(transport.CLUSTER, work, args.repeat, args.seconds, tmp)
            figures["cluster_sdk_qps"] = stack["sdk_qps"]
            phase("cross-process", t0)
    ratios = {k: v for k, v in ratios_of(figures).items() if k in wanted}
    wall = time.perf_counter() - started
    readme_text = args.readme.read_text() if args.readme.exists() else ""
    fell = print_rows(ratios, readme_text)
    print("  " + "; ".join(f"{k} {v:,.0f}" for k, v in figures.items()))
    print(
        f"total {wall:.1f}s" + (f" (over the {BUDGET_S:.0f} s budget)" if wall > BUDGET_S else "")
    )
    if args.record:
        date = datetime.date.today().isoformat()
        block = render_block(ratios, notes_of(figures, args), commit_label(HERE.parent), date)
        args.readme.write_text(replace_block(readme_text, block))
        print(f"recorded in {args.readme}")
    if args.json is not None:
        out: dict[str, Any] = {"ratios": ratios, "figures": figures, "phases_s": phases}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 1 if fell else 0


if __name__ == "__main__":
    sys.exit(main())
