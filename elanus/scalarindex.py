"""Scalar index specifications: which index types apply to which scalar fields, and JSON
path indexes with a cast type (Milvus 2.6's ``json_path`` / ``json_cast_type``).

Pure and I/O-free, like ``elanus.indexparams``: the coord validates a ``create_index`` on a
scalar or JSON field here, and builders and workers read the same stored dict
(:meth:`ScalarSpec.to_dict`, told apart from a vector spec by ``field_kind == "scalar"``).

Type rules follow Milvus: INVERTED on Bool, integers, Float, Double, VarChar and JSON paths;
BITMAP on Bool, integers and VarChar (not on floats, not on the primary key); STL_SORT on
numbers and VarChar; TRIE on VarChar only. AUTOINDEX picks BITMAP for Bool and INVERTED for
every other type (Milvus's choice for most types; its HYBRID, a bitmap for low cardinality,
has no counterpart here). A JSON field is indexed by path only: ``json_path`` names a value
inside it (``meta["a"]["b"]``) and ``json_cast_type`` the type indexed there (``bool``,
``double`` or ``varchar``); rows where the value is missing or of another type are simply
not in the index, as in Milvus.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from elanus.errors import invalid
from elanus.indexparams import INDEX_TYPES
from elanus.schema import DataType, Field

SCALAR_INDEX_TYPES = ("INVERTED", "BITMAP", "STL_SORT", "TRIE")
"""The scalar index types (AUTOINDEX resolves to one of them)."""

_INTS = (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64)
_FLOATS = (DataType.FLOAT, DataType.DOUBLE)
_ALLOWED: dict[str, tuple[DataType, ...]] = {
    "INVERTED": (DataType.BOOL, *_INTS, *_FLOATS, DataType.VARCHAR),
    "BITMAP": (DataType.BOOL, *_INTS, DataType.VARCHAR),
    "STL_SORT": (*_INTS, *_FLOATS, DataType.VARCHAR),
    "TRIE": (DataType.VARCHAR,),
}
CAST_TYPES = {"bool": DataType.BOOL, "double": DataType.DOUBLE, "varchar": DataType.VARCHAR}
"""``json_cast_type`` values and the type the indexed JSON values take."""
_JSON_TYPES = ("INVERTED",)
"""Index types that take a JSON path (Milvus 2.6 builds path indexes as INVERTED)."""

_STEP = re.compile(r'\[\s*(?:"((?:[^"\\]|\\.)*)"|(-?\d+))\s*\]')
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def is_scalar_spec(spec: Mapping[str, Any]) -> bool:
    """Whether a stored index spec is a scalar one (vector specs hold ``field_kind``
    ``"float"`` or ``"binary"``)."""
    return spec.get("field_kind") == "scalar"


@dataclasses.dataclass(frozen=True)
class ScalarSpec:
    """A validated scalar index: ``dtype`` is the type of the indexed values (the cast
    type for a JSON path); ``path`` the keys/positions inside a JSON field (empty for a
    plain field)."""

    index_type: str
    dtype: DataType
    json_path: str | None = None
    json_cast_type: str | None = None
    path: tuple[str | int, ...] = ()
    field_id: int | None = None
    """Set for a field added under a dropped field's name (``Field.id_tagged``): a
    segment's column of that name is indexed only if it carries this id."""

    def to_dict(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.json_path is not None:
            params = {"json_path": self.json_path, "json_cast_type": self.json_cast_type}
        d: dict[str, Any] = {
            "field_kind": "scalar",
            "index_type": self.index_type,
            "dtype": self.dtype.value,
            "metric": "",
            "params": params,
            "path": list(self.path),
        }
        if self.field_id is not None:
            d["field_id"] = self.field_id
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScalarSpec:
        """Rebuild a spec stored with :meth:`to_dict`."""
        try:
            params = d.get("params") or {}
            return cls(
                str(d["index_type"]),
                DataType.parse(d["dtype"]),
                params.get("json_path"),
                params.get("json_cast_type"),
                tuple(d.get("path") or ()),
                int(d["field_id"]) if d.get("field_id") is not None else None,
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise invalid(f"not a scalar index spec: {e}") from None


def make_scalar_spec(field: Field, index_type: Any, params: Mapping[str, Any] | None) -> ScalarSpec:
    """Validate a scalar index request on ``field``; ``ElanusError(INVALID_ARGUMENT)``
    names the type rule or param that does not hold."""
    spec = _scalar_spec(field, index_type, params)
    if field.id_tagged and field.field_id is not None:
        spec = dataclasses.replace(spec, field_id=field.field_id)
    return spec


def _scalar_spec(field: Field, index_type: Any, params: Mapping[str, Any] | None) -> ScalarSpec:
    if not isinstance(index_type, str):
        raise invalid(f"index_type must be a string, got {index_type!r}")
    itype = index_type.strip().upper() or "AUTOINDEX"
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise invalid(f"index params must be a JSON object, got {type(params).__name__}")
    known = SCALAR_INDEX_TYPES + ("AUTOINDEX",)
    if itype not in known:
        what = "indexes only vector fields" if itype in INDEX_TYPES else "is unknown"
        raise invalid(
            f"index type {index_type!r} {what}; the {field.dtype.value} field "
            f"{field.name!r} takes one of {', '.join(known)}"
        )
    unknown = sorted(str(k) for k in params if k not in ("json_path", "json_cast_type"))
    if unknown:
        raise invalid(
            f"unknown index param(s) {', '.join(unknown)} for a scalar index "
            "(accepted: json_path, json_cast_type on JSON fields)"
        )
    if field.dtype == DataType.JSON:
        return _json_spec(field, itype, params)
    if params:
        raise invalid(
            f"json_path and json_cast_type apply to JSON fields only; {field.name!r} is "
            f"{field.dtype.value}"
        )
    if itype == "AUTOINDEX":
        itype = "BITMAP" if field.dtype == DataType.BOOL else "INVERTED"
    if field.dtype not in _ALLOWED[itype]:
        ok = ", ".join(t.value for t in _ALLOWED[itype])
        raise invalid(
            f"{itype} index is not supported on the {field.dtype.value} field "
            f"{field.name!r}; {itype} applies to {ok}"
        )
    if itype == "BITMAP" and field.is_primary:
        raise invalid(f"BITMAP index is not supported on the primary key {field.name!r}")
    return ScalarSpec(itype, field.dtype)


def _json_spec(field: Field, itype: str, params: Mapping[str, Any]) -> ScalarSpec:
    json_path, cast = params.get("json_path"), params.get("json_cast_type")
    if itype == "AUTOINDEX":
        itype = "INVERTED"
    if itype not in _JSON_TYPES:
        raise invalid(
            f"{itype} index is not supported on the JSON field {field.name!r}; index a path "
            'in it with INVERTED, json_path (e.g. meta["a"]) and json_cast_type'
        )
    if json_path is None or cast is None:
        raise invalid(
            f"an index on the JSON field {field.name!r} needs params json_path "
            '(e.g. meta["a"]) and json_cast_type (bool, double or varchar)'
        )
    if not isinstance(cast, str) or cast.strip().lower() not in CAST_TYPES:
        raise invalid(
            f"json_cast_type {cast!r} is not supported; use one of {', '.join(CAST_TYPES)}"
        )
    cast_type = cast.strip().lower()
    path = parse_json_path(json_path, field.name)
    return ScalarSpec(itype, CAST_TYPES[cast_type], json_path, cast_type, path)


def parse_json_path(text: Any, field_name: str) -> tuple[str | int, ...]:
    """The keys and positions of ``field["a"][0]``; it must start with ``field_name``."""
    if not isinstance(text, str) or not text.strip():
        raise invalid(f"json_path must be a non-empty string, got {text!r}")
    s = text.strip()
    head = _NAME.match(s)
    if head is None:
        raise invalid(f'json_path {text!r} must look like {field_name}["key"]')
    if head.group(0) != field_name:
        raise invalid(
            f"json_path {text!r} does not match the field: it must start with {field_name!r}"
        )
    steps: list[str | int] = []
    pos = head.end()
    while pos < len(s):
        m = _STEP.match(s, pos)
        if m is None:
            raise invalid(f'json_path {text!r}: expected ["key"] or [index] at offset {pos}')
        if m.group(1) is not None:
            steps.append(re.sub(r"\\(.)", r"\1", m.group(1)))
        else:
            steps.append(int(m.group(2)))
        pos = m.end()
    return tuple(steps)
