"""What the proxy checks of a read's body beyond its record (``elanus/ops/search.py``,
``reads.py``): query ids against the primary key's type, and the command of a DoExchange
search, a ``SearchOptions`` record (a search body without ``data``: the query vectors
arrive as record batches)."""

from __future__ import annotations

from typing import Any

from elanus.errors import ElanusError, ErrorCode
from elanus.ops.search import SearchOptions
from elanus.requests import decode
from elanus.schema import DataType, Field
from elanus.wire.codec import decode_request

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def check_query_ids(
    ids: list[Any], pk: Field, what: str = "query", code: ErrorCode = ErrorCode.BAD_EXPRESSION
) -> list[Any]:
    """``ids`` of a query (or of a search by primary keys: ``what``), checked against the
    primary key: exact JSON integers in the int64 range for an Int64 key (no strings,
    floats or booleans, so no key is ever rounded), strings for a VarChar key. A query's
    wrong id is BAD_EXPRESSION, as Milvus reports ids (which it turns into ``pk in
    [...]``), naming the value rather than an internal expression."""

    def bad(message: str) -> ElanusError:
        return ElanusError(code, f"{what}: 'ids' {message}")

    if pk.dtype == DataType.INT64:
        for v in ids:
            if isinstance(v, bool) or not isinstance(v, int):
                raise bad(f"of Int64 primary key {pk.name!r} must be JSON integers, got {v!r}")
            if not _INT64_MIN <= v <= _INT64_MAX:
                raise bad(f"value {v} is out of the Int64 range")
    elif not all(isinstance(v, str) for v in ids):
        bad_id = next(v for v in ids if not isinstance(v, str))
        raise bad(f"of VarChar primary key {pk.name!r} must be strings, got {bad_id!r}")
    return ids


def search_command(raw: bytes) -> SearchOptions:
    """The command of a DoExchange search, checked as a ``search`` body's options."""
    command = decode(SearchOptions, decode_request(raw, "DoExchange command"), "DoExchange command")
    command.check()
    return command
