"""An in-memory segment answers search, query and count at a timestamp, equal to brute force."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from elanus.expr import parse
from elanus.schema import DataType, Field, Schema
from elanus.segments.querynode import blocks
from elanus.segments.querynode.memseg import MemSegment

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


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_a_growing_segment_in_many_blocks_answers_as_one_sealed_table(
    metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settled rows live in blocks (``segments/querynode/blocks.py``); reads between appends settle
    them bit by bit. Searches (top-k, ranges, filters, k beyond the visible rows) and
    queries equal those of the same rows in one table."""
    monkeypatch.setattr(blocks, "BLOCK_BYTES", 4096)  # ~48 rows of 16-d: many blocks
    rng = np.random.default_rng(11)
    parts = [rows(np.arange(lo, lo + n), 100 + lo, rng)[0] for lo, n in _runs(900, rng)]
    growing = MemSegment(1, 1, SCHEMA)
    q = rng.random((4, DIM), dtype=np.float32)
    for part in parts:
        growing.append(part)
        growing.search("v", q, 5, metric, 10**9)  # settles what came so far
    assert len(growing._blocks) > 5
    sealed = MemSegment(2, 1, SCHEMA, pa.concat_tables(parts))
    for seg in (growing, sealed):
        seg.delete(pa.array(np.arange(0, 900, 5)), 5000)
    expr = parse("n != 3", SCHEMA)
    radius, bound = (0.5, 4.0) if metric == "L2" else (4.0, 0.5) if metric == "IP" else (0.8, 0.2)
    for ts, k in [(400, 10), (6000, 10), (6000, 2000), (250, 1000)]:
        want = sealed.search("v", q, k, metric, ts, expr)
        got = growing.search("v", q, k, metric, ts, expr)
        # the same hits, best first (near-equal distances may swap: blocks round apart)
        assert [set(r) for r in got.pks.tolist()] == [set(r) for r in want.pks.tolist()]
        np.testing.assert_allclose(got.distances, want.distances, rtol=1e-5, atol=1e-6)
        ranged = [
            s.search("v", q, k, metric, ts, None, radius=bound, range_filter=radius)
            for s in (growing, sealed)
        ]
        assert [set(r) for r in ranged[0].pks.tolist()] == [set(r) for r in ranged[1].pks.tolist()]
        found = np.count_nonzero(ranged[0].rows >= 0)
        assert found > 0 and (k < 1000 or found < ranged[0].rows.size)  # hits, and padding
        got_rows, want_rows = (s.query(ts, expr, ["id", "n"]) for s in (growing, sealed))
        assert got_rows.to_pydict() == want_rows.to_pydict()


def _runs(total: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Appends of uneven sizes (1 to 60 rows) that cover ``range(total)``."""
    out, lo = [], 0
    while lo < total:
        n = min(int(rng.integers(1, 60)), total - lo)
        out.append((lo, n))
        lo += n
    return out


@pytest.mark.parametrize("growing", [False, True])
def test_a_limited_query_offers_every_copy_of_its_first_keys(growing: bool) -> None:
    """The proxy pages by key: a segment's ``limit`` rows are those of its smallest
    ``limit`` keys, with every copy of a key inserted twice (a query keeps the newest,
    ``elanus.newestrow``; a snapshot read keeps all), whichever copy comes first."""
    rng = np.random.default_rng(3)
    old, _ = rows(np.array([4, 1, 3, 2, 0]), 100, rng)
    new, _ = rows(np.array([3, 1, 9]), 200, rng)  # 1 and 3 again, newer
    newest, _ = rows(np.array([1]), 300, rng)
    if growing:
        seg = MemSegment(1, 1, SCHEMA)
        for part in (old, new, newest):
            seg.append(part)
    else:
        seg = MemSegment(1, 1, SCHEMA, pa.concat_tables([old, new, newest]))
    copies = {0: [100], 1: [100, 200, 300], 2: [100], 3: [100, 200], 4: [100], 9: [200]}
    for limit, keys in [(1, [0]), (2, [0, 1]), (4, [0, 1, 2, 3]), (5, [0, 1, 2, 3, 4])]:
        got = seg.query(10**9, None, ["id", "_ts"], limit)
        ids, stamps = got.column("id").to_pylist(), got.column("_ts").to_pylist()
        assert sorted(zip(ids, stamps, strict=True)) == [(k, t) for k in keys for t in copies[k]]
    assert seg.query(10**9, None, ["id"], 6).num_rows == 9  # six keys: every row
    # Without repeats among the candidates, the plain partition answers (no reordering).
    assert seg.query(150, None, ["id"], 2).column("id").to_pylist() == [1, 0]
