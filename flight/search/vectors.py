"""The query vectors of a search, checked against their field and shaped as segments take
them: float32 rows for float vectors (bfloat16 widened), uint8 rows for binary vectors,
``{index: value}`` maps for sparse ones. A search's vectors are checked on every call, so
Arrow input skips Python lists where it can."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import bfloat16
from elanus.errors import invalid
from elanus.schema import DENSE_FLOAT_TYPES, DataType, Field


def query_vectors(field: Field, data: Any) -> Any:
    """The query vectors of a search as its segments take them (float32 rows for float
    vectors), checked against the field; ``data`` is JSON lists or an Arrow column."""
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if isinstance(data, pa.Array):
        if not _float_field(field) or data.null_count:
            data = data.to_pylist()  # the checks below name what is wrong with it
        else:
            data = _arrow_float_rows(field, data)
    if _float_field(field):
        try:
            q = np.asarray(data, dtype=np.float32)
        except (TypeError, ValueError):
            raise invalid(f"search: 'data' must be a list of {field.dim}-d vectors") from None
        if q.ndim != 2 or q.shape[1] != field.dim:
            got = q.shape[1] if q.ndim == 2 else "ragged or scalar"
            raise invalid(
                f"search: vector field {field.name!r} has dim {field.dim}, "
                f"the query vectors have {got}"
            )
        if not np.isfinite(q).all():
            raise invalid("search: query vectors contain NaN or infinity")
        return q
    if field.dtype is DataType.BINARY_VECTOR:
        width = (field.dim or 0) // 8
        try:
            raw = np.asarray(data)
        except (TypeError, ValueError):
            raw = np.asarray([], dtype=np.int64)
        ok = raw.ndim == 2 and raw.shape[1] == width and raw.dtype.kind in "iu"
        if not ok or (raw.size and (raw.min() < 0 or raw.max() > 255)):
            raise invalid(
                f"search: binary queries for {field.name!r} need {width} bytes each "
                f"(integers 0-255; dim {field.dim})"
            )
        return raw.astype(np.uint8)
    if field.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return [_sparse_query(field, v) for v in data]
    return data


def _float_field(field: Field) -> bool:
    return field.dtype in DENSE_FLOAT_TYPES


def _arrow_float_rows(field: Field, column: pa.Array) -> Any:
    """A list column of numbers as an (n, d) array without going through Python lists; a
    column of another shape comes back as lists for the ordinary checks."""
    kind = column.type
    if not (
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    ):
        return column.to_pylist()
    values = column.flatten()
    lengths = column.value_lengths()
    dim = field.dim or 0
    number = pa.types.is_floating(values.type) or pa.types.is_integer(values.type)
    if not number or values.null_count or pc.any(pc.not_equal(lengths, dim)).as_py():
        return column.to_pylist()
    flat = values.to_numpy(zero_copy_only=False)
    if field.dtype is DataType.BFLOAT16_VECTOR and values.type == bfloat16.ARROW_TYPE:
        flat = bfloat16.widen(flat)  # the stored form: bit patterns
    return flat.reshape(len(column), dim)


def _sparse_query(field: Field, vector: Any) -> dict[int, float]:
    """A sparse query vector as ``{index: value}`` with sane indices and finite values."""
    if isinstance(vector, dict):
        items = list(vector.items())
    elif isinstance(vector, list) and all(
        isinstance(p, list | tuple) and len(p) == 2 for p in vector
    ):
        items = [tuple(p) for p in vector]
    else:
        raise invalid(f"search: sparse queries for {field.name!r} are {{index: value}} maps")
    out: dict[int, float] = {}
    for k, v in items:
        try:
            index, value = int(k), float(v)
        except (TypeError, ValueError):
            raise invalid(f"search: sparse query entry {k!r}: {v!r} is not index: number") from None
        if not 0 <= index < 2**32 - 1:
            raise invalid(f"search: sparse query index {k!r} is out of range [0, 2^32 - 1)")
        if not np.isfinite(value):
            raise invalid(f"search: sparse query value at index {k!r} is NaN or infinite")
        out[index] = value
    return out
