"""Collection schemas as Spark schemas, and Arrow batches shaped the way Spark wants them.

| Elanus                   | Spark                      | notes                                   |
|--------------------------|----------------------------|-----------------------------------------|
| Bool                     | boolean                    |                                         |
| Int8 / Int16 / Int32     | byte / short / int         |                                         |
| Int64                    | long                       |                                         |
| Float / Double           | float / double             |                                         |
| VarChar                  | string                     |                                         |
| JSON                     | string                     | the JSON text                           |
| Array(element)           | array<element>             | elements are never null                 |
| FloatVector(dim)         | array<float>               | never null                              |
| Float16Vector(dim)       | array<float>               | widened to float32                      |
| BFloat16Vector(dim)      | array<float>               | bit patterns widened to float32         |
| BinaryVector(dim)        | binary                     | dim / 8 bytes                           |
| SparseFloatVector        | map<long, float>           | indices are uint32: ``int`` would wrap  |
| ``$meta`` (dynamic keys) | string ``$meta``           | the JSON object text, nullable          |

A field is nullable in Spark exactly when it is nullable in Elanus.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)
from pyspark.sql.types import DataType as SparkType

from elanus import bfloat16
from elanus.errors import invalid
from elanus.schema import DENSE_FLOAT_TYPES, DYNAMIC_FIELD, DataType, Field, Schema

_SCALARS: dict[DataType, SparkType] = {
    DataType.BOOL: BooleanType(),
    DataType.INT8: ByteType(),
    DataType.INT16: ShortType(),
    DataType.INT32: IntegerType(),
    DataType.INT64: LongType(),
    DataType.FLOAT: FloatType(),
    DataType.DOUBLE: DoubleType(),
    DataType.VARCHAR: StringType(),
    DataType.JSON: StringType(),
}


def spark_type(f: Field) -> SparkType:
    """The Spark type a field is read as (see the table above)."""
    dt = f.dtype
    if dt in _SCALARS:
        return _SCALARS[dt]
    if dt in DENSE_FLOAT_TYPES:
        return ArrayType(FloatType(), containsNull=False)
    if dt is DataType.BINARY_VECTOR:
        return BinaryType()
    if dt is DataType.SPARSE_FLOAT_VECTOR:
        return MapType(LongType(), FloatType(), valueContainsNull=False)
    if dt is DataType.ARRAY and f.element_type in _SCALARS:
        return ArrayType(_SCALARS[f.element_type], containsNull=False)
    raise invalid(f"field {f.name!r}: no Spark type for {dt.value}")


def spark_schema(schema: Schema, columns: list[str] | None = None) -> StructType:
    """The DataFrame schema of a collection (or of some of its columns, in that order).
    A function's output (BM25's sparse vector) is not among the default columns: the
    server computes it on write and never returns it."""
    fields = {f.name: StructField(f.name, spark_type(f), f.nullable) for f in schema.fields}
    if schema.enable_dynamic_field:
        fields[DYNAMIC_FIELD] = StructField(DYNAMIC_FIELD, StringType(), True)
    computed = {n for fn in schema.functions for n in fn.output_field_names}
    names = columns if columns is not None else [n for n in fields if n not in computed]
    for n in names:
        if n not in fields:
            raise invalid(f"column {n!r} is not a field of the collection")
    return StructType([fields[n] for n in names])


def arrow_target(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks the batches of a Python data source against."""
    return to_arrow_schema(schema, timezone="UTC")


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A batch in Spark's layout: columns by name, vectors as plain lists, uint32 sparse
    indices as int64, float16 and bfloat16 widened; field metadata dropped."""
    batch = batch.select(target.names)
    if any(bfloat16.is_bits_type(t) for t in batch.schema.types):
        # a cast would read bit patterns as integers: widen them first
        widened = [bfloat16.widen_column(c) for c in batch.columns]
        batch = pa.RecordBatch.from_arrays(widened, names=batch.schema.names)
    return batch.cast(target)
