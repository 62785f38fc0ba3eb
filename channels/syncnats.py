"""Request/reply over NATS from a plain thread, with no event loop in between.

A Flight handler that asks a role in another process (the proxy's search, a delegator's
remote worker) used to hand the request to the bus's loop and wait for it there: a
self-pipe wakeup and a concurrent future on the way out, an inbox task, a queue and
another wakeup on the way back. Here the calling thread writes the request on a socket
of its own (a small pool of raw NATS connections, one per concurrent caller) and reads
the reply from it, so the wait costs no thread hop at all.

The answers are the transport's (``channels/transport.py``): the same frame messages,
replies in parts, the probe of a request not answered for ``PROBE_AFTER_S`` (a gone server
is UNAVAILABLE), NATS's no-responders answer (UNAVAILABLE), a lost connection
(UNAVAILABLE: a read fails over to another replica) and the timeout. A request too large
for one message is not taken (``SyncRequester.fits``): the caller sends it the loop's way.

Only the NATS client protocol's request side is spoken: CONNECT (user and password),
SUB on the connection's inbox, PUB/HPUB, MSG/HMSG and PING/PONG.
"""

from __future__ import annotations

import itertools
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

from elanus.channels import frames
from elanus.channels.natsauth import NatsCredentials
from elanus.channels.transport import (
    DIRECT,
    PART_MARGIN,
    PARTS,
    PROBE,
    PROBE_AFTER_S,
    PROBE_WAIT_S,
    STATUS_NO_RESPONDERS,
    Unusable,
)
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

IDLE_S = 30.0
"""A pooled connection idle longer than this is replaced: the server pings idle clients
every two minutes and drops those that do not answer."""
CONNECT_TIMEOUT_S = 2.0
BIG_BODY = 64 * 1024
"""A message this large is read into a buffer of its own (``Connection._big_message``)."""
BODY_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0
"""A send that cannot go out in this long (a server not reading) loses the connection."""


class Pieces:
    """A payload in pieces the socket gathers (``sendmsg``), so none is copied to join
    them; ``bytes()`` joins them where one piece is needed."""

    __slots__ = ("nbytes", "parts")

    def __init__(self, parts: list[bytes | memoryview]) -> None:
        self.parts = parts
        self.nbytes = sum(len(p) for p in parts)

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


class ConnectionLost(Exception):
    """The socket closed or failed: the request's fate is unknown."""


class TlsRequired(ConnectionLost):
    """The server speaks TLS only (an operator's NATS): this raw client does not."""


@dataclass(slots=True)
class Message:
    subject: str
    headers: dict[str, str]
    data: bytes
    reply: str = ""

    @property
    def status(self) -> str | None:
        return self.headers.get("Status")


class Connection:
    """One raw NATS connection, used by one thread at a time."""

    def __init__(self, url: str, credentials: NatsCredentials | None, name: str) -> None:
        parts = urlsplit(url if "://" in url else f"nats://{url}")
        self.sock = socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or 4222), CONNECT_TIMEOUT_S
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self.inbox = f"_SINBOX.{os.urandom(8).hex()}"
        self.used = time.monotonic()
        try:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            line = self._line(deadline)
            if not line.startswith(b"INFO "):
                raise ConnectionLost(f"unexpected greeting {line[:40]!r}")
            info = orjson.loads(line[5:])
            if info.get("tls_required"):
                raise TlsRequired("the server requires TLS")
            self.max_payload = int(info.get("max_payload", 1024 * 1024))
            options = {
                "verbose": False,
                "pedantic": False,
                "headers": True,
                "no_responders": True,
                "protocol": 1,
                "lang": "python-elanus-sync",
                "version": "1",
                "name": name,
            }
            if credentials is not None:
                options.update(user=credentials.user, **{"pass": credentials.password})
            self.sock.sendall(
                b"CONNECT " + orjson.dumps(options) + b"\r\nSUB " + self.inbox.encode()
                + b".* 1\r\nPING\r\n"
            )  # fmt: skip
            while True:  # the PONG says CONNECT and SUB were taken
                line = self._line(deadline)
                if line.startswith(b"-ERR"):
                    raise ConnectionLost(line.decode(errors="replace"))
                if line == b"PONG":
                    break
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the socket; a thread blocked reading it (a consumer's long poll) wakes at
        once rather than at its timeout (``close`` alone does not wake it)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more
        try:
            self.sock.close()
        except OSError:
            pass

    # -- writing ----------------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        reply: str,
        data: bytes | Pieces,
        headers: dict[str, str] | None = None,
    ) -> None:
        """One message; ``reply`` may be empty (a reply itself)."""
        parts = data.parts if isinstance(data, Pieces) else [data]
        self._sendv(command(subject, reply, len(data), headers), *parts, b"\r\n")

    def probe(self, subject: str, reply: str) -> None:
        self.publish(subject, reply, b"", {PROBE: "1"})

    def _send(self, data: bytes) -> None:
        self._sendv(data)

    def _sendv(self, *parts: bytes | memoryview) -> None:
        """Send ``parts`` as one: gathered by the kernel, not joined here (a megabyte of
        DML is not copied to put a command line in front of it)."""
        views = [memoryview(p) for p in parts if len(p)]
        try:
            self.sock.settimeout(SEND_TIMEOUT_S)  # reads may have left it non-blocking
            while views:
                sent = self.sock.sendmsg(views)
                while views and sent >= len(views[0]):
                    sent -= len(views.pop(0))
                if views and sent:
                    views[0] = views[0][sent:]
        except OSError as exc:
            raise ConnectionLost(str(exc)) from None

    # -- reading ----------------------------------------------------------------------------
    def fresh(self) -> bool:
        """Whether this pooled connection may take a request: not idle too long, and
        nothing but pings (answered) or late replies (dropped) waiting on it."""
        if time.monotonic() - self.used > IDLE_S:
            return False
        try:
            while readable(self.sock, 0.0):
                if not self._fill(0.0):
                    return False
                while self._next_message(buffered_only=True) is not None:
                    pass  # a late reply of an abandoned request
        except (ConnectionLost, OSError):
            return False
        return True

    def read(self, deadline: float) -> Message | None:
        """The next message to this connection's inbox, or None at ``deadline``."""
        return self._next_message(deadline=deadline)

    def _next_message(self, deadline: float = 0.0, buffered_only: bool = False) -> Message | None:
        while True:
            end = self._buf.find(b"\r\n")
            if end < 0:
                if buffered_only or not self._fill(deadline):
                    return None
                continue
            line = bytes(self._buf[:end])
            if line.startswith((b"MSG ", b"HMSG ")):
                args = line.split()
                size = int(args[-1])
                start = end + 2
                if len(self._buf) < start + size + 2:
                    if size >= BIG_BODY and not buffered_only:
                        return self._big_message(args, start, size)
                    if buffered_only or not self._fill(deadline):
                        return None
                    continue
                head = int(args[-2]) if args[0] == b"HMSG" else 0
                headers = _headers(bytes(self._buf[start : start + head])) if head else {}
                data = bytes(self._buf[start + head : start + size])  # the one copy
                del self._buf[: start + size + 2]
                with_reply = len(args) == (6 if head else 5)
                reply = args[3].decode() if with_reply else ""
                return Message(args[1].decode(), headers, data, reply)
            del self._buf[: end + 2]
            if line == b"PING":
                self._send(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise ConnectionLost(line.decode(errors="replace"))
            # +OK, PONG and INFO (cluster changes) need nothing

    def _big_message(self, args: list[bytes], start: int, size: int) -> Message:
        """A large message whose start is buffered: the rest is read straight into the
        buffer it is handed on in (no copy, no page faults of buffers in between). Once
        its first bytes are here the rest is on its way: it is waited for, not timed out
        like a reply (``BODY_TIMEOUT_S`` is for a connection broken in the middle)."""
        head = int(args[-2]) if args[0] == b"HMSG" else 0
        pad = -head % 8  # the payload starts 8-aligned, as Arrow's buffers want it
        body = bytearray(pad + size + 2)
        have = pad + len(self._buf) - start
        body[pad:have] = self._buf[start:]
        self._buf.clear()
        view = memoryview(body)
        try:
            self.sock.settimeout(BODY_TIMEOUT_S)
            while have < len(body):
                got = self.sock.recv_into(view[have:])
                if not got:
                    raise ConnectionLost("the server closed the connection")
                have += got
        except OSError as exc:  # TimeoutError too: the connection is broken
            raise ConnectionLost(f"a message was cut off: {exc}") from None
        finally:
            view.release()
        headers = _headers(bytes(body[pad : pad + head])) if head else {}
        del body[pad + size :]  # the CRLF
        del body[: pad + head]  # from the front: no copy either
        reply = args[3].decode() if len(args) == (6 if head else 5) else ""
        return Message(args[1].decode(), headers, body, reply)  # type: ignore[arg-type]

    def _line(self, deadline: float) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if not self._fill(deadline):
                raise ConnectionLost("the server did not answer in time")
        line = bytes(self._buf[:end])
        del self._buf[: end + 2]
        return line

    def _fill(self, deadline: float) -> bool:
        """Read what the socket has; False if nothing came by ``deadline``."""
        left = deadline - time.monotonic()
        try:
            self.sock.settimeout(max(left, 0.0))
            chunk = self.sock.recv(256 * 1024)
        except (TimeoutError, BlockingIOError):
            return False
        except OSError as exc:
            raise ConnectionLost(str(exc)) from None
        if not chunk:
            raise ConnectionLost("the server closed the connection")
        self._buf += chunk
        return True


def header_block(headers: dict[str, str]) -> bytes:
    """Headers as they go on the wire, before the payload (``NATS/1.0`` and a line each)."""
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return f"NATS/1.0\r\n{lines}\r\n".encode()


def command(subject: str, reply: str, size: int, headers: dict[str, str] | None) -> bytes:
    """A PUB (or, with headers, HPUB) line for a ``size``-byte payload, and the header
    block, which comes before the payload."""
    to = f"{subject} {reply}" if reply else subject
    if not headers:
        return f"PUB {to} {size}\r\n".encode()
    block = header_block(headers)
    return f"HPUB {to} {len(block)} {len(block) + size}\r\n".encode() + block


def readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has something to read (or its end) within ``timeout`` seconds
    (``poll``: a busy process's descriptors may lie beyond ``select``'s limit)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(max(timeout, 0.0) * 1000))


def _headers(block: bytes) -> dict[str, str]:
    """A NATS header block; its status line's code as ``Status`` (as nats-py has it)."""
    lines = block.decode(errors="replace").split("\r\n")
    headers: dict[str, str] = {}
    status = lines[0][len("NATS/1.0") :].strip()
    if status:
        headers["Status"] = status.split(" ", 1)[0]
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep:
            headers[key.strip()] = value.strip()
    return headers


class SyncRequester:
    """Blocking request/reply over a pool of raw connections (see the module docstring)."""

    def __init__(self, url: str, credentials: NatsCredentials | None, name: str) -> None:
        self.urls = [u.strip() for u in url.split(",") if u.strip()]
        self.usable = not any(u.lower().startswith("tls://") for u in self.urls)
        """False once a server turned out to need TLS (or a URL asks for it): requests
        then go the loop's way (``Unusable``)."""
        self.credentials = credentials
        self.name = f"{name}-sync"
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._good = 0
        self._limit = 0
        """The largest request this pool sends (0: not known until a connection is made)."""

    def fits(self, size: int) -> bool:
        """Whether a request of ``size`` bytes goes out here as one message (else: the
        loop's transport, which sends parts, and speaks TLS)."""
        return self.usable and (self._limit == 0 or size <= self._limit)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def dedicated(self) -> Connection:
        """A connection of the caller's own, outside the pool (a consumer's fetches)."""
        return self._connect()

    def checkout(self) -> Connection:
        """A fresh connection for this thread alone (a DoPut stream holds one for all its
        messages); ``checkin`` it when nothing it sent is still unanswered, else close it."""
        while True:
            with self._lock:
                if self._closed:
                    raise ElanusError(ErrorCode.UNAVAILABLE, "the bus is closed")
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect()
            if conn.fresh():
                return conn
            conn.close()

    def _connect(self) -> Connection:
        """A new connection, to the server of a NATS cluster that took the last one first
        (a dead one is tried last)."""
        if not self.usable:
            raise Unusable("the NATS servers need TLS")
        errors = []
        first = self._good
        for i in range(len(self.urls)):
            url = self.urls[(first + i) % len(self.urls)]
            try:
                conn = Connection(url, self.credentials, self.name)
            except TlsRequired:
                self.usable = False
                raise Unusable("the NATS servers need TLS") from None
            except (OSError, ConnectionLost) as exc:
                errors.append(f"{url}: {exc}")
                continue
            self._good = (first + i) % len(self.urls)
            self._limit = max(conn.max_payload - PART_MARGIN, 64 * 1024)
            return conn
        raise ElanusError(ErrorCode.UNAVAILABLE, f"cannot reach NATS: {'; '.join(errors)}")

    def checkin(self, conn: Connection) -> None:
        conn.used = time.monotonic()
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def ask(self, subject: str, header: str) -> Message | None:
        """The answer to a control message (``header`` set, empty body) a server answers
        at once without running a handler; None if none came in ``PROBE_WAIT_S``."""
        try:
            conn = self.checkout()
        except ElanusError:  # our own way to NATS is down: that tells nothing of the server
            return None
        token = f"{conn.inbox}.{next(self._ids)}"
        try:
            conn.publish(subject, token, b"", {header: "1"})
            deadline = time.monotonic() + PROBE_WAIT_S
            while (msg := conn.read(deadline)) is not None:
                if msg.subject == token:
                    self.checkin(conn)
                    return msg
        except ConnectionLost:
            conn.close()
            return None
        self.checkin(conn)
        return None

    def serves(self, subject: str) -> bool:
        """Whether anybody serves ``subject`` (``NatsTransport.serves``, from a thread)."""
        answer = self.ask(subject, PROBE)
        return answer is None or answer.status != STATUS_NO_RESPONDERS

    def direct(self, subject: str) -> bytes | None:
        """The direct port of ``subject``'s server, as it describes it (None: none)."""
        answer = self.ask(subject, DIRECT)
        if answer is None or answer.status is not None or not answer.data:
            return None
        return answer.data

    def reply(self, to: str, data: bytes) -> None:
        """Publish a handler's reply from this thread, in parts when it is large (NATS
        keeps one connection's order, so the requester joins them in order)."""
        conn = self.checkout()
        try:
            parts = frames.split(data, self._limit)
            headers = {PARTS: str(len(parts))} if len(parts) > 1 else None
            for part in parts:
                conn.publish(to, "", part, headers)
        except ConnectionLost:
            conn.close()
            raise
        self.checkin(conn)

    def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        """The reply's bytes (every part joined), or the transport's errors."""
        conn = self.checkout()
        try:
            raw = self._exchange(conn, subject, data, timeout)
        except ConnectionLost as exc:
            conn.close()
            self._good = (self._good + 1) % len(self.urls)  # its server may be the one gone
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"the connection to NATS was lost while {subject} waited for its reply: {exc}",
            ) from None
        except BaseException:
            conn.close()  # a reply may still come: this connection is not clean any more
            raise
        self.checkin(conn)
        return raw

    def _exchange(self, conn: Connection, subject: str, data: bytes, timeout: float) -> bytes:
        token = f"{conn.inbox}.{next(self._ids)}"
        conn.publish(subject, token, data)
        now = time.monotonic()
        deadline = now + timeout
        probe: str | None = None
        wake = now + PROBE_AFTER_S
        parts: list[bytes] = []
        count = 1
        while True:
            msg = conn.read(min(wake, deadline) if not parts else deadline)
            now = time.monotonic()
            if msg is None:
                if now >= deadline:
                    raise ElanusError(ErrorCode.TIMEOUT, f"{subject} did not answer in {timeout}s")
                if parts:
                    continue
                if probe is None:  # not answered yet: is its server still there?
                    probe = f"{conn.inbox}.{next(self._ids)}"
                    conn.probe(subject, probe)
                    wake = now + PROBE_WAIT_S
                else:  # the probe was not answered in time: a busy server, alive
                    probe, wake = None, now + PROBE_AFTER_S
                continue
            if msg.subject == probe:
                if msg.status == STATUS_NO_RESPONDERS:
                    raise ElanusError(
                        ErrorCode.UNAVAILABLE,
                        f"the server that took the request on {subject} is gone",
                    )
                probe, wake = None, now + PROBE_AFTER_S
                continue
            if msg.subject != token:
                continue  # a late answer to an earlier request or probe
            if msg.status == STATUS_NO_RESPONDERS:
                raise ElanusError(ErrorCode.UNAVAILABLE, f"no service answers on {subject}")
            if not parts:
                count = int(msg.headers.get(PARTS, "1"))
            parts.append(msg.data)
            if len(parts) >= count:
                return parts[0] if count == 1 else b"".join(parts)
