"""The proxy role: an Arrow Flight server that checks requests and forwards them (seed 000 §6).

Flight calls arrive on gRPC threads; they do the static checks right there and reach the
asyncio side (bus, DdQueue, MetaCache loads) only through ``run`` (or ``submit``). Every failure
leaves as ``FlightServerError("[CODE] message")`` (see ``wire``); no traceback ever does.

Past 600 lines: the constructor is the one place where each service is given its ports
(``flight/ports.py``: the few things it uses, never the proxy), so no service imports this.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import traceback
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
from nats.aio.subscription import Subscription

from elanus import flightsql
from elanus.api.auth import GetSecret
from elanus.api.compaction import CompactionAPI
from elanus.api.datacoord import DataCoordAPI
from elanus.api.metanotice import InvalidationAck, MetaInvalidation
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.runtime import requestlog
from elanus.channels.runtime.metrics import proxy_request
from elanus.channels.runtime.role import Role
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.actions import (
    catalogue,
    check_request,
    lookup,
    perform,
    perform_op,
    rate_of,
)
from elanus.flight.auth import (
    ANONYMOUS,
    MIDDLEWARE_KEY,
    Authenticator,
    AuthMiddlewareFactory,
    Caller,
    HandshakeOnly,
    authorize,
    caller_of,
)
from elanus.flight.dbgate import DatabaseGate
from elanus.flight.ddl import DdlService
from elanus.flight.dml import DmlService
from elanus.flight.flowcontrol import FlowControl
from elanus.flight.imports import ImportService
from elanus.flight.limits import Kind, Limits
from elanus.flight.loads import LoadService
from elanus.flight.metacache import MetaCache
from elanus.flight.putcommand import UPLOAD_OP, check_put
from elanus.flight.putpipeline import PutPipeline
from elanus.flight.search import QueryService, ReadService, hits_table, search_command
from elanus.flight.snapshots import SnapshotService
from elanus.flight.sql import MIDDLEWARE_KEY as SQL_OPTIONS
from elanus.flight.sql import SqlHeadersFactory, options_of
from elanus.flight.streams import client_batches, client_chunks
from elanus.ops import scope_of
from elanus.wire.bodyshape import set_max_json_depth
from elanus.wire.codec import decode_request, encode_result, to_flight_error
from elanus.wire.tls import server_tls

if TYPE_CHECKING:
    from elanus.flight.sql.service import SqlService
from elanus.flight.uploads import receive_upload
from elanus.importroots import ensure_dirs
from elanus.privileges import Need
from elanus.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

ACTION_TIMEOUT_S = 120.0
"""How long a Flight thread waits for the loop; longer than any coord request."""


class ProxyServer(Role):
    role_name = "proxy"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.cache = MetaCache()
        self.ddl = DdlService(bus, self.cache, self.node_id)
        self.coord = self.ddl.api
        """The coord's services, typed (``elanus/api/coord.py``)."""
        self.dml = DmlService(self)
        self.limits = Limits(settings)
        self.flow = FlowControl(settings)
        self.dbgate = DatabaseGate(
            loop=self, coord=self.coord, cache=self.cache, flow=self.flow, collections=self.dml
        )
        self.query = QueryService(
            loop=self, coord=self.coord, bus=bus, settings=settings, collections=self.dml,
            gate=self.dbgate, clock=self.ddl, cache=self.cache,
        )  # fmt: skip
        self.reads = ReadService(
            query=self.query, loop=self, coord=self.coord, bus=bus, collections=self.dml,
            gate=self.dbgate, flusher=self.dml,
        )  # fmt: skip
        self.loads = LoadService(
            loop=self, coord=self.coord, collections=self.dml, gate=self.dbgate, routes=self.query
        )
        self.imports = ImportService(
            loop=self, coord=self.coord, settings=settings, collections=self.dml, ids=self.dml.ids
        )
        self.snapshots = SnapshotService(
            loop=self, coord=self.coord, cache=self.cache, collections=self.dml, loader=self.ddl,
            reads=self.reads, imports=self.imports, act=self,
        )  # fmt: skip
        self._sql: SqlService | None = None
        self._sql_lock = threading.Lock()
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _FlightService | None = None
        self._thread: threading.Thread | None = None
        self._invalidations: Subscription | None = None
        self._accepting = False
        self.auth: Authenticator | None = None
        """Set when ``auth_enabled``: checks every call's credentials (``flight/auth.py``)."""
        # typed: action modules read these while mypy is still inferring this class
        self.datacoord: DataCoordAPI = self.coord.data
        self.timeticks = self.coord.timeticks
        self.compaction: CompactionAPI = self.coord.compaction
        self.indexcoord = self.coord.index
        self.importcoord = self.coord.imports

    @property
    def sql(self) -> SqlService:
        """Flight SQL on the same port (``flight/sql/``, docs/sql.md), made on first use."""
        with self._sql_lock:
            if self._sql is None:
                from elanus.flight.sql.service import SqlService

                self._sql = SqlService(
                    settings=self.settings, collections=self.dml, act=self, query=self.query,
                    reads=self.reads,
                )  # fmt: skip
            return self._sql

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("the proxy is not started")
        return self.settings.replace(flight_port=self.port).flight_uri

    @property
    def address(self) -> str:
        return self.uri if self.port is not None else ""

    def session_meta(self) -> dict[str, object]:
        return {"flight_port": self.port}

    def live_meta(self) -> dict[str, object]:
        return {**super().live_meta(), "flow_control": self.flow.describe()}

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        set_max_json_depth(self.settings.max_json_depth)
        requestlog.set_slow_threshold(self.settings.slow_request_s)
        await asyncio.to_thread(ensure_dirs, self.settings)  # the import roots, for uploads
        s = self.settings
        location = f"{s.flight_scheme}://{s.flight_host}:{s.flight_port}"
        tls = server_tls(s.tls_cert, s.tls_key, s.tls_client_ca)
        try:
            await self.ddl.start(self.supervisor)
            await self.dml.start()
            await self.flow.start(self.bus)
            if self.settings.auth_enabled:
                secret = (await self.coord.auth.secret(GetSecret())).secret
                self.auth = Authenticator(
                    lambda req: self.run(self.coord.auth.verify(req)),
                    lambda req: self.run(self.coord.auth.identity(req)),
                    bytes.fromhex(secret),
                    self.settings.token_ttl_s,
                )
            self._invalidations = await self.bus.subscribe(
                subjects.META_INVALIDATE, self._on_invalidate
            )
            try:
                self._server = await asyncio.to_thread(_FlightService, location, self, tls)
            except Exception as exc:
                raise ElanusError(
                    ErrorCode.UNAVAILABLE, f"cannot serve Arrow Flight on {location}: {exc}"
                ) from None
            self.port = self._server.port
            self._thread = threading.Thread(
                target=self._serve, args=(self._server,), daemon=True, name=f"flight-{self.port}"
            )
            self._thread.start()
            self._accepting = True
            await self.register()
        except BaseException:
            await self.stop()
            raise
        log.info("proxy %s serving Arrow Flight on %s", self.node_id, self.uri)

    def _serve(self, server: _FlightService) -> None:
        """The Flight server's thread: should it fail, that is logged at once and the
        proxy reports itself unhealthy (``health``, ``elanus status``)."""
        try:
            server.serve()
        except Exception as exc:
            log.exception("proxy %s: the Arrow Flight server failed", self.node_id)
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self.supervisor.failed, "flight server", exc)

    async def stop(self) -> None:
        self._accepting = False
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            # shutdown() waits for in-flight calls, which may need this loop: not on it.
            await asyncio.to_thread(_shutdown, server, thread)
        await self.dml.stop()
        await self.flow.stop()
        await self.ddl.stop()
        if self._invalidations is not None:
            try:
                await self._invalidations.unsubscribe()
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass
            self._invalidations = None
        await super().stop()

    async def _on_invalidate(self, doc: MetaInvalidation) -> InvalidationAck:
        """Drop cached meta (or cached identities, for ``kind: auth``); the answer is the
        ack a coord waits for before its DDL returns."""
        try:
            if doc.get("kind") == "auth":
                dropped = self.auth.forget(doc.get("user")) if self.auth is not None else 0
            else:
                dropped = self.cache.on_invalidate(doc)
        except Exception:  # noqa: BLE001 - a message we cannot read: forget everything
            log.warning("unreadable meta invalidation; clearing the meta cache")
            self.cache.clear()
            dropped = -1
        return {"node_id": self.node_id, "dropped": dropped}

    # -- called on Flight threads -----------------------------------------------------------
    def perform(self, name: str, raw: bytes, caller: Caller = ANONYMOUS) -> Any:
        """One DoAction's JSON-able result (``actions.perform``)."""
        return perform(self, name, raw, caller)

    def perform_op(self, op: Any, caller: Caller = ANONYMOUS) -> Any:
        """The action of an operation record, as a caller would send it (``perform_op``):
        the ``ActionRunner`` port."""
        return perform_op(self, op, caller)

    def handle_action(self, name: str, raw: bytes, caller: Caller = ANONYMOUS) -> bytes:
        """Check, authorise, execute (``actions.perform``) and encode one DoAction; every
        error becomes a Flight error."""
        try:
            return encode_result(self.perform(name, raw, caller))
        except ElanusError as exc:
            raise to_flight_error(exc) from None
        except Exception as exc:  # noqa: BLE001 - never leak a traceback to the client
            raise _internal_error(name, exc, f"action {name}") from None

    def handle_put(
        self,
        command: bytes,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
        caller: Caller = ANONYMOUS,
    ) -> None:
        """DoPut: insert or upsert a stream of batches, one PutResult per batch (or, with
        op ``upload``, a file into the import area: ``flight/uploads.py``).

        With ``atomic`` (what the SDK sends) every batch is checked before any is
        published, so bad input anywhere in the stream writes nothing; the stream's total
        is then bounded by ``max_request_bytes``. Without it, batches are checked,
        published and acknowledged one by one. Every stream stops at ``max_put_batches``
        messages and ``max_put_bytes`` bytes (``limits.PutBudget``).
        """
        try:
            request = check_put(command)
            upsert = request["op"] == "upsert"
            privilege = {UPLOAD_OP: "Import", "upsert": "Upsert"}.get(request["op"], "Insert")
            caller.require(Need(privilege, request["db"], request["collection"]))
            info = self.dml.collection(request["db"], request["collection"])
            if request["op"] == UPLOAD_OP:  # a file into the import area, for an import
                receive_upload(self.settings, request, reader, writer)
                return
            mode = "staged" if request["stage"] else "atomic" if request["atomic"] else "stream"
            budget = self.limits.put_budget(mode)
            batches = budget.batches(client_chunks(reader, "DoPut"))
            if request["stage"]:  # a staged write: checked now, visible at commit_write
                self.dbgate.check_writable(info.db)
                self.imports.stage(info, request, batches, writer)
                return
            what = f"{request['op']} into {info.name}"
            self.dbgate.admit_write(info, what)  # before a byte of it is written
            with PutPipeline(self.dml.thread_write(), info, writer) as pipeline:
                if request["atomic"]:
                    for prepared in self.dml.prepare_all(
                        info, request["partition"], batches, upsert, request["partial"]
                    ):
                        pipeline.add(prepared)
                    return
                for i, batch in enumerate(batches):
                    if i:  # later batches of a stream already admitted wait, never fail
                        self.flow.admit(info.vchannels, what, refuse=False)
                    pipeline.add(
                        self.dml.prepare(
                            info,
                            request["partition"],
                            batch,
                            upsert=upsert,
                            partial=request["partial"],
                        )
                    )
        except ElanusError as exc:
            raise to_flight_error(exc) from None
        except Exception as exc:  # noqa: BLE001 - never leak a traceback to the client
            raise _internal_error("DoPut", exc) from None

    def handle_exchange(
        self,
        command: bytes,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
        caller: Caller = ANONYMOUS,
    ) -> None:
        """DoExchange search: batches of query vectors in (one column of vectors), batches
        of hits out (query_index, rank, id, distance, output fields). A stream without
        vectors gets a stream without hits (query_index, rank, id, distance)."""
        with _flight_errors("DoExchange"):
            request = search_command(command)
            caller.require(Need("Search", request.db, request.collection))
            info = self.dml.collection(request.db, request.collection)
            plan = self.query.prepare_search(info, request)
            pk_type = info.schema.primary.arrow_type()
            first, started = 0, False
            for batch in client_batches(reader, "DoExchange"):
                if batch.num_columns != 1:
                    raise ElanusError(
                        ErrorCode.INVALID_ARGUMENT,
                        "DoExchange: send one column holding the query vectors",
                    )
                queries = self.query.search_data(plan, batch.column(0))
                merged, _ = self.query.run_search(plan, queries)
                table = hits_table(merged, pk_type, first).combine_chunks()
                if not started:
                    writer.begin(table.schema)
                    started = True
                # exactly one batch per batch of queries, an empty one when nothing matched:
                # a client can pair answers with what it sent (the SDK's search_stream does)
                answer = table.to_batches()
                writer.write_batch(
                    answer[0] if answer else pa.RecordBatch.from_pylist([], schema=table.schema)
                )
                first += batch.num_rows
            if not started:  # no query vectors: an empty answer, not a stream without schema
                empty = {"distances": np.empty((0, 0), np.float32), "pks": np.empty(0)}
                writer.begin(hits_table(empty, pk_type).schema)

    def handle_get(self, ticket: bytes, caller: Caller = ANONYMOUS) -> flight.FlightDataStream:
        """DoGet: a read-plan ticket (JSON with ``read``), or a ``query`` action body."""
        with _flight_errors("DoGet"):
            doc = decode_request(ticket, "DoGet ticket")
            if "read" in doc:
                return self.reads.stream(doc, caller)
            _, request = check_request("query", ticket)
            caller.require(Need("Query", request.db, request.collection))
            info = self.dml.collection(request.db, request.collection)
            table, _, _ = self.query.query_table(info, request)
            return flight.RecordBatchStream(table)
        raise AssertionError("unreachable")

    def handle_flight_info(
        self, descriptor: flight.FlightDescriptor, caller: Caller = ANONYMOUS
    ) -> flight.FlightInfo:
        """GetFlightInfo: a snapshot read plan for the JSON command (``read_plan`` body)."""
        with _flight_errors("GetFlightInfo"):
            request = self.reads.plan_request(_command(descriptor, "GetFlightInfo"))
            authorize(caller, lookup("read_plan"), scope_of(request))
            return self.reads.plan(request).flight_info(descriptor)
        raise AssertionError("unreachable")

    def handle_schema(
        self, descriptor: flight.FlightDescriptor, caller: Caller = ANONYMOUS
    ) -> flight.SchemaResult:
        """GetSchema: the Arrow schema a read plan for the same command would have."""
        with _flight_errors("GetSchema"):
            request = self.reads.plan_request(_command(descriptor, "GetSchema"))
            authorize(caller, lookup("read_plan"), scope_of(request))
            return flight.SchemaResult(self.reads.schema(request))
        raise AssertionError("unreachable")

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` on the proxy's loop without waiting for it (background refreshes);
        it handles its own errors."""
        loop = self._loop
        if not self._accepting or loop is None or loop.is_closed():
            coro.close()
            return
        asyncio.run_coroutine_threadsafe(coro, loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = ACTION_TIMEOUT_S) -> T:
        """The bridge from a Flight thread to the proxy's asyncio loop (with ``spawn``)."""
        return self.wait(self.submit(coro), timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting (``wait`` collects it): a Flight
        thread keeps several writes in flight this way (``flight/putpipeline.py``)."""
        loop = self._loop
        if not self._accepting or loop is None or loop.is_closed():
            coro.close()
            raise ElanusError(ErrorCode.UNAVAILABLE, "the proxy is shutting down")
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def wait(self, future: concurrent.futures.Future[T], timeout: float = ACTION_TIMEOUT_S) -> T:
        """The result of a ``submit``ted coroutine, its errors as ``run`` raises them."""
        try:
            return future.result(timeout)
        except TimeoutError:
            raise ElanusError(ErrorCode.TIMEOUT, f"no answer within {timeout}s") from None
        except concurrent.futures.CancelledError:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the proxy is shutting down") from None


def _shutdown(server: flight.FlightServerBase, thread: threading.Thread | None) -> None:
    server.shutdown()
    if thread is not None:
        thread.join(timeout=10)


def _command(descriptor: flight.FlightDescriptor, call: str) -> bytes:
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"{call} takes a command descriptor holding a JSON read_plan body, not a path",
        )
    return bytes(descriptor.command or b"")


class GetSchemaRefused(Exception):  # noqa: N818 - named for what a client reads
    """A GetSchema error. pyarrow's GetSchema callback, unlike the others, does not turn a
    ``FlightError`` into a Flight status, so this plain exception carries the same
    ``"[CODE] message"`` text, and the JSON error goes out in the ``grpc-status-details-bin``
    trailer, where Flight puts the extra info of every other call."""


def _schema_refusal(context: flight.ServerCallContext, exc: flight.FlightError) -> GetSchemaRefused:
    info = getattr(exc, "extra_info", None)
    if info:
        context.add_trailer("grpc-status-details-bin", info)
    return GetSchemaRefused(str(exc))


def _quiet_schema_refusals() -> None:
    """Keep tracebacks out of GetSchema errors.

    pyarrow sends an uncaught exception's status with a detail of
    ``traceback.format_exception(...)`` -- frames, pyarrow's source file names, line
    numbers -- which it looks up in the ``traceback`` module at each failure. For a
    ``GetSchemaRefused`` (the one raise pyarrow cannot catch) the detail becomes the class
    name alone; every other exception is formatted as before.
    """
    original = traceback.format_exception
    if getattr(original, "_elanus_quiet", False):
        return

    def format_exception(exc: Any, *args: Any, **kwargs: Any) -> list[str]:
        value = args[0] if args else exc
        if isinstance(value, GetSchemaRefused):
            return [f"{GetSchemaRefused.__name__}\n"]
        return original(exc, *args, **kwargs)

    format_exception._elanus_quiet = True  # type: ignore[attr-defined]
    traceback.format_exception = format_exception  # type: ignore[assignment]


class _FlightService(flight.FlightServerBase):
    """The gRPC face of a ProxyServer; all logic lives in the proxy."""

    def __init__(self, location: str, proxy: ProxyServer, tls: dict[str, Any]) -> None:
        middleware: dict[str, flight.ServerMiddlewareFactory] = {}
        handshake = None
        if proxy.settings.auth_enabled:
            middleware[MIDDLEWARE_KEY] = AuthMiddlewareFactory(lambda: proxy.auth)
            handshake = HandshakeOnly()
        middleware[SQL_OPTIONS] = SqlHeadersFactory()  # a SQL call's elanus-* headers
        super().__init__(location, auth_handler=handshake, middleware=middleware, **tls)
        self._proxy = proxy
        _quiet_schema_refusals()

    def _admit(
        self, context: flight.ServerCallContext, kind: Kind | None, size: int, what: str
    ) -> Caller:
        """Size and rate limits, before anything of the request is read (``limits``); the
        caller, for the call's privilege checks."""
        caller = caller_of(context)
        with _flight_errors(what):
            self._proxy.limits.admit(caller.user, kind, size, what)
        return caller

    def list_actions(self, context: flight.ServerCallContext) -> list[flight.ActionType]:
        return [flight.ActionType(spec.name, spec.description) for spec in catalogue().values()]

    def do_action(
        self, context: flight.ServerCallContext, action: flight.Action
    ) -> list[flight.Result]:
        if action.type in flightsql.ACTIONS:
            return self._sql_action(context, action)
        with proxy_request(action.type if action.type in catalogue() else "unknown"):
            size = len(action.type) + (action.body.size if action.body is not None else 0)
            what = f"{action.type} body" if len(action.type) <= 128 else "DoAction type and body"
            caller = self._admit(context, rate_of(action.type), size, what)
            body = action.body.to_pybytes() if action.body is not None else b""
            return [flight.Result(self._proxy.handle_action(action.type, body, caller))]

    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> list[Any]:
        return []

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        with proxy_request("GetFlightInfo"):
            caller = self._admit(
                context, Kind.DQL, len(descriptor.command or b""), "GetFlightInfo command"
            )
            if flightsql.looks_like_any(descriptor.command or b""):
                with _flight_errors("GetFlightInfo"):
                    return self._proxy.sql.flight_info(descriptor, caller, options_of(context))
            return self._proxy.handle_flight_info(descriptor, caller)

    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        with proxy_request("GetSchema"):
            try:
                command = descriptor.command or b""
                caller = self._admit(context, None, len(command), "GetSchema command")
                if flightsql.looks_like_any(command):
                    with _flight_errors("GetSchema"):
                        schema = self._proxy.sql.schema(descriptor, caller, options_of(context))
                    return flight.SchemaResult(schema)
                return self._proxy.handle_schema(descriptor, caller)
            except flight.FlightError as exc:
                refusal = _schema_refusal(context, exc)
            raise refusal

    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        with proxy_request("DoPut"):
            command = descriptor.command or b""
            if flightsql.looks_like_any(command):  # binding a prepared statement's values
                caller = self._admit(context, Kind.DQL, len(command), "DoPut command")
                with _flight_errors("DoPut"):
                    self._proxy.sql.do_put(command, reader, writer, caller)
                return
            caller = self._admit(context, Kind.DML, len(command), "DoPut command")
            self._proxy.handle_put(command, reader, writer, caller)

    def do_get(
        self, context: flight.ServerCallContext, ticket: flight.Ticket
    ) -> flight.FlightDataStream:
        with proxy_request("DoGet"):
            caller = self._admit(context, Kind.DQL, len(ticket.ticket), "DoGet ticket")
            if flightsql.looks_like_any(ticket.ticket):
                with _flight_errors("DoGet"):
                    return self._proxy.sql.do_get(ticket.ticket, caller, options_of(context))
            return self._proxy.handle_get(ticket.ticket, caller)

    def _sql_action(
        self, context: flight.ServerCallContext, action: flight.Action
    ) -> list[flight.Result]:
        """A Flight SQL action (CreatePreparedStatement, ...): ``flight/sql/``."""
        with proxy_request("sql"):
            size = len(action.type) + (action.body.size if action.body is not None else 0)
            caller = self._admit(context, Kind.DQL, size, f"{action.type} body")
            body = action.body.to_pybytes() if action.body is not None else b""
            with _flight_errors(action.type):
                results = self._proxy.sql.do_action(action.type, body, caller, options_of(context))
            return [flight.Result(r) for r in results]

    def do_exchange(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
    ) -> None:
        with proxy_request("DoExchange"):
            command = descriptor.command or b""
            caller = self._admit(context, Kind.DQL, len(command), "DoExchange command")
            self._proxy.handle_exchange(command, reader, writer, caller)


@contextlib.contextmanager
def _flight_errors(call: str) -> Iterator[None]:
    """Every failure of a stream call leaves as a Flight error with a code, no traceback."""
    try:
        yield
    except ElanusError as exc:
        raise to_flight_error(exc) from None
    except flight.FlightError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _internal_error(call, exc) from None


def _internal_error(call: str, exc: Exception, logged: str | None = None) -> flight.FlightError:
    """An unexpected failure of ``call``: logged (as ``logged``, else the call) with its
    traceback, sent as INTERNAL without it."""
    log.exception("%s failed", logged or call)
    return to_flight_error(ElanusError(ErrorCode.INTERNAL, f"{call}: {type(exc).__name__}: {exc}"))
