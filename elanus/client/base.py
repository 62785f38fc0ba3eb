"""The plumbing every part of the SDK shares: the Flight connection, one DoAction round
trip, the client's database, and the schema of a collection (for inserts and paging)."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack, cast

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.compat import reject_unknown
from elanus.client.retry import OnWait
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import body_of, name_of
from elanus.ops.collections import DescribeCollection
from elanus.ops.replies import CollectionDescription
from elanus.schema import Schema, check_name
from elanus.wire.codec import DEFAULT_DB, decode_body, encode_json, from_flight_error
from elanus.wire.tls import TlsOptions, client_tls

RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
"""gRPC waits between tries to reach a proxy that is away: its own default grows to two
minutes, so a client of a proxy down 12 s tried again only ~5 s after it was back."""

R = TypeVar("R")


@dataclass
class Login:
    """The credentials a client was opened with, as pymilvus takes them: ``token`` as
    ``"user:password"`` (or a bearer token from an earlier handshake), or user + password."""

    user: str
    password: str | None
    expires: float = 0.0
    renew_at: float = 0.0

    @classmethod
    def of(cls, token: str | None, user: str | None, password: str | None) -> Login | None:
        if token:
            name, sep, secret = token.partition(":")
            return cls(name, secret) if sep else cls(token, None)
        if user:
            return cls(user, password or "")
        return None

    def expiring(self) -> bool:
        return self.password is not None and 0 < self.renew_at < time.time()

    def renewed(self, header: str) -> None:
        """Read the expiry a bearer token carries (not its signature: the server checks it)."""
        token = header.partition(" ")[2]
        try:
            body = token.partition(".")[0]
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            self.expires = float(payload["exp"])
        except (ValueError, KeyError, TypeError):
            self.expires = self.renew_at = 0.0
            return
        now = time.time()
        self.renew_at = self.expires - min(RENEW_BEFORE_S, (self.expires - now) / 4)


CONNECT_TIMEOUT_S = 10.0
"""The longest the round trip at connect may take (less if the client's ``timeout`` is)."""


def connect_timeout(timeout: float | None) -> float:
    return min(timeout, CONNECT_TIMEOUT_S) if timeout else CONNECT_TIMEOUT_S


RENEW_BEFORE_S = 60.0
"""A token this close to its expiry (or in the last quarter of its life) is renewed by a
new handshake before the next call."""


class ClientBase:
    """The connection half of ``Client``; the API mixins build on it."""

    def __init__(
        self,
        uri: str = "grpc://localhost:8815",
        timeout: float | None = None,
        db: str = DEFAULT_DB,
        *,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
        retry_deadline_s: float = 60.0,
        **tls: Unpack[TlsOptions],
    ) -> None:
        """Credentials (with ``auth_enabled``): ``token="user:password"`` as pymilvus takes
        it, or ``user`` and ``password``. ``tls_root_certs`` (or pymilvus's
        ``server_pem_path`` / ``ca_pem_path``) is the CA to trust, a PEM path or bytes;
        ``client_pem_path`` and ``client_key_path`` are the certificate and key for mutual
        TLS. TLS material makes a ``grpc://`` uri
        ``grpc+tls://`` (see ``flight.tls.client_tls``). A write refused by the server's flow
        control (RATE_LIMITED) is sent again with backoff and jitter for up to
        ``retry_deadline_s`` seconds (0: never; ``client.retry``); ``on_retry`` is told
        of each wait."""
        reject_unknown(
            "Client", {k: v for k, v in tls.items() if k not in TlsOptions.__annotations__}
        )
        uri, tls_args = client_tls(uri, **tls)
        self.uri = uri
        self.timeout = timeout
        self._db = check_name(db, "database")
        self._last_write_ts: int = 0
        self.retry_deadline_s = retry_deadline_s
        self.on_retry: OnWait | None = None
        """The newest write of this client: what a Session-consistent read waits for."""
        try:
            self._flight: flight.FlightClient | None = flight.FlightClient(
                uri, generic_options=RECONNECT_OPTIONS, **tls_args
            )
        except (pa.ArrowException, ValueError) as exc:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"bad proxy uri {uri!r}: {exc}") from None
        self._login = Login.of(token, user, password)
        self._headers: list[tuple[bytes, bytes]] = []
        try:
            if self._login is not None:
                self._authenticate(connect_timeout(timeout))
            if self._login is None or self._login.password is None:
                self._probe(connect_timeout(timeout))  # the handshake was no round trip
        except ElanusError:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def db(self) -> str:
        """The database that calls without an explicit ``db`` act on."""
        return self._db

    def _conn(self) -> flight.FlightClient:
        if self._flight is None:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the client is closed")
        return self._flight

    def _options(self, timeout: float | None) -> flight.FlightCallOptions:
        t = timeout if timeout is not None else self.timeout
        if self._login is not None and self._login.expiring():
            self._authenticate()
        return flight.FlightCallOptions(timeout=t, headers=self._headers)

    def _probe(self, timeout: float) -> None:
        """One cheap call (Flight ListFlights) at connect, so a client on nothing, or on
        something that is not an Elanus proxy, fails here and says so. A refusal for want
        of credentials still proves an Elanus proxy answered."""
        options = flight.FlightCallOptions(timeout=timeout, headers=self._headers)
        try:
            for _ in self._conn().list_flights(options=options):
                break
        except (flight.FlightError, pa.ArrowException) as exc:
            err = from_flight_error(exc, self.uri)
            if err.code not in (ErrorCode.UNAUTHENTICATED, ErrorCode.PERMISSION_DENIED):
                raise err from None

    def _authenticate(self, timeout: float | None = None) -> None:
        """Flight's basic-auth handshake; later calls carry the bearer token it returns."""
        login = self._login
        assert login is not None
        if login.password is None:  # a token from an earlier handshake
            self._headers = [(b"authorization", f"Bearer {login.user}".encode())]
            return
        try:
            header = self._conn().authenticate_basic_token(
                login.user,
                login.password,
                flight.FlightCallOptions(timeout=timeout or self.timeout),
            )
        except (flight.FlightError, pa.ArrowException) as exc:
            err = from_flight_error(exc, self.uri)
            if err.code == ErrorCode.INTERNAL and timeout:
                # At connect: a handshake with nothing (or no Flight) behind the uri fails
                # without saying why; the probe's call does.
                self._probe(timeout)
            raise err from None
        self._headers = [header]
        login.renewed(header[1].decode())

    def _action(
        self, name: str, body: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """One DoAction round trip: JSON body in, the first result's JSON object out."""
        action = flight.Action(name, encode_json(body or {}))
        try:
            results = list(self._conn().do_action(action, self._options(timeout)))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        if not results:
            return {}
        try:
            return decode_body(results[0].body.to_pybytes(), f"{name} result")
        except ElanusError as exc:
            raise ElanusError(ErrorCode.INTERNAL, f"unreadable reply: {exc.message}") from None

    def _in_db(self, db: str | None, **body: Any) -> dict[str, Any]:
        return {"db": db or self._db, **body}

    def _db_or_own(self, db: str | None) -> str:
        """The database a call names, else the client's."""
        return db or self._db

    def _op(self, op: object, *, timeout: float | None = None) -> dict[str, Any]:
        """The action of an operation record (``elanus/ops``): its fields as the body."""
        return self._action(name_of(op), body_of(op), timeout=timeout)

    def _reply(self, op: object, shape: type[R], *, timeout: float | None = None) -> R:
        """``_op`` whose reply has the keys ``shape`` declares (``elanus.ops.replies``):
        the server's JSON as it came, read through its declaration."""
        return cast(R, self._op(op, timeout=timeout))

    def close(self) -> None:
        if self._flight is not None:
            self._flight.close()
            self._flight = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.uri!r}, db={self._db!r})"

    def _saw_write(self, ts: int) -> None:
        """Remember a write's timestamp: later Session reads wait for the newest one."""
        self._last_write_ts = max(self._last_write_ts, int(ts))

    def _schema_of(self, collection_name: str, db: str | None) -> Schema:
        op = DescribeCollection(db=self._db_or_own(db), name=collection_name)
        return Schema.from_dict(self._reply(op, CollectionDescription)["schema"])
