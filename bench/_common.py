"""Shared helpers of the benchmarks: a standalone server as a real child process, timing,
CPU accounting, py-spy profiling and the results table.

Not a benchmark itself (``make bench`` skips ``bench/_*.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from elanus.channels.nats_server import die_with_parent, free_port, terminate
from elanus.client.client import Client

MB = 1 << 20


# -- the server under test ------------------------------------------------------------------
class Standalone:
    """``elanus standalone --data-dir D --port P`` as a child process (dies with us).

    ``start`` waits until ``health`` answers; ``stop`` sends SIGTERM, then SIGKILL. The
    child gets ``PR_SET_PDEATHSIG``, so even a ``kill -9`` of the benchmark takes it (and its
    nats-server) down.
    """

    launcher: list[str] = [sys.executable, "-m", "elanus.cli"]
    """How to run the ``elanus`` command (a class attribute, so an experiment can swap it)."""

    def __init__(
        self,
        data_dir: Path,
        env: dict[str, str] | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.client_options = client_options or {}
        """What the health check connects with (credentials, when the env turns auth on)."""
        self.port = free_port()
        self.uri = f"grpc://127.0.0.1:{self.port}"
        self.log_path = data_dir.parent / f"{data_dir.name}-standalone.log"
        self.env = env or {}
        self.cwd: Path | None = None
        """Where the child runs; ``python -m`` puts it first on ``sys.path``, so another
        build's launcher needs a directory without this checkout's packages."""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> Standalone:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            *self.launcher, "standalone",
            "--data-dir", str(self.data_dir), "--port", str(self.port), "--nats-port", "0",
        ]  # fmt: skip
        # Milvus's face off unless asked for: port 19530 is one per machine, and a
        # benchmark may run several servers (or share the machine with one).
        env = {
            **os.environ, "ELANUS_LOG_LEVEL": "WARNING", "ELANUS_MILVUS_PORT": "0", **self.env,
        }  # fmt: skip
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.cwd,
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            )
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"elanus standalone exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            if (self.data_dir / "standalone.json").exists():
                try:
                    with Client(self.uri, timeout=5, **self.client_options) as c:
                        c.health()
                    return self
                except Exception as exc:  # noqa: BLE001 - not up yet
                    last = exc
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"standalone not healthy in {timeout}s ({last}):\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def nats_pid(self) -> int | None:
        try:
            info = json.loads((self.data_dir / "standalone.json").read_text())
            return int(info["nats_pid"]) if info.get("nats_pid") else None
        except (OSError, ValueError, KeyError):
            return None

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        terminate(proc, timeout)

    def __enter__(self) -> Standalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def served_client(prefix: str, timeout: float) -> Iterator[Client]:
    """A client of a fresh standalone in a temporary directory, all gone on exit."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        Standalone(Path(tmp) / "data") as server,
        Client(server.uri, timeout=timeout) as client,
    ):
        yield client


# -- CPU accounting ---------------------------------------------------------------------------
def _busy() -> float:
    """CPU seconds the whole machine spent busy (all cores) since boot."""
    t = psutil.cpu_times()
    return float(t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0)
                 + getattr(t, "softirq", 0.0))  # fmt: skip


class CpuMeter:
    """CPU seconds (user+system) used by named processes between ``start`` and ``stop``.

    ``others`` is what the rest of the machine used meanwhile: other workloads on a shared
    box show up there (and make the run's numbers suspect).
    """

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items() if pid is not None}
        self._before: dict[str, float] = {}
        self._busy0 = 0.0
        self.used: dict[str, float] = {}

    @staticmethod
    def _cpu(p: psutil.Process) -> float:
        try:
            t = p.cpu_times()
            return float(t.user + t.system)
        except psutil.Error:
            return 0.0

    def start(self) -> CpuMeter:
        self._before = {n: self._cpu(p) for n, p in self.procs.items()}
        self._busy0 = _busy()
        return self

    def stop(self) -> dict[str, float]:
        busy = _busy() - self._busy0
        self.used = {n: self._cpu(p) - self._before[n] for n, p in self.procs.items()}
        self.used["others"] = max(0.0, busy - sum(self.used.values()))
        return self.used


def machine_load() -> tuple[float, float, float]:
    return os.getloadavg()


def announce(what: str, detail: str) -> None:
    """The run's first line (the machine's cores and load), and a warning on a busy one."""
    load = os.getloadavg()[0]
    print(f"elanus {what}: {os.cpu_count()} CPUs, load average {load:.2f}; {detail}", flush=True)
    if load > 0.5 * (os.cpu_count() or 1):
        print("  !! the machine is busy: numbers will be low and noisy", file=sys.stderr)


# -- profiling ----------------------------------------------------------------------------------
def py_spy_binary() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


class PySpy:
    """``py-spy record --pid`` into collapsed stacks while a block runs (skipped if absent)."""

    def __init__(self, pid: int, out: Path, rate: int = 97, gil: bool = False) -> None:
        self.pid, self.out, self.rate, self.gil = pid, out, rate, gil
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PySpy:
        exe = py_spy_binary()
        if exe is None:
            print("py-spy is not installed: no profile (pip install py-spy)", file=sys.stderr)
            return self
        self.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--threads",
            "--nonblocking", "--format", "raw", "--output", str(self.out),
        ]  # fmt: skip
        if self.gil:
            cmd.append("--gil")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=(self.out.with_suffix(".log")).open("wb"),
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
        time.sleep(0.5)  # let it attach
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _frame_name(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"; drop the line number
    # and keep the last two path parts, so one function is one entry.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path, _, _line = where.rpartition(":")
    short = "/".join(Path(path).parts[-2:]) if path else where
    return f"{name} ({short})" if short else name


_PLUMBING = (
    "Thread._bootstrap (", "Thread._bootstrap_inner (", "Thread.run (", "LoopThread._run (",
    "BaseEventLoop.run_forever (", "BaseEventLoop._run_once (", "Handle._run (", "_worker (",
    "_WorkItem.run (",
)  # fmt: skip
"""Frames every sample of a thread has: left out of the inclusive ranking."""


def summarize_collapsed(path: Path, top: int = 15) -> dict[str, Any]:
    """Self and inclusive sample counts per function, and samples per thread."""
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"total": 0, "self": [], "inclusive": [], "threads": []}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        n = int(count_s)
        frames = stack.split(";")
        if frames and frames[0].startswith("thread ("):  # --threads puts the thread first
            threads[frames[0]] += n
            frames = frames[1:]
        names = [_frame_name(f) for f in frames]
        total += n
        if names:
            self_c[names[-1]] += n
        for name in set(names):
            if not name.startswith(_PLUMBING):
                incl_c[name] += n
    return {
        "total": total,
        "self": self_c.most_common(top),
        "inclusive": incl_c.most_common(top),
        "threads": threads.most_common(top),
    }


# -- results -----------------------------------------------------------------------------------
@dataclass
class Result:
    case: str
    rows: int
    dim: int
    seconds: float
    nbytes: int
    kind: str = "elanus"
    """``elanus``, ``raw-js``, ``raw-lance`` or ``other`` (ratios are taken against the raws)."""
    ok: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / MB / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "kind": self.kind,
            "rows": self.rows,
            "dim": self.dim,
            "seconds": round(self.seconds, 4),
            "rows_per_s": round(self.rows_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 2),
            "ok": self.ok,
            **self.extra,
        }


def _ratio(r: Result, base: Result | None) -> str:
    if base is None or not base.rows_per_s or base.rows_per_s != base.rows_per_s:
        return "-"
    return f"{r.rows_per_s / base.rows_per_s:.2f}x"


def print_results(title: str, results: list[Result]) -> None:
    """One table per (rows, dim) data set; ratios are rows/s over the raw baselines'."""
    raw_js = next((r for r in results if r.kind == "raw-js"), None)
    raw_lance = next((r for r in results if r.kind == "raw-lance"), None)
    headers = ["case", "rows", "dim", "seconds", "rows/s", "MB/s", "vs raw JetStream",
               "vs raw Lance"]  # fmt: skip
    body = [
        [
            r.case + ("" if r.ok else "  (FAILED)"),
            f"{r.rows:,}",
            str(r.dim),
            f"{r.seconds:.2f}",
            f"{r.rows_per_s:,.0f}",
            f"{r.mb_per_s:,.1f}",
            _ratio(r, raw_js),
            _ratio(r, raw_lance),
        ]
        for r in results
    ]
    print_table(title, headers, body)


def print_table(title: str, headers: list[str], body: list[list[str]]) -> None:
    """A titled table, first column left-aligned; plain text when rich is not installed."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text
        print(f"\n{title}")
        widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
        for row in body:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        return
    table = Table(title=title, title_justify="left")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for row in body:
        table.add_row(*row)
    Console(width=max(160, shutil.get_terminal_size((160, 20)).columns)).print(table)


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    """``with timed() as t: ...`` then ``t[0]`` is the elapsed seconds."""
    out: list[float] = []
    start = time.perf_counter()
    try:
        yield out
    finally:
        out.append(time.perf_counter() - start)
