"""A thin comm layer over one NATS connection: request/reply, broadcasts, JetStream.

Every role-to-role request goes through ``Bus.request`` (or ``Bus.request_sync`` from a
non-loop thread). The transport behind it is in-process when the serving role runs in
this process and NATS otherwise (``channels/transport.py``); messages are frame messages
(``channels/frames.py``): JSON headers beside binary numpy/Arrow frames. The caller gets
the handler's result, or the ``ElanusError`` the handler raised.

A plain thread's request to another process never waits on the loop: it goes to the
server's direct port when the handler is a blocking one served there
(``channels/direct.py``), else out on the thread's own NATS connection
(``channels/syncnats.py``); only the coord's subjects and requests too large for one
message take the loop's transport.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import nats
import nats.aio.client
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from elanus.channels import frames, subjects
from elanus.channels.direct import (
    DirectClient,
    DirectServer,
    NotDirect,
    Pending,
    direct_key,
    local_host,
)
from elanus.channels.natsauth import NatsCredentials, resolve
from elanus.channels.syncnats import SyncRequester
from elanus.channels.transport import (
    LOCAL,
    Handler,
    NatsTransport,
    Unusable,
    blocking,
    is_blocking,
    unwrap,
)
from elanus.errors import ElanusError, ErrorCode

__all__ = ["LOCAL", "Bus", "Handler", "Served", "blocking"]

log = logging.getLogger(__name__)

# nats-py reads the socket in 32 KiB pieces and pauses the transport past 64 KiB buffered:
# a 1 MiB DML message took some 40 reads, resumes and parser passes on the loop. One read
# per megabyte (the StreamReader's limit is the same figure) is what a consumer of those
# messages needs; the module constant is read at each read and each connect.
nats.aio.client.DEFAULT_BUFFER_SIZE = 1 << 20
COORD_SUBJECTS = f"{subjects.COORD}."


class Served:
    """What ``Bus.serve`` returns: ``unsubscribe`` ends both the local and NATS service."""

    def __init__(
        self,
        sub: Subscription | None,
        url: str,
        prefix: str,
        handlers: dict[str, Handler],
        direct: DirectServer | None = None,
    ) -> None:
        self.sub, self.url, self.prefix, self.handlers = sub, url, prefix, handlers
        self.direct = direct

    async def unsubscribe(self) -> None:
        LOCAL.remove(self.url, self.prefix, self.handlers)
        if self.direct is not None:
            self.direct.remove(self.prefix, self.handlers)
        if self.sub is not None:
            await self.sub.unsubscribe()


class Bus:
    """One NATS connection per process (or per role in tests), with JetStream at hand.

    ``url`` may list several servers of a NATS cluster, comma-separated: the connection
    goes to any live one and moves to another when it dies. ``credentials`` (or userinfo
    in ``url``) are presented to the server; ``url`` keeps no userinfo, since it is
    logged, shown and used as a key of ``LOCAL``. ``stream_replicas`` is how many servers
    hold each stream and KV bucket this process creates (setting ``stream_replicas``).
    """

    def __init__(
        self,
        url: str,
        name: str = "elanus",
        credentials: NatsCredentials | None = None,
        in_process: bool = True,
        stream_replicas: int = 1,
    ) -> None:
        self.url, from_url = resolve(url)
        self.credentials = credentials or from_url
        self.name = name
        self.in_process = in_process
        self.stream_replicas = stream_replicas
        """Whether requests to roles of this process skip NATS (``transport = "nats"``
        turns it off, so a one-process stack exercises the wire like a cluster)."""
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._nats: NatsTransport | None = None
        self._sync: SyncRequester | None = None
        self._direct: DirectClient | None = None
        self._direct_server: DirectServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connection_listeners: list[Callable[[bool], None]] = []
        """Called with False when the connection drops and True when it is back (on the
        bus's loop; a listener with work to do spawns it)."""

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
                servers=self.url.split(","),
                name=self.name,
                user=creds.user if creds else None,
                password=creds.password if creds else None,
                connect_timeout=timeout,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                allow_reconnect=True,
                # a dead server of a cluster is noticed by its closed socket at once, a
                # frozen one within two missed pings rather than nats-py's two minutes
                ping_interval=2,
                max_outstanding_pings=2,
                error_cb=on_error,
                disconnected_cb=self._on_disconnect,
                reconnected_cb=self._on_reconnect,
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
        self._sync = SyncRequester(self.url, self.credentials, self.name)
        self._nats = await NatsTransport(self._nc, self._sync).start()
        key = direct_key(self.credentials)
        if key is not None:
            self._direct = DirectClient(key, self._sync.direct, self._sync.serves)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        return self

    async def fork(self, name: str) -> Bus:
        """A second connection to the same server, for bulk data: megabytes of DML on one
        socket must not delay the small control messages (ticks, keepalives) on another."""
        return await Bus(
            self.url, name, self.credentials, self.in_process, self.stream_replicas
        ).connect()

    async def _on_error(self, exc: Exception) -> None:
        log.debug("nats %s: %s", self.name, exc)

    async def _on_disconnect(self) -> None:
        """Requests waiting for a reply fail now (UNAVAILABLE, retryable): a reply sent
        while the connection is down is lost, and a restarted nats-server lost the request
        itself, so waiting out their timeouts would hold their callers for nothing."""
        log.info("nats %s: disconnected, reconnecting to any of %s", self.name, self.url)
        if self._nats is not None:
            lost = ElanusError(
                ErrorCode.UNAVAILABLE,
                "the connection to NATS was lost while the request waited for its reply; retry",
            )
            self._nats.abandon("", lost)
        self._tell_listeners(False)

    async def _on_reconnect(self) -> None:
        server = self._nc.connected_url if self._nc is not None else None
        log.info("nats %s: reconnected to %s", self.name, server.netloc if server else "?")
        self._tell_listeners(True)

    def _tell_listeners(self, connected: bool) -> None:
        for listener in list(self.connection_listeners):
            try:
                listener(connected)
            except Exception:  # noqa: BLE001 - one listener's bug must not stop the others
                log.exception("nats %s: a connection listener failed", self.name)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        if self._direct_server is not None:
            self._direct_server.close()
            self._direct_server = None
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        if self._nats is not None:
            await self._nats.stop()
            self._nats = None
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
    @property
    def transport(self) -> NatsTransport:
        if self._nats is None:
            raise RuntimeError("Bus is not connected")
        return self._nats

    async def request(self, subject: str, payload: Any = None, timeout: float = 30.0) -> Any:
        """The reply of whoever serves ``subject``: a role of this process, called directly,
        or one elsewhere over NATS."""
        local = LOCAL.find(self.url, subject) if self.in_process else None
        if local is not None:
            return await local.call(payload if payload is not None else {}, timeout)
        return await self.transport.request(
            subject, payload if payload is not None else {}, timeout
        )

    def serves_here(self, subject: str) -> bool:
        """Whether a role of this process serves ``subject`` (requests skip NATS)."""
        return self.in_process and LOCAL.find(self.url, subject) is not None

    async def serves(self, subject: str) -> bool:
        """Whether a role (of this process, or elsewhere) serves ``subject`` now."""
        return self.serves_here(subject) or await self.transport.serves(subject)

    @property
    def sync(self) -> SyncRequester | None:
        """The thread-side connections (``channels/syncnats.py``); None until connected."""
        return self._sync

    def request_sync(self, subject: str, payload: Any = None, timeout: float = 30.0) -> Any:
        """``request`` from a thread that is not the bus's loop (a Flight thread): a
        blocking handler of this process runs right on the calling thread."""
        body = payload if payload is not None else {}
        local = LOCAL.find(self.url, subject) if self.in_process else None
        if local is not None:
            return local.call_sync(body, timeout)
        sync = self._sync
        if sync is not None and not subject.startswith(COORD_SUBJECTS):
            # Straight from this thread (``channels/syncnats.py``): no hop onto the loop and
            # back. The coord's subjects stay on the loop, whose transport fails their
            # requests when the coord's lease changes hands (``NatsTransport.abandon``).
            if threading.get_ident() == self._loop_thread:
                raise RuntimeError("request_sync called on the bus's own loop")
            data = frames.encode(body)
            if self._direct is not None:  # to its server's direct port, if it has one
                try:
                    return unwrap(self._direct.request(subject, data, timeout))
                except NotDirect:
                    pass
            if sync.fits(len(data)):
                try:
                    return unwrap(sync.request(subject, data, timeout))
                except Unusable:
                    pass  # nothing was sent: the loop's way
        return self._on_loop(self.transport.request(subject, body, timeout), timeout)

    def request_many_sync(self, calls: list[tuple[str, Any]], timeout: float = 30.0) -> list[Any]:
        """Several requests at once from a non-loop thread (a fan-out), all concurrent: the
        first one served in this process runs on this thread (no hop for the common one
        worker here), those a direct port serves are sent from this thread before it and
        their replies read after it (``channels/direct.py``), every other runs on the loop
        meanwhile (a blocking handler of this process on the handler pool, a remote one
        over NATS). ``timeout`` is one deadline for the whole fan-out. Results in order;
        the first failure is raised and the calls still waited for are abandoned (a
        handler already running finishes on its own)."""
        deadline = time.monotonic() + timeout
        found = [LOCAL.find(self.url, s) if self.in_process else None for s, _ in calls]
        here = next((i for i, f in enumerate(found) if f is not None), None)
        others = [i for i in range(len(calls)) if i != here]
        results: list[Any] = [None] * len(calls)
        direct = self._direct if threading.get_ident() != self._loop_thread else None
        sent: dict[int, Pending] = {}
        pending = None
        try:
            for i in others:
                subject, body = calls[i]
                if found[i] is None and not subject.startswith(COORD_SUBJECTS):
                    sent.update(_start(direct, i, subject, body))
            on_loop = [i for i in others if i not in sent]
            if on_loop:

                async def ask_others() -> list[Any]:
                    tasks = [
                        asyncio.ensure_future(self.request(calls[i][0], calls[i][1], timeout))
                        for i in on_loop
                    ]
                    try:
                        return await asyncio.gather(*tasks)
                    finally:  # the first failure ends the fan-out: stop waiting for the rest
                        for t in tasks:
                            t.cancel()

                pending = asyncio.run_coroutine_threadsafe(ask_others(), self.loop)
            if here is not None:
                endpoint = found[here]
                assert endpoint is not None
                results[here] = endpoint.call_sync(calls[here][1], timeout)
            while sent:
                assert direct is not None
                i, started = sent.popitem()
                left = max(0.0, deadline - time.monotonic())
                try:
                    results[i] = unwrap(direct.finish(started, left))
                except NotDirect:  # no longer served there: over NATS
                    results[i] = self.request_sync(calls[i][0], calls[i][1], left)
        except BaseException:
            if pending is not None:
                pending.cancel()
            for started in sent.values():
                DirectClient.abandon(started)
            raise
        if pending is not None:
            left = max(0.0, deadline - time.monotonic())
            values = _result(pending, calls[on_loop[0]][0], left)
            for i, value in zip(on_loop, values, strict=True):
                results[i] = value
        return results

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("Bus is not connected")
        return self._loop

    def _on_loop(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("request_sync called on the bus's own loop")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return _result(future, "request", timeout)

    async def serve(
        self, prefix: str, handlers: dict[str, Handler], queue: str | None = None
    ) -> Served:
        """Answer ``<prefix>.<method>`` requests, from this process and over NATS."""
        direct = None if queue else self._direct_port(handlers)
        if direct is not None:
            direct.add(prefix, handlers)
        sub = await self.transport.serve(prefix, handlers, queue, self._tasks)
        LOCAL.add(self.url, prefix, handlers)
        return Served(sub, self.url, prefix, handlers, direct)

    def serve_here(self, prefix: str, handlers: dict[str, Handler]) -> Served:
        """Answer ``<prefix>.<method>`` requests from this process only (never over NATS):
        a node group's name, which each member's process resolves to its own member."""
        LOCAL.add(self.url, prefix, handlers)
        return Served(None, self.url, prefix, handlers)

    def _direct_port(self, handlers: dict[str, Handler]) -> DirectServer | None:
        """This process's direct port (``channels/direct.py``), opened with the first
        blocking handlers served alone; none without credentials to guard it."""
        if self._direct_server is None:
            key = direct_key(self.credentials)
            if key is None or not any(is_blocking(h) for h in handlers.values()):
                return None
            try:
                self._direct_server = DirectServer(local_host(self.url), key)
            except OSError as exc:
                log.warning("nats %s: no direct port (%s): requests come over NATS", self.name, exc)
                return None
            self.transport.direct = self._direct_server
        return self._direct_server

    # -- broadcast --------------------------------------------------------------------------
    async def publish(self, subject: str, payload: Any) -> None:
        await self.nc.publish(subject, frames.encode(payload))

    async def subscribe(
        self, subject: str, callback: Callable[[Any], Awaitable[Any]]
    ) -> Subscription:
        """Hear every message on ``subject``; when the sender waits for answers
        (``scatter``), what ``callback`` returns is its answer."""

        async def on_message(msg: Msg) -> None:
            try:
                answer = await callback(frames.decode(msg.data))
            except Exception:  # noqa: BLE001
                log.exception("subscriber of %s failed", subject)
                return
            if msg.reply:
                try:
                    await self.nc.publish(msg.reply, frames.encode(answer))
                except Exception:  # noqa: BLE001 - the sender may be gone
                    log.debug("could not answer a broadcast on %s", subject)

        return await self.nc.subscribe(subject, cb=on_message)

    async def scatter(self, subject: str, payload: Any, expected: int, timeout: float) -> list[Any]:
        """Broadcast ``payload`` and gather up to ``expected`` answers within ``timeout``
        (fewer when some subscriber is slow or gone)."""
        answers: asyncio.Queue[Any] = asyncio.Queue()

        async def on_answer(msg: Msg) -> None:
            answers.put_nowait(msg.data)

        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=on_answer)
        got: list[Any] = []
        try:
            await self.nc.publish(subject, frames.encode(payload), reply=inbox)
            async with asyncio.timeout(timeout):
                while len(got) < expected:
                    got.append(frames.decode(await answers.get()))
        except TimeoutError:
            pass
        finally:
            await sub.unsubscribe()
        return got


def _body(payload: Any) -> Any:
    return payload if payload is not None else {}


def _start(direct: DirectClient | None, i: int, subject: str, body: Any) -> dict[int, Pending]:
    """Call ``i`` of a fan-out sent to a direct port, or nothing (it goes over NATS)."""
    if direct is None:
        return {}
    try:
        return {i: direct.start(subject, frames.encode(_body(body)))}
    except NotDirect:
        return {}


def _result(future: Any, subject: str, timeout: float) -> Any:
    """A concurrent future's result; the transport enforces the timeout, this only guards
    against a loop that never runs the request."""
    try:
        return future.result(timeout + 5.0)
    except TimeoutError:
        future.cancel()
        raise ElanusError(ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s") from None


def _is_auth_error(exc: Exception) -> bool:
    """Whether nats-py reports the server refusing our login (no typed error for it)."""
    if isinstance(exc, nats.errors.AuthorizationError):
        return True
    return isinstance(exc, nats.errors.Error) and "authorization violation" in str(exc).lower()
