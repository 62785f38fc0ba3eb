"""Host one or more roles in this process: the engine behind ``elanus standalone`` and
``elanus run ROLE``.

Roles never share memory, so hosting them together is only a matter of start order, one
NATS connection and one asyncio loop (``LoopThread``). Teardown must always happen, even
after a failed start: an orphaned ``nats-server`` or a held DuckDB lock would break the next
start, so every successful start step registers its undo on an ``ExitStack``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, cast

import psutil

from elanus import freemem
from elanus.channels.bus import Bus
from elanus.channels.jsretry import is_transient
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.natsauth import DEFAULT_USER, NatsCredentials, redact_url, resolve
from elanus.channels.runtime.loop import LoopThread
from elanus.channels.runtime.metrics import MetricsServer
from elanus.cli.roles import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    RESTARTS_ENV,
    HostedRole,
    TakesTurns,
    role_class,
    role_spec,
)
from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings

log = logging.getLogger(__name__)

NATS_RESTART_TRIES = 5
"""Failed starts of a dead embedded nats-server in a row before the process gives up."""
NATS_CRASHES_PER_MINUTE = 5
"""Deaths of the embedded nats-server within a minute before the process gives up."""


class RoleHost:
    """Start roles in order on one loop and one bus; stop them in reverse, always.

    ``start`` must run on the main thread when NATS is embedded: the child's
    ``PR_SET_PDEATHSIG`` is tied to the thread that forked it.
    """

    def __init__(
        self,
        settings: Settings,
        roles: Sequence[str],
        info_file: str | os.PathLike[str] | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
        connect_timeout: float = 15.0,
    ) -> None:
        for name in roles:
            role_spec(name)  # fail early, before anything starts
        self.settings = settings
        self.role_names = list(roles)
        self.info_file = Path(info_file) if info_file else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.connect_timeout = connect_timeout
        self.nats: EmbeddedNats | None = None
        self.loop: LoopThread | None = None
        self.bus: Bus | None = None
        self.metrics: MetricsServer | None = None
        """This process's ``/metrics``, when ``metrics_port`` is set."""
        self.roles: list[tuple[str, HostedRole]] = []
        self._stack = contextlib.ExitStack()
        self._stop_requested = threading.Event()
        self._starting = False
        self.failure: str | None = None
        """Why the process stops on its own (its log could not come back): one line, for
        the exit message; None after a requested stop."""
        self.restarts: dict[str, int] = {}
        """In-place restarts of each hosted role, beside those of the process (``status``)."""
        self._restart_due: dict[str, float] = {}
        """Roles that stopped themselves, and when they start again (backoff)."""
        self._nats_deaths: list[float] = []
        self.served = False
        """Whether ``serve`` started every role (a failure before that is a failed start)."""
        self.keepers: list[Callable[[], None]] = []
        """Called on the main thread while the host waits (a standalone's serving
        processes started again when they exit)."""
        self.extend: Callable[[RoleHost], None] | None = None
        """Called once the roles serve, before the info file says the host is up (a
        standalone starts its further serving processes)."""
        self.serving_pids: list[int] = []
        """The further serving processes' pids (in the info file)."""

    # -- what others need to reach us ------------------------------------------------------
    @property
    def nats_url(self) -> str | None:
        if self.nats is not None:
            return self.nats.url
        return redact_url(self.settings.nats_url)

    @property
    def flight_uri(self) -> str | None:
        """The proxy's actual uri (its port may have been picked at start), if one is hosted."""
        for name, role in self.roles:
            if name == "proxy":
                return str(getattr(role, "uri", None) or self.settings.flight_uri)
        return None

    @property
    def milvus_port(self) -> int | None:
        """The port of the proxy's Milvus face, if one is hosted and serving."""
        return getattr(self._proxy(), "milvus_port", None)

    @property
    def webui_url(self) -> str | None:
        """The address of the proxy's web console, if one is hosted and serving."""
        return getattr(self._proxy(), "webui_url", None)

    def _proxy(self) -> HostedRole | None:
        return next((role for name, role in self.roles if name == "proxy"), None)

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "nats_url": self.nats_url,
            "nats_pid": self.nats.pid if self.nats else None,
            "flight_uri": self.flight_uri,
            "milvus_port": self.milvus_port,
            "webui_url": self.webui_url,
            "metrics_url": self.metrics.url if self.metrics else None,
            "data_dir": str(self.settings.data_path),
            "roles": [name for name, _ in self.roles],
            "serving_pids": self.serving_pids,
            "started_at": time.time(),
        }

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, on_ready: Callable[[RoleHost], None] | None = None) -> RoleHost:
        """Start every role; ``on_ready`` (the start panel) runs before the info file is
        written, so whoever waits for that file finds the panel printed."""
        self._starting = True
        try:
            self._start(on_ready)
        except BaseException:
            self.stop()
            raise
        finally:
            self._starting = False
        return self

    def _start(self, on_ready: Callable[[RoleHost], None] | None) -> None:
        stack = self._stack
        self._check_info_file()
        url, creds = self._nats()
        if self.settings.metrics_port:
            metrics = self.metrics = MetricsServer(
                self.settings.flight_host, self.settings.metrics_port
            )
            stack.callback(self._undo, "stopping the metrics server", metrics.stop)
        self.loop = LoopThread().start()
        stack.callback(self._undo, "stopping the loop", self.loop.stop)
        bus = Bus(
            url,
            name=f"elanus-{'+'.join(self.role_names)}-{os.getpid()}",
            credentials=creds,
            in_process=self.settings.transport != "nats",
            stream_replicas=self.settings.stream_replicas,
        )
        connecting, since = self.loop.submit(bus.connect()), time.monotonic()
        try:  # the role classes import (CPU, most of a start) while the bus connects
            classes = [role_class(name) for name in self.role_names]
        except BaseException:
            connecting.cancel()
            raise
        self._connect(bus, connecting, since)
        self.bus = bus
        self._undo_on_loop("closing the bus", bus.close)
        for name, cls in zip(self.role_names, classes, strict=True):
            role = self._start_role(name, cls, bus)
            self.roles.append((name, role))
            self._undo_on_loop(f"stopping {name}", role.stop)
        if self.extend is not None:
            self.extend(self)
        if on_ready is not None:
            on_ready(self)
        if self.info_file is not None:
            self._write_info_file(self.info_file)
            stack.callback(self.info_file.unlink, missing_ok=True)
        log.info("hosting %s (nats %s, flight %s)", self.role_names, url, self.flight_uri)

    def _start_role(self, name: str, cls: Callable[..., HostedRole], bus: Bus) -> HostedRole:
        """A started role. A start that meets NATS failing over (a stream electing its
        leader: JetStream requests time out for seconds) is undone and tried again, with a
        new role, until ``start_timeout``: exiting would cost a service manager's restart
        and this process's imports on top of the election."""
        assert self.loop is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            role = cls(self.settings, bus)
            try:
                self._count_restarts(name, role)
                if hasattr(role, "wait_turn"):  # the active coord, or a standby until then
                    turns = cast(TakesTurns, role)
                    turns.on_lease_lost = lambda: self._role_stopped(name)
                    self.loop.call(turns.wait_turn(self._stop_requested), timeout=None)
                self.loop.call(role.start(), timeout=max(1.0, deadline - time.monotonic()))
                return role
            except Exception as exc:
                if self._stop_requested.is_set():
                    raise  # a stop asked for meanwhile (a standby's Ctrl-C): not a failure
                if not start_may_succeed_again(exc) or time.monotonic() >= deadline:
                    # The command prints the error as its one line; the trace of one that is
                    # no ElanusError (a bug, not a setting) is kept for log_level DEBUG.
                    log.debug("starting %s failed", name, exc_info=True)
                    raise
                log.warning("starting %s met NATS failing over (%r); starting again", name, exc)
            try:
                self.loop.call(role.stop(), timeout=10)
            except Exception:  # noqa: BLE001 - half started: what is left goes with the bus
                log.exception("stopping the %s that did not start failed", name)
            time.sleep(0.2)

    def _nats(self) -> tuple[str, NatsCredentials | None]:
        """The NATS URL and credentials of the roles: an external server's from the
        settings (or the URL), else those of an embedded server started here (the settings'
        or, when unset, generated once and kept owner-only in its store dir)."""
        s = self.settings
        if s.nats_url is not None:
            return resolve(s.nats_url, s.nats_user, s.nats_password)
        if threading.current_thread() is not threading.main_thread():
            log.warning("embedded NATS started off the main thread: it will die with it")
        configured = None
        if s.nats_password is not None:
            configured = NatsCredentials(s.nats_user or DEFAULT_USER, s.nats_password)
        self.nats = EmbeddedNats(
            s.nats_store_path, port=s.nats_port, credentials=configured, user=s.nats_user
        )
        self._stack.callback(self._undo, "stopping nats-server", self.nats.stop)
        self.nats.start()
        return self.nats.url, self.nats.credentials

    def _connect(self, bus: Bus, future: concurrent.futures.Future[Bus], since: float) -> None:
        """Wait for ``bus.connect()`` (``future``, submitted at ``since``) or fail with a
        clear error: an unreachable NATS would be retried forever."""
        try:
            future.result(max(0.0, self.connect_timeout - (time.monotonic() - since)))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"cannot connect to NATS at {bus.url} within {self.connect_timeout:g}s",
            ) from None
        except OSError as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"cannot connect to NATS at {bus.url}: {exc}"
            ) from None

    def _undo(self, what: str, fn: Callable[[], Any]) -> None:
        """One teardown step; a failure is logged so that the next steps still run."""
        started = time.monotonic()
        try:
            fn()
        except Exception:  # noqa: BLE001 - teardown continues whatever one step does
            log.exception("error while %s", what)
        else:
            log.info("%s took %.2fs", what, time.monotonic() - started)

    def _undo_on_loop(self, what: str, coro_fn: Callable[[], Any]) -> None:
        loop = self.loop
        assert loop is not None
        self._stack.callback(
            self._undo, what, lambda: loop.call(coro_fn(), timeout=self.stop_timeout)
        )

    def at_stop(self, what: str, fn: Callable[[], Any]) -> None:
        """Run ``fn`` first at the stop (what was started after the roles, by their host)."""
        self._stack.callback(self._undo, what, fn)

    def stop(self) -> None:
        """Tear down whatever started, in reverse order; safe to call more than once."""
        try:
            self._stack.close()
        except Exception:  # noqa: BLE001 - a failing undo must not hide the others
            log.exception("error during shutdown")
        finally:
            self.roles.clear()
            self.bus = None
            self.metrics = None

    def request_stop(self) -> None:
        self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``request_stop`` (a signal handler calls it); True if it was called.
        Meanwhile keep the embedded nats-server and the roles that stopped themselves
        going (on this thread: the main one, which forked the nats-server)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop_requested.is_set():
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                return False
            self._stop_requested.wait(left)
            if not self._stop_requested.is_set():
                self._keep_nats()
                self._restart_roles()
                for keep in self.keepers:
                    keep()
        return True

    # -- keeping things running ------------------------------------------------------------
    def _count_restarts(self, name: str, role: HostedRole) -> None:
        """Tell ``role`` how often it was started again, by ``cluster up`` (its process)
        and here (in place): its session carries the sum, ``elanus status`` shows it."""
        try:
            by_process = int(os.environ.get(RESTARTS_ENV, "0"))
        except ValueError:
            by_process = 0
        total = by_process + self.restarts.get(name, 0)
        if total and hasattr(role, "restarts"):
            setattr(role, "restarts", total)  # noqa: B010 - not in HostedRole: Role's own

    def _role_stopped(self, name: str) -> None:
        """A role stopped itself (the coord's lease was taken): started again in place
        after a backoff, where it waits its turn (a standby) or serves again."""
        if name in self._restart_due or self._stop_requested.is_set():
            return
        count = self.restarts.get(name, 0)
        delay = min(BACKOFF_FIRST_S * 2**count, BACKOFF_MAX_S)
        log.warning("%s stopped itself: starting it again in %.1fs", name, delay)
        self._restart_due[name] = time.monotonic() + delay

    def _restart_roles(self) -> None:
        for name, due in list(self._restart_due.items()):
            if time.monotonic() < due:
                continue
            del self._restart_due[name]
            self._restart_role(name)

    def _restart_role(self, name: str) -> None:
        assert self.loop is not None and self.bus is not None
        index = next(i for i, (n, _) in enumerate(self.roles) if n == name)
        old = self.roles[index][1]
        try:
            self.loop.call(old.stop(), timeout=self.stop_timeout)
        except Exception:  # noqa: BLE001 - what is left of it goes with the bus
            log.exception("stopping %s before its restart failed", name)
        self.restarts[name] = self.restarts.get(name, 0) + 1
        try:
            role = self._start_role(name, role_class(name), self.bus)
        except Exception as exc:  # noqa: BLE001 - tried again after a longer backoff
            log.error("restarting %s failed: %s", name, exc)
            self._role_stopped(name)
            return
        self.roles[index] = (name, role)
        log.warning("%s started again (restart %d)", name, self.restarts[name])

    def _keep_nats(self) -> None:
        """An embedded nats-server that died is started again on the same store and
        port: the roles' connections find it there and carry on. One that cannot come back
        (or keeps dying) stops this process with ``failure`` set: a service manager can
        act on an exit, not on a process that lingers unable to serve."""
        nats = self.nats
        if nats is None or nats.proc is None or nats.proc.poll() is None:
            return
        code, pid = nats.proc.returncode, nats.proc.pid
        now = time.monotonic()
        self._nats_deaths = [t for t in self._nats_deaths if now - t < 60] + [now]
        log.error("nats-server (pid %d) exited with %s: starting it again", pid, code)
        if len(self._nats_deaths) > NATS_CRASHES_PER_MINUTE:
            self._give_up(f"nats-server died {len(self._nats_deaths)} times within a minute")
            return
        delay, error = BACKOFF_FIRST_S, ""
        for _ in range(NATS_RESTART_TRIES):
            nats.proc = None
            try:
                nats.start(timeout=10)
            except Exception as exc:  # noqa: BLE001 - tried again, then given up on
                error = " ".join(str(exc).split())[:300]
                log.error("starting nats-server again failed: %s", error)
                if self._stop_requested.wait(delay):
                    return
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            log.warning("nats-server started again (pid %s) in %.1fs", nats.pid,
                        time.monotonic() - now)  # fmt: skip
            if self.info_file is not None and self.info_file.exists():
                self._write_info_file(self.info_file)
            return
        self._give_up(f"nats-server could not be started again ({error})")

    def _give_up(self, why: str) -> None:
        log.critical("%s: stopping", why)
        self.failure = why
        self._stop_requested.set()

    def serve(self, on_ready: Callable[[RoleHost], None] | None = None) -> None:
        """Start, run until SIGINT/SIGTERM (or a ``failure``: raised once stopped), stop.
        Call from the main thread."""
        freemem.limit_arenas()  # before the roles' threads start
        freemem.use_system_pool()
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            try:
                self.start(on_ready)
            except Exception:
                if not self._stop_requested.is_set():
                    raise
                log.info("stopped while starting")  # Ctrl-C: a clean stop, not a failure
                return
            self.served = True
            self.wait()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.failure is not None:  # one line on stderr, exit 1 (``cli/main.py``)
            raise ElanusError(ErrorCode.UNAVAILABLE, self.failure)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A signal during start only asks for a stop once start is done (start steps have
        # their own timeouts); a second one while still starting aborts the start.
        if self._starting and self._stop_requested.is_set():
            raise KeyboardInterrupt
        log.info("received %s, shutting down", signal.Signals(signum).name)
        self._stop_requested.set()

    def __enter__(self) -> RoleHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the info file ---------------------------------------------------------------------
    def _check_info_file(self) -> None:
        """Refuse a data dir another live standalone is using (DuckDB would fail later)."""
        if self.info_file is None or not self.info_file.is_file():
            return
        try:
            pid = int(json.loads(self.info_file.read_text())["pid"])
            proc = psutil.Process(pid)
            alive = (
                pid != os.getpid()
                and proc.status() != psutil.STATUS_ZOMBIE
                and any("elanus" in part for part in proc.cmdline())
            )
        except (ValueError, KeyError, TypeError, OSError, psutil.Error):
            alive = False
        if alive:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                f"data dir {self.settings.data_path} is in use by elanus pid {pid} "
                f"(see {self.info_file})",
            )

    def _write_info_file(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.info(), indent=2) + "\n")
        tmp.replace(path)


def start_may_succeed_again(exc: BaseException) -> bool:
    """A NATS request that timed out or found no responder (or an error a role raised for
    one): what a NATS server's death does for seconds. Not a storage or settings error:
    a missing bucket fails the start at once."""
    cause: BaseException | None = exc
    while cause is not None:
        if is_transient(cause):
            return True
        suppressed = cause.__suppress_context__
        cause = cause.__cause__ or (None if suppressed else cause.__context__)
    return False
