"""bfloat16 as Elanus stores it. Arrow (and so Lance and Parquet) has no bfloat16 type, so
a BFloat16Vector column is ``fixed_size_list<uint16, dim>`` of bit patterns: the upper 16
bits of the float32 with the same sign and exponent. A list keeps the layout of the other
dense vectors (dimension = list size, per-element values) and uint16 is taken by no other
vector type, so a column's type alone says it holds bfloat16; ``fixed_size_binary`` would
be mistaken for a BinaryVector.

Narrowing is round-to-nearest-even, as ``ml_dtypes``, PyTorch and Milvus's own conversion
do; widening is exact (a 16-bit shift), so searches compute on float32."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

BF16_MAX = float(np.array([0x7F7F0000], np.uint32).view(np.float32)[0])
"""The largest finite bfloat16 (about 3.39e38)."""
ROUNDS_FINITE = float(np.array([0x7F7F7FFF], np.uint32).view(np.float32)[0])
"""The largest float32 that rounds to a finite bfloat16 (one more rounds to infinity)."""
ARROW_TYPE = pa.uint16()
"""The element type of a stored BFloat16Vector column."""


def round_bits(values: np.ndarray) -> np.ndarray:
    """Finite numbers as bfloat16 bit patterns (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the
    # dropped half is above one half, or is one half and the kept half is odd.
    bias = np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return ((u + bias) >> np.uint32(16)).astype(np.uint16)


def widen(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns as the float32 values they stand for (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def is_bits_type(t: pa.DataType) -> bool:
    """A list type whose elements are uint16: in Elanus, a bfloat16 vector column."""
    return (
        pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    ) and t.value_type == ARROW_TYPE


def widen_column(arr: Any) -> Any:
    """A stored bfloat16 column (Array or ChunkedArray) as ``fixed_size_list<float32, dim>``,
    nulls kept; any other column unchanged."""
    if isinstance(arr, pa.ChunkedArray):
        if not is_bits_type(arr.type):
            return arr
        return pa.chunked_array([widen_column(c) for c in arr.chunks], _float_type(arr.type))
    if not pa.types.is_fixed_size_list(arr.type) or not is_bits_type(arr.type):
        return arr
    dim = arr.type.list_size
    flat = arr.values.slice(arr.offset * dim, len(arr) * dim).to_numpy(zero_copy_only=False)
    mask = arr.is_null() if arr.null_count else None
    return pa.FixedSizeListArray.from_arrays(pa.array(widen(flat)), dim, mask=mask)


def widen_table(table: pa.Table) -> pa.Table:
    """A result table with its stored bfloat16 columns widened to float32 lists."""
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if pa.types.is_fixed_size_list(column.type) and is_bits_type(column.type):
            f = table.schema.field(i)
            widened = pa.field(name, _float_type(column.type), f.nullable, f.metadata)
            table = table.set_column(i, widened, widen_column(column))
    return table


def _float_type(t: pa.DataType) -> pa.DataType:
    return pa.list_(pa.float32(), t.list_size)
