"""Parsed filters, remembered by (schema, text, params).

Every segment of a read evaluates the same filter, and clients send the same filters over
and over; parsing (a grammar pass and type checks) costs far more than a lookup. A cached
``Expr`` is immutable and shared across threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import orjson

from elanus.expr.compiler import Expr, parse
from elanus.schema import Schema

MAX_CACHED = 1024

_lock = threading.Lock()
_cache: OrderedDict[tuple[bytes, str, bytes], Expr] = OrderedDict()


def schema_key(schema: Schema) -> bytes:
    """What a filter's meaning depends on: the schema's fields, as canonical bytes."""
    return orjson.dumps(schema.to_dict(), option=orjson.OPT_SORT_KEYS)


def parse_cached(text: str, schema: Schema, params: dict[str, Any] | None = None) -> Expr:
    """``parse``, answered from the cache when the same filter was parsed before."""
    try:
        key = (schema_key(schema), text, orjson.dumps(params or {}, option=orjson.OPT_SORT_KEYS))
    except TypeError:  # params orjson cannot encode: parse names the problem
        return parse(text, schema, params)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    expr = parse(text, schema, params)
    with _lock:
        _cache[key] = expr
        while len(_cache) > MAX_CACHED:
            _cache.popitem(last=False)
    return expr
