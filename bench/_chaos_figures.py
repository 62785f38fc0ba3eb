"""What a chaos run records and the figures drawn from it (``bench/_chaos.py``): every
request's start, end, success and error kind; per killed role the write stall, each proxy's
read unavailability, the recovery times and the errors seen. Pure functions of the record.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from elanus.errors import ElanusError

RAW_SIGNS = re.compile(
    r"nats: |nats\.errors|NoResponders|no responders|Flight returned|grpc_status|"
    r"StatusCode\.|Traceback|_InactiveRpcError|ConnectionClosed|Errno|TimeoutError\(\)",
    re.I,
)
"""Text of NATS, gRPC or Python internals: no error a client sees may be made of it."""
CLIENT_HINT = "cannot reach the Elanus proxy: "
"""The client's own UNAVAILABLE for a proxy that is not there: it quotes gRPC's text after
saying what it means, which is fine (so does its TIMEOUT, ``CLIENT_OWN``)."""
CLIENT_OWN = (CLIENT_HINT.rstrip(": "), "the Elanus proxy did not answer in time")


Samples = dict[str, list[tuple[str, dict[str, str], float]]]
"""Metric family -> its samples (name, labels, value)."""


def scrape_metrics(url: str) -> Samples | str:
    """A process's ``/metrics`` as Prometheus reads it, or why it could not be read."""
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        return {
            family.name: [(s.name, s.labels, s.value) for s in family.samples]
            for family in text_string_to_metric_families(text)
        }
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


def error_kind(exc: BaseException) -> str:
    """``CODE: message`` with numbers, ids and addresses blanked, so alike errors count as one."""
    if isinstance(exc, ElanusError):
        code, text = str(exc.code), exc.message
    else:
        code, text = type(exc).__name__, str(exc)
    for own in CLIENT_OWN:  # the rest is gRPC's text: which address, which errno
        if text.startswith(own):
            return f"{code}: {own}"
    text = re.sub(r"\b[0-9a-f]{8,}\b|\d+(\.\d+)?", "N", text.split("\n")[0])
    return f"{code}: {text[:90]}"


def is_raw(kind: str) -> bool:
    """An error kind whose message is NATS's, gRPC's or Python's own text."""
    message = kind.partition(": ")[2]
    if message.startswith(CLIENT_OWN):
        return False
    return bool(RAW_SIGNS.search(message)) or not kind.split(":")[0].isupper()


@dataclass
class Op:
    stream: str
    """``write``, ``delete`` or ``read@A`` / ``read@B`` (the proxy asked)."""
    t0: float
    t1: float
    ok: bool
    kind: str = ""


@dataclass
class Phase:
    """One killed role: when it was killed, restarted and seen back, and its figures."""

    role: str
    name: str
    t_kill: float
    t_restart: float = 0.0
    t_back: float = 0.0
    t_end: float = 0.0
    channels_moved_s: float | None = None
    exits: list[str] = field(default_factory=list)
    """Other role processes that exited by themselves meanwhile (started again)."""
    figures: dict[str, Any] = field(default_factory=dict)
    scrapes: dict[str, Samples | str] = field(default_factory=dict)
    """Each role process's ``/metrics`` at the phase's end (``scrape_metrics``)."""


class Record:
    """Every request of the run, appended from many threads."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.lock = threading.Lock()

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)

    def of(self, stream: str, t0: float, t1: float) -> list[Op]:
        with self.lock:
            return [o for o in self.ops if o.stream == stream and t0 <= o.t0 <= t1]


def timed(record: Record, stream: str, call: Callable[[], Any]) -> Any:
    """``call()``, recorded under ``stream``; an ElanusError is recorded and re-raised."""
    t0 = time.monotonic()
    try:
        out = call()
    except ElanusError as exc:
        record.add(Op(stream, t0, time.monotonic(), False, error_kind(exc)))
        raise
    record.add(Op(stream, t0, time.monotonic(), True))
    return out


def longest_gap(ops: list[Op], t0: float, t1: float) -> float:
    """Longest time in [t0, t1] without a successful request ending (writes: the stall)."""
    ends = sorted(o.t1 for o in ops if o.ok and t0 <= o.t1 <= t1)
    marks = [t0, *ends, t1]
    return max(b - a for a, b in zip(marks, marks[1:], strict=False))


def unavailable(ops: list[Op]) -> float:
    """Longest span of failing reads: from a failed request's start to the start of the
    next successful one (or the last failure's end), and any single request's length."""
    worst, start = 0.0, None
    for o in sorted(ops, key=lambda o: o.t0):
        if not o.ok:
            start = o.t0 if start is None else start
            worst = max(worst, o.t1 - start)
        else:
            if start is not None:
                worst = max(worst, o.t0 - start)
                start = None
            worst = max(worst, o.t1 - o.t0) if o.t1 - o.t0 > 1.0 else worst
    return worst


def back_after(ops: list[Op], t: float) -> float:
    """Seconds from ``t`` to the first success after the last failure that began after
    ``t`` (0: nothing failed after ``t``; inf: never back)."""
    late = [o for o in ops if not o.ok and o.t0 >= t]
    if not late:
        return 0.0
    last = max(o.t1 for o in late)
    ok = [o.t1 for o in ops if o.ok and o.t0 >= last]
    return min(ok) - t if ok else float("inf")


def phase_figures(phase: Phase, record: Record, labels: list[str]) -> dict[str, Any]:
    t0, t1 = phase.t_kill - 1.0, phase.t_end
    writes = record.of("write", t0, t1)
    out: dict[str, Any] = {
        "write_stall_s": longest_gap(writes, t0, t1),
        "writes_ok": sum(o.ok for o in writes),
        "writes_failed": sum(not o.ok for o in writes),
    }
    errors: Counter[str] = Counter()
    every = writes + record.of("delete", t0, t1)
    for label in labels:
        reads = record.of(f"read@{label}", t0, t1)
        every += reads
        out[f"read_unavailable_s@{label}"] = unavailable(reads)
        out[f"reads_failed@{label}"] = sum(not o.ok for o in reads)
        out[f"slowest_read_s@{label}"] = max((o.t1 - o.t0 for o in reads), default=0.0)
        out[f"back_after_restart_s@{label}"] = back_after(reads, phase.t_restart)
        out[f"reads_ok_after_back@{label}"] = sum(o.ok for o in reads if o.t0 >= phase.t_back)
    errors.update(o.kind for o in every if not o.ok)
    out["back_after_restart_s"] = max(
        back_after(record.of(s, phase.t_restart, t1), phase.t_restart)
        for s in ["write", *(f"read@{label}" for label in labels)]
    )
    out["failing_after_back_s"] = max(
        [o.t1 - phase.t_back for o in every if not o.ok and o.t1 > phase.t_back], default=0.0
    )
    out["errors"] = dict(errors.most_common())
    out["raw_errors"] = sorted(k for k in errors if is_raw(k))
    out["restart_to_back_s"] = phase.t_back - phase.t_restart
    out["channels_moved_s"] = phase.channels_moved_s
    out["exits"] = list(phase.exits)
    return out


def bounds(phase: Phase, tick_s: float) -> list[tuple[str, str, float | None, float]]:
    """(figure, key, value, bound) of the issue's bounds that concern ``phase.role``."""
    f = phase.figures
    reads = [k for k in f if k.startswith("read_unavailable_s@")]
    if phase.role == "querynode":
        return [(f"reads unavailable ({k[-1]})", k, f[k], 1.0) for k in reads]
    if phase.role == "datanode":
        return [("channels moved (from the kill)", "channels_moved_s", f["channels_moved_s"], 2.0)]
    if phase.role == "coord":
        return [
            ("failing after it is back", "failing_after_back_s", f["failing_after_back_s"], 2.0)
        ]
    if phase.role == "proxy":
        return [
            (
                "B's reads unavailable",
                "read_unavailable_s@B",
                f["read_unavailable_s@B"],
                2 * tick_s,
            ),
            ("A serves (from restart)", "back_after_restart_s@A", f["back_after_restart_s@A"], 2.0),
        ]
    if phase.role == "nats":
        return [("resumed (from restart)", "back_after_restart_s", f["back_after_restart_s"], 2.0)]
    return []
