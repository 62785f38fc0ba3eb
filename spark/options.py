"""What the reader's and the writer's options have in common: known names only (a typo is
an error naming it), and where to connect: ``uri`` and ``collection`` (or Spark's ``path``,
from ``load(name)`` / ``save(name)``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from elanus.errors import invalid

CLIENT_OPTIONS = ("user", "password", "token")
"""Credentials for a server with ``auth_enabled``: ``user`` + ``password``, or ``token``
as ``"user:password"`` (as pymilvus takes it)."""


def client_options(given: Mapping[str, str]) -> dict[str, Any]:
    """The ``Client`` keyword arguments the options carry (credentials); picklable."""
    return {k: given[k] for k in CLIENT_OPTIONS if given.get(k)}


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
