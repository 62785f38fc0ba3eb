"""TLS for the Flight face: the PEM material a proxy serves with, and what a client trusts.

A proxy with ``tls_cert``/``tls_key`` serves ``grpc+tls://`` (and asks clients for a
certificate signed by ``tls_client_ca`` when that is set: mutual TLS). A client names the
CA it trusts as ``tls_root_certs`` (a PEM path or bytes), or by pymilvus's names
(``server_pem_path``, ``ca_pem_path``, ``client_pem_path``, ``client_key_path``,
``server_name``, ``secure``), so code written for pymilvus carries over.

Imports only the standard library and the shared error types, so the client SDK may use
it. Errors name the setting or argument and the path, never the file's bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypedDict, Unpack

from elanus.errors import ElanusError, ErrorCode, invalid

TLS_SCHEME = "grpc+tls"
_PLAIN_SCHEMES = ("grpc://", "grpc+tcp://")
PemSource = str | bytes | os.PathLike[str]


def read_pem(source: PemSource, what: str) -> bytes:
    """PEM bytes from a path or from bytes given inline; refuses what is not PEM, naming
    ``what`` and the path but nothing of the file's content."""
    if isinstance(source, bytes):
        data, where = source, "the bytes given"
    else:
        path = Path(source).expanduser()
        where = str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise invalid(f"{what}: cannot read {where}: {reason}") from None
    if b"-----BEGIN " not in data:
        raise invalid(f"{what}: {where} is not PEM (no '-----BEGIN' line)")
    return data


class TlsOptions(TypedDict, total=False):
    """A client's TLS keywords, under our name and pymilvus's (``Client(**options)``)."""

    tls_root_certs: PemSource | None
    server_pem_path: PemSource | None
    ca_pem_path: PemSource | None
    client_pem_path: PemSource | None
    client_key_path: PemSource | None
    server_name: str | None
    secure: bool


def client_tls(uri: str, **given: Unpack[TlsOptions]) -> tuple[str, dict[str, Any]]:
    """The uri to dial and the ``pyarrow.flight.FlightClient`` TLS keyword arguments.

    Any TLS material (or ``secure=True``) turns a ``grpc://`` uri into ``grpc+tls://``: a
    client that was given a CA to trust never talks in the clear by mistake. Without a CA
    a ``grpc+tls://`` client trusts the system's roots, as gRPC does.
    """
    named: dict[str, PemSource | None] = {
        "tls_root_certs": given.get("tls_root_certs"),
        "server_pem_path": given.get("server_pem_path"),
        "ca_pem_path": given.get("ca_pem_path"),
    }
    roots = {name: v for name, v in named.items() if v is not None and v not in ("", b"")}
    client_pem_path, client_key_path = given.get("client_pem_path"), given.get("client_key_path")
    server_name, secure = given.get("server_name"), given.get("secure", False)
    if len(roots) > 1:
        raise invalid(
            f"give the CA to trust once, not as {' and '.join(roots)} (they mean the same)"
        )
    if bool(client_pem_path) != bool(client_key_path):
        raise invalid("mutual TLS needs both client_pem_path and client_key_path")
    options: dict[str, Any] = {}
    for name, root in roots.items():
        options["tls_root_certs"] = read_pem(root, name)
    if client_pem_path and client_key_path:
        options["cert_chain"] = read_pem(client_pem_path, "client_pem_path")
        options["private_key"] = read_pem(client_key_path, "client_key_path")
    if server_name:
        options["override_hostname"] = server_name
    if options or secure:
        for plain in _PLAIN_SCHEMES:
            if uri.startswith(plain):
                uri = f"{TLS_SCHEME}://{uri[len(plain) :]}"
    if options and not uri.startswith(f"{TLS_SCHEME}://"):
        raise invalid(f"TLS options were given but the uri {uri!r} is not grpc+tls://")
    return uri, options


def server_tls(cert: str | None, key: str | None, client_ca: str | None) -> dict[str, Any]:
    """``FlightServerBase`` keyword arguments for the settings ``tls_cert``, ``tls_key``
    and ``tls_client_ca`` (empty when TLS is off)."""
    if not cert and not key:
        if client_ca:
            raise invalid("tls_client_ca (mutual TLS) needs tls_cert and tls_key too")
        return {}
    if not cert or not key:
        raise invalid("TLS needs both tls_cert and tls_key")
    options: dict[str, Any] = {
        "tls_certificates": [(read_pem(cert, "tls_cert"), read_pem(key, "tls_key"))]
    }
    if client_ca:
        options["verify_client"] = True
        options["root_certificates"] = read_pem(client_ca, "tls_client_ca")
    return options


def unavailable_hint(text: str) -> ElanusError:
    """UNAVAILABLE for a call that never reached the proxy, saying what most likely went
    wrong: a failed TLS handshake, a TLS server dialled in the clear (or one that wants a
    client certificate: it closes the connection at once), or no server at all (then how
    to start one)."""
    lowered = text.lower()
    if "ssl" in lowered or "handshake" in lowered or "tsi_" in lowered:
        why = (
            "the TLS handshake with the Elanus proxy failed (is its certificate signed by the "
            "CA you trust, tls_root_certs / --tls-ca, and issued for this host name?)"
        )
    elif "socket closed" in lowered:
        why = (
            "the Elanus proxy closed the connection at once: it may be starting or stopping "
            "(retry), serve TLS (connect to a grpc+tls:// uri and trust its CA) or require a "
            "client certificate (mutual TLS)"
        )
    elif "connection refused" in lowered:
        return ElanusError(
            ErrorCode.UNAVAILABLE,
            "no Elanus server answers there (connection refused): start one with "
            "`elanus standalone` (or `make run` in a clone of Elanus)",
        )
    else:
        why = "cannot reach the Elanus proxy"
    return ElanusError(ErrorCode.UNAVAILABLE, f"{why}: {text}")
