"""The insert checks of JSON values: JSON text (strict JSON, checked vectorised with an
in-memory DuckDB's ``json_valid``; no longer than Milvus's limit, nested no deeper than
request bodies may be) and the dynamic field ``$meta`` (unknown columns folded into one
JSON object per row with ``json_merge_patch``); ``merge_objects`` merges ``$meta`` for a
partial upsert.

The DuckDB here is ``:memory:`` only, one shared database with a cursor per OS thread: a
compute engine for JSON, never a file (docs/design-notes.md, "Layering")."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.conform_common import (
    first_true,
    mismatch,
    preview,
    single_array,
)
from elanus.errors import invalid
from elanus.schema import (
    DYNAMIC_FIELD,
    RESERVED_NAMES,
    Schema,
)
from elanus.wire.bodyshape import max_json_depth

if TYPE_CHECKING:
    import duckdb

MAX_JSON_BYTES = 65536
"""Milvus's ``common.JSONMaxLength``: the longest JSON text one row's value may be."""


def dynamic_column(
    schema: Schema, columns: dict[str, pa.Array], unknown: list[str], n: int
) -> pa.Array:
    meta = columns.get(DYNAMIC_FIELD)
    extra = [name for name in unknown if name != DYNAMIC_FIELD]
    for name in extra:
        _check_dynamic_key(name)
    if meta is not None:
        meta = _check_meta(schema, meta)
    if not extra:
        return meta if meta is not None else pa.nulls(n, type=pa.string())
    for name in extra:
        _check_json_friendly(name, columns[name])
    struct = pa.StructArray.from_arrays([columns[name] for name in extra], names=extra)
    table = pa.table(
        {
            "i": pa.array(np.arange(n, dtype=np.int64)),
            "m": meta if meta is not None else pa.nulls(n, type=pa.string()),
            "s": struct,
        }
    )
    con = _duck()
    con.register("_elanus_dyn", table)
    try:
        out = con.sql(
            "SELECT json_merge_patch(coalesce(m, '{}'), to_json(s))::VARCHAR AS m "
            "FROM _elanus_dyn ORDER BY i"
        ).to_arrow_table()
    finally:
        con.unregister("_elanus_dyn")
    return single_array(out.column(0)).cast(pa.string())


def merge_objects(before: pa.Array, given: pa.Array) -> pa.Array:
    """Row by row, the JSON object ``given`` laid over ``before`` one level deep: its keys
    replace those of ``before`` (a null value too), the others stay; a null object is an
    empty one, and two nulls stay null. How a partial upsert merges ``$meta``."""
    as_map = "coalesce(json_transform({}, '\"MAP(VARCHAR, JSON)\"'), MAP())"
    table = pa.table(
        {"i": pa.array(np.arange(len(before), dtype=np.int64)), "b": before, "g": given}
    )
    con = _duck()
    con.register("_elanus_merge", table)
    try:
        out = con.sql(
            "SELECT CASE WHEN b IS NULL AND g IS NULL THEN NULL ELSE "
            f"to_json(map_concat({as_map.format('b')}, {as_map.format('g')}))::VARCHAR END "
            "FROM _elanus_merge ORDER BY i"
        ).to_arrow_table()
    finally:
        con.unregister("_elanus_merge")
    return single_array(out.column(0)).cast(pa.string())


def _check_meta(schema: Schema, meta: pa.Array) -> pa.Array:
    t = meta.type
    if pa.types.is_null(t):
        return pa.nulls(len(meta), type=pa.string())
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise mismatch(
            f"the dynamic field column {DYNAMIC_FIELD!r} takes JSON object text (strings), "
            f"got Arrow type {t}"
        )
    meta = json_text(repr(DYNAMIC_FIELD), meta)
    static = [f.name for f in schema.fields]
    taken = [*static, *RESERVED_NAMES, ""]
    table = pa.table({"i": pa.array(np.arange(len(meta), dtype=np.int64)), "m": meta})
    con = _duck()
    con.register("_elanus_meta", table)
    try:
        not_object, clash = con.execute(
            "SELECT min(i) FILTER (WHERE json_type(m) <> 'OBJECT'), "
            "min(i) FILTER (WHERE json_type(m) = 'OBJECT' AND list_has_any(json_keys(m), ?)) "
            "FROM _elanus_meta WHERE m IS NOT NULL",
            [taken],
        ).fetchall()[0]
    finally:
        con.unregister("_elanus_meta")
    if not_object is not None:
        raise invalid(
            f"{DYNAMIC_FIELD!r}: the value at row {not_object} is not a JSON object: "
            f"{preview(meta[not_object].as_py())}"
        )
    if clash is not None:
        keys = json.loads(meta[clash].as_py())
        for key in keys:
            _check_dynamic_key(key, f"{DYNAMIC_FIELD!r}: the value at row {clash} has key")
        names = sorted(set(keys) & set(static))
        raise invalid(
            f"{DYNAMIC_FIELD!r}: the value at row {clash} has key {names[0]!r}, which is a field "
            "of the collection schema (dynamic keys cannot repeat schema fields)"
        )
    return meta


def _check_dynamic_key(key: str, where: str = "insert data has a dynamic field named") -> None:
    """Milvus refuses ``$meta`` as a dynamic key; Elanus also keeps the names of its own
    columns (``_ts``...) and the empty name out, so no stored key can shadow them."""
    if key == "":
        raise invalid(f"{where} '' (empty): a dynamic field needs a name")
    if key in RESERVED_NAMES:
        raise invalid(
            f"{where} {key!r}, which is reserved; dynamic fields cannot be named "
            f"{', '.join(repr(n) for n in sorted(RESERVED_NAMES))}"
        )


_JSON_SCALARS = (
    pa.types.is_null,
    pa.types.is_boolean,
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_string_view,
)
"""Arrow types whose values are JSON scalars as they are (floats: only finite ones)."""
_JSON_LISTS = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
)
"""Arrow list types, which become JSON arrays."""


def _check_json_friendly(name: str, arr: pa.Array, path: str = "") -> None:
    """Dynamic columns become JSON: only JSON-like types, and no NaN/infinity."""
    t = arr.type
    where = f"dynamic field {name!r}{path}"
    if pa.types.is_dictionary(t):
        return _check_json_friendly(name, arr.dictionary_decode(), path)
    if any(is_kind(t) for is_kind in _JSON_SCALARS):
        return None
    if pa.types.is_floating(t):
        values = arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if arr.null_count:
            values = values[~arr.is_null().to_numpy(zero_copy_only=False)]
        finite = np.isfinite(values)
        if not finite.all():
            bad = values[int(np.argmin(finite))].item()
            raise invalid(f"{where} contains {bad!r}, which JSON cannot hold")
        return None
    if any(is_kind(t) for is_kind in _JSON_LISTS):
        return _check_json_friendly(name, pc.list_flatten(arr), path + "[]")
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            sub = pc.struct_field(arr, [i])
            _check_json_friendly(name, sub, f"{path}.{t.field(i).name}")
        return None
    raise mismatch(f"{where} has Arrow type {t}, which cannot be stored as JSON")


_DUCK_LOCK = threading.Lock()


_DUCK_DB: duckdb.DuckDBPyConnection | None = None


_CURSORS: dict[int, duckdb.DuckDBPyConnection] = {}
"""OS thread id -> its cursor (not a ``threading.local``: Flight handler threads get a new
Python thread state per call, which would make a cursor per call)."""


_LENIENT = r"(?i)nan|inf|,\s*[\]}]"


def _duck() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for this thread (one shared in-memory database)."""
    global _DUCK_DB
    ident = threading.get_ident()
    con = _CURSORS.get(ident)
    if con is None:
        with _DUCK_LOCK:
            if _DUCK_DB is None:
                # imported on first use: a proxy that never checks JSON saves ~40 ms of start
                import duckdb

                _DUCK_DB = duckdb.connect(":memory:")
            con = _DUCK_DB.cursor()
            if len(_CURSORS) >= 1024:  # threads come and go: forget the gone ones
                _CURSORS.clear()
            _CURSORS[ident] = con
    return con


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_text(label: str, arr: pa.Array) -> pa.Array:
    """A string column as ``pa.string()``, each value held to be strict JSON text of an
    allowed length and depth: what a JSON field and ``$meta`` both take."""
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    bad = first_invalid_json(arr)
    if bad is not None:
        raise invalid(
            f"{label}: the value at row {bad} is not valid JSON text: {preview(arr[bad].as_py())}"
        )
    check_json_shape(label, arr)
    return arr


def check_json_shape(label: str, arr: pa.Array) -> None:
    """Refuse JSON texts (valid ones) longer than ``MAX_JSON_BYTES`` or nested deeper
    than ``max_json_depth``: readers of the value recurse, and Milvus refuses the length.
    Only a text with more opening brackets than the limit can nest too deeply, so the
    common case costs two vectorised counts."""
    lengths = pc.binary_length(arr)
    longest = pc.max(lengths).as_py()
    if longest is not None and longest > MAX_JSON_BYTES:
        i = first_true(pc.greater(lengths, MAX_JSON_BYTES))
        raise invalid(
            f"{label}: the JSON value at row {i} is {lengths[i].as_py()} bytes long; "
            f"the limit is {MAX_JSON_BYTES}"
        )
    limit = max_json_depth()
    opens = pc.add(pc.count_substring(arr, "["), pc.count_substring(arr, "{"))
    suspects = pc.greater(opens, limit).fill_null(False).to_numpy(zero_copy_only=False)
    for row in np.flatnonzero(suspects).tolist():
        if _nesting(arr[row].as_py()) > limit:
            raise invalid(
                f"{label}: the JSON value at row {row} is nested more than {limit} levels "
                "deep (setting max_json_depth)"
            )


def _nesting(text: str) -> int:
    """How deep arrays and objects nest in valid JSON text (brackets in strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def first_invalid_json(arr: pa.Array) -> int | None:
    """Index of the first non-null value of a string array that is not strict JSON text."""
    n = len(arr)
    if n == 0 or arr.null_count == n:
        return None
    table = pa.table({"i": pa.array(np.arange(n, dtype=np.int64)), "j": arr})
    con = _duck()
    con.register("_elanus_json", table)
    try:
        row = con.execute(
            "SELECT min(i) FROM _elanus_json WHERE j IS NOT NULL AND NOT json_valid(j)"
        ).fetchall()[0]
    finally:
        con.unregister("_elanus_json")
    bad = None if row is None or row[0] is None else int(row[0])
    suspects = pc.match_substring_regex(arr, _LENIENT).fill_null(False)
    if pc.any(suspects).as_py():
        for i in np.flatnonzero(suspects.to_numpy(zero_copy_only=False)):
            if bad is not None and i >= bad:
                break
            try:
                json.loads(arr[int(i)].as_py(), parse_constant=_reject_constant)
            except ValueError:
                return int(i)
    return bad
