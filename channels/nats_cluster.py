"""N ``nats-server`` children in one JetStream cluster on this machine (``elanus cluster up``
and the tests of the replicated log).

Each server is an ``EmbeddedNats`` with its own store dir, client port, ``server_name``
and a cluster port; every server lists every other's cluster port as a route, so the mesh
forms whichever starts first. They share one user and password (kept owner-only in the
cluster's root dir, as a standalone's server keeps its own). Routes carry no credentials
and listen on ``host`` only: fine on loopback, not a production layout (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
from nats.js.errors import APIError

from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.channels.natsauth import NatsCredentials, check_for_config, stored_credentials

CLUSTER_NAME = "elanus"
ATTEMPT_S = 1.0
"""How long one JetStream readiness request waits: one sent before the servers' routes
are up goes unanswered, and the JetStream default (5 s) would be waited out for it."""
PORT_ATTEMPTS = 3


def cluster_config(name: str, server_name: str, host: str, port: int, routes: list[int]) -> str:
    """The ``server_name`` and ``cluster`` block of one server's config file."""
    listed = ", ".join(f'"nats://{host}:{p}"' for p in routes)
    return (
        f'server_name: "{server_name}"\n'
        "cluster {\n"
        f'  name: "{name}"\n'
        f'  listen: "{host}:{port}"\n'
        f"  routes: [{listed}]\n"
        "}\n"
    )


class NatsCluster:
    """Start, wait for, kill, restart and stop ``size`` clustered nats-servers."""

    def __init__(
        self,
        root: str | Path,
        size: int = 3,
        host: str = "127.0.0.1",
        ports: list[int] | None = None,
        credentials: NatsCredentials | None = None,
        name: str = CLUSTER_NAME,
    ) -> None:
        if size < 1:
            raise ValueError("a NATS cluster needs at least one server")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.credentials = check_for_config(credentials or stored_credentials(self.root))
        self.size, self.host, self.name, self._fixed_ports = size, host, name, ports
        self.servers = self._servers()

    def _servers(self) -> list[EmbeddedNats]:
        """The servers' configs, on the given client ports or free ones (routes: free)."""
        host, name, size = self.host, self.name, self.size
        client_ports = self._fixed_ports or [free_port(host) for _ in range(size)]
        route_ports = [free_port(host) for _ in range(size)]
        servers = [
            EmbeddedNats(
                self.root / f"n{i + 1}",
                port=client_ports[i],
                host=host,
                credentials=self.credentials,
                extra_config=cluster_config(
                    name,
                    f"{name}-n{i + 1}",
                    host,
                    route_ports[i],
                    [p for j, p in enumerate(route_ports) if j != i] if size > 1 else [],
                ),
            )
            for i in range(size)
        ]
        if size == 1:  # a lone server is no cluster: drop the block, keep the name
            servers[0].extra_config = f'server_name: "{name}-n1"\n'
        return servers

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def url(self) -> str:
        """Every server, comma-separated: the ``nats_url`` setting of the roles."""
        return ",".join(self.urls)

    def client_env(self) -> dict[str, str]:
        return self.credentials.env()

    def start(self, timeout: float = 30.0) -> NatsCluster:
        """Start every server, then wait until JetStream has a metadata leader. A free port
        can be taken between being found free and a server binding it (another socket's
        ephemeral port): with ports of its own choosing, the cluster tries other ones."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                return self._start(timeout)
            except RuntimeError as exc:
                taken = "address already in use" in str(exc)
                if not taken or self._fixed_ports or attempt == PORT_ATTEMPTS - 1:
                    raise
                self.servers = self._servers()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> NatsCluster:
        try:
            for s in self.servers:
                s.launch()
            deadline = time.monotonic() + timeout
            for s in self.servers:
                s.wait_ready(max(1.0, deadline - time.monotonic()))
            self.wait_jetstream(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def wait_jetstream(self, timeout: float = 30.0) -> None:
        """Block until JetStream answers (a cluster first elects a metadata leader)."""
        asyncio.run(self._wait_jetstream(timeout))

    async def _wait_jetstream(self, timeout: float) -> None:
        live = [s.url for s in self.servers if s.proc is not None]
        nc = await nats.connect(
            servers=live,
            user=self.credentials.user,
            password=self.credentials.password,
            connect_timeout=timeout,
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    await nc.jetstream(timeout=ATTEMPT_S).account_info()
                    return
                except (APIError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"JetStream of the NATS cluster at {','.join(live)} did not "
                            f"get ready in {timeout:g}s"
                        ) from None
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def meta_leader(self) -> int | None:
        """Which server leads JetStream's metadata, as the live servers' logs last told
        (nats-py cannot ask without the system account); None when not known."""
        latest: tuple[str, int] | None = None
        for i, s in enumerate(self.servers):
            if s.proc is None or not s.log_path.exists():
                continue
            for line in s.log_path.read_text(errors="replace").splitlines():
                stamp = " ".join(line.split()[1:3])
                if "Self is new JetStream cluster metadata leader" in line:
                    found = i
                elif "new metadata leader: " in line:
                    name = line.rsplit("new metadata leader: ", 1)[1].split("/")[0]
                    found = next(
                        (j for j, t in enumerate(self.servers) if f'"{name}"' in t.extra_config),
                        -1,
                    )
                else:
                    continue
                if latest is None or stamp > latest[0]:
                    latest = (stamp, found)
        return latest[1] if latest and latest[1] >= 0 else None

    def kill(self, index: int) -> None:
        """kill -9 one server (chaos tests)."""
        self.servers[index].kill()

    def restart(self, index: int, timeout: float = 20.0) -> None:
        """Start a stopped or killed server again, on its port and store."""
        self.servers[index].start(timeout)

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers if s.pid is not None]

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
