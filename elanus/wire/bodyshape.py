"""Limits on the shape of JSON request bodies: nesting depth and repeated keys.

A JSON parser keeps the last of two equal keys (``{"name": "a", "name": "b"}`` reads as
``{"name": "b"}``), so a body with a repeated key means something other than what half of
it says: the proxy refuses it, naming the key. A body nested deeper than
``Settings.max_json_depth`` is refused too, before any recursive code can trip over it.

The checks run on every request, the single-query search included, so the common case
costs a few byte counts and a walk over the body's objects (never over its lists of
numbers): only a body whose counts do not add up is parsed again, slowly, to name the key.
"""

from __future__ import annotations

import json
from typing import Any

from elanus.errors import invalid

DEFAULT_MAX_JSON_DEPTH = 64
_limit = DEFAULT_MAX_JSON_DEPTH
_SCALARS = frozenset({str, int, float, bool, type(None)})


def set_max_json_depth(depth: int) -> None:
    """Set the nesting limit for this process (the proxy does, from its settings)."""
    global _limit
    if depth < 2:
        raise ValueError("max_json_depth must be at least 2")
    _limit = depth


def max_json_depth() -> int:
    return _limit


Shape = tuple[int, int, int]
"""``body_objects``'s answer: objects, keys, nesting depth."""


def check_body_shape(raw: bytes, body: Any, what: str, known: Shape | None = None) -> None:
    """Refuse a parsed request body that repeats a key in one object or nests deeper
    than the limit. ``raw`` is the text ``body`` was parsed from; ``known`` is
    ``body_objects(body)`` when the caller has it already (a search shaped like an earlier
    one: only the lists of its data differ, and those are not walked)."""
    braces, brackets, colons = raw.count(b"{"), raw.count(b"["), raw.count(b":")
    objects, keys, object_depth = body_objects(body) if known is None else known
    if objects == braces and object_depth + brackets <= _limit:
        depth = 0  # every "{" is an object found outside lists: lists hold no objects
    else:
        objects, keys, depth = _walk(body)
    if depth > _limit:
        raise invalid(
            f"{what} is nested more than {_limit} levels deep (arrays and objects); "
            "the limit is the setting max_json_depth"
        )
    if colons != keys:  # each key has one colon, others are in strings (_keys counts those)
        key = _repeated_key(raw)
        if key is not None:
            raise invalid(f"{what} has the key {key!r} twice in one object; give it once")


def _keys(obj: dict[str, Any]) -> int:
    """The object's keys, plus the colons inside its string keys and values (so that the
    colons of a text add up to the keys of its objects)."""
    inside = sum(k.count(":") for k in obj if ":" in k)
    inside += sum(v.count(":") for v in obj.values() if type(v) is str and ":" in v)
    return len(obj) + inside


def body_objects(body: Any) -> Shape:
    """Objects reachable through objects only, their keys, and their nesting depth: what
    ``check_body_shape`` compares with the text's counts."""
    objects = keys = depth = 0
    stack = [(body, 1)]
    while stack:
        obj, level = stack.pop()
        if type(obj) is not dict:
            continue
        objects += 1
        keys += _keys(obj)
        depth = max(depth, level)
        stack.extend((v, level + 1) for v in obj.values() if type(v) is dict)
    return objects, keys, depth


def _walk(body: Any) -> tuple[int, int, int]:
    """Objects, keys and nesting depth of the whole value; lists of scalars (vectors)
    are passed over in C."""
    objects = keys = depth = 0
    stack = [(body, 1)]
    while stack:
        obj, level = stack.pop()
        depth = max(depth, level)
        if type(obj) is dict:
            objects += 1
            keys += _keys(obj)
            values: Any = obj.values()
        elif set(map(type, obj)) <= _SCALARS:
            continue
        else:
            values = obj
        if level >= _limit:  # one level more is too deep: no need to look further
            if any(type(v) in (dict, list) for v in values):
                return objects, keys, level + 1
            continue
        stack.extend((v, level + 1) for v in values if type(v) in (dict, list))
    return objects, keys, depth


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return out


def _repeated_key(raw: bytes) -> str | None:
    """The first key that an object of ``raw`` holds twice, if any."""
    try:
        json.loads(raw, object_pairs_hook=_pairs)
    except _Repeated as rep:
        return rep.key
    except (ValueError, RecursionError):
        return None
    return None
