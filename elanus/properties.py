"""The values of the collection (and field, and index) properties Milvus checks, checked
as Milvus checks them on both faces: Elanus stores a collection's properties as text, so
a value Milvus would refuse must be refused before it is stored."""

from __future__ import annotations

from elanus.errors import invalid
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
