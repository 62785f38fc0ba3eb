"""``elanus cluster up``: a complete cluster on one machine, every role its own process.

N nats-servers in one JetStream cluster (``channels/nats_cluster.py``), then a coord and a
standby coord, data nodes, query nodes, index nodes and proxies, each an ``elanus run ROLE``
child with its own data dir under ``DIR`` and its log in ``DIR/logs``. The roles share
segments through one storage directory, ``DIR/storage``: the only thing they share besides
NATS. Ctrl-C or SIGTERM stops the children, roles in reverse start order then NATS, each by
the pid we started; nothing is removed, so ``cluster up`` on the same DIR carries on. The
children die with us even after kill -9 (``PR_SET_PDEATHSIG``) and sit in process groups
of their own, so a terminal's Ctrl-C reaches only this process, which stops them in order.
A role process that exits while the cluster runs is started again after a backoff that
doubles with each exit in a row; its session carries the count (``elanus status``).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import RenderableType

from elanus.channels.nats_cluster import NatsCluster
from elanus.channels.nats_server import die_with_parent, free_port, terminate
from elanus.cli import preflight
from elanus.cli.context import CliState
from elanus.cli.output import console, table
from elanus.cli.roles import RESTARTED, RESTARTS_ENV, Exited, keep_step
from elanus.errors import ElanusError, ErrorCode

if TYPE_CHECKING:
    from elanus.ops.replies import Session

cluster_app = typer.Typer(help="Run a whole cluster on this machine.", no_args_is_help=True)

START_ORDER = ("coord", "datanode", "querynode", "indexnode", "proxy")


@dataclass
class Child:
    role: str
    index: int
    data_dir: Path
    log_path: Path
    args: list[str]
    uri: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    metrics_url: str | None = None
    milvus_port: int = 0
    """The port of a proxy's Milvus face (0: off)."""
    restarts: int = 0
    """How often ``keep_running`` started the process again."""
    due: float | None = None
    """When an exited process starts again (monotonic); None while it runs."""
    started: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass
class LocalCluster:
    """The processes of ``cluster up``; ``start`` and ``stop`` are usable from tests."""

    root: Path
    nats: int = 3
    proxies: int = 1
    datanodes: int = 1
    querynodes: int = 1
    indexnodes: int = 1
    standby: bool = True
    """A second coord, waiting on the lease: it takes over when the first one dies."""
    stream_replicas: int | None = None
    """Replicas of the streams; default: 3 with three or more NATS servers, else 1."""
    port: int = 0
    """Flight port of the first proxy (the others take the next ones); 0: free ports."""
    milvus_port: int = 0
    """Port of the first proxy's Milvus face (the others take the next ones); 0: off."""
    env: dict[str, str] = field(default_factory=dict)
    """More environment for the roles (settings as ``ELANUS_*`` variables)."""
    metrics: bool = False
    """Every role process serves ``/metrics`` on a free port of its own (``metrics_url``),
    kept across its restarts."""
    cluster: NatsCluster | None = None
    children: list[Child] = field(default_factory=list)

    @property
    def replicas(self) -> int:
        return self.stream_replicas or (3 if self.nats >= 3 else 1)

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def uris(self) -> list[str]:
        return [c.uri for c in self.children if c.uri]

    @property
    def pids(self) -> list[int]:
        """Every child's pid, nats-servers included."""
        kids = [c.proc.pid for c in self.children if c.proc is not None]
        return (self.cluster.pids if self.cluster else []) + kids

    def start(self, timeout: float = 90.0) -> LocalCluster:
        if self.replicas > self.nats:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                f"stream_replicas={self.replicas} needs at least as many NATS servers "
                f"(--nats {self.nats})",
            )
        self.check_start()
        before = preflight.snapshot(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.cluster = NatsCluster(self.root / "nats", self.nats).start()
            deadline = time.monotonic() + timeout
            counts = {
                "coord": 2 if self.standby else 1,
                "datanode": self.datanodes,
                "querynode": self.querynodes,
                "indexnode": self.indexnodes,
                "proxy": self.proxies,
            }
            for role in START_ORDER:
                for i in range(counts[role]):
                    self._spawn(role, i)
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            preflight.leave_as_found(self.root, before)
            raise
        return self

    def check_start(self) -> None:
        """What would fail the start, refused before anything is made (``preflight``):
        the root directory, and the proxies' Flight and Milvus ports."""
        preflight.check_directory(self.root, "--data-dir")
        ports = []
        for i in range(self.proxies):
            if self.port:
                ports.append(("flight_port", "127.0.0.1", self.port + i))
            if self.milvus_port:
                ports.append(("milvus_port", "127.0.0.1", self.milvus_port + i))
        preflight.check_ports(ports)

    def _spawn(self, role: str, index: int) -> None:
        assert self.cluster is not None
        data_dir = self.root / f"{role}-{index}"
        args = ["run", role, "--nats", self.cluster.url, "--data-dir", str(data_dir)]
        args += ["--storage", str(self.storage)]
        uri, milvus = None, 0
        if role == "proxy":
            port = self.port + index if self.port else free_port()
            milvus = self.milvus_port + index if self.milvus_port else 0
            args += ["--port", str(port), "--milvus-port", str(milvus)]
            uri = f"grpc://127.0.0.1:{port}"
        metrics_url = None
        if self.metrics:
            metrics_port = free_port()
            args += ["--metrics-port", str(metrics_port)]
            metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        log_path = self.root / "logs" / f"{role}-{index}.log"
        child = Child(
            role, index, data_dir, log_path, args, uri, metrics_url=metrics_url, milvus_port=milvus
        )
        self.children.append(child)
        self.launch(child)

    def launch(self, child: Child) -> None:
        """Start ``child``'s process (again, after it died: same args, data dir and log)."""
        assert self.cluster is not None
        child.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, **self.cluster.client_env()}
        env["ELANUS_STREAM_REPLICAS"] = str(self.replicas)
        env[RESTARTS_ENV] = str(child.restarts)
        child.started = time.monotonic()
        with child.log_path.open("ab") as log:
            child.proc = subprocess.Popen(
                [sys.executable, "-m", "elanus.cli", *child.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
                process_group=0,
            )

    def _wait_ready(self, deadline: float) -> None:
        """Every proxy answers and lists every role's session (a standby coord has none)."""
        from elanus.client.client import Client  # the SDK: not loaded by ``elanus run``

        expected = len(self.children) - (1 if self.standby else 0)
        for uri in self.uris:
            while True:
                self._check_alive()
                try:  # the client probes the proxy as it connects: not up yet is UNAVAILABLE
                    with Client(uri, timeout=2) as client:
                        sessions = client.list_sessions()
                    if len(sessions) >= expected and self._faces_up(sessions):
                        break
                except ElanusError:
                    pass
                if time.monotonic() > deadline:
                    raise ElanusError(
                        ErrorCode.TIMEOUT,
                        f"the cluster did not come up in time (logs in {self.root / 'logs'})",
                    )
                time.sleep(0.2)

    def _faces_up(self, sessions: list[Session]) -> bool:
        """Every proxy's Milvus face serves, when there is one: it binds its port after
        Flight answers, and says so in the proxy's session."""
        faces = [(s.get("meta") or {}).get("milvus_port") for s in sessions if s["role"] == "proxy"]
        return not self.milvus_port or all(faces)

    def _check_alive(self) -> None:
        """A role process that exits while the cluster starts fails the start, with the
        error line it printed (every ``elanus run`` failure is one)."""
        for c in self.children:
            if c.proc is not None and c.proc.poll() is not None:
                lines = c.log_path.read_text(errors="replace").splitlines()
                said = [line for line in lines if line.startswith("error: [")]
                why = said[-1].removeprefix("error: ") if said else "no error line"
                raise ElanusError(
                    ErrorCode.UNAVAILABLE,
                    f"{c.name} exited with {c.proc.returncode}: {why} (log {c.log_path})",
                )

    def keep_running(self) -> list[str]:
        """Start again each role process that exited, once its backoff is over (0.2 s,
        doubling up to 5 s while it keeps exiting within a minute of its start); the
        lines to tell the operator."""
        said = []
        now = time.monotonic()
        for c in self.children:
            seen = keep_step(c, now, functools.partial(self.launch, c))
            if isinstance(seen, Exited):
                said.append(f"{c.name} exited with {seen.returncode} (log {c.log_path}); "
                            f"starting it again in {seen.delay:.1f}s")  # fmt: skip
            elif seen == RESTARTED:
                assert c.proc is not None
                said.append(f"{c.name} started again (pid {c.proc.pid}, restart {c.restarts})")
        return said

    def stop(self) -> None:
        """Stop the roles (proxies first, coord last), then NATS; each by its own pid."""
        for child in reversed(self.children):
            proc, child.proc = child.proc, None
            terminate(proc, timeout=20.0)
        if self.cluster is not None:
            self.cluster.stop()

    def table(self) -> RenderableType:
        """Every process with its endpoints (a proxy's Flight uri and Milvus port, each
        role's metrics), data dir and log."""
        assert self.cluster is not None
        rows: list[tuple[str, object, str, str, str]] = [
            (f"nats-{i}", s.pid, s.url, "", str(s.store_dir))
            for i, s in enumerate(self.cluster.servers)
        ]
        for c in self.children:
            endpoint = c.uri or ""
            if c.role == "proxy":
                endpoint += (
                    f"\nmilvus: 127.0.0.1:{c.milvus_port}" if c.milvus_port else "\nmilvus: off"
                )
            pid = c.proc.pid if c.proc else "-"
            rows.append(
                (c.name, pid, endpoint, c.metrics_url or "off", f"{c.data_dir}\n{c.log_path}")
            )
        columns = ("process", "pid", "endpoint", "metrics", "data dir / log")
        return table(columns, rows, title=f"elanus cluster ({self.root})")


def _on_signal(stop: threading.Event) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return handler


Count = Annotated[int, typer.Option(min=0, help="How many of this role.")]


@cluster_app.command("up")
def up(
    ctx: typer.Context,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Root of every process's data dir and log.")
    ] = Path("./elanus-cluster"),
    nats: Annotated[int, typer.Option("--nats", min=1, help="NATS servers.")] = 3,
    proxies: Annotated[int, typer.Option("--proxies", min=1, help="Proxies.")] = 1,
    datanodes: Annotated[int, typer.Option("--datanodes", min=1, help="Data nodes.")] = 1,
    querynodes: Annotated[int, typer.Option("--querynodes", min=1, help="Query nodes.")] = 1,
    indexnodes: Annotated[int, typer.Option("--indexnodes", min=0, help="Index nodes.")] = 1,
    standby: Annotated[
        bool, typer.Option("--standby/--no-standby", help="A second coord, as a standby.")
    ] = True,
    stream_replicas: Annotated[
        int | None,
        typer.Option(
            "--stream-replicas", min=1, max=5, help="Replicas of each stream (default 3, or 1)."
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", help="First proxy's Flight port; the others follow.")
    ] = 8815,
    milvus_port: Annotated[
        int, typer.Option("--milvus-port", help="First proxy's Milvus port (0: off).")
    ] = 19530,
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics/--no-metrics", help="Every process serves /metrics on a free port."
        ),
    ] = False,
) -> None:
    """Start NATS servers, a coord, data, query and index nodes and proxies, each its own
    process; print the endpoints; stop them all on Ctrl-C."""
    CliState.of(ctx).settings()  # the roles' settings (elanus.toml, ELANUS_*): refused now
    stop = threading.Event()
    previous = {s: signal.signal(s, _on_signal(stop)) for s in (signal.SIGINT, signal.SIGTERM)}
    cluster = LocalCluster(
        data_dir.expanduser().resolve(),
        nats=nats,
        proxies=proxies,
        datanodes=datanodes,
        querynodes=querynodes,
        indexnodes=indexnodes,
        standby=standby,
        stream_replicas=stream_replicas,
        port=port,
        milvus_port=milvus_port,
        metrics=metrics,
    )
    try:
        cluster.start()
        console.print(cluster.table())
        console.print(
            f"nats_url = {cluster.cluster.url if cluster.cluster else ''}\n"
            f"clients: elanus --uri {cluster.uris[0]} status   (Ctrl-C stops everything)"
        )
        while not stop.wait(0.1):
            for line in cluster.keep_running():
                console.print(line)
    finally:
        console.print("stopping the cluster ...")
        cluster.stop()
        for s, h in previous.items():
            signal.signal(s, h)
