"""The proxy's static checks for inserts, upserts and deletes (seed 000 §6), as a pure module.

``conform_insert`` checks an incoming Arrow batch against a collection schema and returns a
table whose columns are exactly the schema's fields, in schema order, with their exact Arrow
types (plus ``$meta`` for dynamic fields), or raises an ``ElanusError`` naming the field, the
row and the problem. ``conform_delete_keys`` does the same for a list of primary keys.

Everything is vectorised (Arrow compute, numpy, and DuckDB's ``json_valid`` for JSON text);
nothing is written and nothing is read from anywhere. Vector columns are
``elanus.conform_vectors``'s, JSON values and the dynamic field ``elanus.conform_json``'s.

Error codes: ``SCHEMA_MISMATCH`` when a column is missing, unknown, of the wrong type or the
wrong shape (vector dimension); ``INVALID_ARGUMENT`` when a value is wrong (nulls, out of
range, too long, NaN, bad JSON, duplicate keys, no rows); ``REQUEST_TOO_LARGE`` for size.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.conform_common import (
    Loc,
    accepted_kind,
    arrow_message,
    first_null,
    first_true,
    mismatch,
    row_at,
    single_array,
    wrong_type,
)
from elanus.conform_json import dynamic_column, json_text
from elanus.conform_vectors import (
    to_bfloat16_vector,
    to_binary_vector,
    to_float16_vector,
    to_float_vector,
    to_sparse_vector,
)
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.functions import function_outputs, output_column
from elanus.schema import (
    DYNAMIC_FIELD,
    FLOAT32_MAX,
    INT_RANGES,
    INT_TYPES,
    DataType,
    Field,
    Schema,
)

__all__ = ["conform_insert", "conform_delete_keys", "check_unique_across"]


# -- entry points ---------------------------------------------------------------------------


def conform_insert(
    data: pa.Table | pa.RecordBatch,
    schema: Schema,
    *,
    upsert: bool = False,
    max_bytes: int | None = None,
    staged: bool = False,
) -> pa.Table:
    """Check ``data`` against ``schema``; return it with the schema's columns and types.

    The result has one column per schema field in schema order (``Field.arrow_field()``,
    metadata included), minus the primary key when it is auto_id and this is an insert (the
    proxy assigns ids later), plus ``$meta`` (JSON object text or null) when the schema has
    dynamic fields enabled. Unknown columns are folded into ``$meta`` (a column's value wins
    over the same key in an incoming ``$meta``; a null column value leaves the key out).

    A function's output (BM25) is computed here from its input and may not be given,
    except by ``staged`` files: the proxy conformed those already, outputs included.
    """
    what = "upsert" if upsert else "insert"
    table = _as_table(data, what)
    if max_bytes is not None:
        size = table.nbytes
        if size > max_bytes:
            raise ElanusError(
                ErrorCode.REQUEST_TOO_LARGE,
                f"{what} request is {size} bytes; the limit is {max_bytes} bytes",
            )
    n = table.num_rows
    if n == 0:
        raise invalid(f"{what} request has no rows")

    names = table.column_names
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise mismatch(f"column {repeated[0]!r} appears more than once in the {what} request")
    columns = {name: single_array(table.column(i)) for i, name in enumerate(names)}
    static = {f.name for f in schema.fields}
    unknown = [name for name in names if name not in static]
    if unknown and not schema.enable_dynamic_field:
        listed = ", ".join(repr(u) for u in unknown)
        raise mismatch(
            f"field {listed} is not in the collection schema (dynamic fields are disabled)"
            if len(unknown) == 1
            else f"fields {listed} are not in the collection schema (dynamic fields are disabled)"
        )

    outputs = function_outputs(schema)
    given = [name for name in names if name in outputs]
    if staged:
        outputs = {name: fn for name, fn in outputs.items() if name not in given}
    elif given:
        raise mismatch(
            f"Attempt to insert an unexpected function output field `{given[0]}` to collection "
            f"(the {outputs[given[0]].function_type.value} function "
            f"{outputs[given[0]].name!r} computes it from "
            f"{outputs[given[0]].input_field_names[0]!r})"
        )

    # Structural checks first: which columns are there at all.
    for f in schema.fields:
        if f.name in outputs:
            continue
        if f.is_primary and f.auto_id:
            if upsert and f.name not in columns:
                raise mismatch(
                    f"upsert needs the primary key field {f.name!r} (even though it is auto_id)"
                )
            if not upsert and f.name in columns:
                raise mismatch(
                    f"primary key field {f.name!r} is auto_id: do not supply it on insert "
                    "(ids are assigned by the server)"
                )
        elif f.name not in columns and not f.nullable and f.default_value is None:
            raise mismatch(
                f"field {f.name!r} is missing from the {what} request "
                "(it is not nullable and has no default value)"
            )

    conformed: dict[str, pa.Array] = {}
    for f in schema.fields:
        if (f.is_primary and f.auto_id and not upsert) or f.name in outputs:
            continue
        col = columns.get(f.name)
        arr = _missing(f, n) if col is None else _conform_column(f, col)
        if f.is_primary:
            _check_unique_keys(f.name, arr)
        conformed[f.name] = arr
    for name, fn in outputs.items():  # computed from the checked input text
        conformed[name] = output_column(fn, schema, conformed[fn.input_field_names[0]])
    kept = [f for f in schema.fields if f.name in conformed]
    arrays: list[pa.Array] = [conformed[f.name] for f in kept]
    fields: list[pa.Field] = [f.arrow_field() for f in kept]

    if schema.enable_dynamic_field:
        arrays.append(dynamic_column(schema, columns, unknown, n))
        fields.append(pa.field(DYNAMIC_FIELD, pa.string(), nullable=True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def conform_delete_keys(pks: pa.Array | pa.ChunkedArray | list[Any], schema: Schema) -> pa.Array:
    """Primary keys to delete, as the pk's Arrow type (int64 or string), deduplicated."""
    pk = schema.primary
    if isinstance(pks, pa.ChunkedArray):
        arr = single_array(pks)
    elif isinstance(pks, pa.Array):
        arr = pks
    elif isinstance(pks, list | tuple | np.ndarray):
        if isinstance(pks, np.ndarray) and pks.ndim != 1:
            raise invalid(f"delete: primary keys must be a flat list, got shape {pks.shape}")
        try:
            arr = pa.array(pks)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise mismatch(
                f"delete: primary keys of field {pk.name!r} must all be "
                f"{accepted_kind(pk.dtype)}: {arrow_message(exc)}"
            ) from None
    else:
        raise invalid(
            f"delete: primary keys must be a list or an Arrow array, got {type(pks).__name__}"
        )
    if len(arr) == 0:
        raise invalid(f"delete: no primary keys given for field {pk.name!r}")
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count:
        raise invalid(
            f"delete: primary key field {pk.name!r} has a null at position {first_null(arr)}"
        )
    loc: Loc = lambda i: f"position {i}"  # noqa: E731
    label = f"delete: primary key field {pk.name!r}"
    if pk.dtype == DataType.INT64:
        arr = _to_number(pk, arr, loc=loc, label=label)
    else:
        arr = _to_string(pk, arr, label=label, check_length=False)
    return pc.unique(arr)


# -- columns --------------------------------------------------------------------------------


def _as_table(data: Any, what: str) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    raise invalid(f"{what} data must be an Arrow table or record batch, got {type(data).__name__}")


def _missing(f: Field, n: int) -> pa.Array:
    if f.default_value is not None:
        return pa.repeat(_default_scalar(f), n)
    return pa.nulls(n, type=f.arrow_type())


def _default_scalar(f: Field) -> pa.Scalar:
    value = f.default_value
    if f.dtype == DataType.JSON:  # refused since, but a catalog may hold an older schema
        value = json.dumps(value)
    return pa.scalar(value, type=f.arrow_type())


def _conform_column(f: Field, arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_null(arr.type):
        arr = pa.nulls(len(arr), type=f.arrow_type())
    nulls = arr.null_count
    if nulls and f.default_value is None and not f.nullable:
        i = first_null(arr)
        if f.is_primary:
            raise invalid(f"primary key field {f.name!r} has a null at row {i}")
        if f.dtype.is_vector:
            raise invalid(f"vector field {f.name!r} has a null at row {i}")
        raise invalid(
            f"field {f.name!r} has a null at row {i} (it is not nullable and has no default value)"
        )
    out = _CONVERTERS[f.dtype](f, arr)
    if nulls and f.default_value is not None:
        out = out.fill_null(_default_scalar(f))
    return out


def _to_bool(f: Field, arr: pa.Array, **_: Any) -> pa.Array:
    if not pa.types.is_boolean(arr.type):
        raise wrong_type(f, arr.type)
    return arr


def _to_number(
    f: Field,
    arr: pa.Array,
    *,
    dtype: DataType | None = None,
    loc: Loc = row_at,
    label: str | None = None,
) -> pa.Array:
    """An integer or floating column (or an array's elements, of ``dtype``), range-checked
    and cast to its exact Arrow type; errors name ``label`` and rows as ``loc`` says."""
    dt = dtype or f.dtype
    label = label or f"field {f.name!r}"
    if dt in INT_TYPES:
        return _to_int(arr, dt, loc, label)
    return _to_float(arr, dt, loc, label)


def _to_int(arr: pa.Array, dt: DataType, loc: Loc, label: str) -> pa.Array:
    if not pa.types.is_integer(arr.type):
        raise mismatch(f"{label} takes {dt.value} integers, got Arrow type {arr.type}")
    target = _ARROW_INT[dt]
    if arr.type == target:
        return arr
    lo, hi = INT_RANGES[dt]
    src = np.iinfo(arr.type.to_pandas_dtype())
    bad: pa.Array | None = None
    if src.min < lo:
        bad = pc.less(arr, pa.scalar(lo, arr.type))
    if src.max > hi:
        above = pc.greater(arr, pa.scalar(hi, arr.type))
        bad = above if bad is None else pc.or_(bad, above)
    if bad is not None and pc.any(bad).as_py():
        i = first_true(bad)
        raise invalid(
            f"{label}: value {arr[i].as_py()} at {loc(i)} is out of range for "
            f"{dt.value} [{lo}, {hi}]"
        )
    return arr.cast(target, safe=False)


def _to_float(arr: pa.Array, dt: DataType, loc: Loc, label: str) -> pa.Array:
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise mismatch(f"{label} takes {dt.value} numbers, got Arrow type {t}")
    target = pa.float32() if dt == DataType.FLOAT else pa.float64()
    if pa.types.is_floating(t) and len(arr):
        bad = pc.or_(pc.is_nan(arr), pc.is_inf(arr))  # nulls stay null, not "bad"
        if pc.any(bad).as_py():
            i = first_true(bad)
            raise invalid(
                f"{label}: value {arr[i].as_py()!r} at {loc(i)} is not a finite number "
                "(NaN and infinity are not allowed)"
            )
    if t == target:
        return arr
    if target == pa.float32() and t == pa.float64():
        values = arr.to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(values) & (np.abs(values) > FLOAT32_MAX)
        if over.any():
            i = int(np.argmax(over))
            raise invalid(
                f"{label}: value {values[i].item()!r} at {loc(i)} is out of range for Float"
            )
    return arr.cast(target, safe=False)


def _to_string(
    f: Field,
    arr: pa.Array,
    *,
    loc: Loc = row_at,
    label: str | None = None,
    check_length: bool = True,
) -> pa.Array:
    label = label or f"field {f.name!r}"
    t = arr.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise mismatch(f"{label} takes VarChar strings, got Arrow type {t}")
    if t != pa.string():
        arr = arr.cast(pa.string())
    if check_length and f.max_length is not None and len(arr):
        lengths = pc.binary_length(arr)
        longest = pc.max(lengths).as_py()
        if longest is not None and longest > f.max_length:
            i = first_true(pc.greater(lengths, f.max_length))
            raise invalid(
                f"{label}: the value at {loc(i)} is {lengths[i].as_py()} bytes long (UTF-8); "
                f"max_length is {f.max_length}"
            )
    return arr


def _to_varchar(f: Field, arr: pa.Array) -> pa.Array:
    return _to_string(f, arr)


def _to_json(f: Field, arr: pa.Array) -> pa.Array:
    t = arr.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise wrong_type(f, t)
    return json_text(f"field {f.name!r}", arr)


def _to_array(f: Field, arr: pa.Array) -> pa.Array:
    assert f.element_type is not None
    t = arr.type
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        arr = arr.cast(pa.large_list(t.value_type))
        t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        raise wrong_type(f, t)
    lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
    cap = f.max_capacity or 0
    if len(lengths) and lengths.max() > cap:
        i = int(np.argmax(lengths > cap))
        raise invalid(
            f"field {f.name!r}: the array at row {i} has {int(lengths[i])} elements; "
            f"max_capacity is {cap}"
        )
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pc.list_flatten(arr)

    def loc(i: int) -> str:
        r = int(np.searchsorted(offsets, i, side="right")) - 1
        return f"row {r}, element {i - int(offsets[r])}"

    label = f"field {f.name!r}"
    if pa.types.is_null(values.type):
        values = pa.nulls(len(values), type=_ARROW_ELEMENT[f.element_type])
    elif values.null_count:
        raise invalid(f"{label}: null element at {loc(first_null(values))} (not allowed)")
    values = _convert_element(f, values, loc)
    mask = arr.is_null() if arr.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)


def _convert_element(f: Field, values: pa.Array, loc: Loc) -> pa.Array:
    et = f.element_type
    assert et is not None
    label = f"field {f.name!r} (array of {et.value})"
    if et in INT_TYPES or et in (DataType.FLOAT, DataType.DOUBLE):
        return _to_number(f, values, dtype=et, loc=loc, label=label)
    if et == DataType.BOOL:
        if not pa.types.is_boolean(values.type):
            raise mismatch(f"{label} takes booleans, got Arrow type {values.type}")
        return values
    return _to_string(f, values, loc=loc, label=label)


_ARROW_INT = {
    DataType.INT8: pa.int8(),
    DataType.INT16: pa.int16(),
    DataType.INT32: pa.int32(),
    DataType.INT64: pa.int64(),
}
_ARROW_ELEMENT = {
    **_ARROW_INT,
    DataType.BOOL: pa.bool_(),
    DataType.FLOAT: pa.float32(),
    DataType.DOUBLE: pa.float64(),
    DataType.VARCHAR: pa.string(),
}
_CONVERTERS: dict[DataType, Callable[[Field, pa.Array], pa.Array]] = {
    DataType.BOOL: _to_bool,
    DataType.INT8: _to_number,
    DataType.INT16: _to_number,
    DataType.INT32: _to_number,
    DataType.INT64: _to_number,
    DataType.FLOAT: _to_number,
    DataType.DOUBLE: _to_number,
    DataType.VARCHAR: _to_varchar,
    DataType.JSON: _to_json,
    DataType.ARRAY: _to_array,
    DataType.FLOAT_VECTOR: to_float_vector,
    DataType.FLOAT16_VECTOR: to_float16_vector,
    DataType.BFLOAT16_VECTOR: to_bfloat16_vector,
    DataType.BINARY_VECTOR: to_binary_vector,
    DataType.SPARSE_FLOAT_VECTOR: to_sparse_vector,
}


# -- primary keys ---------------------------------------------------------------------------


def check_unique_across(arrays: list[pa.Array], field_name: str) -> None:
    """No key twice in one request made of several batches (rows numbered across all)."""
    _check_unique_keys(field_name, pa.concat_arrays(arrays))


def _all_distinct(arr: pa.Array) -> bool:
    """Whether no key repeats: ascending integer keys (auto ids, ranges) are told in one
    vectorised pass; anything else by hashing (``unique``: 3x faster than
    ``count_distinct`` on 300k int64 keys, 21 against 73 ms)."""
    if pa.types.is_integer(arr.type) and arr.null_count == 0:
        keys = arr.to_numpy(zero_copy_only=False)
        if bool(np.all(keys[1:] > keys[:-1])):
            return True
    return len(pc.unique(arr)) == len(arr)


def _check_unique_keys(name: str, arr: pa.Array) -> None:
    n = len(arr)
    if n < 2 or _all_distinct(arr):
        return
    codes = pc.dictionary_encode(arr).indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(codes, return_index=True)
    repeat = np.ones(n, dtype=bool)
    repeat[first] = False
    i = int(np.argmax(repeat))
    key = arr[i].as_py()
    j = int(np.argmax(codes == codes[i]))
    raise invalid(
        f"duplicate primary key {key!r} in field {name!r} (rows {j} and {i}); "
        "primary keys must be unique within a request"
    )


# DuckDB's parser also accepts NaN/Infinity (any case) and trailing commas; rows that might
# use those are re-checked with Python's strict parser.
