"""Milvus's columnar ``schema_pb2.FieldData`` to Arrow and back, column at a time.

Vectors never pass through Python rows: byte vectors are ``np.frombuffer`` views, float
vectors go from the repeated float field through numpy into a fixed-size list, sparse
rows are one structured numpy view of their concatenated (uint32, float32) pairs. Numeric
scalars go through numpy as well; only Array cells (one small message per row) are read
row by row. Nullable columns carry ``valid_data``: in requests the values of null rows are
left out (pymilvus packs them so), in replies every row has a value, as Milvus sends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pymilvus.grpc_gen import schema_pb2

from elanus import bfloat16
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.schema import DYNAMIC_FIELD, DataType, Field, Schema

PROTO_TYPES: dict[DataType, int] = {
    dt: schema_pb2.DataType.Value(dt.value) for dt in DataType if dt != DataType.JSON
} | {DataType.JSON: schema_pb2.JSON}
_SCALAR_ATTR: dict[DataType, tuple[str, Any]] = {
    DataType.BOOL: ("bool_data", np.bool_),
    DataType.INT8: ("int_data", np.int32),
    DataType.INT16: ("int_data", np.int32),
    DataType.INT32: ("int_data", np.int32),
    DataType.INT64: ("long_data", np.int64),
    DataType.FLOAT: ("float_data", np.float32),
    DataType.DOUBLE: ("double_data", np.float64),
    DataType.VARCHAR: ("string_data", None),
    DataType.JSON: ("json_data", None),
}
_SPARSE_PAIR = np.dtype([("index", "<u4"), ("value", "<f4")])


def elanus_type(proto_type: int) -> DataType:
    """The Elanus type of a Milvus ``DataType`` number (``String`` is VarChar)."""
    if proto_type == schema_pb2.String:
        return DataType.VARCHAR
    for dt, number in PROTO_TYPES.items():
        if number == proto_type:
            return dt
    known = proto_type in schema_pb2.DataType.values()
    label = schema_pb2.DataType.Name(proto_type) if known else proto_type
    raise invalid(f"data type {label} is not supported by Elanus")


# -- requests: FieldData -> Arrow ------------------------------------------------------------
_VECTOR_ATTR = {
    DataType.FLOAT_VECTOR: "float_vector",
    DataType.BINARY_VECTOR: "binary_vector",
    DataType.FLOAT16_VECTOR: "float16_vector",
    DataType.BFLOAT16_VECTOR: "bfloat16_vector",
    DataType.SPARSE_FLOAT_VECTOR: "sparse_float_vector",
}


def to_table(fields_data: Any, schema: Schema, num_rows: int) -> pa.Table:
    """An insert's columns as an Arrow table ``validation.conform_insert`` takes: one
    column per field given, dynamic keys in ``$meta`` (JSON text). Every column must hold
    ``num_rows`` rows, as Milvus checks before anything else."""
    if num_rows <= 0:
        raise invalid(f"num_rows is {num_rows}: give the number of rows sent (at least 1)")
    names, columns = [], []
    for fd in fields_data:
        if fd.is_dynamic or fd.field_name == DYNAMIC_FIELD:
            name = DYNAMIC_FIELD
            column = _json_column(fd, name, num_rows)
        else:
            field = _schema_field(schema, fd.field_name)
            name, column = field.name, to_arrow(fd, field, num_rows)
        if len(column) != num_rows:
            raise invalid(f"field {name!r} holds {len(column)} rows, but num_rows is {num_rows}")
        names.append(name)
        columns.append(column)
    return pa.table(columns, names=names)


def _schema_field(schema: Schema, name: str) -> Field:
    for f in schema.fields:
        if f.name == name:
            return f
    raise ElanusError(
        ErrorCode.SCHEMA_MISMATCH, f"field {name!r} is not in the collection's schema"
    )


def to_arrow(fd: Any, field: Field, num_rows: int) -> pa.Array:
    """One ``FieldData`` as an Arrow column of ``field``'s type."""
    dt = field.dtype
    if dt.is_vector:
        return _vectors(fd.vectors, field, num_rows)
    if dt == DataType.JSON:
        return _json_column(fd, field.name, num_rows)
    attr = "array_data" if dt == DataType.ARRAY else _SCALAR_ATTR[dt][0]
    _check_kind(field, fd.scalars.WhichOneof("data"), attr)
    if dt == DataType.ARRAY:
        values = _array_cells(fd.scalars.array_data, field)
    else:
        np_type = _SCALAR_ATTR[dt][1]
        data = getattr(fd.scalars, attr).data
        values = (
            pa.array(np.array(data, dtype=np_type)).cast(field.arrow_type())
            if np_type is not None
            else pa.array(list(data), pa.string())
        )
    return _expand(values, fd.valid_data, num_rows, field.name)


def _check_kind(field: Field, sent: str | None, attr: str) -> None:
    """The values of ``field`` come in the member of the oneof its type uses (none: no
    values, which the row count check then names)."""
    if sent is not None and sent != attr:
        raise invalid(
            f"field {field.name!r} is {field.dtype.value}: its values go in {attr}, not {sent}"
        )


def _expand(values: pa.Array, valid: Any, num_rows: int, name: str) -> pa.Array:
    """Values of the valid rows only, spread out to ``num_rows`` with nulls between."""
    if not len(valid):
        return values
    if len(valid) != num_rows:
        raise invalid(
            f"valid_data of field {name!r} has {len(valid)} entries; num_rows is {num_rows}"
        )
    mask = np.array(valid, dtype=np.bool_)
    if int(mask.sum()) != len(values):
        if len(values) == len(mask):  # every row has a value: the mask alone marks nulls
            return pc.if_else(pa.array(mask), values, pa.nulls(len(values), values.type))
        raise invalid(f"valid_data of field {name!r} does not match the number of values given")
    where = np.cumsum(mask) - 1
    return values.take(pa.array(np.where(mask, where, 0), mask=~mask))


def _json_column(fd: Any, name: str, num_rows: int) -> pa.Array:
    sent = fd.scalars.WhichOneof("data")
    if sent is not None and sent != "json_data":
        raise invalid(f"field {name!r} is JSON: its values go in json_data, not {sent}")
    values = pa.array(list(fd.scalars.json_data.data), pa.binary()).cast(pa.string())
    return _expand(values, fd.valid_data, num_rows, name)


def _array_cells(arrays: Any, field: Field) -> pa.Array:
    """An Array column's cells; each holds its values in the element type's member (a
    cell of another kind would read as empty: refused, naming the member)."""
    assert field.element_type is not None
    attr, _ = _SCALAR_ATTR[field.element_type]
    sent = arrays.element_type
    if sent and sent != PROTO_TYPES[field.element_type]:
        label = schema_pb2.DataType.Name(sent) if sent in schema_pb2.DataType.values() else sent
        raise invalid(
            f"field {field.name!r} is an Array of {field.element_type.value}, "
            f"not of {label} (array_data.element_type)"
        )
    cells = arrays.data
    kinds = {c.WhichOneof("data") for c in cells} - {None, attr}
    if kinds:
        raise invalid(
            f"field {field.name!r} is an Array of {field.element_type.value}: its cells' "
            f"values go in {attr}, not {', '.join(sorted(kinds))}"
        )
    inner = field.arrow_type().value_type
    return pa.array([list(getattr(c, attr).data) for c in cells], pa.list_(inner))


def _vectors(vf: Any, field: Field, num_rows: int) -> pa.Array:
    dt, dim = field.dtype, field.dim or 0
    _check_kind(field, vf.WhichOneof("data"), _VECTOR_ATTR[dt])
    if dt == DataType.SPARSE_FLOAT_VECTOR:
        return sparse_to_arrow(list(vf.sparse_float_vector.contents))
    if vf.dim != dim:  # Milvus checks the dim sent, 0 included
        raise invalid(f"vector field {field.name!r} has dim {dim}, the data has dim {vf.dim}")
    if dt == DataType.FLOAT_VECTOR:
        flat = np.array(vf.float_vector.data, dtype=np.float32)
        return _fixed_list(flat, dim, field, pa.float32())
    if dt == DataType.BINARY_VECTOR:
        raw = vf.binary_vector
        width = dim // 8
        if len(raw) != width * num_rows:
            raise _bad_size(field, len(raw), width * num_rows)
        return pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), num_rows, [None, pa.py_buffer(raw)]
        )
    raw = vf.float16_vector if dt == DataType.FLOAT16_VECTOR else vf.bfloat16_vector
    np_type, arrow_type = (
        (np.float16, pa.float16()) if dt == DataType.FLOAT16_VECTOR else (np.uint16, pa.uint16())
    )
    if len(raw) % 2:
        raise _bad_size(field, len(raw), 2 * dim * num_rows)
    return _fixed_list(np.frombuffer(raw, dtype=np_type), dim, field, arrow_type)


def _fixed_list(flat: np.ndarray, dim: int, field: Field, arrow_type: pa.DataType) -> pa.Array:
    if dim <= 0 or len(flat) % dim:
        raise invalid(
            f"vector field {field.name!r} has dim {dim}; the data holds {len(flat)} values, "
            "not a whole number of vectors"
        )
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, arrow_type), dim)


def _bad_size(field: Field, got: int, want: int) -> ElanusError:
    return invalid(f"vector field {field.name!r}: {got} bytes of vectors, expected {want}")


def sparse_to_arrow(rows: list[bytes]) -> pa.Array:
    """Milvus's sparse rows (little-endian uint32 index, float32 value pairs) as the
    Arrow map column Elanus stores."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    if (lengths % _SPARSE_PAIR.itemsize).any():
        raise invalid("a sparse vector's bytes are not whole (uint32, float32) pairs")
    pairs = np.frombuffer(b"".join(rows), dtype=_SPARSE_PAIR)
    offsets = np.concatenate([[0], np.cumsum(lengths // _SPARSE_PAIR.itemsize)]).astype(np.int32)
    return pa.MapArray.from_arrays(
        pa.array(offsets), pa.array(pairs["index"].copy()), pa.array(pairs["value"].copy())
    )


def sparse_rows(column: pa.Array) -> list[bytes]:
    """The Arrow map column back as Milvus's sparse rows."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = column.offsets.to_numpy()
    pairs = np.empty(len(column.keys), dtype=_SPARSE_PAIR)
    pairs["index"] = column.keys.to_numpy(zero_copy_only=False)
    pairs["value"] = column.items.to_numpy(zero_copy_only=False)
    raw = pairs.tobytes()
    size = _SPARSE_PAIR.itemsize
    return [raw[a * size : b * size] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


# -- replies: Arrow -> FieldData -------------------------------------------------------------
def from_arrow(column: pa.Array | pa.ChunkedArray, field: Field | None, name: str) -> Any:
    """An Arrow column of a reply as a ``FieldData`` (``field`` None: the dynamic ``$meta``
    JSON column, or a computed one such as ``count(*)``)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_null(column.type):  # no rows read: the column has no type of its own
        column = column.cast(_reply_type(field, name))
    fd = schema_pb2.FieldData(field_name=name)
    if field is None:
        if name == DYNAMIC_FIELD:
            fd.type, fd.is_dynamic = schema_pb2.JSON, True
            fd.scalars.json_data.data.extend(_texts(column, b"{}"))
            return fd
        fd.type = schema_pb2.Int64
        fd.scalars.long_data.data.extend(column.to_numpy(zero_copy_only=False).tolist())
        return fd
    dt = field.dtype
    fd.type = PROTO_TYPES[dt]
    if field.field_id is not None:
        fd.field_id = field.field_id
    if dt.is_vector:
        _fill_vectors(fd.vectors, column, field)
        return fd
    if field.nullable or column.null_count:
        fd.valid_data.extend(column.is_valid().to_numpy(zero_copy_only=False).tolist())
    if dt == DataType.JSON:
        fd.scalars.json_data.data.extend(_texts(column, b"null"))
    elif dt == DataType.VARCHAR:
        fd.scalars.string_data.data.extend(column.fill_null("").to_pylist())
    elif dt == DataType.ARRAY:
        _fill_arrays(fd.scalars.array_data, column, field)
    else:
        attr, np_type = _SCALAR_ATTR[dt]
        filled = column.fill_null(False if dt == DataType.BOOL else 0)
        values = filled.to_numpy(zero_copy_only=False).astype(np_type)
        getattr(fd.scalars, attr).data.extend(values.tolist())
    return fd


def _reply_type(field: Field | None, name: str) -> pa.DataType:
    if field is not None:
        return field.arrow_type()
    return pa.string() if name == DYNAMIC_FIELD else pa.int64()


def _texts(column: pa.Array, null: bytes) -> list[bytes]:
    return [null if v is None else v.encode() for v in column.cast(pa.string()).to_pylist()]


def _fill_arrays(target: Any, column: pa.Array, field: Field) -> None:
    assert field.element_type is not None
    attr, _ = _SCALAR_ATTR[field.element_type]
    target.element_type = PROTO_TYPES[field.element_type]
    for cell in column.to_pylist():
        sf = target.data.add()
        if cell:
            getattr(sf, attr).data.extend(cell)


def _fill_vectors(vf: Any, column: pa.Array, field: Field) -> None:
    dt, dim = field.dtype, field.dim or 0
    if dt == DataType.SPARSE_FLOAT_VECTOR:
        rows = sparse_rows(column)
        vf.sparse_float_vector.contents.extend(rows)
        vf.sparse_float_vector.dim = int(pc.max(column.keys).as_py() or 0) + 1 if rows else 0
        return
    vf.dim = dim
    if dt == DataType.BINARY_VECTOR:
        vf.binary_vector = b"".join(column.to_pylist())
        return
    flat = column.flatten().to_numpy(zero_copy_only=False)
    if dt == DataType.FLOAT_VECTOR:
        vf.float_vector.data.extend(flat.astype(np.float32).tolist())
    elif dt == DataType.FLOAT16_VECTOR:
        vf.float16_vector = flat.astype(np.float16).tobytes()
    else:  # bfloat16: replies carry float32 (widened); Milvus sends the bit patterns
        bits = flat if flat.dtype == np.uint16 else bfloat16.round_bits(flat.astype(np.float32))
        vf.bfloat16_vector = np.asarray(bits, dtype=np.uint16).tobytes()


def ids_of(pks: pa.Array | np.ndarray | list[Any], pk: Field) -> Any:
    """Primary keys as Milvus's ``IDs``."""
    ids = schema_pb2.IDs()
    values = pks.to_pylist() if isinstance(pks, pa.Array | pa.ChunkedArray) else list(pks)
    if pk.dtype == DataType.INT64:
        ids.int_id.data.extend(values)
    else:
        ids.str_id.data.extend(values)
    return ids
