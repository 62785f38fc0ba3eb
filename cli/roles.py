"""The registry of roles ``elanus run`` and ``elanus standalone`` host: names, the class
each one is (imported only when hosted, so a client command stays light), start order."""

from __future__ import annotations

import importlib
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from elanus.errors import ElanusError, ErrorCode

INFO_FILE = "standalone.json"
"""Written under the data dir by a standalone server so other processes can find it."""
RESTARTS_ENV = "ELANUS_ROLE_RESTARTS"
"""How many times ``cluster up`` started this role's process again (shown by ``status``)."""
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.2, 5.0
"""The wait before a role (or an embedded nats-server) that stopped starts again: doubled
at each stop in a row, up to the most."""
STEADY_S = 60.0
"""A process that ran this long before it exited starts again after the first wait."""


def restart_delay(restarts: int, ran_s: float) -> float:
    """The wait before a role process that exited after ``ran_s`` seconds starts again,
    the ``restarts``-th time: the first wait once it had run steadily, else doubled per
    restart up to the most."""
    if ran_s > STEADY_S:
        return BACKOFF_FIRST_S
    return min(BACKOFF_FIRST_S * 2**restarts, BACKOFF_MAX_S)


class KeptProcess(Protocol):
    """A child process kept running by its parent (a ``cluster up`` role, a standalone's
    serving process): its process, when it started, and its restart state."""

    proc: subprocess.Popen[bytes] | None
    started: float
    restarts: int
    due: float | None
    """When an exited process starts again (monotonic); None while it runs."""


@dataclass(frozen=True)
class Exited:
    """``keep_step`` saw the process exit: it starts again in ``delay`` seconds."""

    returncode: int | None
    delay: float


RESTARTED = "restarted"


def keep_step(child: KeptProcess, now: float, launch: Callable[[], None]) -> Exited | str | None:
    """One look at ``child``: an exit seen now (its restart scheduled after the backoff of
    ``restart_delay``), a restart done now (``launch`` called), or ``None`` (running, or
    waiting out its backoff). The caller words what it tells."""
    proc = child.proc
    if proc is None or (child.due is None and proc.poll() is None):
        return None
    if child.due is None:
        delay = restart_delay(child.restarts, now - child.started)
        child.due = now + delay
        return Exited(proc.returncode, delay)
    if now >= child.due:
        child.due, child.restarts = None, child.restarts + 1
        launch()
        return RESTARTED
    return None


class HostedRole(Protocol):
    """What the host needs of a role class (``elanus.channels.role.Role`` and friends)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class TakesTurns(Protocol):
    """A role of which one instance serves and others wait (the coord's lease)."""

    on_lease_lost: Callable[[], None]

    async def wait_turn(self, stop: threading.Event | None = None) -> None: ...


@dataclass(frozen=True)
class RoleSpec:
    target: str
    """``module:Class``, imported only when the role is hosted (keeps the CLI light)."""
    standalone: bool = True
    """Whether ``elanus standalone`` hosts this role."""


ROLES: dict[str, RoleSpec] = {
    # Insertion order is start order (stop order is the reverse); coord must come first.
    "coord": RoleSpec("elanus.meta.coord:Coordinator"),
    "datanode": RoleSpec("elanus.segments.datanode.node:DataNode"),
    "querynode": RoleSpec("elanus.segments.querynode.node:QueryNode"),
    "indexnode": RoleSpec("elanus.index.indexnode:IndexNode"),
    "proxy": RoleSpec("elanus.webui.face:ConsoleProxy"),  # Flight, Milvus's protocol, console
}


MEMBER_ROLES = ["querynode", "proxy"]
"""What a standalone's further serving process hosts (``cli/serving.py``); in this order,
so its query node has joined the node group before its proxy serves."""


def standalone_roles() -> list[str]:
    return [name for name, spec in ROLES.items() if spec.standalone]


def role_spec(name: str) -> RoleSpec:
    spec = ROLES.get(name)
    if spec is None:
        known = ", ".join(ROLES)
        raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"unknown role {name!r}; known: {known}")
    return spec


def role_class(name: str) -> Callable[..., HostedRole]:
    """Import a role class by its registry name."""
    module_name, _, class_name = role_spec(name).target.partition(":")
    cls: Callable[..., HostedRole] = getattr(importlib.import_module(module_name), class_name)
    return cls
