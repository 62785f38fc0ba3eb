"""A thin comm layer over one NATS connection: JSON request/reply and broadcasts.

Control traffic between roles is JSON request/reply on NATS subjects. A reply is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code", "message"}}``; the
caller's ``request`` returns the result or raises the ``ElanusError`` the handler raised.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import numpy as np
import pyarrow as pa
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext

from elanus.channels.natsauth import NatsCredentials, resolve
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
JSON_HEADERS = {"content-type": "application/json"}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=_json_default).encode()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, pa.Table | pa.RecordBatch):
        return {ARROW_KEY: base64.b64encode(ipc_table_bytes(obj)).decode()}
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


ARROW_KEY = "__arrow_ipc__"


def ipc_table_bytes(data: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write(data)
    return sink.getvalue().to_pybytes()


def as_table(value: Any) -> pa.Table:
    """A table from a reply: as is when the call was local, decoded when it crossed NATS."""
    if isinstance(value, pa.Table):
        return value
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if isinstance(value, dict) and ARROW_KEY in value:
        return pa.ipc.open_stream(base64.b64decode(value[ARROW_KEY])).read_all()
    raise TypeError(f"expected an Arrow table, got {type(value).__name__}")


class LocalServices:
    """Request handlers served by roles of this process, by subject prefix.

    Seed 000 §6.5: a component's function is separate from how it is reached. When the
    role serving a subject runs in the caller's process (standalone), ``Bus.request``
    calls its handler directly, skipping NATS and JSON; otherwise it goes over NATS. The
    handler runs as its own task on its own loop, as a NATS request would, so a caller
    that times out does not cancel it half way. Handlers must not mutate the request and
    must return objects they no longer change.
    """

    def __init__(self) -> None:
        self._served: dict[
            tuple[str, str], list[tuple[dict[str, Handler], asyncio.AbstractEventLoop]]
        ] = {}
        self._direct: dict[tuple[str, str], Callable[..., Any]] = {}

    # Direct calls: thread-safe functions a role offers to callers in its process on any
    # thread, with no event-loop hop at all (the proxy's small-search path). A caller that
    # finds none, or gets ``None`` back, takes the ordinary request path.
    def add_direct(self, url: str, subject: str, fn: Callable[..., Any]) -> None:
        self._direct[(url, subject)] = fn

    def remove_direct(self, url: str, subject: str) -> None:
        self._direct.pop((url, subject), None)

    def find_direct(self, url: str, subject: str) -> Callable[..., Any] | None:
        return self._direct.get((url, subject))

    def add(self, url: str, prefix: str, handlers: dict[str, Handler]) -> None:
        key = (url, prefix)
        self._served.setdefault(key, []).append((handlers, asyncio.get_running_loop()))

    def remove(self, url: str, prefix: str, handlers: dict[str, Handler]) -> None:
        key = (url, prefix)
        entries = self._served.get(key, [])
        self._served[key] = [e for e in entries if e[0] is not handlers]
        if not self._served[key]:
            del self._served[key]

    def find(
        self, url: str, subject: str
    ) -> tuple[Handler | None, asyncio.AbstractEventLoop] | None:
        """The handler for ``subject`` in the cluster behind ``url``, if served here."""
        prefix, _, method = subject.rpartition(".")
        while prefix:
            entries = self._served.get((url, prefix))
            if entries:
                handlers, loop = entries[-1]
                return handlers.get(method), loop
            prefix, _, head = prefix.rpartition(".")
            method = f"{head}.{method}"
        return None


LOCAL = LocalServices()


class Served:
    """What ``Bus.serve`` returns: ``unsubscribe`` ends both the local and NATS service."""

    def __init__(
        self, sub: Subscription, url: str, prefix: str, handlers: dict[str, Handler]
    ) -> None:
        self.sub, self.url, self.prefix, self.handlers = sub, url, prefix, handlers

    async def unsubscribe(self) -> None:
        LOCAL.remove(self.url, self.prefix, self.handlers)
        await self.sub.unsubscribe()


class Bus:
    """One NATS connection per process (or per role in tests), with JetStream at hand.

    ``credentials`` (or userinfo in ``url``) are presented to the server; ``url`` keeps
    no userinfo, since it is logged, shown and used as a key of ``LOCAL``.
    """

    def __init__(
        self, url: str, name: str = "elanus", credentials: NatsCredentials | None = None
    ) -> None:
        self.url, from_url = resolve(url)
        self.credentials = credentials or from_url
        self.name = name
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def nc(self) -> NatsClient:
        if self._nc is None:
            raise RuntimeError("Bus is not connected")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self.nc.jetstream()
        return self._js

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def connect(self, timeout: float = 10.0) -> Bus:
        """Connect, or fail with UNAVAILABLE (unreachable) or UNAUTHENTICATED (refused
        credentials): nats-py would otherwise retry a refused login forever."""
        creds = self.credentials
        refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def on_error(exc: Exception) -> None:
            if _is_auth_error(exc):
                if not refused.done():
                    refused.set_result(exc)
                if self._nc is not None:  # a reconnect refused: worth more than debug
                    log.warning("nats %s: the server refused our credentials", self.name)
            await self._on_error(exc)

        connecting: asyncio.Future[Any] = asyncio.ensure_future(
            nats.connect(
                self.url,
                name=self.name,
                user=creds.user if creds else None,
                password=creds.password if creds else None,
                connect_timeout=timeout,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                allow_reconnect=True,
                error_cb=on_error,
            )
        )
        await asyncio.wait({connecting, refused}, timeout=timeout, return_when="FIRST_COMPLETED")
        if not connecting.done():
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            if refused.done():
                hint = "" if creds else " (none were given: set nats_user and nats_password)"
                raise ElanusError(
                    ErrorCode.UNAUTHENTICATED,  # as the Flight face answers the same failure
                    f"NATS at {self.url} refused the credentials{hint}",
                )
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"cannot connect to NATS at {self.url}: timeout"
            )
        try:
            self._nc = connecting.result()
        except (TimeoutError, OSError, nats.errors.NoServersError) as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"cannot connect to NATS at {self.url}: {exc or 'timeout'}"
            ) from None
        return self

    async def fork(self, name: str) -> Bus:
        """A second connection to the same server, for bulk data: megabytes of DML on one
        socket must not delay the small control messages (ticks, keepalives) on another."""
        return await Bus(self.url, name, self.credentials).connect()

    async def _on_error(self, exc: Exception) -> None:
        log.debug("nats %s: %s", self.name, exc)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._nc is not None:
            try:
                await self._nc.drain()
            except Exception:  # noqa: BLE001 - the connection may already be gone
                pass
            try:
                await self._nc.close()
            except Exception:  # noqa: BLE001
                pass
            self._nc = None
            self._js = None

    # -- request/reply ----------------------------------------------------------------------
    async def request(
        self, subject: str, payload: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        local = LOCAL.find(self.url, subject)
        if local is not None:
            return await self._local_request(subject, local, payload or {}, timeout)
        try:
            msg = await self.nc.request(subject, dumps(payload or {}), timeout=timeout)
        except NoRespondersError:
            raise ElanusError(ErrorCode.UNAVAILABLE, f"no service answers on {subject}") from None
        except NatsTimeout:
            raise ElanusError(
                ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s"
            ) from None
        reply = json.loads(msg.data)
        if reply.get("ok"):
            return reply.get("result")
        raise ElanusError.from_dict(reply.get("error") or {})

    async def _local_request(
        self,
        subject: str,
        local: tuple[Handler | None, asyncio.AbstractEventLoop],
        payload: dict[str, Any],
        timeout: float,
    ) -> Any:
        handler, loop = local
        if handler is None:
            method = subject.rpartition(".")[2]
            raise ElanusError(ErrorCode.UNKNOWN_ACTION, f"unknown method {method!r}")
        coro = _guarded(subject, handler, payload)
        if loop is asyncio.get_running_loop():
            future: asyncio.Future[Any] = asyncio.ensure_future(coro)
        else:
            future = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise ElanusError(
                ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s"
            ) from None

    async def serve(
        self, prefix: str, handlers: dict[str, Handler], queue: str | None = None
    ) -> Served:
        """Answer ``<prefix>.<method>`` requests; each message runs as its own task."""

        async def on_message(msg: Msg) -> None:
            method = msg.subject[len(prefix) + 1 :]
            task = asyncio.create_task(self._dispatch(msg, method, handlers))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        sub = await self.nc.subscribe(f"{prefix}.>", queue=queue or "", cb=on_message)
        LOCAL.add(self.url, prefix, handlers)
        return Served(sub, self.url, prefix, handlers)

    async def _dispatch(self, msg: Msg, method: str, handlers: dict[str, Handler]) -> None:
        handler = handlers.get(method)
        try:
            if handler is None:
                raise ElanusError(ErrorCode.UNKNOWN_ACTION, f"unknown method {method!r}")
            try:
                body = json.loads(msg.data) if msg.data else {}
            except ValueError as exc:
                raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"malformed JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ElanusError(ErrorCode.INVALID_ARGUMENT, "request body must be a JSON object")
            result = await handler(body)
            reply = {"ok": True, "result": result}
        except ElanusError as exc:
            reply = {"ok": False, "error": exc.to_dict()}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - report, never kill the service
            log.exception("handler %s failed", method)
            reply = {"ok": False, "error": {"code": "INTERNAL", "message": f"{method}: {exc}"}}
        if msg.reply:
            try:
                await msg.respond(dumps(reply))
            except Exception:  # noqa: BLE001 - the requester may be gone
                log.debug("could not reply to %s", method)

    # -- broadcast --------------------------------------------------------------------------
    async def publish(self, subject: str, payload: dict[str, Any]) -> None:
        await self.nc.publish(subject, dumps(payload))

    async def subscribe(
        self, subject: str, callback: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> Subscription:
        async def on_message(msg: Msg) -> None:
            try:
                await callback(json.loads(msg.data))
            except Exception:  # noqa: BLE001
                log.exception("subscriber of %s failed", subject)

        return await self.nc.subscribe(subject, cb=on_message)


def _is_auth_error(exc: Exception) -> bool:
    """Whether nats-py reports the server refusing our login (no typed error for it)."""
    if isinstance(exc, nats.errors.AuthorizationError):
        return True
    return isinstance(exc, nats.errors.Error) and "authorization violation" in str(exc).lower()


async def _guarded(subject: str, handler: Handler, payload: dict[str, Any]) -> Any:
    """Run a handler as a NATS request would: unexpected errors become INTERNAL."""
    try:
        return await handler(payload)
    except (ElanusError, asyncio.CancelledError):
        raise
    except Exception as exc:  # noqa: BLE001 - the same answer a remote caller would get
        log.exception("handler %s failed", subject)
        method = subject.rpartition(".")[2]
        raise ElanusError(ErrorCode.INTERNAL, f"{method}: {exc}") from None
