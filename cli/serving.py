"""A standalone's further serving processes (setting ``serving_processes``).

One Python interpreter answers about one core's worth of requests: every search's parsing,
planning, fan-out and reduce holds its GIL (docs/process-model.md has the measurement).
So a standalone asked for P serving processes starts P - 1 more, each hosting a proxy and
a query node (``elanus serve-member``):

- they share the first process's Milvus port (``SO_REUSEPORT``: the kernel spreads the
  connections) and serve Flight on ports of their own;
- their query nodes and the first one's form one node group (``meta/nodegroups.py``):
  each holds every replica placed on the group, so a request is answered in the process
  that received it;
- they reach the coord, the datanode and the log through the first process's NATS.

The first process starts them once its own roles serve, waits until each proxy has
registered, and starts one that exits again after a backoff (as ``cluster up`` does).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from elanus.channels.nats_server import die_with_parent, terminate
from elanus.channels.runtime.sessions import list_sessions, purge_sessions_of
from elanus.cli.host import RoleHost
from elanus.cli.roles import RESTARTS_ENV, Exited, keep_step
from elanus.errors import ElanusError, ErrorCode
from elanus.settings import ENV_PREFIX, Settings

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 90.0


def group_name(settings: Settings) -> str:
    """The node group of a standalone's serving processes: one per data dir, the same
    after a restart (its recorded replicas name it)."""
    digest = hashlib.sha256(str(settings.data_path).encode()).hexdigest()[:8]
    return f"grp-{digest}"


@dataclass
class Member:
    index: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    due: float | None = None
    started: float = 0.0


class ServingProcesses:
    """The further serving processes of the standalone ``host`` (its settings name the
    group); started by ``start``, kept running by ``keep``, stopped by ``stop``."""

    def __init__(self, host: RoleHost) -> None:
        self.host = host
        s = host.settings
        self.members = [
            Member(i, s.data_path / "logs" / f"serving-{i}.log")
            for i in range(1, s.serving_processes)
        ]

    def _env(self, m: Member) -> dict[str, str]:
        """Every setting of the first process, but the ports of its own and the group's
        place: a member connects to the first process's NATS with its credentials."""
        s, host = self.host.settings, self.host
        assert host.bus is not None
        values = {k: v for k, v in s.to_dict().items() if v is not None}
        values.update(
            nats_url=host.bus.url,
            flight_port=0,
            metrics_port=0,
            webui_port=0,
            milvus_port=host.milvus_port or 0,
            serving_processes=1,
            serving_index=m.index,
        )
        creds = host.bus.credentials
        if creds is not None:
            values.update(nats_user=creds.user, nats_password=creds.password)
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        env.update({ENV_PREFIX + k.upper(): str(v) for k, v in values.items()})
        env[RESTARTS_ENV] = str(m.restarts)
        return env

    def _launch(self, m: Member) -> None:
        m.log_path.parent.mkdir(parents=True, exist_ok=True)
        m.started = time.monotonic()
        with m.log_path.open("ab") as out:
            m.proc = subprocess.Popen(
                [sys.executable, "-m", "elanus.cli", "serve-member"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(m),
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
                process_group=0,
            )
        log.info("serving process %d started (pid %d)", m.index, m.proc.pid)
        self.host.serving_pids = self.pids

    @classmethod
    def start_for(cls, host: RoleHost) -> None:
        """Start ``host``'s further serving processes; stopped before its roles are, kept
        running while it waits."""
        members = cls(host)
        host.at_stop("stopping the serving processes", members.stop)
        members.start()
        host.keepers.append(members.keep)

    def start(self) -> None:
        """Start every member and wait until each one's proxy serves (a member that exits
        meanwhile fails the start, with the last error line of its log)."""
        for m in self.members:
            self._launch(m)
        deadline = time.monotonic() + READY_TIMEOUT_S
        wanted = len(self.members) + 1
        while self._proxies_up() < wanted:
            for m in self.members:
                if m.proc is not None and m.proc.poll() is not None:
                    raise ElanusError(
                        ErrorCode.UNAVAILABLE,
                        f"serving process {m.index} exited with {m.proc.returncode}: "
                        f"{_last_error(m.log_path)} (log {m.log_path})",
                    )
            if time.monotonic() > deadline:
                raise ElanusError(
                    ErrorCode.TIMEOUT,
                    f"the serving processes did not come up in {READY_TIMEOUT_S:g}s "
                    f"(logs in {self.members[0].log_path.parent})",
                )
            time.sleep(0.2)

    def _proxies_up(self) -> int:
        """Proxies whose faces serve (a proxy's session says so once they are bound)."""
        host = self.host
        assert host.loop is not None and host.bus is not None
        sessions = host.loop.call(list_sessions(host.bus, host.settings.session_ttl_s))
        milvus = bool(host.milvus_port)
        return sum(
            1 for s in sessions if s.role == "proxy" and (not milvus or s.meta.get("milvus_port"))
        )

    def keep(self) -> None:
        """Start again each member that exited, after its backoff (0.2 s, doubling up to
        5 s while it keeps exiting within a minute of its start)."""
        now = time.monotonic()
        for m in self.members:
            pid = m.proc.pid if m.proc is not None else 0
            seen = keep_step(m, now, functools.partial(self._launch, m))
            if isinstance(seen, Exited):
                log.warning(
                    "serving process %d exited with %s (log %s): starting it again in %.1fs",
                    m.index, seen.returncode, m.log_path, seen.delay,
                )  # fmt: skip
                self._forget(pid)

    def _forget(self, pid: int) -> None:
        """Take the exited process's sessions out now: the coord stops waiting for its
        proxy's time ticks (Strong reads) and drops its query node from the group at its
        next poll, not a session TTL later. Best effort: the TTL still ends them."""
        host = self.host
        if host.loop is None or host.bus is None:
            return
        try:
            gone = host.loop.call(
                purge_sessions_of(host.bus, pid, host.settings.session_ttl_s), timeout=2.0
            )
        except Exception as exc:  # noqa: BLE001 - the sessions expire by themselves
            log.warning("sessions of the exited serving process %d not purged: %r", pid, exc)
            return
        log.info("sessions of the exited serving process %d purged: %s", pid, ", ".join(gone))

    def stop(self) -> None:
        for m in reversed(self.members):
            proc, m.proc = m.proc, None
            terminate(proc, timeout=20.0)

    @property
    def pids(self) -> list[int]:
        return [m.proc.pid for m in self.members if m.proc is not None]


def _last_error(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    said = [line for line in lines if line.startswith("error: [")]
    return said[-1].removeprefix("error: ") if said else "no error line"
