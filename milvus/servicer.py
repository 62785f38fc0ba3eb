"""The frame of every Milvus RPC: who calls (``auth``), in which database, within which
limits, whether the request sets anything Elanus does not do (``fields``); the answer's
status (``status``); and "not supported" for every RPC not served.

A served RPC is a method marked ``@served(kind)`` on one of the concern mixins; it takes
``(ctx, request)`` and returns the response message (its status left OK). Errors become
the response type's status, never a gRPC error, so pymilvus raises ``MilvusException``
with Milvus's code. Unauthenticated calls are refused with gRPC UNAUTHENTICATED, as
Milvus's interceptor does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import message_factory
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

from elanus.channels.runtime.metrics import Outcome, proxy_request
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.actions import perform_op
from elanus.flight.auth import Caller
from elanus.flight.limits import SMALLER_ADVICE, Kind
from elanus.milvus.auth import MilvusCredentials
from elanus.milvus.fields import check
from elanus.milvus.honoured import REQUESTS
from elanus.milvus.status import not_supported, status_of
from elanus.wire.codec import DEFAULT_DB

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

log = logging.getLogger(__name__)
SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]
_MARK = "_milvus_rate"


@dataclass(frozen=True)
class Ctx:
    """One Milvus call: the caller, the database it addresses and the RPC's name;
    ``db_named``: the call named its database (else ``db`` is the default), which
    ``FlushAll`` reads as "every database"."""

    caller: Caller
    db: str
    rpc: str
    db_named: bool = True


def served(kind: Kind | None = None) -> Callable[[Any], Any]:
    """Mark a mixin method as the handler of the RPC of the same name; ``kind`` is the
    rate bucket it counts against (``flight/limits.py``)."""

    def mark(fn: Any) -> Any:
        setattr(fn, _MARK, kind)
        fn._milvus_served = True
        return fn

    return mark


FALLS_BACK: frozenset[str] = frozenset()
"""Unserved RPCs that pymilvus follows with an older one when the answer is gRPC
UNIMPLEMENTED, as against a Milvus whose Go server lacks the method; none since
``AlterCollectionSchema`` is served (``add_collection_field`` tried it, then
``AddCollectionField``)."""


def reply_class(rpc: str) -> Any:
    return message_factory.GetMessageClass(SERVICE.methods_by_name[rpc].output_type)


def status_field(rpc: str) -> str | None:
    """The name of ``rpc``'s reply field that carries Milvus's status (``status``, or
    ``alter_status`` in ``AlterCollectionSchemaResponse``); ``""`` when the reply is a
    status itself, ``None`` when it carries none (``Dummy``, ``GetReplicateInfo``)."""
    reply = SERVICE.methods_by_name[rpc].output_type
    status = common_pb2.Status.DESCRIPTOR.full_name
    if reply.full_name == status:
        return ""
    fields = (f for f in reply.fields if f.message_type and f.message_type.full_name == status)
    return next((f.name for f in fields), None)


def failed(rpc: str, status: common_pb2.Status) -> Any:
    """The response of ``rpc`` carrying only ``status``, in whichever field holds it; a
    reply without one cannot say so (``tests/test_milvus_refusals.py`` keeps them
    unserved)."""
    field = status_field(rpc)
    if field == "":
        return status
    if field is None:
        raise TypeError(f"{rpc}'s reply has no status to carry a failure")
    return reply_class(rpc)(**{field: status})


class Servicer(milvus_pb2_grpc.MilvusServiceServicer):
    """Dispatch for the concern mixins; ``act`` runs a Flight action as the caller."""

    def __init__(self, proxy: ProxyServer, credentials: MilvusCredentials) -> None:
        self.proxy = proxy
        self.credentials = credentials
        for method in SERVICE.methods:
            fn = getattr(type(self), method.name, None)
            if getattr(fn, "_milvus_served", False):
                handler = self._wrap(method.name, getattr(self, method.name))
            elif unimplemented(method.name):
                handler = _refuse_stream(method.name)
            else:
                handler = _refuse(method.name)
            setattr(self, method.name, handler)

    def reranked_search(self, ctx: Ctx, request: Any) -> Any:
        """A Search with a ``function_score`` (``milvus/hybrid.py`` runs it)."""
        raise NotImplementedError

    @classmethod
    def served_rpcs(cls) -> list[str]:
        """The RPCs this servicer serves, in the service's order (the rest are refused)."""
        return [m.name for m in SERVICE.methods if _is_served(cls, m.name)]

    def _wrap(self, rpc: str, fn: Callable[[Ctx, Any], Any]) -> Callable[[Any, Any], Any]:
        kind = getattr(fn, _MARK, None)
        table = REQUESTS.get(rpc)
        if table is None:  # every field served must be classified (milvus/honoured.py)
            raise TypeError(f"{rpc} is served but its request has no table in honoured.py")

        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with proxy_request(rpc) as outcome:  # counted and timed as Flight calls are
                return answer(request, context, outcome)

        def answer(request: Any, context: grpc.ServicerContext, outcome: Outcome) -> Any:
            metadata = context.invocation_metadata() or ()
            try:
                caller = self.credentials.caller(metadata)
            except ElanusError as exc:
                outcome.fail(exc.code)
                if exc.code == ErrorCode.UNAUTHENTICATED:
                    context.abort(grpc.StatusCode.UNAUTHENTICATED, f"[{exc.code}] {exc.message}")
                return failed(rpc, status_of(exc))
            try:
                self.proxy.limits.admit(caller.user, kind, request.ByteSize(), rpc, SMALLER_ADVICE)
                check(request, table, rpc)  # nothing it sets goes unread (fields.py)
                db = _db_of(request, metadata)
                return fn(Ctx(caller, db or DEFAULT_DB, rpc, bool(db)), request)
            except ElanusError as exc:
                outcome.fail(exc.code)
                return failed(rpc, status_of(exc))
            except Exception:  # noqa: BLE001 - a bug: the details go to the log, not the client
                log.exception("Milvus RPC %s failed", rpc)
                error = ElanusError(
                    ErrorCode.INTERNAL,
                    f"{rpc} failed unexpectedly; the proxy's log has the details",
                )
                outcome.fail(error.code)
                return failed(rpc, status_of(error))

        return handle

    def run_op(self, ctx: Ctx, op: Any) -> Any:
        """Run the action of operation record ``op`` (``elanus/ops``), built from the
        request's fields: checked as a body would be, no JSON between."""
        return perform_op(self.proxy, op, ctx.caller)


def _is_served(cls: type, name: str) -> bool:
    return bool(getattr(getattr(cls, name, None), "_milvus_served", False))


def _db_of(request: Any, metadata: Any) -> str:
    """The database of a call: the request's ``db_name`` (``dbName`` in the segment
    requests), else the ``dbname`` header (pymilvus's ``db_name=``), else ``""``."""
    field = next((f for f in ("db_name", "dbName") if _has_field(request, f)), None)
    db = getattr(request, field) if field else ""
    if not db:
        db = next((v for k, v in metadata if k.lower() == "dbname"), "") or ""
        if isinstance(db, bytes):
            db = db.decode()
    return str(db)


def _has_field(message: Any, name: str) -> bool:
    return name in message.DESCRIPTOR.fields_by_name


def unimplemented(rpc: str) -> bool:
    """Whether ``rpc``, not served, is answered gRPC UNIMPLEMENTED (what Milvus's Go server
    answers for a method it lacks) rather than its reply with code 10: a stream, an RPC
    whose reply has no status, or one pymilvus replaces with an older one on that code
    (``FALLS_BACK``). docs/milvus-compat.md's RPC table says which, per RPC."""
    method = SERVICE.methods_by_name[rpc]
    streams = method.server_streaming or method.client_streaming
    return bool(streams or rpc in FALLS_BACK or status_field(rpc) is None)


def _refuse(rpc: str) -> Callable[[Any, Any], Any]:
    """The handler of a unary RPC Elanus does not serve that has a status to say so
    (``unimplemented`` is false). It answers at once, with nothing pymilvus retries: the
    reply with code 10, which pymilvus raises as a ``MilvusException`` naming the RPC."""
    reply = failed(rpc, not_supported(rpc))

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        return reply

    return handle


def _refuse_stream(rpc: str) -> Callable[[Any, Any], Any]:
    """gRPC UNIMPLEMENTED, naming the RPC, for an RPC ``unimplemented`` picks."""
    reason = not_supported(rpc).reason

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, reason)

    return handle
