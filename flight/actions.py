"""DoAction on the proxy: ``perform`` looks the action up in the registry
(``flight/registry.py``), checks the body, authorises the caller and runs the executor with
a ``Call``. Milvus's task pattern, without a class per task; executors reach the cluster
through the proxy.

The concern modules import ``Call`` and the registry's names from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elanus.flight.auth import ANONYMOUS, Caller, authorize
from elanus.flight.registry import (
    CONCERNS,
    Action,
    Checker,
    action,
    catalogue,
    check_db,
    check_named,
    check_request,
    lookup,
    privilege_table,
    rate_of,
)

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

__all__ = [
    "CONCERNS", "Action", "Call", "Checker", "Executor", "action", "catalogue", "check_db",
    "check_named", "check_request", "lookup", "perform", "privilege_table", "rate_of",
]  # fmt: skip


@dataclass(frozen=True)
class Call:
    """One action being executed: who asked, the checked request, the body as sent."""

    proxy: ProxyServer
    request: dict[str, Any]
    caller: Caller = ANONYMOUS
    raw: bytes = b""
    ts: int = 0
    """The DdQueue's TSO timestamp, for a ``ddl`` action."""


Executor = Callable[[Call], Any]


def perform(proxy: ProxyServer, name: str, raw: bytes, caller: Caller = ANONYMOUS) -> Any:
    """One DoAction: check, authorise, execute; the JSON-able result."""
    spec = lookup(name)
    if spec.self_checked:
        return spec.run(Call(proxy, {}, caller, raw))
    spec, request = check_request(name, raw)
    authorize(caller, spec, request)
    call = Call(proxy, request, caller, raw)
    if spec.ddl:

        async def task(ts: int) -> Any:
            return await spec.run(dataclasses.replace(call, ts=ts))

        return proxy.run(proxy.ddl.queue.submit(spec.name, task))
    if spec.loop:
        return proxy.run(spec.run(call))
    return spec.run(call)
