"""Flow-control benchmark: unthrottled writers against a standalone, Strong reads beside them.

    .venv/bin/python bench/flow.py                    # 4 writers, 30 s, default flow settings
    .venv/bin/python bench/flow.py --quick            # 2 writers, 5 s: smoke run
    .venv/bin/python bench/flow.py --off              # flow control off (every hard limit 0)
    .venv/bin/python bench/flow.py --tight            # tests/test_flow_control.py's limits
    .venv/bin/python bench/flow.py --writers 8 --batch 20000 --seconds 60
    .venv/bin/python bench/flow.py --cluster --writers 2 --batch 5000 --dim 128 \
        --seconds 20 --against-off                    # issue 35's case, and its baseline

``--cluster`` runs ``elanus cluster up``'s processes instead of a standalone (one
nats-server, coord, proxy, datanode and two query nodes, as issue 35 measured): there no
payload is handed over in-process, every consumer reads whole messages from the log.
``--against-off`` runs a round with flow control off first, on a fresh server, and prints
the write rate of the second round over the first.

``--writers`` threads (one client each) insert ``--batch`` rows of ``--dim``-d vectors as
fast as the server acknowledges them (the SDK retries writes refused with RATE_LIMITED);
one reader alternates a Strong search and a Strong ``count(*)`` every 0.2 s; the flow
reports every role publishes are heard as the proxies hear them. Printed: rows/s
acknowledged, Strong read p50 / p99 / max and failures, the worst tick lag reported (p50 /
p99 / max over the run and over its second half, where it has converged), the client's
waits, whether the final count equals the rows acknowledged; then where a Strong read's
time goes (the query nodes' and proxy's latency histograms), each role's longest silence
between two reports, and the CPU seconds of each process. ``--trace`` adds rows/s, tick
lag and the slowest Strong read per second; ``--profile DIR`` py-spies every role.
Issue 22's bound: every Strong read succeeds, p99 under 1 s (``--tight``); issue 35's,
with the defaults: p99 within 2 s at a write rate within 20 % of ``--off``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chaos_figures import scrape_metrics  # noqa: E402
from _common import CpuMeter, PySpy, Standalone, announce, summarize_collapsed  # noqa: E402

from elanus.channels import subjects  # noqa: E402
from elanus.channels.bus import Bus  # noqa: E402
from elanus.channels.flow import FlowReport  # noqa: E402
from elanus.channels.nats_server import free_port  # noqa: E402
from elanus.channels.natsauth import NatsCredentials  # noqa: E402
from elanus.cli.cluster import LocalCluster  # noqa: E402
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
    ap.add_argument(
        "--against-off", action="store_true", help="a round with flow control off first"
    )
    ap.add_argument("--quick", action="store_true", help="2 writers, 5 s: a smoke run")
    ap.add_argument(
        "--cluster", action="store_true", help="a cluster of role processes, not a standalone"
    )
    ap.add_argument("--trace", action="store_true", help="print rows/s and tick lag per second")
    ap.add_argument("--profile", type=Path, help="py-spy every role process into this folder")
    args = ap.parse_args()
    if args.quick:
        args.writers, args.seconds, args.batch = 2, 5.0, 2000
    label = "off" if args.off else "tight" if args.tight else "defaults"
    rounds = [("off", OFF)] if args.against_off and not args.off else []
    rounds.append((label, OFF if args.off else TIGHT if args.tight else {}))
    announce(
        "flow",
        f"{args.writers} writers x {args.batch} rows x {args.dim}-d, {args.seconds:g} s, "
        f"flow control {' then '.join(name for name, _ in rounds)}, "
        f"{'cluster' if args.cluster else 'standalone'}",
    )
    results = {name: one_round(env, args) for name, env in rounds}
    names = list(results)
    print(f"  {'flow control':<30} " + " ".join(f"{n:<22}" for n in names))
    for key in results[names[-1]]:
        if key not in LONG:
            print(f"  {key:<30} " + " ".join(f"{_shown(results[n][key]):<22}" for n in names))
    for n in names:
        for key in LONG:
            print(f"  {n}: {key}: {results[n][key]}")
    if len(names) == 2:
        off, on = (results[n]["rows/s"] for n in names)
        print(f"  write rate, {names[1]} / off: {on / off:.2f}")
    return 0 if all(r["reads failed"] == 0 for r in results.values()) else 1


def _shown(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


LONG = ("where a Strong read's time goes", "longest silence of a role", "CPU s")
"""Figures printed on lines of their own, after the table."""


def one_round(env: dict[str, str], args: Any) -> dict[str, Any]:
    """A fresh standalone or cluster with ``env``, the writers and the reader against it."""
    with tempfile.TemporaryDirectory(prefix="elanus-bench-flow-") as tmp:
        if args.cluster:
            cluster = LocalCluster(
                Path(tmp),
                nats=1,
                querynodes=2,
                indexnodes=0,
                standby=False,
                metrics=True,
                env={"ELANUS_LOG_LEVEL": "WARNING", "ELANUS_MILVUS_PORT": "0", **env},
            )
            try:
                cluster.start(120)
                assert cluster.cluster is not None
                nats = (cluster.cluster.url, cluster.cluster.credentials)
                urls = [c.metrics_url for c in cluster.children if c.metrics_url]
                pids = {c.name: c.proc.pid for c in cluster.children if c.proc is not None}
                pids["nats"] = cluster.cluster.pids[0]
                return run(cluster.uris[0], nats, urls, pids, args)
            finally:
                cluster.stop()
        # a password of our own, so that the trace can hear the flow reports
        creds = NatsCredentials("elanus", secrets.token_hex(12))
        env = {**env, **creds.env(), "ELANUS_METRICS_PORT": str(free_port())}
        with Standalone(Path(tmp) / "data", env=env) as server:
            info = json.loads((server.data_dir / "standalone.json").read_text())
            nats = (info["nats_url"], creds)
            pids = {"standalone": server.pid, "nats": server.nats_pid()}
            return run(server.uri, nats, [info["metrics_url"]], pids, args)


class FlowTrace:
    """Hears every role's flow report (what the proxies judge by), on a thread of its own:
    the worst tick lag of any consumer, each time a report comes in."""

    def __init__(self, url: str, credentials: NatsCredentials) -> None:
        self.url, self.credentials = url, credentials
        self.started = time.monotonic()
        self.samples: list[tuple[float, float]] = []
        """(seconds since ``started``, the worst tick lag then)."""
        self._latest: dict[str, float] = {}
        self._heard_at: dict[str, float] = {}
        self.silence: dict[str, float] = {}
        """Per role, the longest time between two of its reports."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> FlowTrace:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(30)
        return self

    async def _listen(self) -> None:
        self._bus = await Bus(self.url, "bench-flow", credentials=self.credentials).connect()
        await self._bus.subscribe(subjects.FLOW_REPORT, self._heard)

    async def _heard(self, doc: Any) -> None:
        report = FlowReport.from_doc(doc)
        lags = [c.tick_lag_s for c in report.channels if c.tick_lag_s is not None]
        self._latest[report.reporter] = max(lags, default=0.0)
        now = time.monotonic()
        self.samples.append((now - self.started, max(self._latest.values())))
        last = self._heard_at.get(report.reporter)
        if last is not None:
            gap = max(self.silence.get(report.reporter, 0.0), now - last)
            self.silence[report.reporter] = gap
        self._heard_at[report.reporter] = now

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._bus.close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def run(
    uri: str,
    nats: tuple[str, NatsCredentials],
    metrics: list[str],
    pids: dict[str, int | None],
    args: Any,
) -> dict[str, Any]:
    admin = Client(uri, timeout=60)
    admin.create_collection("flow", dimension=args.dim, auto_id=True)
    admin.load_collection("flow")
    stop = threading.Event()
    acked = [0] * args.writers
    acks: list[tuple[float, int]] = []  # (when, rows), for --trace
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
                    n = c.insert("flow", data)["insert_count"]
                except BaseException as exc:  # noqa: BLE001 - reported in the figures
                    errors.append(exc)
                    return
                acked[i] += n
                acks.append((time.monotonic(), n))

    trace = FlowTrace(*nats).start()
    spies = {
        name: PySpy(pid, args.profile / f"{name}.txt").start()
        for name, pid in pids.items()
        if args.profile and pid is not None and name != "nats"
    }
    cpu = CpuMeter({**pids, "bench": os.getpid()}).start()
    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(args.writers)]
    started = trace.started = time.monotonic()
    for t in threads:
        t.start()
    reads: list[tuple[float, float]] = []  # (when, latency)
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
            reads.append((t0 - started, time.monotonic() - t0))
        except ElanusError as exc:
            failed += 1
            print(f"  read failed: {exc}", file=sys.stderr)
        n += 1
        time.sleep(max(0.0, 0.2 - (time.monotonic() - t0)))
    used = cpu.stop()
    for spy in spies.values():
        spy.stop()
    stop.set()
    for t in threads:
        t.join(180)
    elapsed = time.monotonic() - started
    trace.stop()
    spent = time_spent(metrics)
    total = admin.query("flow", "", ["count(*)"], consistency_level="Strong")[0]["count(*)"]
    admin.close()
    if args.trace:
        print_trace(started, acks, reads, trace.samples, args.seconds)
    for name in spies:
        print_profile(name, args.profile / f"{name}.txt")
    lat = np.array([latency for _, latency in reads] or [float("nan")])
    lags = [lag for _, lag in trace.samples]
    late = [lag for at, lag in trace.samples if at >= args.seconds / 2]
    return {
        "rows acknowledged": sum(acked),
        "rows/s": round(sum(acked) / elapsed),
        "write errors": len(errors) and f"{len(errors)}: {errors[0]}",
        "client waits (RATE_LIMITED)": sum(waits),
        "Strong reads": len(reads),
        "reads failed": failed,
        "Strong read p50 / p99 / max": _percentiles(lat),
        "tick lag p50 / p99 / max": _percentiles(np.array(lags or [float("nan")])),
        "  in the 2nd half": _percentiles(np.array(late or [float("nan")])),
        "where a Strong read's time goes": spent,
        "longest silence of a role": ", ".join(
            f"{who.split()[0]} {gap:.2f} s" for who, gap in sorted(trace.silence.items())
        ),
        "CPU s": ", ".join(f"{n} {v:.1f}" for n, v in used.items()),
        "count(*) == acknowledged": total == sum(acked) or f"no: count(*) {total:,}",
    }


TIMES = {
    "tsafe wait": ("elanus_querynode_wait_tsafe_seconds", {}),
    "shard search": ("elanus_querynode_search_latency_seconds", {"scope": "shard"}),
    "proxy search": ("elanus_proxy_req_latency_seconds", {"function": "search"}),
    "proxy query": ("elanus_proxy_req_latency_seconds", {"function": "query"}),
}
"""Means over the run from every process's histograms: how long a read waited for tsafe,
a shard search took in all (the wait included), and the proxy answered."""


def time_spent(urls: list[str]) -> str:
    sums = {name: [0.0, 0.0] for name in TIMES}
    for url in urls:
        samples = scrape_metrics(url)
        if isinstance(samples, str):
            return f"metrics unreadable: {samples}"
        for name, (family, labels) in TIMES.items():
            for sample, got, value in samples.get(family, []):
                if all(got.get(k) == v for k, v in labels.items()):
                    if sample.endswith("_sum"):
                        sums[name][0] += value
                    elif sample.endswith("_count"):
                        sums[name][1] += value
    return ", ".join(f"{n} {s / c * 1000:.0f} ms" for n, (s, c) in sums.items() if c)


def _percentiles(a: Any) -> str:
    return f"{np.percentile(a, 50):.2f} / {np.percentile(a, 99):.2f} / {a.max():.2f} s"


def print_profile(name: str, path: Path) -> None:
    summary = summarize_collapsed(path, top=12)
    print(f"  py-spy {name}: {summary['total']} samples; inclusive:")
    for frame, n in summary["inclusive"]:
        print(f"    {n / max(1, summary['total']):6.1%}  {frame}")


def print_trace(
    started: float,
    acks: list[tuple[float, int]],
    reads: list[tuple[float, float]],
    lags: list[tuple[float, float]],
    seconds: float,
) -> None:
    """Per second of the run: rows acknowledged, the worst tick lag reported, the slowest
    Strong read that started in it."""
    print(f"  {'s':>3} {'rows/s':>10} {'tick lag':>9} {'Strong read':>12}")
    for second in range(int(seconds)):
        rows = sum(n for at, n in acks if second <= at - started < second + 1)
        lag = max((lag for at, lag in lags if second <= at < second + 1), default=0.0)
        read = max((lat for at, lat in reads if second <= at < second + 1), default=0.0)
        print(f"  {second:>3} {rows:>10,} {lag:>8.2f}s {read:>11.2f}s")


if __name__ == "__main__":
    sys.exit(main())
