"""The values of the collection (and field, and index) properties Milvus checks, checked
as Milvus checks them on both faces: Elanus stores a collection's properties as text, so
a value Milvus would refuse must be refused before it is stored."""

from __future__ import annotations

from elanus.errors import invalid

TTL_KEY = "collection.ttl.seconds"
MAX_TTL_SECONDS = 3_155_760_000
"""Milvus's longest collection TTL (100 years); -1 is its "no TTL"."""
MMAP_KEYS = frozenset({"mmap.enabled", "mmap_enabled"})


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
