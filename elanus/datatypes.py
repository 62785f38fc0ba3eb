"""Data types of fields: Milvus's names, their groups (vectors, integers, ...) and ranges,
and the Arrow type each is stored as. Pure; re-exported by ``elanus.schema``."""

from __future__ import annotations

import enum

import pyarrow as pa

from elanus.errors import invalid


class DataType(enum.StrEnum):
    BOOL = "Bool"
    INT8 = "Int8"
    INT16 = "Int16"
    INT32 = "Int32"
    INT64 = "Int64"
    FLOAT = "Float"
    DOUBLE = "Double"
    VARCHAR = "VarChar"
    JSON = "JSON"
    ARRAY = "Array"
    FLOAT_VECTOR = "FloatVector"
    BINARY_VECTOR = "BinaryVector"
    FLOAT16_VECTOR = "Float16Vector"
    BFLOAT16_VECTOR = "BFloat16Vector"
    SPARSE_FLOAT_VECTOR = "SparseFloatVector"

    @classmethod
    def parse(cls, value: str | DataType | enum.Enum) -> DataType:
        """A type by value or member name; another enum (pymilvus's ``DataType``) by name."""
        if isinstance(value, DataType):
            return value
        raw = value.name if isinstance(value, enum.Enum) else str(value)
        key = raw.replace("_", "").lower()
        for dt in cls:
            if dt.value.lower() == key or dt.name.replace("_", "").lower() == key:
                return dt
        raise invalid(f"unknown data type {value!r}")

    @property
    def is_vector(self) -> bool:
        return self in VECTOR_TYPES

    @property
    def is_scalar_number(self) -> bool:
        return self in INT_TYPES or self in (DataType.FLOAT, DataType.DOUBLE)


VECTOR_TYPES = frozenset(
    {
        DataType.FLOAT_VECTOR,
        DataType.BINARY_VECTOR,
        DataType.FLOAT16_VECTOR,
        DataType.BFLOAT16_VECTOR,
        DataType.SPARSE_FLOAT_VECTOR,
    }
)
DENSE_FLOAT_TYPES = frozenset(
    {DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR}
)
"""Dense vectors of floating-point numbers: searched (and returned) as float32."""
INT_TYPES = frozenset({DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64})
INT_RANGES: dict[DataType, tuple[int, int]] = {
    DataType.INT8: (-(2**7), 2**7 - 1),
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.INT64: (-(2**63), 2**63 - 1),
}
FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32 (``numpy.finfo(numpy.float32).max``)."""
ARRAY_ELEMENT_TYPES = frozenset(
    {DataType.BOOL, *INT_TYPES, DataType.FLOAT, DataType.DOUBLE, DataType.VARCHAR}
)

_ARROW_SCALARS: dict[DataType, pa.DataType] = {
    DataType.BOOL: pa.bool_(),
    DataType.INT8: pa.int8(),
    DataType.INT16: pa.int16(),
    DataType.INT32: pa.int32(),
    DataType.INT64: pa.int64(),
    DataType.FLOAT: pa.float32(),
    DataType.DOUBLE: pa.float64(),
    DataType.VARCHAR: pa.string(),
    DataType.JSON: pa.string(),
}
SPARSE_ARROW_TYPE = pa.map_(pa.uint32(), pa.float32())
