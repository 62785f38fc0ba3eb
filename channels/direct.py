"""Blocking handlers answered over a direct TCP connection between two processes.

A search from the proxy to a query node crossed the nats-server twice: measured between
two processes on the 2-core VM, a NATS round trip of a 600-byte message took ~180 µs and
a TCP round trip ~17 µs. So a process that serves blocking handlers (``transport.blocking``:
searches, queries, counts) also listens on a TCP port, and a thread that asks one of them
from another process (``Bus.request_sync``) sends the request there when it can:

* **finding it**: the caller asks once per role instance, over NATS, on the request's own
  subject with an ``Elanus-Direct`` header; the server answers (``describe``) with its
  address, the subject prefix and the methods it serves directly, without running a
  handler. A server that has none, or serves a queue group (the coord), answers nothing
  and is asked again after ``RETRY_S``;
* **who may call**: the port answers only a caller that proves it holds the cluster's NATS
  credentials (an HMAC of a fresh nonce under a key derived from them); without
  credentials there is no port;
* **what it answers**: the same frame messages a NATS reply carries, from the connection's
  own thread (no loop, no pool); an error the handler raised, INTERNAL alike. A subject it
  no longer serves (its role stopping) gets an empty answer, and the caller asks over NATS;
* **when it cannot**: a port that refuses the connection or the credentials is forgotten
  and the request goes over NATS; a connection that breaks while a request waits is
  UNAVAILABLE (a read fails over to another replica), as is a server whose subject NATS
  says nobody serves any more (the probe of ``PROBE_AFTER_S``, as on NATS); the timeout
  is the caller's.

Wire format, after the handshake (server: ``b"ED1"`` and a 16-byte nonce; caller: the
32-byte HMAC-SHA256; server: ``b"+"``): a request is ``u32 subject length | u64 data
length | subject | data``; a reply is ``u64 length | data`` (length 0: not served here).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from elanus.channels.natsauth import NatsCredentials
from elanus.channels.syncnats import SEND_TIMEOUT_S, readable
from elanus.channels.transport import (
    HANDLER_THREADS,
    PROBE_AFTER_S,
    Handler,
    answer_blocking,
    is_blocking,
)
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

MAGIC = b"ED1"
NONCE = 16
DIGEST = 32
_REQUEST = struct.Struct("<IQ")
_REPLY = struct.Struct("<Q")
HANDSHAKE_S = 2.0
CONNECT_S = 1.0
RETRY_S = 10.0
"""A role instance without a direct port is asked again after this long."""


def direct_key(credentials: NatsCredentials | None) -> bytes | None:
    """The key both ends derive from the cluster's NATS credentials (None: no port)."""
    if credentials is None:
        return None
    text = f"elanus-direct\0{credentials.user}\0{credentials.password}"
    return hashlib.sha256(text.encode()).digest()


def _read_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes (the socket's timeout applies); EOF is ConnectionError."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("the peer closed the connection")
        got += k
    return bytes(buf)


# -- the serving side --------------------------------------------------------------------------
class DirectServer:
    """This process's direct port: the blocking handlers of every prefix it serves alone."""

    def __init__(self, host: str, key: bytes) -> None:
        self.key = key
        self._listener = socket.create_server((host, 0))
        self.address = f"{host}:{self._listener.getsockname()[1]}"
        self._handlers: dict[str, Handler] = {}
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        """Tokens of the handlers that may run at once (a C-level semaphore: Python's
        ``Semaphore`` was 6% of a query node's samples)."""
        for slot in range(HANDLER_THREADS):
            self._slots.put(slot)
        threading.Thread(target=self._accept, name="elanus-direct", daemon=True).start()

    def add(self, prefix: str, handlers: dict[str, Handler]) -> None:
        with self._lock:
            for method, handler in handlers.items():
                if is_blocking(handler):
                    self._handlers[f"{prefix}.{method}"] = handler

    def remove(self, prefix: str, handlers: dict[str, Handler]) -> None:
        with self._lock:
            for method, handler in handlers.items():
                if self._handlers.get(f"{prefix}.{method}") is handler:
                    del self._handlers[f"{prefix}.{method}"]

    def describe(self, prefix: str, handlers: dict[str, Handler]) -> bytes:
        """The answer to a caller's ``Elanus-Direct`` question on one of ``prefix``'s
        subjects: where to connect, and which methods are served there."""
        methods = sorted(m for m, h in handlers.items() if is_blocking(h))
        return orjson.dumps({"address": self.address, "prefix": prefix, "methods": methods})

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._open)
        for s in (self._listener, *conns):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._open.add(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="elanus-direct-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(HANDSHAKE_S)
            nonce = os.urandom(NONCE)
            conn.sendall(MAGIC + nonce)
            proof = _read_exact(conn, DIGEST)
            if not hmac.compare_digest(proof, hmac.new(self.key, nonce, "sha256").digest()):
                log.warning("direct port: a caller without the cluster's credentials")
                return
            conn.sendall(b"+")
            conn.settimeout(None)
            while True:
                size, length = _REQUEST.unpack(_read_exact(conn, _REQUEST.size))
                subject = _read_exact(conn, size).decode()
                data = _read_exact(conn, length)
                with self._lock:
                    handler = self._handlers.get(subject)
                if handler is None:  # no longer served here: the caller asks over NATS
                    conn.sendall(_REPLY.pack(0))
                    continue
                slot = self._slots.get()  # at most as many at once as the NATS path's pool
                try:
                    reply = answer_blocking(subject, handler, data)
                finally:
                    self._slots.put(slot)
                conn.sendall(_REPLY.pack(len(reply)) + reply)
        except (OSError, ConnectionError, ValueError):
            pass  # the caller went away (or spoke nonsense): its connection ends
        finally:
            with self._lock:
                self._open.discard(conn)
            conn.close()


def local_host(nats_url: str) -> str:
    """The address of this host on the way to the nats-server: the one peers reach."""
    from urllib.parse import urlsplit

    first = nats_url.split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"nats://{first}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((parts.hostname or "127.0.0.1", parts.port or 4222))
        return str(probe.getsockname()[0])


# -- the calling side ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    address: str
    prefix: str
    methods: frozenset[str]


class NotDirect(Exception):
    """This request cannot go directly (no port, or it refused us): send it over NATS."""


class DirectClient:
    """Direct connections to other processes' ports, found over NATS (``discover``), one
    idle pool per address; each connection carries one request at a time."""

    def __init__(
        self,
        key: bytes,
        discover: Callable[[str], bytes | None],
        serves: Callable[[str], bool],
    ) -> None:
        self.key = key
        self._discover = discover
        self._serves = serves
        self._routes: dict[str, Route] = {}
        self._misses: dict[str, float] = {}
        self._idle: dict[str, list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for s in conns:
                s.close()

    def route(self, subject: str) -> Route | None:
        """Where ``subject`` is served directly, asking its server once if need be."""
        prefix, _, method = subject.rpartition(".")
        while prefix:
            known = self._routes.get(prefix)
            if known is not None:
                return known if method in known.methods else None
            prefix, _, head = prefix.rpartition(".")
            method = f"{head}.{method}"
        if self._misses.get(subject, 0.0) > time.monotonic():
            return None
        answer = self._discover(subject)
        found = _parse_route(answer) if answer else None
        if found is None:
            self._misses[subject] = time.monotonic() + RETRY_S
            return None
        self._routes[found.prefix] = found
        return self.route(subject) if subject.startswith(f"{found.prefix}.") else None

    def forget(self, route: Route) -> None:
        if self._routes.get(route.prefix) == route:
            self._routes.pop(route.prefix, None)
        with self._lock:
            conns = self._idle.pop(route.address, [])
        for s in conns:
            s.close()

    def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        """The reply's bytes; NotDirect when the request should go over NATS instead."""
        return self.finish(self.start(subject, data), timeout)

    def start(self, subject: str, data: bytes) -> Pending:
        """Send a request (NotDirect: send it over NATS); ``finish`` waits for its reply,
        ``abandon`` drops it. Several started at once run at once (a fan-out)."""
        route = self.route(subject)
        if route is None:
            raise NotDirect(subject)
        conn = self._checkout(route)
        name = subject.encode()
        try:
            conn.settimeout(SEND_TIMEOUT_S)
            conn.sendall(_REQUEST.pack(len(name), len(data)) + name + data)
        except OSError as exc:
            conn.close()
            raise _lost(route, subject, exc) from None
        return Pending(conn, route, subject)

    def finish(self, pending: Pending, timeout: float) -> bytes:
        """The reply of a started request, within ``timeout`` from now."""
        conn = pending.conn
        try:
            raw = self._await(pending, timeout)
        except BaseException:
            conn.close()  # a reply may still come, or it is broken: never reused
            raise
        with self._lock:
            if not self._closed:
                self._idle.setdefault(pending.route.address, []).append(conn)
                return raw
        conn.close()
        return raw

    @staticmethod
    def abandon(pending: Pending) -> None:
        pending.conn.close()

    def _checkout(self, route: Route) -> socket.socket:
        while True:
            with self._lock:
                if self._closed:
                    raise NotDirect("closed")
                pool = self._idle.get(route.address)
                conn = pool.pop() if pool else None
            if conn is None:
                return self._connect(route)
            # A server never speaks unasked: anything to read on an idle one is its end.
            if not readable(conn, 0.0):
                return conn
            conn.close()

    def _connect(self, route: Route) -> socket.socket:
        host, _, port = route.address.rpartition(":")
        try:
            conn = socket.create_connection((host, int(port)), CONNECT_S)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(HANDSHAKE_S)
            hello = _read_exact(conn, len(MAGIC) + NONCE)
            if not hello.startswith(MAGIC):
                raise ConnectionError("not a direct port")
            conn.sendall(hmac.new(self.key, hello[len(MAGIC) :], "sha256").digest())
            if _read_exact(conn, 1) != b"+":
                raise ConnectionError("refused")
            conn.settimeout(None)
            return conn
        except (OSError, ConnectionError, ValueError) as exc:
            log.info("direct port %s not usable (%s): requests go over NATS", route.address, exc)
            self.forget(route)
            raise NotDirect(route.address) from None

    def _await(self, pending: Pending, timeout: float) -> bytes:
        conn, route, subject = pending.conn, pending.route, pending.subject
        try:
            deadline = time.monotonic() + timeout
            while True:  # wait for the reply's first bytes, probing a silent server
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _timed_out(subject, timeout)
                if readable(conn, min(left, PROBE_AFTER_S)):
                    break
                if not self._serves(subject):
                    raise ElanusError(
                        ErrorCode.UNAVAILABLE,
                        f"the server that took the request on {subject} is gone",
                    )
            conn.settimeout(max(deadline - time.monotonic(), PROBE_AFTER_S))
            (length,) = _REPLY.unpack(_read_exact(conn, _REPLY.size))
            if not length:  # the port no longer serves it (a frame message is never empty)
                self.forget(route)
                raise NotDirect(subject)
            return _read_exact(conn, length)
        except TimeoutError:
            raise _timed_out(subject, timeout) from None
        except (OSError, ConnectionError) as exc:
            raise _lost(route, subject, exc) from None


@dataclass(frozen=True, slots=True)
class Pending:
    """A request sent on its own connection, its reply not read yet."""

    conn: socket.socket
    route: Route
    subject: str


def _lost(route: Route, subject: str, exc: BaseException) -> ElanusError:
    return ElanusError(
        ErrorCode.UNAVAILABLE,
        f"the connection to {route.address} was lost while {subject} waited for its reply: {exc}",
    )


def _timed_out(subject: str, timeout: float) -> ElanusError:
    return ElanusError(ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s")


def _parse_route(answer: bytes) -> Route | None:
    try:
        doc: Any = orjson.loads(answer)
        return Route(str(doc["address"]), str(doc["prefix"]), frozenset(doc["methods"]))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
