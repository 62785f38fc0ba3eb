"""MVCC visibility of rows: ``_ts <= T < death`` against a brute-force reference."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from elanus.properties import expire_floor
from elanus.segments.querynode.visibility import RowVersions
from elanus.tsutil import compose


def reference(
    rows: list[tuple[object, int]], deletes: list[tuple[object, int]], t: int
) -> list[bool]:
    """Row i is visible at t when inserted by t and no delete of its key in (ts_i, t]."""
    return [ins <= t and not any(k == pk and ins < d <= t for k, d in deletes) for pk, ins in rows]


@pytest.mark.parametrize("kind", ["int", "str"])
def test_random_histories_match_the_reference(kind: str) -> None:
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 40, 300)
    insert_ts = rng.integers(1, 1000, 300).astype(np.uint64)
    del_keys = rng.integers(0, 50, 200)
    del_ts = rng.integers(1, 1000, 200).astype(np.uint64)
    conv = (lambda a: pa.array(a)) if kind == "int" else (lambda a: pa.array([f"k{x}" for x in a]))
    rv = RowVersions(conv(keys), insert_ts)
    # Deletes arrive in several batches, keys repeating inside and across batches.
    for lo in range(0, 200, 37):
        rv.delete(conv(del_keys[lo : lo + 37]), del_ts[lo : lo + 37])
    rows = list(zip(conv(keys).to_pylist(), insert_ts.tolist(), strict=True))
    dels = list(zip(conv(del_keys).to_pylist(), del_ts.tolist(), strict=True))
    for t in [0, 1, 50, 333, 500, 999, 1000, 5000]:
        assert rv.visible(t).tolist() == reference(rows, dels, t), t


def test_upsert_at_one_timestamp_hides_the_old_row_only() -> None:
    rv = RowVersions(pa.array([7]), np.array([10], np.uint64))
    rv.append(pa.array([7]), np.array([20], np.uint64))  # the upsert's new row
    rv.delete(pa.array([7]), 20)  # the upsert's delete, same timestamp
    assert rv.visible(15).tolist() == [True, False]  # time travel: before the upsert
    assert rv.visible(20).tolist() == [False, True]
    assert rv.visible(10**9).tolist() == [False, True]


def test_deletes_are_idempotent_and_order_free() -> None:
    a = RowVersions(pa.array([1, 2, 3]), np.array([5, 5, 5], np.uint64))
    b = RowVersions(pa.array([1, 2, 3]), np.array([5, 5, 5], np.uint64))
    a.delete(pa.array([1, 2]), np.array([9, 30], np.uint64))
    a.delete(pa.array([2]), 12)
    b.delete(pa.array([2]), 12)
    b.delete(pa.array([1, 2]), np.array([9, 30], np.uint64))
    b.delete(pa.array([1, 2]), np.array([9, 30], np.uint64))
    assert a.death_ts.tolist() == b.death_ts.tolist() == [9, 12, np.iinfo(np.uint64).max]
    assert a.live_count(10) == 2 and a.live_count(12) == 1 and a.live_count(4) == 0


def test_a_ttl_hides_rows_inserted_before_the_reads_floor() -> None:
    """``insert physical ms + ttl < read physical ms``: expired (Milvus's rule); a read at an
    earlier timestamp still sees the row; ``all_visible`` says no once one row expired."""
    ms = [1000, 2000, 3000]
    rv = RowVersions(pa.array([1, 2, 3]), np.array([compose(m) for m in ms], np.uint64))
    at = compose(3500)
    assert rv.visible(at, ttl=1500).tolist() == [False, True, True]  # 2000 + 1500 = 3500
    assert rv.visible(at, ttl=1499).tolist() == [False, False, True]
    assert rv.visible(compose(2500), ttl=1500).tolist() == [True, True, False]
    assert rv.visible(at).tolist() == [True, True, True]  # no TTL
    assert rv.all_visible(at) and not rv.all_visible(at, ttl=1500)
    assert rv.all_visible(at, ttl=2500) and rv.live_count(at, ttl=1000) == 1
    assert expire_floor(at, 0) == 0 and expire_floor(compose(10), 20) == 0
