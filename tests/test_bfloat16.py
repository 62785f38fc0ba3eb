"""BFloat16Vector end to end (issue 15 item 6): real nats-server, coord, datanode, query
node, index node and proxy.

- rounding float32 -> bfloat16 is round-to-nearest-even (checked against a float64 model);
- inserted floats are stored rounded: exact search (L2, IP, COSINE) equals a numpy brute
  force on the rounded vectors, over growing and flushed data, and output fields, query and
  get return the rounded vectors as float lists;
- floats, bit patterns and pymilvus's raw bytes are accepted; NaN, infinity, values beyond
  bfloat16's range and a wrong dimension are refused by name and nothing is written;
- an HNSW index on the field has high recall against exact search on the rounded vectors;
- the Spark source widens the stored bit patterns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pymilvus
import pytest
from conftest import Stack, wait_for
from test_index_service import clustered, served_indexes
from test_read_path import brute_force, check_hits

from elanus import DataType, ElanusError, ErrorCode
from elanus.bfloat16 import BF16_MAX, round_bits, widen
from elanus.client.client import Client
from elanus.conform_vectors import to_bfloat16_vector
from elanus.filereaders import convert_column, open_numpy
from elanus.schema import Field, Schema

DIM = 8
STRONG = "Strong"


def rounded(x: np.ndarray) -> np.ndarray:
    return widen(round_bits(x)).reshape(x.shape)


def schema(dim: int = DIM) -> dict[str, object]:
    return {
        "fields": [
            {"name": "id", "type": "Int64", "is_primary": True},
            {"name": "vec", "type": "BFloat16Vector", "dim": dim},
        ]
    }


def count(client: Client, name: str) -> int:
    rows = client.query(name, output_fields=["count(*)"], consistency_level=STRONG)
    return int(rows[0]["count(*)"])


# -- 1. rounding and conversion (no stack) ------------------------------------------------------


def test_rounding_is_nearest_even() -> None:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(20_000) * 10.0 ** rng.integers(-30, 30, 20_000)).astype(np.float32)
    u = x.view(np.uint32)
    # exact ties (the dropped half is 0x8000), half with an odd kept half, half even
    ties = ((u & np.uint32(0xFFFF0000)) | np.uint32(0x8000)).view(np.float32)
    x = np.concatenate([x, ties, np.float32([0.0, -0.0, 1.0, BF16_MAX, -BF16_MAX])])
    bits = round_bits(x)
    down = (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # truncation (toward 0)
    up = down + np.uint16(1)
    err_down = np.abs(widen(down).astype(np.float64) - x)
    err_up = np.abs(widen(up).astype(np.float64) - x)
    want = np.where(err_down < err_up, down, up)
    tie = err_down == err_up
    want[tie] = np.where(down[tie] % 2 == 0, down[tie], up[tie])
    assert np.array_equal(bits, want)
    assert np.array_equal(widen(round_bits(widen(bits))), widen(bits))  # idempotent
    assert (round_bits(np.float32([1 + 2**-8, 1 + 3 * 2**-8])) == [0x3F80, 0x3F82]).all()


def test_conversion_accepts_floats_bits_and_bytes() -> None:
    f = Field("v", DataType.BFLOAT16_VECTOR, dim=3)
    floats = pa.array([[1.0, 2.5, 3.14159], [0.1, -1e38, 7.0]])
    stored = to_bfloat16_vector(f, floats)
    assert stored.type == pa.list_(pa.uint16(), 3) == f.arrow_type()
    want = rounded(np.array(floats.to_pylist(), np.float32))
    assert np.array_equal(widen(np.array(stored.to_pylist(), np.uint16)), want)
    assert to_bfloat16_vector(f, stored) is stored  # the stored form passes through
    raw = pa.array([np.array(r, np.uint16).tobytes() for r in stored.to_pylist()])
    assert to_bfloat16_vector(f, raw).equals(stored)
    assert Field.from_dict(f.to_dict()) == f
    built = Schema.from_dict(schema())
    assert built.fields[1].dtype is DataType.BFLOAT16_VECTOR
    sdk = Client.create_schema()
    sdk.add_field("b", pymilvus.DataType.BFLOAT16_VECTOR, dim=8)
    assert sdk.fields[0].dtype is DataType.BFLOAT16_VECTOR


@pytest.mark.parametrize(
    ("values", "code", "words"),
    [
        ([[1.0, float("nan"), 3.0]], ErrorCode.INVALID_ARGUMENT, ["'v'", "nan", "position 1"]),
        ([[1.0, 2.0, float("-inf")]], ErrorCode.INVALID_ARGUMENT, ["'v'", "inf", "position 2"]),
        ([[1.0, 3.4e38, 3.0]], ErrorCode.INVALID_ARGUMENT, ["out of range for bfloat16"]),
        ([[1.0, 2.0]], ErrorCode.SCHEMA_MISMATCH, ["expected dim 3, got 2"]),
    ],
)
def test_conversion_refusals(values: list[list[float]], code: ErrorCode, words: list[str]) -> None:
    f = Field("v", DataType.BFLOAT16_VECTOR, dim=3)
    with pytest.raises(ElanusError) as err:
        to_bfloat16_vector(f, pa.array(values))
    assert err.value.code == code
    assert all(w in err.value.message for w in words), err.value.message


def test_nan_bit_patterns_and_short_bytes_are_refused() -> None:
    f = Field("v", DataType.BFLOAT16_VECTOR, dim=2)
    nan = pa.FixedSizeListArray.from_arrays(pa.array([0x3F80, 0x7FC0], pa.uint16()), 2)
    with pytest.raises(ElanusError, match="contains nan at position 1"):
        to_bfloat16_vector(f, nan)
    with pytest.raises(ElanusError, match=r"expected dim 2 \(4 bytes of bfloat16\), got 3 bytes"):
        to_bfloat16_vector(f, pa.array([b"abc"]))


def test_import_files_give_floats_or_bit_patterns(tmp_path: Path) -> None:
    """CSV text vectors are parsed and rounded; a uint16 .npy holds bit patterns."""
    f = Field("vec", DataType.BFLOAT16_VECTOR, dim=2)
    text = convert_column(f, pa.array(["[1.0, 0.1]", "[-3, 2.5]"]))
    stored = to_bfloat16_vector(f, text)
    assert stored.to_pylist() == [[0x3F80, 0x3DCD], [0xC040, 0x4020]]
    s = Schema.from_dict(schema(2))
    np.save(tmp_path / "id.npy", np.array([1, 2], np.int64))
    np.save(tmp_path / "vec.npy", np.array(stored.to_pylist(), np.uint16))
    source = open_numpy([tmp_path / "id.npy", tmp_path / "vec.npy"], s, 10, None)
    (batch,) = list(source.batches)
    assert to_bfloat16_vector(f, batch.column(1)).to_pylist() == stored.to_pylist()


def test_spark_source_widens_the_bit_patterns() -> None:
    from elanus.spark.types import arrow_target, conform, spark_schema

    s = Schema.from_dict(schema(2))
    x = np.float32([[1.5, -2.25], [0.1, 3.0]])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(round_bits(x).ravel()), 2)
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int64()), vec], names=["id", "vec"])
    target = arrow_target(spark_schema(s))
    out = conform(batch, target)
    assert out.schema == target and pa.types.is_float32(target.field("vec").type.value_type)
    assert np.array_equal(np.array(out.column(1).to_pylist(), np.float32), rounded(x))


# -- 2. insert, exact search, query and refusals on a real stack --------------------------------


def test_exact_search_and_outputs_use_the_rounded_vectors(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("b", schema=schema(), properties={"metric_type": "L2"})
    rng = np.random.default_rng(11)
    X = rng.standard_normal((1200, DIM)).astype(np.float32)
    # flushed: rows as dicts of float lists; growing: a numpy column, and pymilvus's bytes
    client.insert("b", [{"id": i, "vec": X[i].tolist()} for i in range(600)])
    client.flush("b", timeout=60)
    client.insert("b", {"id": np.arange(600, 1100), "vec": X[600:1100]})
    raw = [round_bits(X[i]).tobytes() for i in range(1100, 1200)]
    client.insert("b", {"id": list(range(1100, 1200)), "vec": raw})
    client.load_collection("b")
    R = rounded(X)
    assert not np.array_equal(R, X)  # rounding is visible at this precision
    pks = np.arange(len(X))
    Q = rng.standard_normal((4, DIM)).astype(np.float32)
    for metric in ("L2", "IP", "COSINE"):
        results = client.search(
            "b", Q, limit=10, output_fields=["vec"], search_params={"metric_type": metric},
            consistency_level=STRONG,
        )  # fmt: skip
        for i, (hits, q) in enumerate(zip(results, Q, strict=True)):
            check_hits(hits, pks, brute_force(metric, R, q), metric, 10, what=f"{metric} q{i}")
            for h in hits:
                assert h["entity"]["vec"] == R[h["id"]].tolist()
    rows = client.query(
        "b", filter="id in [3, 700, 1150]", output_fields=["vec"], consistency_level=STRONG
    )
    assert {r["id"]: r["vec"] for r in rows} == {i: R[i].tolist() for i in (3, 700, 1150)}
    assert all(isinstance(v, float) for r in rows for v in r["vec"])
    (got,) = client.get("b", [5], output_fields=["vec"])
    assert got["vec"] == R[5].tolist()

    # Refused by name, and nothing of the batch is written.
    bad = X[:3].copy()
    bad[1, 4] = np.nan
    cases = [
        (bad, ErrorCode.INVALID_ARGUMENT, "nan"),
        (np.full((3, DIM), 3.4e38, np.float32), ErrorCode.INVALID_ARGUMENT, "bfloat16"),
        (X[:3, :5], ErrorCode.SCHEMA_MISMATCH, "dim"),
    ]
    for vectors, code, word in cases:
        with pytest.raises(ElanusError) as err:
            client.insert("b", {"id": [5000, 5001, 5002], "vec": vectors})
        assert err.value.code == code and word in err.value.message, err.value.message
        assert "'vec'" in err.value.message
    assert count(client, "b") == len(X)


# -- 3. an index ----------------------------------------------------------------------------------


def test_hnsw_recall_against_exact_on_the_rounded_vectors(stack: Stack) -> None:
    dim, n = 32, 6000
    client = stack.client()
    client.create_collection("h", schema=schema(dim), properties={"metric_type": "L2"})
    X = clustered(n, dim, seed=7)
    client.insert("h", {"id": np.arange(n), "vec": X})
    client.flush("h", timeout=60)
    client.create_index(
        "h", "vec", index_type="HNSW", metric_type="L2", params={"M": 16, "efConstruction": 64}
    )
    stack.add_indexnode()
    client.load_collection("h")
    client.wait_for_index("h", timeout=120)
    wait_for(lambda: len(served_indexes(stack, "vec")) == 1, what="the index served")
    rng = np.random.default_rng(2)
    Q = X[rng.integers(0, n, 50)] + rng.normal(size=(50, dim)).astype(np.float32) * 0.5
    R = rounded(X).astype(np.float64)
    d = ((Q[:, None, :] - R[None, :, :]) ** 2).sum(-1)
    exact = [set(np.argsort(row, kind="stable")[:10].tolist()) for row in d]
    results = client.search(
        "h", Q, limit=10, search_params={"params": {"ef": 64}}, consistency_level=STRONG
    )
    got = [{h["id"] for h in hits} for hits in results]
    recall = sum(len(g & w) for g, w in zip(got, exact, strict=True)) / (10 * len(Q))
    assert recall >= 0.95, recall
