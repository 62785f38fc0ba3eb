"""What Milvus's ``alter_index_properties`` / ``drop_index_properties`` may change of one
index, checked as Milvus's proxy checks it (its AlterIndex task: the configurable index
params), so both faces answer the same.

Milvus lets three keys change after an index is built, each only while the collection
is released: ``mmap.enabled`` (Elanus acts on it: ``elanus.mmapsettings``),
``indexoffsetcache.enabled`` and ``warmup`` (stored and described with the index's
params, no effect: Elanus keeps no offset cache of a scalar index and no tiered storage
to warm). Any other key is refused by name. They live among the collection's
properties under ``index.<index id>.<key>`` (:func:`stored_key`; by id, so an index
made again under a dropped one's name starts clean), hidden from the collection's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from elanus.errors import invalid
from elanus.ownedprops import MMAP, OwnedKeys, canonical

OFFSET_CACHE = "indexoffsetcache.enabled"
WARMUP = "warmup"
KEYS = frozenset({MMAP, OFFSET_CACHE, WARMUP})
WARMUP_VALUES = ("sync", "disable")


_OWNED = OwnedKeys("index.", KEYS)
stored_key = _OWNED.stored_key
is_stored_key = _OWNED.is_stored_key
of_index = _OWNED.of


def check_keys(what: str, properties: Mapping[str, str], delete_keys: Iterable[str]) -> None:
    """The keys Milvus lets change, with the values it takes; one of the two given."""
    for raw, value in properties.items():
        key, text = canonical(raw), str(value).strip()
        if key not in KEYS:
            raise invalid(f"{raw} is not configable index param")
        if key in (MMAP, OFFSET_CACHE) and text.lower() not in ("true", "false"):
            raise invalid(f"{what}: {raw} must be true or false, got {text[:40]!r}")
        if key == WARMUP and text not in WARMUP_VALUES:
            raise invalid(
                f"{what}: {raw} must be one of {', '.join(WARMUP_VALUES)}, got {text[:40]!r}"
            )
    for raw in delete_keys:
        if canonical(raw) not in KEYS:
            raise invalid(f"{raw} is not configable index param")
    if not properties and not list(delete_keys):
        raise invalid(f"{what}: give 'properties' to set or 'delete_keys' to remove")


def stored(index_id: int, properties: Mapping[str, str]) -> dict[str, str]:
    """The collection properties to set for ``properties`` (checked)."""
    out = {}
    for raw, value in properties.items():
        key, text = canonical(raw), str(value).strip()
        out[stored_key(index_id, key)] = text.lower() if key != WARMUP else text
    return out
