"""What an ``elanus`` process costs to start and to end: a CLI call, a standalone's start and
its stop.

Every CLI call, server start and server stop is a new interpreter that imports pyarrow and
more. This times, N times each, one after another (each alone on the machine):

- **bare interpreter**: ``python -c pass``, the floor of any Python command;
- **pyarrow.flight**: ``python -c "import pyarrow.flight"``, the floor of any Flight client;
- **CLI call**: ``elanus collection list`` against a running standalone, spawn to exit;
- **standalone start**: spawn until its info file names it (every role started);
- **standalone stop**: SIGTERM until the process is gone.

and prints the medians of wall and CPU seconds (user + system of the process itself; a
standalone's nats-server not counted) and each wall time as a ratio of the pyarrow.flight
floor. The test suite runs about 300 CLI calls and 100
standalones (bench/README.md)::

    .venv/bin/python bench/process_start.py            # 7 runs each, ~40 s
    .venv/bin/python bench/process_start.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from _common import Standalone, print_table

ELANUS = str(Path(sys.executable).parent / "elanus")


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd`` run to its end (it must succeed)."""
    cpu, started = child_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, child_cpu() - cpu


def start_and_stop(root: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    """A fresh standalone's (wall, CPU) from spawn until its info file names it (every role
    started, polled every 5 ms), then from SIGTERM until it is gone. CPU is the process's
    own (not its nats-server's): read at the start's end, and the rest at its reaping."""
    data = Path(tempfile.mkdtemp(dir=root))
    cmd = [
        ELANUS, "standalone", "--data-dir", str(data), "--port", "0",
        "--milvus-port", "0", "--nats-port", "0", "--webui-port", "0",
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    info = data / "standalone.json"
    while True:
        try:
            if json.loads(info.read_text()).get("pid") == proc.pid:
                break
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the standalone exited with {proc.returncode}")
        time.sleep(0.005)
    up = time.perf_counter() - started
    times = psutil.Process(proc.pid).cpu_times()
    start_cpu = times.user + times.system
    cpu, stopping = child_cpu(), time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    if proc.wait(60) != 0:
        raise SystemExit(f"the standalone stopped with {proc.returncode}")
    down = time.perf_counter() - stopping
    return (up, start_cpu), (down, child_cpu() - cpu - start_cpu)


def median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="elanus-process-start-"))
    rows: dict[str, tuple[float, float]] = {}

    def each(name: str, run: Callable[[], tuple[float, float]]) -> None:
        rows[name] = median([run() for _ in range(args.runs)])

    try:
        each("bare interpreter", lambda: timed([sys.executable, "-c", "pass"]))
        each("pyarrow.flight", lambda: timed([sys.executable, "-c", "import pyarrow.flight"]))
        with Standalone(root / "cli") as server:
            time.sleep(2.0)  # past a fresh server's first housekeeping: the call is timed alone
            uri = server.uri
            each("CLI call", lambda: timed([ELANUS, "collection", "list", "--uri", uri]))
        starts, stops = [], []
        for _ in range(args.runs):
            up, down = start_and_stop(root)
            starts.append(up)
            stops.append(down)
        rows["standalone start"] = median(starts)
        rows["standalone stop"] = median(stops)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    floor = rows["pyarrow.flight"][0]
    body = [
        [name, f"{wall:.3f}", f"{cpu:.2f}", f"{wall / floor:.2f}x"]
        for name, (wall, cpu) in rows.items()
    ]
    print_table(
        f"elanus process start and end (median of {args.runs}, load {os.getloadavg()[0]:.2f})",
        ["what", "wall s", "CPU s", "vs pyarrow.flight"],
        body,
    )


if __name__ == "__main__":
    main()
