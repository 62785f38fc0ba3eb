"""DoAction on the proxy: ``perform`` looks the action up in the registry
(``flight/registry.py``), checks the body, authorises the caller and runs the executor with
a ``Call``. Milvus's task pattern, without a class per task; executors reach the cluster
through the proxy.

``Call`` is generic in what it carries, so this module never names the proxy that imports
it; the executors' ``Call`` is ``flight/executors.py``'s, ``Call[ProxyServer]``. The concern
modules import the registry's names from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from elanus.flight.auth import ANONYMOUS, Caller, authorize
from elanus.flight.registry import (
    CONCERNS,
    Action,
    Checker,
    action,
    catalogue,
    check_body,
    check_db,
    check_named,
    check_request,
    lookup,
    privilege_table,
    rate_of,
    reply_body,
)
from elanus.ops import checked, name_of, scope_of

if TYPE_CHECKING:
    from elanus.flight.ddl import DdlService

__all__ = [
    "CONCERNS", "Action", "ActionHost", "Call", "Checker", "action", "catalogue", "check_body",
    "check_db",
    "check_named", "check_request", "lookup", "perform", "perform_op", "privilege_table",
    "rate_of",
]  # fmt: skip

T = TypeVar("T")


class ActionHost(Protocol):
    """What ``perform`` itself uses of the proxy: its loop and its DDL queue."""

    @property
    def ddl(self) -> DdlService: ...

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = ...) -> T:
        """Run ``coro`` on the proxy's loop and wait for its result."""
        ...


H = TypeVar("H", bound=ActionHost)
Q = TypeVar("Q")


@dataclass(frozen=True)
class Call(Generic[H, Q]):
    """One action being executed: who asked, the checked request (a dict, or the action's
    operation record), the body as sent."""

    proxy: H
    request: Q
    caller: Caller = ANONYMOUS
    raw: bytes = b""
    ts: int = 0
    """The DdQueue's TSO timestamp, for a ``ddl`` action."""


def perform(proxy: ActionHost, name: str, raw: bytes, caller: Caller = ANONYMOUS) -> Any:
    """One DoAction: check, authorise, execute; the JSON-able result (``reply_body``)."""
    spec = lookup(name)
    if spec.self_checked:
        return reply_body(spec.run(Call(proxy, {}, caller, raw)))
    spec, request = check_request(name, raw)
    return _execute(proxy, spec, request, caller, raw)


def perform_op(proxy: ActionHost, op: Any, caller: Caller = ANONYMOUS) -> Any:
    """The action of operation record ``op``, built by another face (the Milvus port): its
    values checked as a body's would be, then as ``perform``, with no JSON between."""
    spec = lookup(name_of(op))
    if spec.op is not type(op):
        raise TypeError(f"{spec.name} is not declared by {type(op).__name__}")
    return _execute(proxy, spec, checked(op), caller, b"")


def _execute(proxy: ActionHost, spec: Action, request: Any, caller: Caller, raw: bytes) -> Any:
    authorize(caller, spec, scope_of(request) if spec.op is not None else request)
    return reply_body(_run(proxy, spec, Call(proxy, request, caller, raw)))


def _run(proxy: ActionHost, spec: Action, call: Call[Any, Any]) -> object:
    """The executor's typed reply, from where it runs: the Flight thread, the loop, or the
    DdQueue."""
    if spec.ddl:

        async def task(ts: int) -> Any:
            return await spec.run(dataclasses.replace(call, ts=ts))

        return proxy.run(proxy.ddl.queue.submit(spec.name, task))
    if spec.loop:
        return proxy.run(spec.run(call))
    return spec.run(call)
