"""An in-memory segment answers search, query and count at a timestamp, equal to brute force."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from elanus.expr import parse
from elanus.schema import DataType, Field, Schema
from elanus.segments.memseg import MemSegment

DIM = 16
SCHEMA = Schema(
    [
        Field("id", DataType.INT64, is_primary=True),
        Field("v", DataType.FLOAT_VECTOR, dim=DIM),
        Field("n", DataType.INT32),
    ]
)


def rows(ids: np.ndarray, ts: int, rng: np.random.Generator) -> tuple[pa.Table, np.ndarray]:
    vecs = rng.random((len(ids), DIM), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM),
            "n": pa.array(ids % 10, pa.int32()),
            "_ts": pa.array(np.full(len(ids), ts, np.uint64)),
        }
    )
    return table, vecs


@pytest.mark.parametrize("growing", [False, True])
def test_search_query_count_at_a_timestamp_equal_brute_force(growing: bool) -> None:
    rng = np.random.default_rng(5)
    first, v1 = rows(np.arange(0, 500), 100, rng)
    second, v2 = rows(np.arange(500, 1000), 200, rng)
    if growing:
        seg = MemSegment(1, 1, SCHEMA)
        seg.append(first)
        seg.append(second)
    else:
        seg = MemSegment(1, 1, SCHEMA, pa.concat_tables([first, second]))
    seg.delete(pa.array(np.arange(0, 1000, 7)), 300)  # every 7th key, after both inserts
    vecs = np.vstack([v1, v2])
    ids = np.arange(1000)
    expr = parse("n >= 5", SCHEMA)
    q = rng.random((3, DIM), dtype=np.float32)
    for ts, expected_alive in [(150, ids < 500), (250, ids >= 0), (400, ids % 7 != 0)]:
        alive = expected_alive & (ids % 10 >= 5)
        hits = seg.search("v", q, 10, "L2", ts, expr)
        d = ((vecs[None, :, :] - q[:, None, :]) ** 2).sum(-1)
        d[:, ~alive] = np.inf
        want = np.argsort(d, axis=1)[:, :10]
        assert hits.pks.tolist() == ids[want].tolist()
        np.testing.assert_allclose(hits.distances, np.take_along_axis(d, want, 1), rtol=1e-4)
        assert seg.count(ts, expr) == int(alive.sum())
        got = seg.query(ts, expr, ["id", "n"]).column("id").to_pylist()
        assert got == ids[alive].tolist()
