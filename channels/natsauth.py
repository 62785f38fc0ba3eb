"""Credentials of the roles on NATS, so that only Elanus processes speak on the bus.

A standalone server's embedded nats-server requires a user and password. When the settings
name none, a random password is generated on first start and kept owner-only (mode 0600)
under the NATS store dir, so a restart reuses it. In cluster mode the roles take them from
the settings (``ELANUS_NATS_USER`` / ``ELANUS_NATS_PASSWORD``) or from the URL's userinfo
(``nats://user:password@host:4222``); URLs are always shown without it.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from elanus.errors import ElanusError, ErrorCode

DEFAULT_USER = "elanus"
CREDENTIALS_FILE = "credentials.json"
ENV_USER = "ELANUS_NATS_USER"
ENV_PASSWORD = "ELANUS_NATS_PASSWORD"


@dataclass(frozen=True)
class NatsCredentials:
    user: str
    password: str

    def __repr__(self) -> str:  # never print the password by accident
        return f"NatsCredentials(user={self.user!r}, password='***')"

    def env(self) -> dict[str, str]:
        """Environment for a role process started by this one: secrets never go on a
        command line, where ``ps`` shows them to every user of the machine."""
        return {ENV_USER: self.user, ENV_PASSWORD: self.password}


def split_url(url: str) -> tuple[str, NatsCredentials | None]:
    """``url`` without userinfo, and the credentials it carried (if both parts were)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    if parts.username and parts.password is not None:
        return clean, NatsCredentials(unquote(parts.username), unquote(parts.password))
    return clean, None


def split_urls(urls: str) -> tuple[str, NatsCredentials | None]:
    """``split_url`` over a comma-separated list of servers (a NATS cluster): the clean
    list, and the credentials of the first URL that carried some."""
    cleaned, found = [], None
    for url in (u.strip() for u in urls.split(",")):
        if not url:
            continue
        clean, creds = split_url(url)
        cleaned.append(clean)
        found = found or creds
    if not cleaned:
        raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"no NATS URL in {urls!r}")
    return ",".join(cleaned), found


def redact_url(url: str | None) -> str | None:
    """A URL (or comma-separated list of them) fit to print or log: userinfo dropped."""
    return None if url is None else split_urls(url)[0]


def resolve(
    url: str, user: str | None = None, password: str | None = None
) -> tuple[str, NatsCredentials | None]:
    """The clean URL (list) and the credentials a role connects with: explicit settings win
    over the URL's userinfo; a user without a password (or the reverse) is refused, since it
    would be silently ignored by the server."""
    clean, from_url = split_urls(url)
    if user is None and password is None:
        return clean, from_url
    if password is None:
        raise ElanusError(ErrorCode.INVALID_ARGUMENT, "nats_user is set but nats_password is not")
    return clean, NatsCredentials(user or DEFAULT_USER, password)


def check_for_config(creds: NatsCredentials) -> NatsCredentials:
    """Refuse values the embedded server's config file cannot hold as plain text: control
    characters, and a password starting with ``$2`` (nats-server reads that as a bcrypt
    hash, and every login would then fail)."""
    for what, value in (("nats_user", creds.user), ("nats_password", creds.password)):
        if not value or any(ord(c) < 32 or c == "\x7f" for c in value):
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT, f"{what} must be non-empty printable text"
            )
    if creds.password.startswith("$2"):
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            "nats_password must not start with '$2' (nats-server would take it for a bcrypt hash)",
        )
    return creds


def conf_string(value: str) -> str:
    """A double-quoted string for nats-server's config syntax."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, atomically: the file is
    created 0600 (never briefly world-readable) and renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the file may have existed with wider rights
        with os.fdopen(fd, "w") as fh:
            fd = -1
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    os.replace(tmp, path)


def stored_credentials(directory: Path, user: str | None = None) -> NatsCredentials:
    """The embedded server's credentials kept in ``directory``; generated on first use."""
    wanted = user or DEFAULT_USER
    stored = read_stored(directory)
    if stored is not None and stored.user == wanted:
        return stored
    creds = NatsCredentials(wanted, secrets.token_urlsafe(32))
    path = directory / CREDENTIALS_FILE
    write_private(path, json.dumps({"user": creds.user, "password": creds.password}) + "\n")
    return creds


def read_stored(directory: Path) -> NatsCredentials | None:
    """The credentials kept in ``directory`` (None when there are none). A stored file that
    is not owner-only is refused rather than used: someone else may have read the password."""
    path = directory / CREDENTIALS_FILE
    if not path.exists():
        return None
    st = path.stat()
    if st.st_mode & 0o077:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"{path} is readable by other users (mode {st.st_mode & 0o777:o}); "
            "chmod 600 it or remove it to generate new NATS credentials",
        )
    try:
        doc = json.loads(path.read_text())
        return NatsCredentials(str(doc["user"]), str(doc["password"]))
    except (OSError, ValueError, KeyError, TypeError):
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"{path} does not hold NATS credentials; remove it to generate new ones",
        ) from None
