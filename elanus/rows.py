"""Client-side conversion of what users pass to ``insert``/``upsert`` into an Arrow table.

Used by the Python SDK, so it imports only pyarrow, numpy, the standard library and
``elanus.schema``/``elanus.errors``. ``to_arrow`` accepts what a MilvusClient-like insert
accepts: an Arrow table or record batch (returned as a table, untouched), a list of row
dicts, a single row dict, a dict of columns (lists or numpy arrays), or a pandas DataFrame
(when pandas is installed). The result is typed by the schema where the values allow it;
the server (``elanus.validation.conform_insert``) makes the final decision, so a value that
does not fit is passed on with its own type for the server to name in its error, and keys
missing from a row become nulls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.schema import (
    DENSE_FLOAT_TYPES,
    DYNAMIC_FIELD,
    SPARSE_ARROW_TYPE,
    DataType,
    Field,
    Schema,
)

__all__ = ["same_fields", "to_arrow"]

_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)
_NESTED = (*DENSE_FLOAT_TYPES, DataType.ARRAY)


def to_arrow(data: Any, schema: Schema) -> pa.Table:
    """Convert insert data into an Arrow table typed by ``schema`` (see the module doc)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if _is_dataframe(data):
        return _from_columns({str(c): data[c] for c in data.columns}, schema)
    if isinstance(data, dict):
        if not data:
            raise invalid("insert data is an empty dict")
        if _is_columns(data, schema):
            return _from_columns(data, schema)
        return _from_rows([data], schema)
    if isinstance(data, list | tuple):
        return _from_rows(data, schema)
    raise invalid(
        "insert data must be a list of row dicts, a dict of columns, a pandas DataFrame or "
        f"an Arrow table, got {type(data).__name__}"
    )


def same_fields(rows: Sequence[Any], schema: Schema) -> None:
    """A partial upsert's rows all give the same fields of the schema (dynamic keys may
    differ), as pymilvus requires: a field one row leaves out would otherwise become a
    null there instead of keeping the stored value."""
    names = {f.name for f in schema.fields}
    first: set[str] | None = None
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise invalid(f"row {i} is a {type(row).__name__}, not a dict")
        given = names.intersection(row)
        if first is None:
            first = given
        elif given != first:
            odd = sorted(given ^ first)
            raise invalid(
                f"partial upsert: row {i} gives other fields than row 0 ({', '.join(odd)}); "
                "every row must give the same fields"
            )


# -- input shapes ---------------------------------------------------------------------------


def _is_dataframe(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas")


def _is_series(value: Any) -> bool:
    return type(value).__name__ == "Series" and type(value).__module__.startswith("pandas")


def _is_seq(value: Any) -> bool:
    return (
        isinstance(value, list | tuple | np.ndarray | pa.Array | pa.ChunkedArray)
        or _is_series(value)
        or hasattr(value, "tocsr")  # a scipy sparse matrix: one row per matrix row
    )


def _first(values: Any) -> Any:
    for v in values:
        if v is not None:
            return v
    return None


def _is_columns(data: dict[str, Any], schema: Schema) -> bool:
    """A dict of columns, or a single row? Decided by the first telling schema field."""
    if not all(_is_seq(v) for v in data.values()):
        return False  # a scalar value: one row
    for f in schema.fields:
        if f.name not in data or f.dtype == DataType.JSON:
            continue
        value = data[f.name]
        if isinstance(value, pa.Array | pa.ChunkedArray) or hasattr(value, "tocsr"):
            return True
        if isinstance(value, np.ndarray) and value.dtype != object:
            return value.ndim == 2 if f.dtype in _NESTED else value.ndim == 1
        first = _first(value)
        if f.dtype in _NESTED:
            return _is_seq(first) or isinstance(first, bytes)  # bytes: a bfloat16 row
        if f.dtype == DataType.SPARSE_FLOAT_VECTOR:
            # a row's sparse vector is a dict or a list of (index, value) pairs
            return isinstance(first, dict) or hasattr(first, "tocoo") or _is_seq(_first(first))
        return True  # a scalar field holding a list: a column
    return True


def _from_rows(rows: Sequence[Any], schema: Schema) -> pa.Table:
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise invalid(f"row {i} is a {type(row).__name__}, not a dict")
    known = {f.name for f in schema.fields}
    present: set[str] = set()
    for row in rows:
        present.update(row)
    arrays: list[pa.Array] = []
    names: list[str] = []
    for f in schema.fields:
        if f.name in present:
            arrays.append(_column(f, [row.get(f.name) for row in rows]))
            names.append(f.name)
    extra = present - known
    if extra:
        _check_dynamic_allowed(schema, extra)
        meta = [_row_meta(i, row, known) for i, row in enumerate(rows)]
        arrays.append(pa.array(meta, type=pa.string()))
        names.append(DYNAMIC_FIELD)
    if not rows:
        for f in schema.fields:
            if not (f.is_primary and f.auto_id):
                arrays.append(pa.array([], type=f.arrow_type()))
                names.append(f.name)
    return pa.Table.from_arrays(arrays, names=names)


def _from_columns(data: dict[str, Any], schema: Schema) -> pa.Table:
    lengths = {name: _length(value) for name, value in data.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k!r}: {v}" for k, v in lengths.items())
        raise invalid(f"insert columns have different lengths ({detail})")
    n = next(iter(lengths.values()))
    known = {f.name for f in schema.fields}
    arrays: list[pa.Array] = []
    names: list[str] = []
    for f in schema.fields:
        if f.name in data:
            arrays.append(_column(f, data[f.name]))
            names.append(f.name)
    extra = [name for name in data if name not in known]
    if extra:
        _check_dynamic_allowed(schema, set(extra))
        lists = {name: _as_list(data[name]) for name in extra}
        rows = [{name: lists[name][i] for name in extra} for i in range(n)]
        meta = [_row_meta(i, row, set()) for i, row in enumerate(rows)]
        arrays.append(pa.array(meta, type=pa.string()))
        names.append(DYNAMIC_FIELD)
    return pa.Table.from_arrays(arrays, names=names)


def _length(value: Any) -> int:
    if hasattr(value, "tocsr"):
        return int(value.shape[0])
    if isinstance(value, pa.ChunkedArray | pa.Array) or _is_seq(value):
        return len(value)
    raise invalid(f"a column must be a list or an array, got {type(value).__name__}")


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, pa.Array | pa.ChunkedArray):
        return value.to_pylist()
    if isinstance(value, np.ndarray):
        return list(value)
    if _is_series(value):
        return value.tolist()
    return list(value)


def _check_dynamic_allowed(schema: Schema, extra: set[str]) -> None:
    if schema.enable_dynamic_field:
        return
    unknown = sorted(extra)
    listed = ", ".join(repr(u) for u in unknown)
    raise ElanusError(
        ErrorCode.SCHEMA_MISMATCH,
        f"field {listed} is not in the collection schema (dynamic fields are disabled)"
        if len(unknown) == 1
        else f"fields {listed} are not in the collection schema (dynamic fields are disabled)",
    )


def _row_meta(i: int, row: dict[str, Any], known: set[str]) -> str | None:
    """The dynamic part of one row as JSON object text (None when there is none)."""
    meta: dict[str, Any] = {}
    for key, value in row.items():
        if key in known:
            continue
        if key == DYNAMIC_FIELD:
            if isinstance(value, str):
                value = json.loads(value)
            if isinstance(value, dict):
                meta.update(value)
                continue
            if value is None:
                continue
            raise invalid(f"row {i}: {DYNAMIC_FIELD!r} must be a dict or JSON object text")
        meta[key] = value
    if not meta:
        return None
    try:
        return json.dumps(meta, default=_json_default, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise invalid(f"row {i}: dynamic fields cannot be stored as JSON: {exc}") from None


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes | bytearray):
        return value.decode()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# -- columns --------------------------------------------------------------------------------


def _column(f: Field, values: Any) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values  # typed by the caller; the server checks it
    dt = f.dtype
    if dt in DENSE_FLOAT_TYPES:
        return _dense_vectors(f, values)
    if dt == DataType.BINARY_VECTOR:
        return _binary_vectors(f, values)
    if dt == DataType.SPARSE_FLOAT_VECTOR:
        return _sparse_vectors(f, values)
    if dt == DataType.JSON:
        return _json_column(f, values)
    if dt == DataType.ARRAY:
        rows = [_plain(v) for v in _as_list(values)]
        return _typed(f, rows)
    if _is_series(values):
        try:
            arr = pa.Array.from_pandas(values)
        except _CONVERT_ERRORS:
            return _typed(f, values.tolist())
        return _cast_or_keep(arr, f.arrow_type())
    if isinstance(values, np.ndarray) and values.dtype != object:
        if values.ndim != 1:
            raise ElanusError(
                ErrorCode.SCHEMA_MISMATCH,
                f"field {f.name!r} is {dt.value}: expected a 1-D column, got shape {values.shape}",
            )
        try:
            arr = pa.array(values)
        except _CONVERT_ERRORS:
            return _typed(f, values.tolist())
        return _cast_or_keep(arr, f.arrow_type())
    return _typed(f, _as_list(values))


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _typed(f: Field, values: list[Any], type_: pa.DataType | None = None) -> pa.Array:
    """``values`` as ``type_`` (the field's type), else as inferred (the server names the
    problem); a client-side error only when Arrow cannot represent them at all."""
    try:
        return pa.array(values, type=type_ or f.arrow_type())
    except _CONVERT_ERRORS:
        pass
    try:
        return pa.array(values)
    except _CONVERT_ERRORS as exc:
        raise ElanusError(
            ErrorCode.SCHEMA_MISMATCH,
            f"field {f.name!r} ({f.dtype.value}): cannot convert the values: {exc}",
        ) from None


def _cast_or_keep(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target, safe=True)
    except _CONVERT_ERRORS:
        return arr


def _dense_vectors(f: Field, values: Any) -> pa.Array:
    """float32 (or float16) rows; bfloat16 rows travel as float32 (``ml_dtypes`` arrays
    widen exactly) and the server rounds them, or as pymilvus's raw bytes."""
    if f.dtype == DataType.BFLOAT16_VECTOR and isinstance(_first(_as_list(values)), bytes):
        return _typed(f, _as_list(values), pa.binary())
    half = f.dtype == DataType.FLOAT16_VECTOR
    np_type = np.float16 if half else np.float32
    matrix = _matrix(values, np_type)
    if matrix is not None:
        flat = pa.array(matrix.reshape(-1))  # zero-copy for a C-contiguous array
        return pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1])
    rows = [_plain(v) for v in _as_list(values)]
    elem = pa.float16() if half else pa.float32()
    if elem == pa.float16():
        # Older pyarrow cannot convert Python floats to float16: go through numpy.
        rows = [None if r is None else np.asarray(r, dtype=np.float16) for r in rows]
    return _typed(f, rows, pa.list_(elem))


def _matrix(values: Any, np_type: type) -> np.ndarray | None:
    """A rectangular 2-D array of ``np_type``, or None when the rows don't make one."""
    matrix: np.ndarray
    try:
        if isinstance(values, np.ndarray) and values.dtype != object:
            matrix = np.ascontiguousarray(values, dtype=np_type)
        else:
            rows = _as_list(values)
            if not rows or any(r is None for r in rows):
                return None
            matrix = np.ascontiguousarray(np.asarray(rows, dtype=np_type))
    except (TypeError, ValueError):
        return None
    return matrix if matrix.ndim == 2 else None


def _binary_vectors(f: Field, values: Any) -> pa.Array:
    width = (f.dim or 0) // 8
    if isinstance(values, np.ndarray) and values.dtype == np.uint8 and values.ndim == 2:
        data = np.ascontiguousarray(values)
        if data.shape[1] == width:
            buf = pa.py_buffer(data)
            return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(data), [None, buf])
        return pa.array([bytes(r) for r in data], type=pa.binary())
    rows = []
    for v in _as_list(values):
        if isinstance(v, np.ndarray):
            v = v.astype(np.uint8).tobytes()
        elif isinstance(v, list | tuple):
            v = bytes(v)
        rows.append(v)
    try:
        return pa.array(rows, type=pa.binary(width))
    except _CONVERT_ERRORS:
        return _typed(f, rows, pa.binary())


def _sparse_vectors(f: Field, values: Any) -> pa.Array:
    if hasattr(values, "tocsr"):  # a scipy sparse matrix: vectorised
        csr = values.tocsr()
        csr.sort_indices()
        return pa.MapArray.from_arrays(
            pa.array(np.asarray(csr.indptr, dtype=np.int32)),
            pa.array(np.asarray(csr.indices, dtype=np.int64)).cast(pa.uint32()),
            pa.array(np.asarray(csr.data, dtype=np.float32)),
        )
    rows: list[Any] = []
    for v in _as_list(values):
        if v is None:
            rows.append(None)
        elif isinstance(v, dict):
            rows.append(sorted((int(k), float(x)) for k, x in v.items()))
        elif hasattr(v, "tocoo"):
            coo = v.tocoo()
            rows.append(sorted(zip(coo.col.tolist(), coo.data.tolist(), strict=True)))
        else:
            rows.append([(int(k), float(x)) for k, x in v])
    return _typed(f, rows, SPARSE_ARROW_TYPE)


def _json_column(f: Field, values: Any) -> pa.Array:
    out: list[str | None] = []
    for i, v in enumerate(_as_list(values)):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(json.dumps(v, default=_json_default, allow_nan=False, ensure_ascii=False))
        except (TypeError, ValueError) as exc:
            raise invalid(f"field {f.name!r}: the value at row {i} is not JSON: {exc}") from None
    return pa.array(out, type=pa.string())
