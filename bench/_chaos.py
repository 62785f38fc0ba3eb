"""The chaos harness (issue 22): a multi-process cluster under writes and Strong reads, one
role at a time killed with SIGKILL, measured, restarted; then every acknowledged row and
delete checked. Used by ``bench/chaos.py`` (the figures) and ``tests/test_chaos_cluster.py``
(the guarantees, with short phases).

The cluster is ``elanus cluster up``'s (``cli/cluster.py``): every role an
``elanus run ROLE`` process of its own (in a process group of its own, dying with us),
around N clustered nats-servers. One writer inserts batches of fresh ids through proxy A
(through proxy B while A cannot be reached, as a client behind a load balancer would) and
deletes some acknowledged ids; one reader per proxy alternates a Strong search and a Strong
``count(*)`` every ``read_interval_s``. Every request is recorded (start, end, success,
error kind), so each phase's figures are computed afterwards from the record.

Not a benchmark itself (``make bench`` skips ``bench/_*.py``).
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chaos_figures import (  # noqa: E402
    CLIENT_HINT,
    Phase,
    Record,
    back_after,
    error_kind,
    phase_figures,
    scrape_metrics,
    timed,
)

from elanus.cli.cluster import Child, LocalCluster  # noqa: E402
from elanus.client.client import Client  # noqa: E402
from elanus.errors import ElanusError  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402

ROLES = ("querynode", "datanode", "coord", "proxy", "nats")
"""What ``run_chaos`` can kill, in its default order."""

COLLECTION = "chaos"
RECOVERY_CAP_S = 60.0
"""How long a phase waits, after the restart, for every stream to succeed again."""
STRONG: dict[str, Any] = {"consistency_level": "Strong"}


@dataclass
class Config:
    root: Path
    nats: int = 3
    proxies: int = 2
    datanodes: int = 2
    querynodes: int = 3
    replica_number: int = 2
    shards: int = 2
    dim: int = 16
    batch: int = 200
    write_pause_s: float = 0.05
    read_interval_s: float = 0.2
    request_timeout_s: float = 15.0
    """Client timeout of each write and read: a request stuck this long shows as a stall."""
    env: dict[str, str] = field(default_factory=dict)
    """More settings for every role (``ELANUS_*``), e.g. a shorter session TTL."""
    settle_s: float = 3.0
    """A phase watches at least this long after the killed role is back."""
    metrics: bool = False
    """Every role serves ``/metrics``; each phase ends with a scrape of every process
    (``Phase.scrapes``)."""


class Connection:
    """A client of one proxy, opened again after an error (a restarted proxy is a new
    server: the old channel may sit in gRPC's reconnect backoff)."""

    def __init__(self, uri: str, timeout: float) -> None:
        self.uri, self.timeout = uri, timeout
        self.client: Client | None = None

    def get(self) -> Client:
        if self.client is None:
            self.client = Client(self.uri, timeout=self.timeout, retry_deadline_s=0)
        return self.client

    def reset(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()


class Writer(threading.Thread):
    """Inserts batches of fresh ids; deletes a few acknowledged ids after every other batch.

    ``acked``: ids whose insert was acknowledged; ``ambiguous``: ids of inserts that failed
    (they may be stored, once); ``deleted``: ids whose delete was acknowledged; ``touched``:
    every id a delete was sent for (acknowledged or not), which is no longer expected."""

    def __init__(self, cfg: Config, uris: list[str], record: Record) -> None:
        super().__init__(daemon=True, name="chaos-writer")
        self.cfg, self.record = cfg, record
        self.conns = [Connection(u, cfg.request_timeout_s) for u in uris]
        self.acked: list[int] = []
        self.ambiguous: set[int] = set()
        self.deleted: set[int] = set()
        self.touched: set[int] = set()
        self.next_id = 0
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.lock = threading.Lock()
        self.rng = np.random.default_rng(22)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            if self.paused.is_set():
                self.idle.set()
                time.sleep(0.02)
                continue
            self.idle.clear()
            self._insert()
            n += 1
            if n % 2 == 0 and len(self.acked) > 4 * self.cfg.batch:
                self._delete()
            time.sleep(self.cfg.write_pause_s)
        self.idle.set()

    def _send(self, stream: str, call: Callable[[Client], Any]) -> Any:
        """Through proxy A, or B when A cannot be reached at all (nothing was sent)."""
        return timed(self.record, stream, lambda: self._through(call))

    def _through(self, call: Callable[[Client], Any]) -> Any:
        for i, conn in enumerate(self.conns):
            try:
                return call(conn.get())
            except ElanusError as exc:
                conn.reset()
                if not exc.message.startswith(CLIENT_HINT) or i == len(self.conns) - 1:
                    raise
        raise AssertionError("unreachable")

    def _insert(self) -> None:
        b = self.cfg.batch
        with self.lock:
            ids = np.arange(self.next_id, self.next_id + b, dtype=np.int64)
            self.next_id += b
        data = {"id": ids, "vector": self.rng.random((b, self.cfg.dim), dtype=np.float32)}
        try:
            self._send("write", lambda c: c.insert(COLLECTION, data))
        except ElanusError:
            with self.lock:
                self.ambiguous.update(ids.tolist())
            time.sleep(0.1)
            return
        with self.lock:
            self.acked.extend(ids.tolist())

    def _delete(self) -> None:
        with self.lock:
            pool = self.acked[: -2 * self.cfg.batch]  # not the newest batches
            picks = [int(i) for i in self.rng.choice(pool, 5, replace=False)]
            picks = [i for i in picks if i not in self.touched]
            self.touched.update(picks)
        if not picks:
            return
        try:
            self._send("delete", lambda c: c.delete(COLLECTION, ids=picks))
        except ElanusError:
            return
        with self.lock:
            self.deleted.update(picks)

    def pause(self, timeout: float = 60.0) -> None:
        self.idle.clear()
        self.paused.set()
        if not self.idle.wait(timeout):
            raise TimeoutError("the writer did not finish its request")

    def resume(self) -> None:
        self.paused.clear()

    def close(self) -> None:
        self.stop.set()
        self.join(self.cfg.request_timeout_s * 2 + 5)
        for c in self.conns:
            c.reset()


class Reader(threading.Thread):
    """Strong ``search`` and ``count(*)`` in turn through one proxy, every interval."""

    def __init__(self, cfg: Config, uri: str, label: str, record: Record) -> None:
        super().__init__(daemon=True, name=f"chaos-reader-{label}")
        self.cfg, self.record, self.stream = cfg, record, f"read@{label}"
        self.conn = Connection(uri, cfg.request_timeout_s)
        self.stop = threading.Event()

    def run(self) -> None:
        query = [[0.5] * self.cfg.dim]
        n = 0
        while not self.stop.is_set():
            t0 = time.monotonic()

            def read(c: Client, i: int = n) -> Any:
                if i % 2:
                    return c.search(COLLECTION, query, limit=3, consistency_level="Strong")
                return c.query(COLLECTION, "", ["count(*)"], consistency_level="Strong")

            try:
                timed(self.record, self.stream, lambda: read(self.conn.get()))
            except ElanusError:
                self.conn.reset()
            n += 1
            self.stop.wait(max(0.0, self.cfg.read_interval_s - (time.monotonic() - t0)))

    def close(self) -> None:
        self.stop.set()
        self.join(self.cfg.request_timeout_s + 5)
        self.conn.reset()


# -- the run ------------------------------------------------------------------------------------
class ChaosCluster:
    """The cluster, the writer and the readers; ``kill``/``restart`` one role at a time."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.cluster = LocalCluster(
            cfg.root,
            nats=cfg.nats,
            proxies=cfg.proxies,
            datanodes=cfg.datanodes,
            querynodes=cfg.querynodes,
            indexnodes=0,  # no index: brute-force searches need no index node
            standby=False,
            metrics=cfg.metrics,
            env={"ELANUS_LOG_LEVEL": "INFO", "ELANUS_MILVUS_PORT": "0", **cfg.env},
        )
        self.record = Record()
        self.labels = [chr(ord("A") + i) for i in range(cfg.proxies)]
        self.writer: Writer | None = None
        self._down: Child | None = None
        """The role process killed and not started again yet."""
        self.readers: list[Reader] = []

    def start(self, timeout: float = 120.0) -> ChaosCluster:
        self.cluster.start(timeout)
        uris = self.cluster.uris
        with Client(uris[0], timeout=120) as admin:
            admin.create_collection(
                COLLECTION, schema=quick_schema(self.cfg.dim), num_shards=self.cfg.shards
            )
            admin.load_collection(COLLECTION, replica_number=self.cfg.replica_number)
        self.writer = Writer(self.cfg, uris, self.record)
        self.readers = [
            Reader(self.cfg, u, lb, self.record) for u, lb in zip(uris, self.labels, strict=True)
        ]
        for t in [self.writer, *self.readers]:
            t.start()
        return self

    def child(self, role: str) -> Child:
        return next(c for c in self.cluster.children if c.role == role)

    def admin(self, timeout: float = 60) -> Client:
        """A client of a proxy that answers (after a phase, any)."""
        last: Exception | None = None
        for _ in range(100):
            for uri in self.cluster.uris:
                try:
                    return Client(uri, timeout=timeout)
                except ElanusError as exc:
                    last = exc
            time.sleep(0.2)
        raise TimeoutError(f"no proxy answers: {last}")

    def sessions(self) -> list[dict[str, Any]]:
        for uri in reversed(self.cluster.uris):  # B first: A may be the one killed
            try:
                with Client(uri, timeout=5) as c:
                    return c.list_sessions()
            except ElanusError:
                continue
        return []

    def kill(self, role: str) -> tuple[str, Callable[[], None], Callable[[], bool]]:
        """SIGKILL one process of ``role``; returns its name, how to restart it and how to
        tell it is back."""
        if role == "nats":
            assert self.cluster.cluster is not None
            nats = self.cluster.cluster
            nats.kill(0)
            return "nats-0", lambda: nats.restart(0, timeout=30), self._nats_back
        child = self._down = self.child(role)
        assert child.proc is not None
        os.killpg(child.proc.pid, signal.SIGKILL)
        child.proc.wait(10)
        return child.name, lambda: self.cluster.launch(child), lambda: self._role_back(child)

    def _channels(self, which: Callable[[dict[str, Any]], bool]) -> set[str]:
        """The channels the sessions ``which`` picks consume."""
        return {
            ch
            for s in self.sessions()
            if which(s)
            for ch in ((s.get("meta") or {}).get("channels") or {})
        }

    def _role_back(self, child: Child) -> bool:
        if child.proc is None or child.proc.poll() is not None:
            return False  # exited again: _step starts it again
        if child.uri is not None:
            try:
                with Client(child.uri, timeout=2) as c:
                    c.health()
            except ElanusError:
                return False
        return any(s.get("pid") == child.proc.pid for s in self.sessions())

    def _nats_back(self) -> bool:
        assert self.cluster.cluster is not None
        try:
            self.cluster.cluster.wait_jetstream(2.0)
            return True
        except (TimeoutError, OSError):
            return False

    def phase(self, role: str, seconds: float, log: Callable[[str], None]) -> Phase:
        """Kill ``role``, keep it down for 40 % of ``seconds``, restart it, watch until
        ``seconds`` have passed (and ``settle_s`` since it is back) and every stream has
        succeeded again (``RECOVERY_CAP_S`` at most), then check the data."""
        held: set[str] = set()
        pid = 0
        if role == "datanode":
            pid = self.child("datanode").proc.pid  # type: ignore[union-attr]
            held = self._channels(lambda s: s.get("pid") == pid)
        t_kill = time.monotonic()
        name, restart, back = self.kill(role)
        phase = Phase(role, name, t_kill)
        log(f"killed {name}")
        while time.monotonic() < t_kill + 0.4 * seconds:
            if held and phase.channels_moved_s is None:
                others = self._channels(lambda s: s["role"] == "datanode" and s["pid"] != pid)
                if held <= others:
                    phase.channels_moved_s = time.monotonic() - t_kill
            self._step(phase, log)
        phase.t_restart = time.monotonic()
        restart()
        self._down = None
        while not back():
            if time.monotonic() > phase.t_restart + 120:
                raise TimeoutError(f"{name} not back in 120 s")
            self._step(phase, log)
        phase.t_back = time.monotonic()
        log(f"{name} back {phase.t_back - phase.t_restart:.1f} s after its restart")
        settled = max(phase.t_back + self.cfg.settle_s, t_kill + seconds)
        while time.monotonic() < settled or (
            not self.recovered(phase) and time.monotonic() < phase.t_restart + RECOVERY_CAP_S
        ):
            self._step(phase, log)
        log(f"every stream succeeds again {time.monotonic() - phase.t_restart:.1f} s after it")
        phase.t_end = time.monotonic()
        phase.figures = phase_figures(phase, self.record, self.labels)
        if self.cfg.metrics:
            phase.scrapes = {
                c.name: scrape_metrics(c.metrics_url)
                for c in self.cluster.children
                if c.metrics_url is not None
            }
        started = time.monotonic()
        try:
            phase.figures.update(self.check())
            log(f"rows checked in {time.monotonic() - started:.1f} s")
        except (ElanusError, TimeoutError) as exc:  # reported, and the run goes on
            phase.figures["check_error"] = error_kind(exc)
        return phase

    def _step(self, phase: Phase, log: Callable[[str], None]) -> None:
        """A moment of a phase. A role process that exited by itself (a coord that lost
        its lease) is started again, as a service manager would, and noted."""
        for c in self.cluster.children:
            if c is self._down or c.proc is None or c.proc.poll() is None:
                continue
            phase.exits.append(f"{c.name} (exit status {c.proc.returncode})")
            log(f"{c.name} exited by itself ({c.proc.returncode}); started again")
            self.cluster.launch(c)
        time.sleep(0.2)

    def streams(self) -> list[str]:
        return ["write", *(f"read@{label}" for label in self.labels)]

    def recovered(self, phase: Phase) -> bool:
        """Every stream (the writes, each proxy's reads) has succeeded since the role is
        back, after its last failure."""
        now = time.monotonic()
        for stream in self.streams():
            ops = self.record.of(stream, phase.t_restart, now)
            if math.isinf(back_after(ops, phase.t_restart)):
                return False
            if not any(o.ok and o.t0 >= phase.t_back for o in ops):
                return False
        return True

    def check(self) -> dict[str, int]:
        """With the writer paused: every acknowledged row there once, no deleted one."""
        w = self.writer
        assert w is not None
        w.pause()
        try:
            with w.lock:
                expected = set(w.acked) - w.touched
                deleted = set(w.deleted)
                possible = set(w.acked) | w.ambiguous
                top = w.next_id
            with self.admin(timeout=20) as c:
                found: list[int] = []
                for a in range(0, top, 10_000):
                    where = f"id >= {a} and id < {a + 10_000}"
                    rows = retry(lambda: c.query(COLLECTION, where, ["id"], **STRONG))  # noqa: B023
                    found += [int(r["id"]) for r in rows]
                (row,) = retry(lambda: c.query(COLLECTION, "", ["count(*)"], **STRONG))
            distinct = set(found)
            return {
                "rows_acked": len(w.acked),
                "rows_lost": len(expected - distinct),
                "rows_duplicated": max(len(found), int(row["count(*)"])) - len(distinct),
                "deletes_acked": len(deleted),
                "deletes_undone": len(deleted & distinct),
                "rows_never_sent": len(distinct - possible),
            }
        finally:
            w.resume()

    def close(self) -> None:
        """Stop the load, then every process we started (each by its own pid)."""
        try:
            for r in self.readers:
                r.close()
            if self.writer is not None:
                self.writer.close()
        finally:
            self.cluster.stop()


def retry(call: Callable[[], Any], seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except ElanusError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_chaos(
    cfg: Config,
    roles: list[str],
    seconds_per_role: float | Mapping[str, float],
    log: Callable[[str], None] = print,
) -> list[Phase]:
    """Start the cluster and the load, then kill, restart and measure each role in turn.
    Each phase lasts about ``seconds_per_role`` (``ChaosCluster.phase``), or that role's
    entry where it is a mapping (a NATS kill needs longer than a role's)."""
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown roles {sorted(unknown)}; known: {', '.join(ROLES)}")
    cc = ChaosCluster(cfg)
    phases: list[Phase] = []
    try:
        cc.start()
        log(f"cluster up ({', '.join(cc.cluster.uris)}); load running")
        time.sleep(2.0)
        for role in roles:
            seconds = (
                seconds_per_role[role]
                if isinstance(seconds_per_role, Mapping)
                else seconds_per_role
            )
            phases.append(cc.phase(role, seconds, log))
    finally:
        cc.close()
    return phases
