"""How a request reaches the role that serves it: in this process, or over NATS.

``Bus.request`` (and ``Bus.request_sync`` from a non-loop thread) asks the in-process
transport first: when the role serving the subject runs in this process it is called
directly, with the very request objects the caller built. Otherwise the NATS transport
carries the request as a frame message (``channels/frames.py``). Both give the same
answers: the handler's result, or the ``ElanusError`` it raised (anything else becomes
INTERNAL), and both run the handler as a task of its own so that a caller that times out
does not cancel it half way (as a NATS handler would carry on).

A handler is either a coroutine function, or a plain function marked :func:`blocking`:
thread-safe work (a search) that runs on the caller's thread when the caller is in this
process and on a worker thread otherwise, never on an event loop.

Messages of any size travel through a stock nats-server (1 MB ``max_payload``): a reply
too large for one message comes as several parts to the requester's inbox; a request too
large carries its first part and the responder pulls the rest from the requester.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import nats.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from elanus.channels import frames
from elanus.errors import ElanusError, ErrorCode
from elanus.wiretypes import is_wire_type


class Unusable(ElanusError):
    """This pool cannot reach the servers at all (they need TLS): the caller sends its
    request the loop's way (nats-py, which speaks TLS), now and from then on."""

    def __init__(self, why: str) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, f"the thread-side NATS client is off: {why}")


class SyncReplier(Protocol):
    """The thread-side client a blocking handler's thread replies with
    (``syncnats.SyncRequester``; it raises ``Unusable`` when it cannot reach the servers)."""

    def reply(self, to: str, data: bytes) -> None: ...


class DirectPort(Protocol):
    """This process's direct port (``direct.DirectServer``), as ``serve`` tells callers of it."""

    def describe(self, prefix: str, handlers: dict[str, Handler]) -> bytes: ...


log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]] | Callable[[Any], Any]
BLOCKING = "__elanus_blocking__"
PARTS = "Elanus-Parts"
"""Header of a request's first part or a reply's every part: how many parts there are."""
PULL = "Elanus-Pull"
"""Header of a large request: the subject its remaining parts are fetched from."""
PART_MARGIN = 8 * 1024
"""Room left in each part for NATS headers, which the server counts into ``max_payload``."""
STATUS_NO_RESPONDERS = "503"
PROBE = "Elanus-Probe"
"""Header of a liveness probe: its server answers at once, running no handler."""
PROBE_AFTER_S = 0.5
"""A request not answered this long is probed (and again as often): if nobody serves its
subject any more, its server died holding it, and the caller learns so now (UNAVAILABLE:
a read fails over to another replica) instead of after the request's timeout."""
PROBE_WAIT_S = 0.5
DIRECT = "Elanus-Direct"
"""Header of a question a server answers at once, running no handler: where its direct port
is (``channels/direct.py``); an empty answer means it has none for this subject."""
HANDLER_THREADS = 32
_handler_pool = ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="elanus-handler")
"""Blocking handlers reached from a loop run here, not in the loop's default executor:
a search may wait seconds for tsafe, and must not hold up the roles' own thread work."""


def blocking(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a handler as a thread-safe plain function (see the module docstring)."""
    setattr(fn, BLOCKING, True)
    return fn


def is_blocking(handler: Handler) -> bool:
    return bool(getattr(handler, BLOCKING, False))


def unknown_method(subject: str) -> ElanusError:
    return ElanusError(ErrorCode.UNKNOWN_ACTION, f"unknown method {subject.rpartition('.')[2]!r}")


def internal(subject: str, exc: BaseException) -> ElanusError:
    return ElanusError(ErrorCode.INTERNAL, f"{subject.rpartition('.')[2]}: {exc}")


def call_blocking(subject: str, handler: Handler, payload: Any) -> Any:
    """Run a blocking handler here; unexpected errors become INTERNAL, as over NATS."""
    try:
        return handler(payload)
    except ElanusError:
        raise
    except Exception as exc:  # noqa: BLE001 - the same answer a remote caller would get
        log.exception("handler %s failed", subject)
        raise internal(subject, exc) from None


async def run_handler(subject: str, handler: Handler, payload: Any) -> Any:
    """Run any handler from a loop: a blocking one on a worker thread."""
    if is_blocking(handler):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_handler_pool, call_blocking, subject, handler, payload)
    try:
        return await handler(payload)  # type: ignore[misc]
    except (ElanusError, asyncio.CancelledError):
        raise
    except Exception as exc:  # noqa: BLE001
        log.exception("handler %s failed", subject)
        raise internal(subject, exc) from None


class Endpoint:
    """A handler served in this process, and the loop its role runs on."""

    __slots__ = ("handler", "loop", "subject")

    def __init__(self, subject: str, handler: Handler | None, loop: asyncio.AbstractEventLoop):
        self.subject, self.handler, self.loop = subject, handler, loop

    async def call(self, payload: Any, timeout: float) -> Any:
        if self.handler is None:
            raise unknown_method(self.subject)
        coro = run_handler(self.subject, self.handler, payload)
        if self.loop is asyncio.get_running_loop():
            future: asyncio.Future[Any] = asyncio.ensure_future(coro)
        else:
            future = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise _timeout(self.subject, timeout) from None

    def call_sync(self, payload: Any, timeout: float) -> Any:
        """From a thread that is not ``loop``'s: a blocking handler runs right here."""
        if self.handler is None:
            raise unknown_method(self.subject)
        if is_blocking(self.handler):
            return call_blocking(self.subject, self.handler, payload)
        future = asyncio.run_coroutine_threadsafe(
            run_handler(self.subject, self.handler, payload), self.loop
        )
        try:
            return future.result(timeout)
        except TimeoutError:
            raise _timeout(self.subject, timeout) from None


def _timeout(subject: str, timeout: float) -> ElanusError:
    return ElanusError(ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s")


MAX_FOUND = 4096
"""Subjects whose endpoint ``LocalTransport.find`` remembers before it starts over."""


class LocalTransport:
    """Handlers served by roles of this process, by (cluster url, subject prefix)."""

    def __init__(self) -> None:
        self._served: dict[
            tuple[str, str], list[tuple[dict[str, Handler], asyncio.AbstractEventLoop]]
        ] = {}
        self._found: dict[tuple[str, str], tuple[int, Endpoint | None]] = {}
        """``find``'s answers, each with the ``_version`` it was found at (a single search
        asks twice: the delegator, then its worker)."""
        self._version = 0
        """Moved by every ``add`` and ``remove``: an answer found before is stale."""

    def add(self, url: str, prefix: str, handlers: dict[str, Handler]) -> None:
        entry = (handlers, asyncio.get_running_loop())
        self._served.setdefault((url, prefix), []).append(entry)
        self._changed()

    def remove(self, url: str, prefix: str, handlers: dict[str, Handler]) -> None:
        key = (url, prefix)
        entries = [e for e in self._served.get(key, []) if e[0] is not handlers]
        if entries:
            self._served[key] = entries
        else:
            self._served.pop(key, None)
        self._changed()

    def _changed(self) -> None:
        self._version += 1
        self._found = {}

    def find(self, url: str, subject: str) -> Endpoint | None:
        """The endpoint of ``subject`` in the cluster behind ``url``, if served here."""
        key = (url, subject)
        found = self._found.get(key)
        version = self._version
        if found is not None and found[0] == version:
            return found[1]
        endpoint = self._look_up(url, subject)
        if len(self._found) >= MAX_FOUND:
            self._found = {}
        self._found[key] = (version, endpoint)  # stale at once if a change came meanwhile
        return endpoint

    def _look_up(self, url: str, subject: str) -> Endpoint | None:
        prefix, _, method = subject.rpartition(".")
        while prefix:
            entries = self._served.get((url, prefix))
            if entries:
                handlers, loop = entries[-1]
                return Endpoint(subject, handlers.get(method), loop)
            prefix, _, head = prefix.rpartition(".")
            method = f"{head}.{method}"
        return None


LOCAL = LocalTransport()


class NatsTransport:
    """Request/reply over one NATS connection with frame messages of any size.

    Replies come to one wildcard inbox subscription per connection (as nats-py's own
    request does), routed to their request by the last subject token; the same
    subscription serves the parts of this side's large requests to the responder."""

    def __init__(self, nc: NatsClient, sync: SyncReplier | None = None) -> None:
        self.nc = nc
        self.sync = sync
        self._loop: asyncio.AbstractEventLoop | None = None
        """Replies of blocking handlers go out through it, from their own thread."""
        self.direct: DirectPort | None = None
        """This process's direct port, which ``serve`` tells callers of (``DIRECT``)."""
        self._prefix = nc.new_inbox()
        self._ids = itertools.count(1)
        self._replies: dict[str, tuple[str, asyncio.Queue[Msg | ElanusError]]] = {}
        """Requests waiting for their reply, by token: the subject asked and the queue the
        reply's messages (or an ``abandon`` error) arrive on."""
        self._pulls: dict[str, list[bytes]] = {}
        self._sub: Subscription | None = None

    @property
    def part_limit(self) -> int:
        return max(self.nc.max_payload - PART_MARGIN, 64 * 1024)

    async def start(self) -> NatsTransport:
        self._loop = asyncio.get_running_loop()
        self._sub = await self.nc.subscribe(f"{self._prefix}.*", cb=self._on_inbox)
        return self

    async def stop(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass
            self._sub = None

    async def _on_inbox(self, msg: Msg) -> None:
        token = msg.subject.rpartition(".")[2]
        waiting = self._replies.get(token)
        if waiting is not None:
            waiting[1].put_nowait(msg)
            return
        parts = self._pulls.get(token)
        if parts is not None and msg.reply:
            try:
                index = int(msg.data)
                await self.nc.publish(msg.reply, parts[index])
            except (ValueError, IndexError):
                log.warning("a bad part request on %s", msg.subject)

    async def request(self, subject: str, payload: Any, timeout: float) -> Any:
        data = frames.encode(payload)
        token = str(next(self._ids))
        queue: asyncio.Queue[Msg | ElanusError] = asyncio.Queue()
        self._replies[token] = (subject, queue)
        try:
            inbox = f"{self._prefix}.{token}"
            parts = frames.split(data, self.part_limit)
            if len(parts) == 1:
                await self.nc.publish(subject, data, reply=inbox)
            else:
                pull = f"p{token}"
                self._pulls[pull] = parts
                headers = {PARTS: str(len(parts)), PULL: f"{self._prefix}.{pull}"}
                await self.nc.publish(subject, parts[0], reply=inbox, headers=headers)
            raw = await self._reply(queue, subject, timeout)
        finally:
            self._replies.pop(token, None)
            self._pulls.pop(f"p{token}", None)
        return unwrap(raw)

    async def _reply(
        self, queue: asyncio.Queue[Msg | ElanusError], subject: str, timeout: float
    ) -> bytes:
        """The reply's bytes, probing the subject's server while none has come."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        first: Msg | ElanusError | None = None
        while first is None:
            left = deadline - loop.time()
            try:
                async with asyncio.timeout(min(left, PROBE_AFTER_S)):
                    first = await queue.get()
            except TimeoutError:
                if left <= PROBE_AFTER_S:
                    raise _timeout(subject, timeout) from None
                await self._probe(subject)
        if isinstance(first, ElanusError) or PARTS not in (first.headers or {}):
            return await _collect(first, queue, subject)  # all there: nothing to wait for
        try:
            async with asyncio.timeout(max(deadline - loop.time(), PROBE_AFTER_S)):
                return await _collect(first, queue, subject)
        except TimeoutError:
            raise _timeout(subject, timeout) from None

    async def _probe(self, subject: str) -> None:
        if not await self.serves(subject):
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"the server that took the request on {subject} is gone"
            )

    async def serves(self, subject: str) -> bool:
        """Whether anybody serves ``subject`` now: a live server answers a probe at once
        without running a handler; only NATS's no-responders answer means no (no answer in
        time, a busy server, or our own connection down, which tells nothing of the
        server's, is a yes)."""
        token = str(next(self._ids))
        queue: asyncio.Queue[Msg | ElanusError] = asyncio.Queue()
        self._replies[token] = (subject, queue)
        try:
            await self.nc.publish(
                subject, b"", reply=f"{self._prefix}.{token}", headers={PROBE: "1"}
            )
            async with asyncio.timeout(PROBE_WAIT_S):
                answer = await queue.get()
        except (TimeoutError, nats.errors.Error):
            return True
        finally:
            self._replies.pop(token, None)
        if isinstance(answer, ElanusError):  # abandoned: our connection dropped
            return True
        return (answer.headers or {}).get("Status") != STATUS_NO_RESPONDERS

    def abandon(self, prefix: str, error: ElanusError) -> int:
        """Fail at once every request waiting for a reply from a subject under ``prefix``:
        its server is known to be gone (a coordinator replaced), so no reply will come and
        the caller need not wait out its timeout. The number of requests failed."""
        failed = 0
        for subject, queue in list(self._replies.values()):
            if subject.startswith(prefix):
                queue.put_nowait(error)
                failed += 1
        return failed

    async def serve(
        self, prefix: str, handlers: dict[str, Handler], queue: str | None, tasks: set[Any]
    ) -> Subscription:
        """Answer ``<prefix>.<method>``; each message runs as its own task (in ``tasks``)."""

        async def on_message(msg: Msg) -> None:
            if msg.headers and (PROBE in msg.headers or DIRECT in msg.headers):
                if msg.reply:
                    direct = self.direct if DIRECT in msg.headers and not queue else None
                    answer = direct.describe(prefix, handlers) if direct is not None else b""
                    await self.nc.publish(msg.reply, answer)
                return
            handler = handlers.get(msg.subject[len(prefix) + 1 :])
            if (
                handler is not None
                and is_blocking(handler)
                and self.sync is not None
                and msg.reply
                and not (msg.headers and PARTS in msg.headers)
            ):  # the thread that runs it replies too: no hop back onto the loop
                _handler_pool.submit(
                    self._serve_blocking, msg.subject, msg.reply, msg.data, handler
                )
                return
            task = asyncio.create_task(self._dispatch(msg, prefix, handlers))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        sub = await self.nc.subscribe(f"{prefix}.>", queue=queue or "", cb=on_message)
        # Once serve returns, the subject is reachable from any connection: the server has
        # taken the subscription (a request sent from another connection a moment after
        # got "no responders" while it had not, seen under load). Not while the connection
        # is away: the subscription is sent again when it is back.
        if self.nc.is_connected:
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                await self.nc.flush(timeout=5)
        return sub

    async def _dispatch(self, msg: Msg, prefix: str, handlers: dict[str, Handler]) -> None:
        subject = msg.subject
        handler = handlers.get(subject[len(prefix) + 1 :])
        try:
            if handler is None:
                raise unknown_method(subject)
            body = _request_body(await self._whole_request(msg))
            result = await run_handler(subject, handler, body)
            reply: dict[str, Any] = {"ok": True, "result": result}
        except ElanusError as exc:
            reply = {"ok": False, "error": exc.to_dict()}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - report, never kill the service
            log.exception("handler %s failed", subject)
            reply = {"ok": False, "error": internal(subject, exc).to_dict()}
        if msg.reply:
            await self._respond(msg.reply, reply, subject)

    def _serve_blocking(self, subject: str, reply_to: str, data: bytes, handler: Handler) -> None:
        """A blocking handler's whole request, on a handler thread: decode, run, reply."""
        answer = answer_blocking(subject, handler, data)
        assert self.sync is not None
        try:
            self.sync.reply(reply_to, answer)
            return
        except Unusable:  # servers that need TLS: the loop's connection replies
            pass
        except Exception:  # noqa: BLE001 - the requester may be gone
            log.debug("could not reply to %s", subject)
            return
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._publish_reply(reply_to, answer, subject), self._loop)

    async def _whole_request(self, msg: Msg) -> bytes:
        count = int((msg.headers or {}).get(PARTS, "1"))
        if count == 1:
            return msg.data
        pull = (msg.headers or {})[PULL]
        parts = [msg.data]
        for i in range(1, count):
            part = await self.nc.request(pull, str(i).encode(), timeout=30)
            parts.append(part.data)
        return frames.join(parts)

    async def _respond(self, reply_to: str, reply: dict[str, Any], subject: str) -> None:
        await self._publish_reply(reply_to, _encode_reply(reply, subject), subject)

    async def _publish_reply(self, reply_to: str, data: bytes, subject: str) -> None:
        parts = frames.split(data, self.part_limit)
        try:
            if len(parts) == 1:
                await self.nc.publish(reply_to, data)
                return
            headers = {PARTS: str(len(parts))}
            for part in parts:
                await self.nc.publish(reply_to, part, headers=headers)
        except Exception:  # noqa: BLE001 - the requester may be gone
            log.debug("could not reply to %s", subject)


def answer_blocking(subject: str, handler: Handler | None, data: bytes) -> bytes:
    """The reply message to a blocking handler's request message, run on this thread."""
    try:
        if handler is None:
            raise unknown_method(subject)
        result = call_blocking(subject, handler, _request_body(data))
        reply: dict[str, Any] = {"ok": True, "result": result}
    except ElanusError as exc:
        reply = {"ok": False, "error": exc.to_dict()}
    except Exception as exc:  # noqa: BLE001 - report, never kill the service
        log.exception("handler %s failed", subject)
        reply = {"ok": False, "error": internal(subject, exc).to_dict()}
    return _encode_reply(reply, subject)


def _request_body(data: bytes) -> Any:
    body = frames.decode(data)
    if not isinstance(body, dict) and not is_wire_type(body):
        raise ElanusError(ErrorCode.INVALID_ARGUMENT, "request body must be an object")
    return body


def _encode_reply(reply: dict[str, Any], subject: str) -> bytes:
    try:
        return frames.encode(reply)
    except Exception as exc:  # noqa: BLE001 - a result the bus cannot carry
        log.exception("handler %s returned what the bus cannot carry", subject)
        return frames.encode({"ok": False, "error": internal(subject, exc).to_dict()})


def unwrap(raw: bytes) -> Any:
    """A reply message's result, or the ``ElanusError`` its handler raised."""
    reply = frames.decode(raw)
    if reply.get("ok"):
        return reply.get("result")
    raise ElanusError.from_dict(reply.get("error") or {})


async def _collect(
    first: Msg | ElanusError, queue: asyncio.Queue[Msg | ElanusError], subject: str
) -> bytes:
    """A reply's bytes: one message, or every part of a large one, in order."""
    if isinstance(first, ElanusError):
        raise first
    headers = first.headers or {}
    if headers.get("Status") == STATUS_NO_RESPONDERS:
        raise ElanusError(ErrorCode.UNAVAILABLE, f"no service answers on {subject}")
    count = int(headers.get(PARTS, "1"))
    parts = [first.data]
    while len(parts) < count:
        part = await queue.get()
        if isinstance(part, ElanusError):
            raise part
        parts.append(part.data)
    return frames.join(parts)
