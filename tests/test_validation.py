"""The proxy's static insert/upsert/delete checks (elanus.validation) and the SDK's
client-side converter (elanus.rows): every rejection names the field and the problem."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest
from column_edits import edited_table

from elanus.conform_json import first_invalid_json
from elanus.errors import ElanusError, ErrorCode
from elanus.rows import to_arrow
from elanus.schema import DYNAMIC_FIELD, SPARSE_ARROW_TYPE, DataType, Field, Schema
from elanus.validation import conform_delete_keys, conform_insert

DIM = 4


def base_schema(*, dynamic: bool = False, auto_id: bool = False, pk: str = "Int64") -> Schema:
    pk_field = (
        Field("id", DataType.INT64, is_primary=True, auto_id=auto_id)
        if pk == "Int64"
        else Field("id", DataType.VARCHAR, is_primary=True, max_length=16)
    )
    return Schema(
        [
            pk_field,
            Field("vec", DataType.FLOAT_VECTOR, dim=DIM),
            Field("age", DataType.INT8, nullable=True),
            Field("score", DataType.FLOAT, default_value=0.5),
            Field("name", DataType.VARCHAR, max_length=5, nullable=True),
        ],
        enable_dynamic_field=dynamic,
    )


def full_schema() -> Schema:
    return Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("vec", DataType.FLOAT_VECTOR, dim=DIM),
            Field("half", DataType.FLOAT16_VECTOR, dim=2),
            Field("bits", DataType.BINARY_VECTOR, dim=16),
            Field("sparse", DataType.SPARSE_FLOAT_VECTOR),
            Field("flag", DataType.BOOL, nullable=True),
            Field("d", DataType.DOUBLE, nullable=True),
            Field("doc", DataType.JSON, nullable=True),
            Field(
                "tags", DataType.ARRAY, element_type=DataType.INT16, max_capacity=3, nullable=True
            ),
            Field(
                "words",
                DataType.ARRAY,
                element_type=DataType.VARCHAR,
                max_length=3,
                max_capacity=2,
                nullable=True,
            ),
        ]
    )


def vectors(n: int, dim: int = DIM, dtype: type = np.float32) -> pa.Array:
    flat = np.arange(n * dim, dtype=dtype) / 10
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)


def base_table(n: int = 3, **overrides: object) -> pa.Table:
    cols: dict[str, object] = {
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "vec": vectors(n),
        "age": pa.array([20 + i for i in range(n)], pa.int8()),
        "score": pa.array([1.0] * n, pa.float32()),
        "name": pa.array(["ab"] * n),
    }
    return edited_table(cols, overrides)


def full_table(n: int = 2, **overrides: object) -> pa.Table:
    cols: dict[str, object] = {
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "vec": vectors(n),
        "half": vectors(n, 2, np.float16),
        "bits": pa.array([b"\x01\x02"] * n, pa.binary(2)),
        "sparse": pa.array([[(1, 0.5), (7, 1.0)]] * n, SPARSE_ARROW_TYPE),
        "flag": pa.array([True] * n),
        "d": pa.array([1.5] * n),
        "doc": pa.array(['{"a": 1}'] * n),
        "tags": pa.array([[1, 2]] * n, pa.list_(pa.int16())),
        "words": pa.array([["ab"]] * n, pa.list_(pa.string())),
    }
    return edited_table(cols, overrides)


def rejects(table: pa.Table, schema: Schema, *words: str, code: ErrorCode | None = None, **kw):
    with pytest.raises(ElanusError) as info:
        conform_insert(table, schema, **kw)
    err = info.value
    for word in words:
        assert word in err.message, (word, err.message)
    if code is not None:
        assert err.code == code, err
    else:
        assert err.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.SCHEMA_MISMATCH), err
    return err


def expected_types(schema: Schema, *, drop_pk: bool = False) -> list[pa.DataType]:
    return [f.arrow_type() for f in schema.fields if not (drop_pk and f.is_primary)]


# -- happy paths ----------------------------------------------------------------------------


def test_exact_table_passes_through_with_schema_types_and_order():
    schema = full_schema()
    table = full_table()
    out = conform_insert(table.select(list(reversed(table.column_names))), schema)
    assert out.column_names == [f.name for f in schema.fields]
    assert [c.type for c in out.columns] == expected_types(schema)
    assert out.schema.field("vec").metadata[b"elanus.type"] == b"FloatVector"
    assert out.schema.equals(schema.to_arrow(), check_metadata=True)
    assert out.column("doc").to_pylist() == ['{"a": 1}'] * 2


def test_record_batch_and_chunked_and_sliced_inputs():
    schema = base_schema()
    table = base_table(6)
    out = conform_insert(table.to_batches()[0], schema)
    assert out.num_rows == 6
    chunked = pa.concat_tables([table.slice(0, 3), table.slice(3)])
    assert conform_insert(chunked, schema).column("id").to_pylist() == list(range(6))
    sliced = pa.table(
        {name: table.column(name).combine_chunks().slice(2, 3) for name in table.column_names}
    )
    out = conform_insert(sliced, schema)
    assert out.column("id").to_pylist() == [2, 3, 4]
    assert out.column("vec").to_pylist()[0] == pytest.approx([0.8, 0.9, 1.0, 1.1])


def test_safe_integer_and_float_casts():
    schema = base_schema()
    table = base_table(
        3,
        id=pa.array([1, 2, 3], pa.int32()),
        age=pa.array([-128, 0, 127], pa.int64()),
        score=pa.array([1, 2, 3], pa.int64()),
    )
    out = conform_insert(table, schema)
    assert [c.type for c in out.columns] == expected_types(schema)
    assert out.column("age").to_pylist() == [-128, 0, 127]
    assert out.column("score").to_pylist() == [1.0, 2.0, 3.0]
    out = conform_insert(base_table(2, age=pa.array([5, 6], pa.uint64())), schema)
    assert out.column("age").type == pa.int8()


def test_vector_layouts_are_converted_to_fixed_size_float32():
    schema = base_schema()
    rows = [[0.1, 0.2, 0.3, 0.4], [1.0, 2.0, 3.0, 4.0]]
    for arr in (
        pa.array(rows, pa.list_(pa.float64())),
        pa.array(rows, pa.large_list(pa.float32())),
        pa.array(rows, pa.list_(pa.float64(), DIM)),
        pa.array([[1, 2, 3, 4], [5, 6, 7, 8]], pa.list_(pa.int64())),
    ):
        out = conform_insert(base_table(2, vec=arr), schema)
        assert out.column("vec").type == pa.list_(pa.float32(), DIM)
    assert out.column("vec").to_pylist()[1] == [5.0, 6.0, 7.0, 8.0]


def test_float16_binary_and_sparse_conversions():
    schema = full_schema()
    table = full_table(
        2,
        half=pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64())),
        bits=pa.array([b"\x00\xff", b"\x0f\xf0"]),
        sparse=pa.array(
            [[{"index": 9, "value": 1.0}, {"index": 2, "value": 0.5}], []],
            pa.list_(pa.struct([("index", pa.int64()), ("value", pa.float64())])),
        ),
    )
    out = conform_insert(table, schema)
    assert [c.type for c in out.columns] == expected_types(schema)
    assert out.column("half").to_pylist()[1] == [3.0, 4.0]
    assert out.column("bits").to_pylist() == [b"\x00\xff", b"\x0f\xf0"]
    # indices are sorted within each row
    assert out.column("sparse").to_pylist() == [[(2, 0.5), (9, 1.0)], []]
    as_lists = pa.array([[0, 255], [1, 2]], pa.list_(pa.int64(), 2))
    out = conform_insert(full_table(2, bits=as_lists), schema)
    assert out.column("bits").to_pylist() == [b"\x00\xff", b"\x01\x02"]


def test_defaults_filled_and_nullable_nulls_kept():
    schema = base_schema()
    out = conform_insert(base_table(2, score=None, age=None, name=None), schema)
    assert out.column("score").to_pylist() == [0.5, 0.5]
    assert out.column("age").to_pylist() == [None, None]
    assert out.column("name").to_pylist() == [None, None]
    table = base_table(2, score=pa.array([None, 2.0], pa.float64()), name=pa.array(["x", None]))
    out = conform_insert(table, schema)
    assert out.column("score").to_pylist() == [0.5, 2.0]
    assert out.column("score").null_count == 0
    assert out.column("name").to_pylist() == ["x", None]
    assert [c.type for c in out.columns] == expected_types(schema)


def test_all_null_column_of_null_type():
    out = conform_insert(base_table(2, age=pa.nulls(2)), base_schema())
    assert out.column("age").type == pa.int8()
    assert out.column("age").to_pylist() == [None, None]


def test_auto_id_column_dropped_on_insert_and_kept_on_upsert():
    schema = base_schema(auto_id=True)
    out = conform_insert(base_table(2, id=None), schema)
    assert "id" not in out.column_names
    assert [c.type for c in out.columns] == expected_types(schema, drop_pk=True)
    out = conform_insert(base_table(2), schema, upsert=True)
    assert out.column("id").to_pylist() == [0, 1]


def test_dynamic_fields_folded_into_meta():
    schema = base_schema(dynamic=True)
    table = base_table(
        3,
        color=pa.array(["red", None, "blue"]),
        size=pa.array([1, 2, 3]),
        emb=pa.array([[1.5], [], None], pa.list_(pa.float32())),
        **{DYNAMIC_FIELD: pa.array(['{"old": true, "size": 0}', None, '{"n": {"x": 1}}'])},
    )
    out = conform_insert(table, schema)
    assert out.column_names[-1] == DYNAMIC_FIELD
    assert out.schema.equals(schema.to_arrow(), check_metadata=True)
    metas = [json.loads(m) for m in out.column(DYNAMIC_FIELD).to_pylist()]
    assert metas[0] == {"old": True, "size": 1, "color": "red", "emb": [1.5]}
    assert metas[1] == {"size": 2, "emb": []}
    assert metas[2] == {"n": {"x": 1}, "color": "blue", "size": 3}
    out = conform_insert(base_table(2), schema)
    assert out.column(DYNAMIC_FIELD).to_pylist() == [None, None]


# -- rejections -----------------------------------------------------------------------------


def test_zero_rows():
    rejects(base_table(0), base_schema(), "no rows", code=ErrorCode.INVALID_ARGUMENT)


def test_missing_field():
    rejects(
        base_table(2, vec=None), base_schema(), "'vec'", "missing", code=ErrorCode.SCHEMA_MISMATCH
    )


def test_unknown_field_without_dynamic():
    rejects(base_table(2, color=pa.array(["a", "b"])), base_schema(), "'color'", "not in the")
    rejects(base_table(2, **{DYNAMIC_FIELD: pa.array(["{}", "{}"])}), base_schema(), "'$meta'")


def test_duplicate_column_name():
    t = base_table(2)
    t = t.append_column("age", pa.array([1, 2], pa.int8()))
    rejects(t, base_schema(), "'age'", "more than once")


def test_pk_supplied_for_auto_id_insert():
    rejects(base_table(2), base_schema(auto_id=True), "'id'", "auto_id")


def test_upsert_requires_pk_even_with_auto_id():
    rejects(base_table(2, id=None), base_schema(auto_id=True), "'id'", "upsert", upsert=True)


@pytest.mark.parametrize(
    ("column", "value", "word"),
    [
        ("id", pa.array(["1", "2"]), "Int64"),
        ("name", pa.array([1, 2]), "VarChar"),
        ("vec", pa.array([{"a": 1}, {"a": 2}]), "FloatVector"),
        ("vec", pa.array([["a"] * DIM] * 2, pa.list_(pa.string())), "numbers"),
        ("score", pa.array(["x", "y"]), "Float"),
        ("age", pa.array([1.0, 2.0]), "Int8"),
    ],
)
def test_wrong_types(column, value, word):
    err = rejects(base_table(2, **{column: value}), base_schema(), repr(column), word)
    assert err.code == ErrorCode.SCHEMA_MISMATCH


def test_integer_out_of_range_names_field_and_row():
    err = rejects(base_table(3, age=pa.array([1, 300, 2])), base_schema(), "'age'", "300", "row 1")
    assert "out of range" in err.message
    big = pa.array([1, 2**63 + 5], pa.uint64())
    rejects(base_table(2, id=big), base_schema(), "'id'", "out of range", "row 1")


def test_double_overflowing_float():
    rejects(base_table(2, score=pa.array([1.0, 1e300])), base_schema(), "'score'", "row 1")


def test_wrong_dimension():
    rejects(base_table(2, vec=vectors(2, 3)), base_schema(), "'vec'", "expected dim 4, got 3")
    ragged = pa.array([[1.0] * DIM, [1.0] * 5], pa.list_(pa.float32()))
    rejects(base_table(2, vec=ragged), base_schema(), "expected dim 4, got 5", "row 1")


def test_nan_and_inf_in_vectors():
    flat = np.ones(3 * DIM, dtype=np.float32)
    flat[2 * DIM + 1] = np.nan
    vec = pa.FixedSizeListArray.from_arrays(pa.array(flat), DIM)
    err = rejects(base_table(3, vec=vec), base_schema(), "'vec'", "row 2", "NaN")
    assert err.code == ErrorCode.INVALID_ARGUMENT
    inf = pa.array([[1.0, math.inf], [1.0, 2.0]], pa.list_(pa.float32()))
    rejects(full_table(2, half=inf), full_schema(), "'half'", "row 0", "inf")
    too_big = pa.array([[1.0, 2.0], [1e6, 2.0]], pa.list_(pa.float32()))
    rejects(full_table(2, half=too_big), full_schema(), "'half'", "row 1", "float16")


def test_huge_finite_vector_values_are_taken():
    """Values whose float32 sum overflows are still finite: the fast sum check must not
    refuse them (the exact per-value check decides)."""
    flat = np.full(3 * DIM, 3e38, dtype=np.float32)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(flat), DIM)
    out = conform_insert(base_table(3, vec=vec), base_schema())
    assert out.num_rows == 3


def test_null_vector_and_null_inside_vector():
    vec = pa.array([[1.0] * DIM, None], pa.list_(pa.float32(), DIM))
    rejects(base_table(2, vec=vec), base_schema(), "'vec'", "null", "row 1")
    vec = pa.array([[1.0, None, 1.0, 1.0], [1.0] * DIM], pa.list_(pa.float32()))
    rejects(base_table(2, vec=vec), base_schema(), "'vec'", "null", "row 0")


def test_binary_vector_width():
    schema = full_schema()
    rejects(full_table(2, bits=pa.array([b"\x01"] * 2, pa.binary(1))), schema, "'bits'", "16")
    rejects(full_table(2, bits=pa.array([b"\x01\x02", b"\x01"])), schema, "'bits'", "row 1")
    rejects(full_table(2, bits=pa.array([1, 2])), schema, "'bits'")


def test_sparse_vector_problems():
    schema = full_schema()
    sparse = SPARSE_ARROW_TYPE
    cases = [
        (pa.array([[(1, 0.5)], [(2, -1.0)]], sparse), "row 1", "non-negative"),
        (pa.array([[(1, math.nan)], [(2, 1.0)]], sparse), "row 0", "nan"),
        (
            pa.array([[(1, 0.5)], [(-3, 1.0)]], pa.map_(pa.int64(), pa.float32())),
            "row 1",
            "-3",
        ),
        (pa.array([[(1, 0.5)], [(4, 1.0), (4, 2.0)]], sparse), "row 1", "more than once"),
        (pa.array([[1.0], [2.0]]), "'sparse'", "map<uint32, float32>"),
    ]
    for value, *words in cases:
        rejects(full_table(2, sparse=value), schema, "'sparse'", *words)


def test_varchar_too_long_in_utf8_bytes():
    err = rejects(base_table(3, name=pa.array(["ok", "ok", "ééé"])), base_schema(), "'name'")
    assert "row 2" in err.message and "6 bytes" in err.message and "max_length is 5" in err.message


def test_null_in_non_nullable_field():
    schema = full_schema()
    rejects(full_table(2, bits=pa.array([b"\x01\x02", None], pa.binary(2))), schema, "'bits'")
    schema.fields.append(Field("must", DataType.INT32))
    table = full_table(2).append_column("must", pa.array([1, None], pa.int32()))
    rejects(table, schema, "'must'", "null", "row 1", code=ErrorCode.INVALID_ARGUMENT)


def test_array_field_problems():
    schema = full_schema()
    rejects(full_table(2, tags=pa.array([["a"], ["b"]])), schema, "'tags'", "Int16")
    rejects(
        full_table(2, tags=pa.array([[1], [1, 2, 3, 4]])), schema, "'tags'", "row 1", "4 elements"
    )
    rejects(full_table(2, tags=pa.array([[1], [1, 70000]])), schema, "'tags'", "row 1, element 1")
    rejects(
        full_table(2, tags=pa.array([[1], [None]], pa.list_(pa.int16()))), schema, "null element"
    )
    rejects(
        full_table(2, words=pa.array([["abcd"], ["a"]])), schema, "'words'", "row 0", "max_length"
    )
    rejects(full_table(2, tags=pa.array([1, 2])), schema, "'tags'")
    out = conform_insert(
        full_table(2, tags=pa.array([[1, 2], None], pa.large_list(pa.int64()))), schema
    )
    assert out.column("tags").to_pylist() == [[1, 2], None]
    assert out.column("tags").type == pa.list_(pa.int16())


def test_invalid_json_values():
    schema = full_schema()
    for bad in ["{a: 1}", "", '{"a": NaN}', "[1, 2,]", "Infinity"]:
        err = rejects(full_table(2, doc=pa.array(['{"ok": 1}', bad])), schema, "'doc'", "row 1")
        assert "JSON" in err.message
    rejects(full_table(2, doc=pa.array([1, 2])), schema, "'doc'", "JSON")
    ok = ['{"info": "nan, inf"}', "[1, 2]", '"text"', "3.5", "null"]
    assert first_invalid_json(pa.array(ok + [None])) is None


def test_duplicate_primary_keys():
    rejects(base_table(3, id=pa.array([5, 7, 5])), base_schema(), "duplicate primary key 5", "'id'")
    # ascending but for one repeat next to itself (past the ascending-keys shortcut)
    rejects(base_table(4, id=pa.array([1, 2, 2, 3])), base_schema(), "duplicate primary key 2")
    schema = base_schema(pk="VarChar")
    rejects(base_table(3, id=pa.array(["a", "b", "b"])), schema, "'b'", "duplicate")


def test_null_primary_key():
    rejects(base_table(2, id=pa.array([1, None])), base_schema(), "primary key", "'id'", "row 1")


def test_request_too_large():
    table = base_table(100)
    err = rejects(
        table, base_schema(), "limit is 100 bytes", code=ErrorCode.REQUEST_TOO_LARGE, max_bytes=100
    )
    assert str(table.nbytes) in err.message
    assert conform_insert(table, base_schema(), max_bytes=table.nbytes).num_rows == 100


def test_bad_dynamic_meta():
    schema = base_schema(dynamic=True)
    rejects(
        base_table(2, **{DYNAMIC_FIELD: pa.array(["{}", "[1]"])}), schema, "row 1", "JSON object"
    )
    rejects(base_table(2, **{DYNAMIC_FIELD: pa.array(["{}", "{x"])}), schema, "row 1", "valid JSON")
    rejects(
        base_table(2, **{DYNAMIC_FIELD: pa.array(['{"age": 3}', "{}"])}), schema, "'age'", "row 0"
    )
    rejects(base_table(2, extra=pa.array([1.0, math.nan])), schema, "'extra'", "nan")
    rejects(base_table(2, blob=pa.array([b"x", b"y"])), schema, "'blob'", "JSON")


def test_delete_keys():
    schema = base_schema()
    out = conform_delete_keys([3, 1, 3, 2], schema)
    assert out.type == pa.int64() and out.to_pylist() == [3, 1, 2]
    assert conform_delete_keys(pa.array([1, 2], pa.int32()), schema).type == pa.int64()
    assert conform_delete_keys(np.array([4, 4]), schema).to_pylist() == [4]
    string_schema = base_schema(pk="VarChar")
    assert conform_delete_keys(["a", "b", "a"], string_schema).to_pylist() == ["a", "b"]
    for bad, word in [
        ([], "no primary keys"),
        ([1, None], "null"),
        (["a"], "Int64"),
        ([1.5], "Int64"),
        ([1, "a"], "'id'"),
    ]:
        with pytest.raises(ElanusError) as info:
            conform_delete_keys(bad, schema)
        assert word in info.value.message
    with pytest.raises(ElanusError, match="VarChar"):
        conform_delete_keys([1, 2], string_schema)


def test_large_batch_conforms():
    n, dim = 100_000, 128
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("vec", DataType.FLOAT_VECTOR, dim=dim),
        ]
    )
    flat = np.random.default_rng(0).random(n * dim, dtype=np.float32)
    table = pa.table(
        {"id": np.arange(n), "vec": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)}
    )
    out = conform_insert(table, schema)
    assert out.num_rows == n
    assert out.column("vec").type == pa.list_(pa.float32(), dim)


# -- to_arrow -------------------------------------------------------------------------------


def test_to_arrow_table_and_batch():
    table = base_table(2)
    assert to_arrow(table, base_schema()) is table
    out = to_arrow(table.to_batches()[0], base_schema())
    assert isinstance(out, pa.Table) and out.equals(table)


def test_to_arrow_rows_with_dynamic_fields_and_missing_keys():
    schema = base_schema(dynamic=True)
    rows = [
        {"id": 1, "vec": [0.1, 0.2, 0.3, 0.4], "age": 30, "color": "red"},
        {"id": 2, "vec": np.ones(DIM), "name": "bob", "tags": [1, 2]},
    ]
    out = to_arrow(rows, schema)
    assert out.column("vec").type == pa.list_(pa.float32(), DIM)
    assert out.column("age").to_pylist() == [30, None]
    assert out.column("name").to_pylist() == [None, "bob"]
    assert "score" not in out.column_names  # absent everywhere: left to the server
    metas = out.column(DYNAMIC_FIELD).to_pylist()
    assert [json.loads(m) for m in metas] == [{"color": "red"}, {"tags": [1, 2]}]
    conformed = conform_insert(out, schema)
    assert conformed.column("score").to_pylist() == [0.5, 0.5]


def test_to_arrow_columns_numpy_zero_copy():
    schema = base_schema()
    matrix = np.random.default_rng(1).random((5, DIM), dtype=np.float32)
    out = to_arrow({"id": np.arange(5), "vec": matrix, "age": [1, 2, 3, 4, 5]}, schema)
    vec = out.column("vec").chunk(0)
    assert vec.type == pa.list_(pa.float32(), DIM)
    assert vec.values.buffers()[1].address == matrix.ctypes.data
    assert out.column("age").type == pa.int8()
    assert conform_insert(out, schema).num_rows == 5


def test_to_arrow_single_row_dict_and_columns_of_lists():
    schema = base_schema()
    one = to_arrow({"id": 7, "vec": [1.0, 2.0, 3.0, 4.0]}, schema)
    assert one.num_rows == 1 and one.column("vec").to_pylist() == [[1.0, 2.0, 3.0, 4.0]]
    cols = to_arrow({"id": [1, 2], "vec": [[1, 2, 3, 4], [5, 6, 7, 8]]}, schema)
    assert cols.num_rows == 2 and cols.column("vec").type == pa.list_(pa.float32(), DIM)
    with pytest.raises(ElanusError, match="different lengths"):
        to_arrow({"id": [1, 2], "vec": [[1, 2, 3, 4]]}, schema)


def test_to_arrow_unknown_keys_without_dynamic_field():
    with pytest.raises(ElanusError) as info:
        to_arrow([{"id": 1, "vec": [0.0] * DIM, "color": "red"}], base_schema())
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH and "'color'" in info.value.message


def test_to_arrow_special_types_round_trip():
    schema = full_schema()
    rows = [
        {
            "id": i,
            "vec": [0.5] * DIM,
            "half": np.array([1.0, 2.0], dtype=np.float16),
            "bits": b"\x01\x02",
            "sparse": {9: 0.5, 3: 1.0},
            "flag": True,
            "d": 1.25,
            "doc": {"k": [1, 2], "n": np.int64(3)},
            "tags": np.array([1, 2]),
            "words": ["ab"],
        }
        for i in range(2)
    ]
    out = conform_insert(to_arrow(rows, schema), schema)
    assert [c.type for c in out.columns] == expected_types(schema)
    assert json.loads(out.column("doc")[0].as_py()) == {"k": [1, 2], "n": 3}
    assert out.column("sparse")[0].as_py() == [(3, 1.0), (9, 0.5)]
    assert out.column("bits").to_pylist() == [b"\x01\x02"] * 2


def test_to_arrow_leaves_bad_values_for_the_server():
    schema = base_schema()
    out = to_arrow([{"id": 1, "vec": [1.0, 2.0], "age": 1000}], schema)
    rejects(out, schema, "expected dim 4, got 2")
    out = to_arrow([{"id": 1, "vec": [1.0] * DIM, "age": 1000}], schema)
    rejects(out, schema, "'age'", "1000")


def test_to_arrow_pandas_dataframe():
    pd = pytest.importorskip("pandas")
    schema = base_schema(dynamic=True)
    df = pd.DataFrame(
        {
            "id": [1, 2],
            "vec": [np.zeros(DIM, dtype=np.float32), np.ones(DIM, dtype=np.float32)],
            "age": [3, 4],
            "color": ["red", "blue"],
        }
    )
    out = conform_insert(to_arrow(df, schema), schema)
    assert out.column("vec").to_pylist()[1] == [1.0] * DIM
    assert out.column("age").to_pylist() == [3, 4]
    assert json.loads(out.column(DYNAMIC_FIELD)[1].as_py()) == {"color": "blue"}
