"""Who is calling: the proxy's Flight middleware, bearer tokens and the privilege check.

A client authenticates once with HTTP basic credentials (Flight's ``Handshake``, as
``FlightClient.authenticate_basic_token`` does; any call may carry them, at the cost of a
password check) and gets back ``authorization: Bearer <token>``; later calls carry the
token. A token is ``<payload>.<mac>``: the user, their password version and an expiry,
signed with HMAC-SHA256 under a secret every proxy gets from the coord, so any proxy checks
any token without a round trip. A password change bumps the version, which revokes older
tokens as soon as the proxies drop their cached identity (the coord tells them to).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow.flight as flight

from elanus.api.auth import Identity, UserIdentity, VerifyPassword
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import PrivilegeScope
from elanus.privileges import ANY, PRIVILEGES, Grant, Need, ObjectType, permits
from elanus.wire.codec import DEFAULT_DB

IDENTITY_TTL_S = 30.0
"""How long a proxy trusts a cached identity without hearing from the coord; changes reach
it sooner through the coord's invalidation broadcast."""

Verify = Callable[[VerifyPassword], UserIdentity]
"""The coord's password check, run on a Flight thread."""
Identify = Callable[[Identity], UserIdentity]
"""The coord's identity of a user, run on a Flight thread."""


@dataclass(frozen=True)
class Caller:
    """An authenticated user, with what they may do."""

    user: str
    superuser: bool = False
    grants: tuple[Grant, ...] = ()
    pw_version: int = 0

    def require(self, need: Need) -> None:
        if self.superuser or permits(self.grants, need):
            return
        raise ElanusError(
            ErrorCode.PERMISSION_DENIED,
            f"user {self.user!r} lacks the privilege {need.describe()}",
        )

    @classmethod
    def from_identity(cls, d: UserIdentity) -> Caller:
        grants = tuple(Grant(*map(str, g)) for g in d.grants)
        return cls(d.user, d.superuser, grants, d.pw_version)


ANONYMOUS = Caller("anonymous", superuser=True)
"""The caller when authentication is off: Elanus is then open, as Milvus is without
``authorizationEnabled``."""


def _unauthenticated(message: str) -> ElanusError:
    return ElanusError(ErrorCode.UNAUTHENTICATED, message)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Authenticator:
    """Checks credentials and tokens for one proxy; thread-safe (Flight calls run on many
    threads)."""

    verify: Verify
    identify: Identify
    secret: bytes
    token_ttl_s: float
    _cache: dict[str, tuple[float, Caller]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- tokens -----------------------------------------------------------------------------
    def issue(self, caller: Caller) -> str:
        payload = {"u": caller.user, "v": caller.pw_version, "exp": time.time() + self.token_ttl_s}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self.secret, body.encode(), hashlib.sha256).digest())

    def check_token(self, token: str) -> Caller:
        body, _, mac = token.partition(".")
        if not mac or not hmac.compare_digest(mac, self._mac(body)):
            raise _unauthenticated("invalid token; authenticate again")
        try:
            payload = json.loads(_unb64(body))
            user, version, expires = str(payload["u"]), int(payload["v"]), float(payload["exp"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise _unauthenticated("invalid token; authenticate again") from None
        if expires < time.time():
            raise _unauthenticated("the token has expired; authenticate again")
        caller = self.identity(user)
        if caller.pw_version != version:
            raise _unauthenticated("the token was revoked (the password changed)")
        return caller

    # -- identities -------------------------------------------------------------------------
    def check_password(self, user: str, password: str) -> Caller:
        caller = Caller.from_identity(self.verify(VerifyPassword(user=user, password=password)))
        self._remember(caller)
        return caller

    def identity(self, user: str) -> Caller:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(user)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            caller = Caller.from_identity(self.identify(Identity(user=user)))
        except ElanusError as exc:
            if exc.code == ErrorCode.USER_NOT_FOUND:
                raise _unauthenticated("the token's user no longer exists") from None
            raise
        self._remember(caller)
        return caller

    def _remember(self, caller: Caller) -> None:
        with self._lock:
            self._cache[caller.user] = (time.monotonic() + IDENTITY_TTL_S, caller)

    def forget(self, user: str | None) -> int:
        """Drop cached identities (the coord's ``auth`` invalidation)."""
        with self._lock:
            if user is None:
                n = len(self._cache)
                self._cache.clear()
                return n
            return 1 if self._cache.pop(user, None) else 0

    # -- a call's credentials ---------------------------------------------------------------
    def authenticate(self, headers: dict[str, list[str]]) -> tuple[Caller, str | None]:
        """(caller, a new token to send back or ``None``) from a call's headers."""
        values = _header(headers, "authorization")
        if not values:
            raise _unauthenticated(
                "authentication is required: send 'authorization: Basic ...' (Handshake) "
                "or a bearer token"
            )
        scheme, _, credential = values[0].strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            return self.check_token(credential.strip()), None
        if scheme == "basic":
            try:
                user, sep, password = base64.b64decode(credential.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise _unauthenticated("unreadable basic credentials") from None
            if not sep:
                raise _unauthenticated("basic credentials must be 'user:password'")
            caller = self.check_password(user, password)
            return caller, self.issue(caller)
        raise _unauthenticated(f"unsupported authorization scheme {scheme!r}")


def _header(headers: dict[str, list[str]], name: str) -> list[str]:
    for key, values in headers.items():
        if key.lower() == name:
            return [v.decode() if isinstance(v, bytes) else str(v) for v in values]
    return []


class AuthMiddleware(flight.ServerMiddleware):
    def __init__(self, caller: Caller, token: str | None) -> None:
        self.caller = caller
        self.token = token

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Runs before every Flight call (Handshake included): no credential, no call."""

    def __init__(self, authenticator: Callable[[], Authenticator | None]) -> None:
        self._authenticator = authenticator

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> AuthMiddleware:
        auth = self._authenticator()
        if auth is None:
            raise flight.FlightUnavailableError("[UNAVAILABLE] the proxy is starting")
        try:
            caller, token = auth.authenticate(headers)
        except ElanusError as exc:
            if exc.code == ErrorCode.UNAUTHENTICATED:
                raise flight.FlightUnauthenticatedError(f"[{exc.code}] {exc.message}") from None
            raise flight.FlightUnavailableError(f"[{exc.code}] {exc.message}") from None
        return AuthMiddleware(caller, token)


class HandshakeOnly(flight.ServerAuthHandler):
    """Lets Flight's ``Handshake`` through to the middleware, which does the checking (a
    server without an auth handler answers Handshake with UNIMPLEMENTED)."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""


MIDDLEWARE_KEY = "auth"


def caller_of(context: flight.ServerCallContext) -> Caller:
    middleware = context.get_middleware(MIDDLEWARE_KEY)
    return middleware.caller if isinstance(middleware, AuthMiddleware) else ANONYMOUS


class Guarded(Protocol):
    """What the privilege check reads of an action (``flight/actions.py``'s ``Action``;
    named here so this module stays below the registry it serves)."""

    @property
    def name(self) -> str: ...
    @property
    def privilege(self) -> str: ...
    @property
    def self_service(self) -> bool: ...


def need_for(caller: Caller, action: Guarded, request: PrivilegeScope) -> Need | None:
    """The privilege a checked DoAction request needs (``None``: any authenticated user)."""
    privilege = action.privilege
    if not privilege:
        return None
    if action.name == "commit_write" and request.get("upsert"):
        privilege = "Upsert"
    db = str(request.get("db") or DEFAULT_DB)
    kind = PRIVILEGES[privilege]
    if kind == ObjectType.USER:
        user = str(request.get("user_name") or "")
        if action.self_service and user == caller.user:
            return None
        return Need(privilege, db, user)
    if kind == ObjectType.GLOBAL:
        return Need(privilege, db)
    name = request.get("collection") or request.get("name") or ANY
    return Need(privilege, db, str(name))


def authorize(caller: Caller, action: Guarded, request: PrivilegeScope) -> None:
    need = need_for(caller, action, request)
    if need is not None:
        caller.require(need)
