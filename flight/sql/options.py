"""A SQL call's options, from its gRPC headers: which database, which snapshot.

Flight SQL has no field for them, so they travel as call headers, which every Flight SQL
client can set (ADBC: the ``adbc.flight.sql.rpc.call_header.<name>`` option; the SDK's
``client.sql`` sets them from its arguments). A middleware keeps the headers of every
call; only the SQL calls read them.

- ``elanus-database``: the database of unqualified collection names (``default``);
- ``elanus-consistency-level``: ``Strong``, ``Bounded``, ``Session`` or ``Eventually``;
- ``elanus-as-of``: a hybrid timestamp to read at (as ``AT (VERSION => ts)`` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.flight as flight

from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.schema import check_name
from elanus.wire.codec import DEFAULT_DB

MIDDLEWARE_KEY = "sql-options"
DATABASE = "elanus-database"
CONSISTENCY = "elanus-consistency-level"
AS_OF = "elanus-as-of"


@dataclass(frozen=True)
class SqlOptions:
    db: str = DEFAULT_DB
    consistency_level: ConsistencyLevel | None = None
    as_of: int = 0


class _Headers(flight.ServerMiddleware):
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class SqlHeadersFactory(flight.ServerMiddlewareFactory):
    """Keeps a call's ``elanus-*`` headers (checked only when a SQL call reads them)."""

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> _Headers | None:
        kept = {}
        for key, values in headers.items():
            if key.lower().startswith("elanus-") and values:
                value = values[0]
                kept[key.lower()] = value.decode() if isinstance(value, bytes) else str(value)
        return _Headers(kept) if kept else None


def options_of(context: flight.ServerCallContext) -> SqlOptions:
    """The call's options, checked: a bad value is refused naming its header."""
    middleware = context.get_middleware(MIDDLEWARE_KEY)
    headers = middleware.headers if isinstance(middleware, _Headers) else {}
    unknown = sorted(set(headers) - {DATABASE, CONSISTENCY, AS_OF})
    if unknown:
        raise invalid(
            f"unknown header {unknown[0]!r}: SQL calls take {DATABASE}, {CONSISTENCY} and {AS_OF}"
        )
    db = check_name(headers.get(DATABASE) or DEFAULT_DB, "database")
    level = None
    if headers.get(CONSISTENCY):
        try:
            level = ConsistencyLevel.parse(headers[CONSISTENCY])
        except ValueError as exc:
            raise invalid(f"header {CONSISTENCY}: {exc}") from None
    as_of = 0
    if headers.get(AS_OF):
        try:
            as_of = int(headers[AS_OF])
        except ValueError:
            raise invalid(f"header {AS_OF} must be a hybrid timestamp (an integer)") from None
        if as_of < 1:
            raise invalid(f"header {AS_OF} must be a positive hybrid timestamp")
    return SqlOptions(db=db, consistency_level=level, as_of=as_of)
