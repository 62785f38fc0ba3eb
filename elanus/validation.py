"""The proxy's static checks for inserts, upserts and deletes (seed 000 §6), as a pure module.

``conform_insert`` checks an incoming Arrow batch against a collection schema and returns a
table whose columns are exactly the schema's fields, in schema order, with their exact Arrow
types (plus ``$meta`` for dynamic fields), or raises an ``ElanusError`` naming the field, the
row and the problem. ``conform_delete_keys`` does the same for a list of primary keys.

Everything is vectorised (Arrow compute, numpy, and DuckDB's ``json_valid`` for JSON text);
nothing is written and nothing is read from anywhere.

Error codes: ``SCHEMA_MISMATCH`` when a column is missing, unknown, of the wrong type or the
wrong shape (vector dimension); ``INVALID_ARGUMENT`` when a value is wrong (nulls, out of
range, too long, NaN, bad JSON, duplicate keys, no rows); ``REQUEST_TOO_LARGE`` for size.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.schema import (
    DYNAMIC_FIELD,
    FLOAT32_MAX,
    INT_RANGES,
    INT_TYPES,
    RESERVED_NAMES,
    SPARSE_ARROW_TYPE,
    DataType,
    Field,
    Schema,
)

__all__ = ["conform_insert", "conform_delete_keys", "first_invalid_json", "MAX_SPARSE_INDEX"]

MAX_SPARSE_INDEX = 2**32 - 2  # Milvus: a sparse index must be below 2^32 - 1
_F32_MAX = FLOAT32_MAX
_F16_MAX = float(np.finfo(np.float16).max)
Loc = Callable[[int], str]


def _row(i: int) -> str:
    return f"row {i}"


def mismatch(message: str) -> ElanusError:
    return ElanusError(ErrorCode.SCHEMA_MISMATCH, message)


# -- entry points ---------------------------------------------------------------------------


def conform_insert(
    data: pa.Table | pa.RecordBatch,
    schema: Schema,
    *,
    upsert: bool = False,
    max_bytes: int | None = None,
) -> pa.Table:
    """Check ``data`` against ``schema``; return it with the schema's columns and types.

    The result has one column per schema field in schema order (``Field.arrow_field()``,
    metadata included), minus the primary key when it is auto_id and this is an insert (the
    proxy assigns ids later), plus ``$meta`` (JSON object text or null) when the schema has
    dynamic fields enabled. Unknown columns are folded into ``$meta`` (a column's value wins
    over the same key in an incoming ``$meta``; a null column value leaves the key out).
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
    columns = {name: _single_array(table.column(i)) for i, name in enumerate(names)}
    static = {f.name for f in schema.fields}
    unknown = [name for name in names if name not in static]
    if unknown and not schema.enable_dynamic_field:
        listed = ", ".join(repr(u) for u in unknown)
        raise mismatch(
            f"field {listed} is not in the collection schema (dynamic fields are disabled)"
            if len(unknown) == 1
            else f"fields {listed} are not in the collection schema (dynamic fields are disabled)"
        )

    # Structural checks first: which columns are there at all.
    for f in schema.fields:
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

    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for f in schema.fields:
        if f.is_primary and f.auto_id and not upsert:
            continue
        col = columns.get(f.name)
        arr = _missing(f, n) if col is None else _conform_column(f, col)
        if f.is_primary:
            _check_unique_keys(f.name, arr)
        arrays.append(arr)
        fields.append(f.arrow_field())

    if schema.enable_dynamic_field:
        arrays.append(_dynamic_column(schema, columns, unknown, n))
        fields.append(pa.field(DYNAMIC_FIELD, pa.string(), nullable=True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def conform_delete_keys(pks: pa.Array | pa.ChunkedArray | list[Any], schema: Schema) -> pa.Array:
    """Primary keys to delete, as the pk's Arrow type (int64 or string), deduplicated."""
    pk = schema.primary
    if isinstance(pks, pa.ChunkedArray):
        arr = _single_array(pks)
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
                f"{_kind(pk.dtype)}: {_arrow_message(exc)}"
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
            f"delete: primary key field {pk.name!r} has a null at position {_first_null(arr)}"
        )
    loc: Loc = lambda i: f"position {i}"  # noqa: E731
    label = f"delete: primary key field {pk.name!r}"
    if pk.dtype == DataType.INT64:
        arr = _to_int(pk, arr, loc=loc, label=label)
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


def _single_array(col: pa.ChunkedArray) -> pa.Array:
    if col.num_chunks == 1:
        return col.chunk(0)
    if col.num_chunks == 0:
        return pa.array([], type=col.type)
    return col.combine_chunks()


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
        i = _first_null(arr)
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


def _wrong_type(f: Field, got: pa.DataType, label: str | None = None) -> ElanusError:
    return mismatch(
        f"{label or f'field {f.name!r}'} is {f.dtype.value} and takes {_kind(f.dtype, f)}, "
        f"got Arrow type {got}"
    )


def _kind(dt: DataType, f: Field | None = None) -> str:
    if dt in INT_TYPES:
        return "integers"
    if dt in (DataType.FLOAT, DataType.DOUBLE):
        return "numbers (integer or floating point)"
    if dt == DataType.BOOL:
        return "booleans"
    if dt == DataType.VARCHAR:
        return "strings"
    if dt == DataType.JSON:
        return "JSON text (strings)"
    if dt == DataType.ARRAY:
        elem = f.element_type.value if f and f.element_type else "scalar"
        return f"lists of {elem}"
    if dt == DataType.FLOAT_VECTOR:
        return f"lists of {f.dim if f else 'dim'} floats (fixed_size_list<float32, dim>)"
    if dt == DataType.FLOAT16_VECTOR:
        return f"lists of {f.dim if f else 'dim'} floats (fixed_size_list<float16, dim>)"
    if dt == DataType.BINARY_VECTOR:
        width = (f.dim or 0) // 8 if f else "dim/8"
        return f"fixed_size_binary({width}) or binary values of {width} bytes"
    if dt == DataType.SPARSE_FLOAT_VECTOR:
        return "map<uint32, float32> or list<struct<index, value>>"
    return dt.value


def _to_bool(f: Field, arr: pa.Array, **_: Any) -> pa.Array:
    if not pa.types.is_boolean(arr.type):
        raise _wrong_type(f, arr.type)
    return arr


def _to_int(
    f: Field,
    arr: pa.Array,
    *,
    dtype: DataType | None = None,
    loc: Loc = _row,
    label: str | None = None,
) -> pa.Array:
    dt = dtype or f.dtype
    label = label or f"field {f.name!r}"
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
        i = _first_true(bad)
        raise invalid(
            f"{label}: value {arr[i].as_py()} at {loc(i)} is out of range for "
            f"{dt.value} [{lo}, {hi}]"
        )
    return arr.cast(target, safe=False)


def _to_float(
    f: Field,
    arr: pa.Array,
    *,
    dtype: DataType | None = None,
    loc: Loc = _row,
    label: str | None = None,
) -> pa.Array:
    dt = dtype or f.dtype
    label = label or f"field {f.name!r}"
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise mismatch(f"{label} takes {dt.value} numbers, got Arrow type {t}")
    target = pa.float32() if dt == DataType.FLOAT else pa.float64()
    if pa.types.is_floating(t) and len(arr):
        bad = pc.or_(pc.is_nan(arr), pc.is_inf(arr))  # nulls stay null, not "bad"
        if pc.any(bad).as_py():
            i = _first_true(bad)
            raise invalid(
                f"{label}: value {arr[i].as_py()!r} at {loc(i)} is not a finite number "
                "(NaN and infinity are not allowed)"
            )
    if t == target:
        return arr
    if target == pa.float32() and t == pa.float64():
        values = arr.to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(values) & (np.abs(values) > _F32_MAX)
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
    loc: Loc = _row,
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
            i = _first_true(pc.greater(lengths, f.max_length))
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
        raise _wrong_type(f, t)
    if t != pa.string():
        arr = arr.cast(pa.string())
    bad = first_invalid_json(arr)
    if bad is not None:
        raise invalid(
            f"field {f.name!r}: the value at row {bad} is not valid JSON text: "
            f"{_preview(arr[bad].as_py())}"
        )
    return arr


def _to_array(f: Field, arr: pa.Array) -> pa.Array:
    assert f.element_type is not None
    t = arr.type
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        arr = arr.cast(pa.large_list(t.value_type))
        t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        raise _wrong_type(f, t)
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
        raise invalid(f"{label}: null element at {loc(_first_null(values))} (not allowed)")
    values = _convert_element(f, values, loc)
    mask = arr.is_null() if arr.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)


def _convert_element(f: Field, values: pa.Array, loc: Loc) -> pa.Array:
    et = f.element_type
    assert et is not None
    label = f"field {f.name!r} (array of {et.value})"
    if et in INT_TYPES:
        return _to_int(f, values, dtype=et, loc=loc, label=label)
    if et in (DataType.FLOAT, DataType.DOUBLE):
        return _to_float(f, values, dtype=et, loc=loc, label=label)
    if et == DataType.BOOL:
        if not pa.types.is_boolean(values.type):
            raise mismatch(f"{label} takes booleans, got Arrow type {values.type}")
        return values
    return _to_string(f, values, loc=loc, label=label)


# -- vectors --------------------------------------------------------------------------------


def _vector_values(f: Field, arr: pa.Array) -> pa.Array:
    """The flat element values of a dense vector column, after the dimension check."""
    dim = f.dim or 0
    t = arr.type
    if pa.types.is_fixed_size_list(t):
        if t.list_size != dim:
            raise mismatch(f"field {f.name!r}: expected dim {dim}, got {t.list_size}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
        wrong = lengths != dim
        if wrong.any():
            i = int(np.argmax(wrong))
            raise mismatch(f"field {f.name!r}: expected dim {dim}, got {int(lengths[i])} (row {i})")
    elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return _vector_values(f, arr.cast(pa.large_list(t.value_type)))
    else:
        raise _wrong_type(f, t)
    values = pc.list_flatten(arr)
    vt = values.type
    if not (pa.types.is_floating(vt) or pa.types.is_integer(vt)):
        raise mismatch(
            f"field {f.name!r} is {f.dtype.value}: vector elements must be numbers, got {vt}"
        )
    if values.null_count:
        i = _first_null(values)
        raise invalid(f"field {f.name!r}: the vector at row {i // dim} contains a null")
    return values


def _check_finite(f: Field, values: np.ndarray, dim: int, limit: float, kind: str) -> None:
    """No NaN/infinity in a vector column's flat values, and every value fits ``kind``."""
    if len(values) == 0:
        return
    info = np.finfo(values.dtype) if values.dtype.kind == "f" else np.iinfo(values.dtype)
    if values.dtype.kind == "f":
        # A float64 sum of float16/float32 values cannot overflow: it is finite exactly when
        # every value is, so the common case needs no temporary mask.
        if (
            values.dtype.itemsize <= 4
            and limit >= float(info.max)
            and np.isfinite(np.sum(values, dtype=np.float64))
        ):
            return
        finite = np.isfinite(values)
        if not finite.all():
            i = int(np.argmin(finite))
            raise invalid(
                f"field {f.name!r}: the vector at row {i // dim} contains {values[i].item()!r} at "
                f"position {i % dim} (NaN and infinity are not allowed)"
            )
    if limit < float(info.max):
        over = (values > limit) | (values < -limit)
        if over.any():
            i = int(np.argmax(over))
            raise invalid(
                f"field {f.name!r}: the vector at row {i // dim} contains {values[i].item()!r} at "
                f"position {i % dim}, out of range for {kind}"
            )


def _to_float_vector(f: Field, arr: pa.Array) -> pa.Array:
    dim = f.dim or 0
    target = f.arrow_type()
    values = _vector_values(f, arr)
    np_values = values.to_numpy(zero_copy_only=False)
    _check_finite(f, np_values, dim, _F32_MAX, "float32")
    if arr.type == target:
        return arr
    if values.type != pa.float32():
        values = pa.array(np_values.astype(np.float32))
    return pa.FixedSizeListArray.from_arrays(values, dim)


def _to_float16_vector(f: Field, arr: pa.Array) -> pa.Array:
    dim = f.dim or 0
    target = f.arrow_type()
    values = _vector_values(f, arr)
    np_values = values.to_numpy(zero_copy_only=False)
    _check_finite(f, np_values, dim, _F16_MAX, "float16")
    if arr.type == target:
        return arr
    if values.type != pa.float16():
        values = pa.array(np_values.astype(np.float16))
    return pa.FixedSizeListArray.from_arrays(values, dim)


def _to_binary_vector(f: Field, arr: pa.Array) -> pa.Array:
    dim = f.dim or 0
    width = dim // 8
    target = f.arrow_type()
    t = arr.type
    if pa.types.is_fixed_size_binary(t):
        if t.byte_width != width:
            raise mismatch(
                f"field {f.name!r}: expected dim {dim} ({width} bytes), "
                f"got {t.byte_width * 8} ({t.byte_width} bytes)"
            )
        return arr
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
        wrong = lengths != width
        if wrong.any():
            i = int(np.argmax(wrong))
            got = int(lengths[i])
            raise mismatch(
                f"field {f.name!r}: expected dim {dim} ({width} bytes), got {got * 8} "
                f"({got} bytes) (row {i})"
            )
        return arr.cast(target)
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        # bytes as lists of uint8
        if pa.types.is_fixed_size_list(t):
            got = t.list_size
            if got != width:
                raise mismatch(
                    f"field {f.name!r}: expected dim {dim} ({width} bytes), "
                    f"got {got * 8} ({got} bytes)"
                )
        else:
            lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            wrong = lengths != width
            if wrong.any():
                i = int(np.argmax(wrong))
                got = int(lengths[i])
                raise mismatch(
                    f"field {f.name!r}: expected dim {dim} ({width} bytes), got {got * 8} "
                    f"({got} bytes) (row {i})"
                )
        values = pc.list_flatten(arr)
        if not pa.types.is_integer(values.type) or values.null_count:
            raise _wrong_type(f, t)
        label = f"field {f.name!r} (bytes)"
        np_values = values.to_numpy(zero_copy_only=False)
        if len(np_values) and (np_values.min() < 0 or np_values.max() > 255):
            i = int(np.argmax((np_values < 0) | (np_values > 255)))
            raise invalid(
                f"{label}: value {int(np_values[i])} at row {i // width} is not a byte (0..255)"
            )
        buf = pa.py_buffer(np_values.astype(np.uint8).tobytes())
        return pa.FixedSizeBinaryArray.from_buffers(target, len(arr), [None, buf])
    raise _wrong_type(f, t)


def _sparse_parts(f: Field, arr: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """(offsets from 0, flat indices, flat values) of a sparse vector column."""
    t = arr.type
    n = len(arr)
    if pa.types.is_map(t):
        raw = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        start, end = int(raw[0]), int(raw[-1])
        return raw - start, arr.keys.slice(start, end - start), arr.items.slice(start, end - start)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        st = t.value_type
        names = [st.field(i).name for i in range(st.num_fields)]
        if st.num_fields != 2:
            raise _wrong_type(f, t)
        ki = next((names.index(k) for k in ("index", "key") if k in names), 0)
        vi = names.index("value") if "value" in names else 1 - ki
        if ki == vi:
            raise _wrong_type(f, t)
        lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        entries = pc.list_flatten(arr)
        if entries.null_count:
            i = _first_null(entries)
            r = int(np.searchsorted(offsets, i, side="right")) - 1
            raise invalid(f"field {f.name!r}: the sparse vector at row {r} has a null entry")
        return offsets, pc.struct_field(entries, [ki]), pc.struct_field(entries, [vi])
    raise _wrong_type(f, t)


def _to_sparse_vector(f: Field, arr: pa.Array) -> pa.Array:
    n = len(arr)
    offsets, keys, items = _sparse_parts(f, arr)
    label = f"field {f.name!r}"
    if not pa.types.is_integer(keys.type):
        raise mismatch(f"{label}: sparse vector indices must be integers, got {keys.type}")
    if not (pa.types.is_floating(items.type) or pa.types.is_integer(items.type)):
        raise mismatch(f"{label}: sparse vector values must be numbers, got {items.type}")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    if keys.null_count or items.null_count:
        i = _first_null(keys if keys.null_count else items)
        raise invalid(f"{label}: the sparse vector at row {int(rows[i])} contains a null")
    k = keys.to_numpy(zero_copy_only=False)
    v = items.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    if len(k):
        bad = (k < 0) | (k > MAX_SPARSE_INDEX)
        if bad.any():
            i = int(np.argmax(bad))
            raise invalid(
                f"{label}: the sparse vector at row {int(rows[i])} has index {int(k[i])}, "
                f"out of range [0, {MAX_SPARSE_INDEX}]"
            )
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(v) | (v < 0) | (np.abs(v) > _F32_MAX)
        if bad.any():
            i = int(np.argmax(bad))
            raise invalid(
                f"{label}: the sparse vector at row {int(rows[i])} has value {v[i].item()!r} "
                f"at index {int(k[i])} (values must be finite, non-negative float32)"
            )
    k = k.astype(np.int64, copy=False)
    same_row = rows[1:] == rows[:-1]
    if len(k) > 1 and (same_row & (k[1:] < k[:-1])).any():
        order = np.lexsort((k, rows))
        k, v = k[order], v[order]
    if len(k) > 1:
        dup = same_row & (k[1:] == k[:-1])
        if dup.any():
            i = int(np.argmax(dup))
            raise invalid(
                f"{label}: the sparse vector at row {int(rows[i])} has index {int(k[i])} "
                "more than once"
            )
    out = pa.MapArray.from_arrays(
        pa.array(offsets.astype(np.int32)),
        pa.array(k.astype(np.uint32)),
        pa.array(v.astype(np.float32)),
    )
    return out if out.type == SPARSE_ARROW_TYPE else out.cast(SPARSE_ARROW_TYPE)


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
    DataType.INT8: _to_int,
    DataType.INT16: _to_int,
    DataType.INT32: _to_int,
    DataType.INT64: _to_int,
    DataType.FLOAT: _to_float,
    DataType.DOUBLE: _to_float,
    DataType.VARCHAR: _to_varchar,
    DataType.JSON: _to_json,
    DataType.ARRAY: _to_array,
    DataType.FLOAT_VECTOR: _to_float_vector,
    DataType.FLOAT16_VECTOR: _to_float16_vector,
    DataType.BINARY_VECTOR: _to_binary_vector,
    DataType.SPARSE_FLOAT_VECTOR: _to_sparse_vector,
}


# -- primary keys ---------------------------------------------------------------------------


def check_unique_across(arrays: list[pa.Array], field_name: str) -> None:
    """No key twice in one request made of several batches (rows numbered across all)."""
    _check_unique_keys(field_name, pa.concat_arrays(arrays))


def _check_unique_keys(name: str, arr: pa.Array) -> None:
    n = len(arr)
    if n < 2 or pc.count_distinct(arr).as_py() == n:
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


# -- dynamic fields -------------------------------------------------------------------------


def _dynamic_column(
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
    return _single_array(out.column(0)).cast(pa.string())


def _check_meta(schema: Schema, meta: pa.Array) -> pa.Array:
    t = meta.type
    if pa.types.is_null(t):
        return pa.nulls(len(meta), type=pa.string())
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise mismatch(
            f"the dynamic field column {DYNAMIC_FIELD!r} takes JSON object text (strings), "
            f"got Arrow type {t}"
        )
    if t != pa.string():
        meta = meta.cast(pa.string())
    bad = first_invalid_json(meta)
    if bad is not None:
        raise invalid(
            f"{DYNAMIC_FIELD!r}: the value at row {bad} is not valid JSON text: "
            f"{_preview(meta[bad].as_py())}"
        )
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
            f"{_preview(meta[not_object].as_py())}"
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


def _check_json_friendly(name: str, arr: pa.Array, path: str = "") -> None:
    """Dynamic columns become JSON: only JSON-like types, and no NaN/infinity."""
    t = arr.type
    where = f"dynamic field {name!r}{path}"
    if pa.types.is_dictionary(t):
        return _check_json_friendly(name, arr.dictionary_decode(), path)
    if (
        pa.types.is_null(t)
        or pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
    ):
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
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return _check_json_friendly(name, pc.list_flatten(arr), path + "[]")
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            sub = pc.struct_field(arr, [i])
            _check_json_friendly(name, sub, f"{path}.{t.field(i).name}")
        return None
    raise mismatch(f"{where} has Arrow type {t}, which cannot be stored as JSON")


# -- JSON text ------------------------------------------------------------------------------

_DUCK_LOCK = threading.Lock()
_DUCK_DB: duckdb.DuckDBPyConnection | None = None
_CURSORS: dict[int, duckdb.DuckDBPyConnection] = {}
"""OS thread id -> its cursor (not a ``threading.local``: Flight handler threads get a new
Python thread state per call, which would make a cursor per call)."""
# DuckDB's parser also accepts NaN/Infinity (any case) and trailing commas; rows that might
# use those are re-checked with Python's strict parser.
_LENIENT = r"(?i)nan|inf|,\s*[\]}]"


def _duck() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for this thread (one shared in-memory database)."""
    global _DUCK_DB
    ident = threading.get_ident()
    con = _CURSORS.get(ident)
    if con is None:
        with _DUCK_LOCK:
            if _DUCK_DB is None:
                _DUCK_DB = duckdb.connect(":memory:")
            con = _DUCK_DB.cursor()
            if len(_CURSORS) >= 1024:  # threads come and go: forget the gone ones
                _CURSORS.clear()
            _CURSORS[ident] = con
    return con


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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


# -- helpers --------------------------------------------------------------------------------


def _first_true(mask: pa.Array) -> int:
    return int(np.argmax(mask.fill_null(False).to_numpy(zero_copy_only=False)))


def _first_null(arr: pa.Array) -> int:
    return _first_true(arr.is_null())


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _arrow_message(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
