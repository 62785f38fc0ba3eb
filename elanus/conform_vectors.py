"""The insert checks of vector columns: dense float32, float16 and bfloat16 (dimension, NaN
and infinities, range), binary (byte width) and sparse (index range, duplicate indices, either
Arrow shape), each returning the column in its exact stored Arrow type."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import bfloat16
from elanus.conform_common import (
    first_null,
    mismatch,
    wrong_type,
)
from elanus.errors import invalid
from elanus.schema import (
    FLOAT32_MAX,
    SPARSE_ARROW_TYPE,
    Field,
)

MAX_SPARSE_INDEX = 2**32 - 2  # Milvus: a sparse index must be below 2^32 - 1
_F16_MAX = float(np.finfo(np.float16).max)


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
        raise wrong_type(f, t)
    values = pc.list_flatten(arr)
    vt = values.type
    if not (pa.types.is_floating(vt) or pa.types.is_integer(vt)):
        raise mismatch(
            f"field {f.name!r} is {f.dtype.value}: vector elements must be numbers, got {vt}"
        )
    if values.null_count:
        i = first_null(values)
        raise invalid(f"field {f.name!r}: the vector at row {i // dim} contains a null")
    return values


def _check_finite(f: Field, values: np.ndarray, dim: int, limit: float, kind: str) -> None:
    """No NaN/infinity in a vector column's flat values, and every value fits ``kind``."""
    if len(values) == 0:
        return
    info = np.finfo(values.dtype) if values.dtype.kind == "f" else np.iinfo(values.dtype)
    if values.dtype.kind == "f":
        # A NaN or infinity anywhere makes the sum NaN or infinite, so a finite sum means
        # every value is finite and the common case needs no temporary mask. A float32 sum
        # runs at twice a float64 one's speed; when it overflows (huge finite values), the
        # mask below decides.
        if (
            values.dtype.itemsize <= 4
            and limit >= float(info.max)
            and np.isfinite(np.sum(values, dtype=np.float32))
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


def to_float_vector(f: Field, arr: pa.Array) -> pa.Array:
    return _to_floats(f, arr, np.float32, pa.float32(), FLOAT32_MAX, "float32")


def to_float16_vector(f: Field, arr: pa.Array) -> pa.Array:
    return _to_floats(f, arr, np.float16, pa.float16(), _F16_MAX, "float16")


def to_bfloat16_vector(f: Field, arr: pa.Array) -> pa.Array:
    """Numbers are rounded to bfloat16; uint16 lists and raw little-endian bytes (2 per
    element, pymilvus's form) are taken as bit patterns, the stored form."""
    dim = f.dim or 0
    t = arr.type
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        arr = _bits_from_bytes(f, arr)
    values = _vector_values(f, arr)
    if values.type == bfloat16.ARROW_TYPE:
        bits = values.to_numpy(zero_copy_only=False)
        _check_finite(f, bfloat16.widen(bits), dim, bfloat16.BF16_MAX, "bfloat16")
        if arr.type == f.arrow_type():
            return arr
    else:
        np_values = values.to_numpy(zero_copy_only=False)
        _check_finite(f, np_values, dim, bfloat16.ROUNDS_FINITE, "bfloat16")
        bits = bfloat16.round_bits(np_values)
    return pa.FixedSizeListArray.from_arrays(pa.array(bits, bfloat16.ARROW_TYPE), dim)


def _bits_from_bytes(f: Field, arr: pa.Array) -> pa.Array:
    """Binary rows of ``2 * dim`` bytes as lists of uint16 bit patterns."""
    dim = f.dim or 0
    lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
    wrong = lengths != 2 * dim
    if wrong.any():
        i = int(np.argmax(wrong))
        raise mismatch(
            f"field {f.name!r}: expected dim {dim} ({2 * dim} bytes of bfloat16), got "
            f"{int(lengths[i])} bytes (row {i})"
        )
    if arr.null_count:
        raise invalid(f"field {f.name!r}: the vector at row {first_null(arr)} is null")
    raw = b"".join(arr.to_pylist())
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint16)
    return pa.FixedSizeListArray.from_arrays(pa.array(bits), dim)


def _to_floats(
    f: Field, arr: pa.Array, np_type: Any, arrow_type: pa.DataType, limit: float, name: str
) -> pa.Array:
    """A float vector column of the field's element type, finite and in range."""
    dim = f.dim or 0
    values = _vector_values(f, arr)
    np_values = values.to_numpy(zero_copy_only=False)
    _check_finite(f, np_values, dim, limit, name)
    if arr.type == f.arrow_type():
        return arr
    if values.type != arrow_type:
        values = pa.array(np_values.astype(np_type))
    return pa.FixedSizeListArray.from_arrays(values, dim)


def _check_row_bytes(f: Field, lengths: pa.Array, width: int) -> None:
    """Every row of a binary vector column holds ``width`` bytes; the first that does not
    is named."""
    values = lengths.to_numpy(zero_copy_only=False)
    wrong = values != width
    if wrong.any():
        i = int(np.argmax(wrong))
        got = int(values[i])
        raise mismatch(
            f"field {f.name!r}: expected dim {f.dim or 0} ({width} bytes), got {got * 8} "
            f"({got} bytes) (row {i})"
        )


def to_binary_vector(f: Field, arr: pa.Array) -> pa.Array:
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
        _check_row_bytes(f, pc.binary_length(arr), width)
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
            _check_row_bytes(f, pc.list_value_length(arr), width)
        values = pc.list_flatten(arr)
        if not pa.types.is_integer(values.type) or values.null_count:
            raise wrong_type(f, t)
        label = f"field {f.name!r} (bytes)"
        np_values = values.to_numpy(zero_copy_only=False)
        if len(np_values) and (np_values.min() < 0 or np_values.max() > 255):
            i = int(np.argmax((np_values < 0) | (np_values > 255)))
            raise invalid(
                f"{label}: value {int(np_values[i])} at row {i // width} is not a byte (0..255)"
            )
        buf = pa.py_buffer(np_values.astype(np.uint8).tobytes())
        return pa.FixedSizeBinaryArray.from_buffers(target, len(arr), [None, buf])
    raise wrong_type(f, t)


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
            raise wrong_type(f, t)
        ki = next((names.index(k) for k in ("index", "key") if k in names), 0)
        vi = names.index("value") if "value" in names else 1 - ki
        if ki == vi:
            raise wrong_type(f, t)
        lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        entries = pc.list_flatten(arr)
        if entries.null_count:
            i = first_null(entries)
            r = int(np.searchsorted(offsets, i, side="right")) - 1
            raise invalid(f"field {f.name!r}: the sparse vector at row {r} has a null entry")
        return offsets, pc.struct_field(entries, [ki]), pc.struct_field(entries, [vi])
    raise wrong_type(f, t)


def to_sparse_vector(f: Field, arr: pa.Array) -> pa.Array:
    n = len(arr)
    offsets, keys, items = _sparse_parts(f, arr)
    label = f"field {f.name!r}"
    if not pa.types.is_integer(keys.type):
        raise mismatch(f"{label}: sparse vector indices must be integers, got {keys.type}")
    if not (pa.types.is_floating(items.type) or pa.types.is_integer(items.type)):
        raise mismatch(f"{label}: sparse vector values must be numbers, got {items.type}")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    if keys.null_count or items.null_count:
        i = first_null(keys if keys.null_count else items)
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
            bad = ~np.isfinite(v) | (v < 0) | (np.abs(v) > FLOAT32_MAX)
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
