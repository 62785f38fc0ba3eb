"""What Milvus's ``alter_collection_field`` may change of one field, checked as Milvus's
proxy checks it (its AlterCollectionField task), so both faces answer the same.

Milvus keeps a field's properties among its type params. ``max_length`` (a VarChar field,
or an Array of VarChar) and ``max_capacity`` (an Array field) change what later inserts
may hold, raised or lowered (rows already stored keep their values); ``field.description``
replaces the field's description: these three change the schema (:func:`plan`).
``mmap.enabled`` (Milvus also reads ``mmap_enabled``) and the warm-up keys change only
how a loaded collection holds the field, and only while it is released: Elanus acts on
``mmap.enabled`` (``elanus.mmapsettings``) and stores the warm-up keys with no effect (it
has no tiered storage to warm: a loaded segment is all in memory or mapped). Only these
last can be dropped; any other key is refused by name.

The stored ones live among the collection's properties under ``field.<name>.<key>``
(:func:`stored_key`), hidden from the collection's own properties and shown with the
field's parameters instead, as Milvus describes them.

Unlike Milvus's proxy, which takes any ``max_length`` up to 65535, the lower bound its
documentation states (1) is checked too; and a limit on the primary key is refused, as
Milvus's documentation says ("you cannot ... alter its properties").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from elanus.errors import invalid
from elanus.ownedprops import MMAP, OwnedKeys, canonical
from elanus.schema import MAX_ARRAY_CAPACITY, MAX_VARCHAR_LENGTH, DataType, Field, Schema

MAX_LENGTH = "max_length"
MAX_CAPACITY = "max_capacity"
DESCRIPTION = "field.description"
"""Milvus's key for a field's description (any field, the primary key too)."""
WARMUP_KEYS = frozenset(
    {
        "warmup",
        "warmup.scalarField",
        "warmup.scalarIndex",
        "warmup.vectorField",
        "warmup.vectorIndex",
    }
)
WARMUP_VALUES = ("sync", "disable")
STORED_KEYS = frozenset({MMAP, *WARMUP_KEYS})
"""Kept as text and shown with the field; the schema does not change."""
ALTER_KEYS = frozenset({MAX_LENGTH, MAX_CAPACITY, DESCRIPTION, *STORED_KEYS})
DROP_KEYS = STORED_KEYS
WHAT = "alter_collection_field"


_OWNED = OwnedKeys("field.", STORED_KEYS)
stored_key = _OWNED.stored_key
is_stored_key = _OWNED.is_stored_key
of_field = _OWNED.of


def check_keys(properties: Mapping[str, str], delete_keys: Iterable[str]) -> None:
    """The keys and value shapes Milvus's proxy checks before it looks at the field."""
    for raw, value in properties.items():
        key = canonical(raw)
        if key not in ALTER_KEYS:
            raise invalid(f"{raw} does not allow update in collection field param")
        text = str(value).strip()
        if key == MMAP and text.lower() not in ("true", "false"):
            raise invalid(f"{WHAT}: {raw} must be true or false, got {text[:40]!r}")
        if key in WARMUP_KEYS and text not in WARMUP_VALUES:
            raise invalid(
                f"{WHAT}: {raw} must be one of {', '.join(WARMUP_VALUES)}, got {text[:40]!r}"
            )
        if key in (MAX_LENGTH, MAX_CAPACITY) and not text.lstrip("-").isdigit():
            raise invalid(f"{WHAT}: {raw} should be an integer, got {text[:40]!r}")
    for raw in delete_keys:
        if canonical(raw) not in DROP_KEYS:
            raise invalid(f"{raw} is not allowed to drop in collection field param")
    if not properties and not list(delete_keys):
        raise invalid(f"{WHAT}: give 'properties' to set or 'delete_keys' to remove")


def _changed_field(f: Field, key: str, value: int) -> Field:
    """``f`` with its limit ``key`` at ``value``, refused where Milvus refuses it."""
    if f.is_primary:
        raise invalid(f"{WHAT}: {f.name!r} is the primary key; its properties cannot change")
    if key == MAX_LENGTH:
        strings = f.dtype == DataType.VARCHAR or (
            f.dtype == DataType.ARRAY and f.element_type == DataType.VARCHAR
        )
        if not strings:
            raise invalid(f"{f.name} can not modify the maxlength for non-string types")
        if not 1 <= value <= MAX_VARCHAR_LENGTH:
            raise invalid(
                f"{WHAT}: max_length {value} of field {f.name!r} is out of range "
                f"[1, {MAX_VARCHAR_LENGTH}]"
            )
        return replace(f, max_length=value)
    if f.dtype != DataType.ARRAY:
        raise invalid(f"{f.name} can not modify the maxcapacity for non-array types")
    if not 1 <= value <= MAX_ARRAY_CAPACITY:
        raise invalid(
            f"the maximum capacity specified for a Array should be in (0, {MAX_ARRAY_CAPACITY}]"
        )
    return replace(f, max_capacity=value)


def plan(
    schema: Schema, collection: str, field: str, properties: Mapping[str, str]
) -> tuple[Schema | None, dict[str, str]]:
    """The new schema (``None``: unchanged) and the stored settings to set, by their
    collection property key; refuses a field that is not there or cannot take a key."""
    by_name = {f.name: f for f in schema.fields}
    if field not in by_name:
        raise invalid(f"{WHAT}: field {field} does not exist in collection {collection!r}")
    f, stored = by_name[field], {}
    for raw, value in properties.items():
        key, text = canonical(raw), str(value).strip()
        if key in STORED_KEYS:
            stored[stored_key(field, key)] = text.lower() if key == MMAP else text
        elif key == DESCRIPTION:
            f = replace(f, description=str(value))
        else:
            f = _changed_field(f, key, int(text))
    if f is by_name[field]:
        return None, stored
    fields = [f if g.name == field else g for g in schema.fields]
    return replace(schema, fields=fields, version=schema.version + 1), stored
