"""What the reader's and the writer's options have in common: known names only (a typo is
an error naming it), and where to connect: ``uri`` and ``collection`` (or Spark's ``path``,
from ``load(name)`` / ``save(name)``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from elanus.errors import invalid
from elanus.wire.tls import read_pem

CREDENTIAL_OPTIONS = ("user", "password", "token")
"""Credentials for a server with ``auth_enabled``: ``user`` + ``password``, or ``token``
as ``"user:password"`` (as pymilvus takes it)."""
CONNECT_OPTIONS = ("tls_ca", *CREDENTIAL_OPTIONS)
"""Options of both the reader and the writer that say how to connect, besides ``uri``."""


def target_options(
    options: Mapping[str, str], known: Iterable[str], what: str = "option"
) -> tuple[dict[str, str], str, str]:
    """``(options with lower-case names, uri, collection)``, or INVALID_ARGUMENT."""
    names = tuple(known)
    given = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise invalid(f"unknown elanus {what}(s) {', '.join(unknown)}; known: {', '.join(names)}")
    uri, collection = given.get("uri"), given.get("collection") or given.get("path")
    if not uri:
        raise invalid("the elanus data source needs option 'uri' (grpc://host:port)")
    if not collection:
        raise invalid("the elanus data source needs option 'collection'")
    return given, uri, collection


def client_options(given: Mapping[str, str]) -> dict[str, Any]:
    """``Client`` keyword arguments from the connection options (picklable): the
    credentials, and ``tls_ca`` (a PEM path) read on the driver, so executors get the bytes
    and need no copy of the file."""
    options: dict[str, Any] = {k: given[k] for k in CREDENTIAL_OPTIONS if given.get(k)}
    path = given.get("tls_ca")
    if path:
        options["tls_root_certs"] = read_pem(path, "option 'tls_ca'")
    return options
