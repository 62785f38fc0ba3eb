"""Query ``order_by_fields`` (Milvus 2.6): rows sorted by scalar fields, ascending or
descending, before limit and offset; ties keep primary-key order. The proxy reads every
shard's matching rows, since any of them may come first."""

from __future__ import annotations

from elanus.datatypes import DataType
from elanus.errors import invalid
from elanus.flight.metacache import CollectionInfo

_UNSORTABLE = frozenset({DataType.JSON, DataType.ARRAY})
_WAYS = {"asc": "ascending", "desc": "descending"}


def order_keys(info: CollectionInfo, items: list[str]) -> list[tuple[str, str]]:
    """``["price:desc", "id"]`` as Arrow sort keys, checked: a scalar field of the
    collection each, once, and ``asc`` or ``desc``."""
    names = {f.name: f for f in info.schema.fields}
    keys: list[tuple[str, str]] = []
    for item in items:
        name, _, way = str(item).partition(":")
        name, way = name.strip(), (way.strip().lower() or "asc")
        field = names.get(name)
        if field is None:
            raise invalid(f"query: order_by field {name!r} is not a field of {info.name!r}")
        if field.dtype.is_vector or field.dtype in _UNSORTABLE:
            raise invalid(
                f"query: cannot order by {name!r} of type {field.dtype.value} "
                "(order by Bool, numeric or VarChar fields)"
            )
        if way not in _WAYS:
            raise invalid(f"query: order_by {item!r}: the order must be 'asc' or 'desc'")
        if any(k == name for k, _ in keys):
            raise invalid(f"query: order_by field {name!r} is given twice")
        keys.append((name, _WAYS[way]))
    return keys
