"""The values of the collection (and field, and index) properties Milvus checks, checked
as Milvus checks them on both faces: Elanus stores a collection's properties as text, so
a value Milvus would refuse must be refused before it is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elanus.errors import invalid
from elanus.schema import MAX_NAME_LENGTH
from elanus.tsutil import compose, physical_ms

TTL_KEY = "collection.ttl.seconds"
MAX_TTL_SECONDS = 3_155_760_000
"""Milvus's longest collection TTL (100 years); -1 is its "no TTL"."""
MMAP_KEYS = frozenset({"mmap.enabled", "mmap_enabled"})
MAX_PROPERTIES = 64
"""A collection's properties at most (Elanus's bound: they travel with every describe)."""


def check_property(key: str, value: str, what: str) -> None:
    """Refuse a value Milvus refuses for ``key`` (``what``: the request, for the message):
    a TTL is a whole number of seconds from -1 to ``MAX_TTL_SECONDS``; memory mapping is
    true or false. Other keys take any text."""
    if key == TTL_KEY:
        text = value.strip()
        if not text.lstrip("-").isdigit() or not -1 <= int(text) <= MAX_TTL_SECONDS:
            raise invalid(
                f"{what}: property {key!r} must be a whole number of seconds from -1 to "
                f"{MAX_TTL_SECONDS}, got {value[:40]!r}"
            )
    elif key in MMAP_KEYS and value.strip().lower() not in ("true", "false"):
        raise invalid(f"{what}: property {key!r} must be true or false, got {value[:40]!r}")


def ttl_ms(properties: dict[str, str]) -> int:
    """The collection's TTL in milliseconds (0: none; Milvus takes 0 and -1 as none). The
    value was checked when stored (``check_property``)."""
    text = str(properties.get(TTL_KEY, "0")).strip()
    seconds = int(text) if text.lstrip("-").isdigit() else 0
    return max(seconds, 0) * 1000


def expire_floor(ts: int, ttl: int) -> int:
    """The oldest insert timestamp a read at ``ts`` sees under a TTL of ``ttl`` ms: a row
    expires once its insert time (the hybrid timestamp's physical part) plus the TTL lies
    before the read's, as Milvus's proxy sets ``CollectionTtlTimestamps`` and its segcore
    masks older rows. 0 (every row) without a TTL."""
    if ttl <= 0:
        return 0
    return compose(max(physical_ms(ts) - ttl, 0))


PropertyCheck = Callable[[str, str, str], None]
"""``(key, value, what)``: raises INVALID_ARGUMENT for a value its key does not take."""


def text_properties(raw: dict[str, Any] | None, what: str, check: PropertyCheck) -> dict[str, str]:
    """Properties as stored: string to string, numbers and booleans written as text; the
    values of the keys Milvus checks are checked by ``check`` (``what``: the request)."""
    props = raw or {}
    if len(props) > MAX_PROPERTIES:
        raise invalid(f"{what}: {len(props)} properties; the limit is {MAX_PROPERTIES}")
    out: dict[str, str] = {}
    for key, value in props.items():
        property_key(key, what)
        if isinstance(value, dict | list) or value is None:
            raise invalid(f"{what}: property {key!r} must be a string, got {value!r}")
        out[key] = value if isinstance(value, str) else _scalar_text(value)
        check(key, out[key], what)
    return out


def property_key(key: Any, what: str) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_NAME_LENGTH:
        raise invalid(
            f"{what}: property key {str(key)[:40]!r} must be text of 1 to "
            f"{MAX_NAME_LENGTH} characters"
        )


def _scalar_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
