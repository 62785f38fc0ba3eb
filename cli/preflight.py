"""What a server's start checks before it makes anything: the data dir, the storage, the
TLS files, the ports and an external NATS.

A start that its configuration dooms fails here, in one ``error: [CODE] message`` line
(``cli/main.py``), before a directory, a NATS store or a password file exists. Whatever
else fails later in a start is undone by ``leave_as_found``: a failed start leaves the
data dir as it found it.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import ssl
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from elanus import objstore
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.settings import Settings
from elanus.wire.tls import server_tls

FLAGS = {
    "flight_port": "--port",
    "milvus_port": "--milvus-port",
    "metrics_port": "--metrics-port",
    "nats_port": "--nats-port",
}
"""The command-line flag of each port setting, for the error that names it."""
NATS_CONNECT_S = 2.0
"""How long the check waits for a TCP connection to an external NATS server."""


def check_start(
    settings: Settings, roles: Sequence[str], *, embedded_nats: bool, metrics: bool = True
) -> None:
    """Refuse, naming the setting, a start that could not succeed: the data dir (and a
    local storage root) must be a directory that can be made, an S3 storage must take a
    test object, TLS files must hold a certificate and its key, every port the process
    binds must be free, and an external NATS must answer."""
    check_directory(settings.data_path, "data_dir")
    if settings.storage_remote:
        objstore.Storage(settings.storage_uri, objstore.S3Config.of(settings)).probe()
    else:
        check_directory(settings.storage_path, "storage")
    ports: list[tuple[str, str, int]] = []
    if "proxy" in roles:
        check_tls(settings)
        ports += [("flight_port", settings.flight_host, settings.flight_port)]
        if not settings.serving_index:  # a further serving process shares the first's
            ports += [("milvus_port", settings.flight_host, settings.milvus_port)]
    if metrics:
        ports += [("metrics_port", settings.flight_host, settings.metrics_port)]
    if embedded_nats:
        ports += [("nats_port", "127.0.0.1", settings.nats_port)]
    check_ports(ports)
    if settings.nats_url and not embedded_nats:
        check_nats(settings.nats_url)


def check_directory(path: Path, setting: str) -> None:
    """``path`` is a directory, or one can be made there: its nearest existing ancestor is
    a directory this process may write."""
    if path.exists():
        if not path.is_dir():
            raise invalid(f"{setting} {path} is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise invalid(f"{setting} {path} is not writable by this user")
        return
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise invalid(f"{setting} {path} cannot be made: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise invalid(f"{setting} {path} cannot be made: {parent} is not writable by this user")


def check_tls(settings: Settings) -> None:
    """The proxy's TLS files, loaded as its servers will load them: PEM, a certificate
    chain with the key that belongs to it, and a CA bundle for mutual TLS."""
    server_tls(settings.tls_cert, settings.tls_key, settings.tls_client_ca)  # present, PEM
    if not settings.tls_cert or not settings.tls_key:
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except ssl.SSLError as exc:
        raise invalid(
            f"tls_cert {settings.tls_cert} and tls_key {settings.tls_key} are not a "
            f"certificate and its private key ({_ssl_reason(exc)})"
        ) from None
    if settings.tls_client_ca:
        try:
            context.load_verify_locations(settings.tls_client_ca)
        except ssl.SSLError as exc:
            raise invalid(
                f"tls_client_ca {settings.tls_client_ca} holds no CA certificate "
                f"({_ssl_reason(exc)})"
            ) from None


def _ssl_reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc).lower().replace("_", " ")


def check_ports(ports: Iterable[tuple[str, str, int]]) -> None:
    """Each ``(setting, host, port)`` (0: any free port, not checked) can be bound, and no
    two settings name the same port."""
    seen: dict[int, str] = {}
    for setting, host, port in ports:
        if not port:
            continue
        if port in seen:
            raise invalid(f"{setting} and {seen[port]} are both {port}; give each its own port")
        seen[port] = setting
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
        except socket.gaierror as exc:
            where = "the NATS host" if setting == "nats_port" else "flight_host, --host"
            raise invalid(f"cannot resolve host {host!r} ({where}): {exc.strerror}") from None
        except OSError as exc:
            why = (
                "the port is in use (another server?)"
                if exc.errno == errno.EADDRINUSE
                else (exc.strerror or str(exc)).lower()
            )
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"cannot serve on {host}:{port} (setting {setting}, {FLAGS[setting]}): {why}",
            ) from None


def check_nats(urls: str) -> None:
    """At least one server of ``urls`` (comma-separated) takes a TCP connection: a role
    would otherwise try to connect for its whole connect timeout and then say only that."""
    tried = []
    for url in urls.split(","):
        parts = urlsplit(url.strip() if "://" in url else f"nats://{url.strip()}")
        host, port = parts.hostname or "127.0.0.1", parts.port or 4222
        try:
            with socket.create_connection((host, port), timeout=NATS_CONNECT_S):
                return
        except OSError as exc:
            tried.append(f"{host}:{port} ({(exc.strerror or type(exc).__name__).lower()})")
    raise ElanusError(
        ErrorCode.UNAVAILABLE,
        f"no NATS server answers at {', '.join(tried)} (setting nats_url): start one, or "
        "leave nats_url unset for an embedded one (elanus standalone)",
    )


def snapshot(path: Path) -> set[str] | None:
    """The names in directory ``path`` (None: it does not exist), for ``leave_as_found``."""
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return None


def leave_as_found(path: Path, before: set[str] | None) -> None:
    """After a failed start: remove the directory ``path`` if it did not exist before, else
    what the start added to it (``before`` is ``snapshot(path)`` taken first)."""
    if before is None:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in set(snapshot(path) or ()) - before:
        target = path / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
