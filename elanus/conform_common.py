"""Words and small helpers every insert check shares (``elanus.validation``,
``elanus.conform_vectors``, ``elanus.conform_json``): how a field, a row and a wrong Arrow
type are named in a message, and reading Arrow columns as single arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.errors import ElanusError, ErrorCode
from elanus.schema import (
    INT_TYPES,
    DataType,
    Field,
)

Loc = Callable[[int], str]


def row_at(i: int) -> str:
    return f"row {i}"


def mismatch(message: str) -> ElanusError:
    return ElanusError(ErrorCode.SCHEMA_MISMATCH, message)


def wrong_type(f: Field, got: pa.DataType, label: str | None = None) -> ElanusError:
    return mismatch(
        f"{label or f'field {f.name!r}'} is {f.dtype.value} and takes {accepted_kind(f.dtype, f)}, "
        f"got Arrow type {got}"
    )


def accepted_kind(dt: DataType, f: Field | None = None) -> str:
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
    if dt == DataType.BFLOAT16_VECTOR:
        n = f.dim if f else "dim"
        return (
            f"lists of {n} floats, or of {n} uint16 bfloat16 bit patterns "
            "(fixed_size_list<uint16, dim>), or binary values of 2 * dim bytes"
        )
    if dt == DataType.BINARY_VECTOR:
        width = (f.dim or 0) // 8 if f else "dim/8"
        return f"fixed_size_binary({width}) or binary values of {width} bytes"
    if dt == DataType.SPARSE_FLOAT_VECTOR:
        return "map<uint32, float32> or list<struct<index, value>>"
    return dt.value


def single_array(col: pa.ChunkedArray) -> pa.Array:
    if col.num_chunks == 1:
        return col.chunk(0)
    if col.num_chunks == 0:
        return pa.array([], type=col.type)
    return col.combine_chunks()


def first_true(mask: pa.Array) -> int:
    return int(np.argmax(mask.fill_null(False).to_numpy(zero_copy_only=False)))


def first_null(arr: pa.Array) -> int:
    return first_true(arr.is_null())


def preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def arrow_message(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
