"""What every role API is made of: typed replies, and a client stub over the bus.

A role's API module (``elanus/api/<role>.py``) is owned by the callee: it declares each
call's request (``@request``, checked where it arrives) and reply (``@reply``), and one stub
class with a typed method per call. Callers use only the stub, so a call's shape is visible
from the caller's side and mypy checks both ends::

    @request("worker.release")
    class ReleaseSegments:
        segment_ids: list[int]

    @reply
    class Released:
        released: int

    class WorkerAPI(Stub):
        async def release(self, req: ReleaseSegments) -> Released:
            return await self._ask("release", req, Released)

Requests and replies are wire types (``elanus/wiretypes.py``): in-process they are the very
objects, over NATS they travel as their fields and arrive as instances of the same class.
A handler returns its reply object; ``Stub`` refuses any other reply type loudly (INTERNAL),
so a drifted contract fails where it drifted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, dataclass_transform

from elanus.channels.bus import Bus
from elanus.errors import ElanusError, ErrorCode
from elanus.frozenrecord import frozen_dataclass
from elanus.wiretypes import wire_type

R = TypeVar("R")
T = TypeVar("T")


@dataclass_transform(kw_only_default=True, frozen_default=True)
def reply(cls: type[T]) -> type[T]:
    """Declare a reply type: a frozen, keyword-only dataclass that travels as itself."""
    return wire_type(frozen_dataclass(cls))


@dataclass_transform(kw_only_default=True, frozen_default=True)
def record(cls: type[T]) -> type[T]:
    """Declare a typed part of requests or replies (a segment descriptor, a checkpoint):
    as a reply type, so a field of this type says what it holds and travels as itself."""
    return wire_type(frozen_dataclass(cls))


@reply
class Ack:
    """The reply of a call that returns nothing but its success."""


ACK = Ack()


def expect(kind: type[R], got: Any, subject: str) -> R:
    """``got`` if it is a ``kind``; otherwise the contract drifted: INTERNAL, naming both."""
    if isinstance(got, kind):
        return got
    raise ElanusError(
        ErrorCode.INTERNAL,
        f"{subject} answered {type(got).__name__}, expected {kind.__name__}",
    )


def as_body(value: Any) -> Any:
    """A reply (or anything holding replies) as plain dicts and lists, for a JSON body
    (the Flight layer's replies) or code that reads dicts; arrays are left as they are. A
    reply with its own ``to_body()`` (one whose optional keys stay absent) gives that."""
    to_body = getattr(value, "to_body", None)
    if callable(to_body) and not isinstance(value, type):
        return to_body()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_body(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: as_body(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_body(v) for v in value]
    return value


class Stub:
    """A client of one role instance: requests go to ``<prefix>.<method>`` on the bus.

    Subclasses add one typed method per call; ``timeout`` is the default for calls that do
    not name their own."""

    def __init__(self, bus: Bus, prefix: str, timeout: float = 30.0) -> None:
        self.bus = bus
        self.prefix = prefix
        self.timeout = timeout

    def subject(self, method: str) -> str:
        return f"{self.prefix}.{method}"

    async def alive(self) -> bool:
        """Whether the role instance still serves (a probe: no handler runs); False only
        when NATS says nobody subscribes to its subjects any more (its process is gone)."""
        return await self.bus.serves(self.subject("alive"))

    async def _ask(self, method: str, req: Any, kind: type[R], timeout: float | None = None) -> R:
        subject = self.subject(method)
        got = await self.bus.request(subject, req, self.timeout if timeout is None else timeout)
        return expect(kind, got, subject)

    def _call(self, method: str, req: Any, kind: type[R]) -> Call[R]:
        return Call(self, method, req, kind)

    def _ask_sync(self, method: str, req: Any, kind: type[R], timeout: float | None = None) -> R:
        """``_ask`` from a thread that is not the bus's loop (a Flight thread)."""
        subject = self.subject(method)
        got = self.bus.request_sync(subject, req, self.timeout if timeout is None else timeout)
        return expect(kind, got, subject)


@dataclasses.dataclass(frozen=True, slots=True)
class Call(Generic[R]):
    """A call described, not yet made: what a stub method returns for a call that is
    fanned out to several instances at once (``ask_many_sync`` makes them)."""

    stub: Stub
    method: str
    req: Any
    kind: type[R]


def ask_many_sync(bus: Bus, calls: Sequence[Call[R]], timeout: float) -> list[R]:
    """The one fan-out: the calls run concurrently, from a non-loop thread (the one served
    in this process first runs on this thread, ``Bus.request_many_sync``). ``timeout`` is
    one deadline for the whole fan-out. All replies, in order; or the first failure is
    raised and the calls still waited for are abandoned."""
    if not calls:
        return []
    if len(calls) == 1:  # the common one shard or one worker: no fan-out machinery
        (c,) = calls
        subject = c.stub.subject(c.method)
        return [expect(c.kind, bus.request_sync(subject, c.req, timeout), subject)]
    subjects = [c.stub.subject(c.method) for c in calls]
    got = bus.request_many_sync([(s, c.req) for s, c in zip(subjects, calls, strict=True)], timeout)
    return [expect(c.kind, g, s) for g, c, s in zip(got, calls, subjects, strict=True)]


StubFactory = Callable[[Bus, str], Stub]
