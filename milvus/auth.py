"""Who is calling over Milvus's protocol: every call carries ``authorization``, base64 of
``user:password`` (pymilvus sends its ``token`` or ``user``/``password`` that way).

A password check is slow on purpose (argon2), so a checked credential is remembered by
digest together with the user's password version; each call then only compares that
version with the proxy's cached identity (``Authenticator.identity``), which a password
change invalidates -- as Flight's bearer tokens are revoked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Iterable

from elanus.errors import ElanusError, ErrorCode
from elanus.flight.auth import ANONYMOUS, Authenticator, Caller

MAX_REMEMBERED = 4096


def _unauthenticated(message: str) -> ElanusError:
    return ElanusError(ErrorCode.UNAUTHENTICATED, message)


class MilvusCredentials:
    """Turns a call's metadata into a ``Caller``; thread-safe."""

    def __init__(self, auth: Authenticator | None) -> None:
        self.auth = auth
        self._known: dict[bytes, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def caller(self, metadata: Iterable[tuple[str, str | bytes]]) -> Caller:
        auth = self.auth
        if auth is None:
            return ANONYMOUS
        raw = next((v for k, v in metadata if k.lower() == "authorization"), None)
        if not raw:
            raise _unauthenticated(
                "authentication is required: connect with user and password (or token "
                "'user:password')"
            )
        text = raw.decode() if isinstance(raw, bytes) else raw
        try:
            user, sep, password = base64.b64decode(text.strip()).decode().partition(":")
        except (ValueError, UnicodeDecodeError, binascii.Error):
            raise _unauthenticated("unreadable credentials in 'authorization'") from None
        if not sep:
            raise _unauthenticated("credentials must be 'user:password'")
        digest = hashlib.sha256(text.encode()).digest()
        with self._lock:
            known = self._known.get(digest)
        if known is not None:
            caller = auth.identity(known[0])
            if caller.pw_version == known[1]:
                return caller
        caller = auth.check_password(user, password)
        with self._lock:
            if len(self._known) >= MAX_REMEMBERED:
                self._known.clear()
            self._known[digest] = (caller.user, caller.pw_version)
        return caller
