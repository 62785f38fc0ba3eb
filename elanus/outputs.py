"""Which fields a read returns, and the rows it returns, shaped as Milvus shapes them.

Milvus (proxy ``translateOutputFields`` and pymilvus's row decoding) answers so:

- ``*`` is every field of the schema, vectors included, and, with dynamic fields on, every
  dynamic key of the row; ``$meta`` is every dynamic key. Dynamic keys are flattened into
  the row beside the fields (``{"id": 1, "color": "red"}``), never nested under ``$meta``;
- any other name that is not a field is a dynamic key (with dynamic fields on): a row
  that lacks the key simply has no such entry;
- a query or get row always carries the primary key, first, even when not asked for; a
  search hit carries it as ``id`` and its ``entity`` holds only what was asked for;
- JSON fields come back as JSON values (objects, lists, numbers, strings), not as text;
- a function's output field (BM25's sparse vector) is never returned: ``*`` leaves it out
  and naming it is refused ("not allowed to retrieve raw data of field ...").
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from elanus.errors import invalid
from elanus.schema import DYNAMIC_FIELD, DataType, Schema

COUNT = "count(*)"
AGGREGATE_CALL = re.compile(
    r"^\s*(count|sum|avg|min|max)\s*\(\s*([^()\s]*)\s*\)\s*$", re.IGNORECASE
)
"""An aggregating output (``sum(price)``): group 1 the function, group 2 its field."""


def is_aggregate(name: object) -> bool:
    return isinstance(name, str) and AGGREGATE_CALL.match(name) is not None


def resolve_outputs(schema: Schema, collection: str, names: list[Any]) -> list[str]:
    """The requested output names, checked and in order: field names, ``count(*)``,
    dynamic keys, and ``$meta`` standing for every dynamic key (``*`` expanded)."""
    computed = {f.name for f in schema.fields if schema.function_output(f.name) is not None}
    fields = [f.name for f in schema.fields if f.name not in computed]
    dynamic = schema.enable_dynamic_field
    out: list[str] = []
    for n in names:
        if not isinstance(n, str):
            raise invalid(f"output field names must be strings, got {n!r}")
        n = n.strip()
        if n in computed:  # Milvus's words: a function's output is not returned
            raise invalid(f"not allowed to retrieve raw data of field {n}")
        if n == "*":
            wanted = [*fields, DYNAMIC_FIELD] if dynamic else fields
        elif n in fields or n == COUNT or dynamic:
            wanted = [n]
        else:
            raise invalid(f"output field {n!r} does not exist in {collection!r}")
        out.extend(w for w in wanted if w not in out)
    return out


def with_primary_first(outputs: list[str], pk: str) -> list[str]:
    """Query/get outputs: the primary key always, and first (as Milvus returns rows)."""
    if COUNT in outputs:
        return outputs
    return [pk, *(n for n in outputs if n != pk)]


def stored_columns(schema: Schema, outputs: list[str]) -> list[str]:
    """Stored columns behind the output names (dynamic keys live in ``$meta``)."""
    fields = {f.name for f in schema.fields}
    cols = [n for n in outputs if n in fields]
    if any(n not in fields and n != COUNT for n in outputs):
        cols.append(DYNAMIC_FIELD)
    return cols


def json_fields(schema: Schema) -> frozenset[str]:
    """Fields whose stored JSON text is returned as JSON values."""
    return frozenset(f.name for f in schema.fields if f.dtype == DataType.JSON)


def entity(row: dict[str, Any], outputs: list[str], json_names: frozenset[str]) -> dict[str, Any]:
    """One result row as the user sees it: requested fields with JSON decoded, dynamic keys
    read out of ``$meta`` and flattened into the row."""
    meta: dict[str, Any] | None = None
    out: dict[str, Any] = {}
    for name in outputs:
        if name != DYNAMIC_FIELD and name in row:
            value = row[name]
            out[name] = _json_value(value) if name in json_names else value
            continue
        if meta is None:
            meta = _meta(row.get(DYNAMIC_FIELD))
        if name == DYNAMIC_FIELD:
            for key, value in meta.items():
                out.setdefault(key, value)  # a dynamic key never hides a field
        elif name in meta:
            out[name] = meta[name]
    return out


def _meta(text: Any) -> dict[str, Any]:
    value = _json_value(text) if text else {}
    return value if isinstance(value, dict) else {}


def _json_value(text: Any) -> Any:
    """Stored JSON text as its value (NULL stays None; text that is not JSON stays text)."""
    if not isinstance(text, str | bytes):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
