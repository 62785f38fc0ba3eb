"""Primary-key stats: filters sized in powers of two, folded down from the size a growing
segment's spills build them at, and filters of any size written before still answering."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from elanus.pkhash import hash_pks
from elanus.segments.storage.pkstats import BITS_PER_KEY, PkStats, bloom_bits


def _keys(n: int, seed: int = 1) -> pa.Array:
    rng = np.random.default_rng(seed)
    return pa.array(rng.choice(10**12, n, replace=False).astype(np.int64))


def test_stats_built_in_parts_at_a_larger_size_fold_to_the_stats_built_at_once() -> None:
    keys = _keys(30_000)
    grown = PkStats.sized_for(1_000_000)
    for start in range(0, len(keys), 7_000):
        grown.add(keys.slice(start, 7_000))
    folded, direct = grown.fold(), PkStats.build(keys)
    assert grown.num_bits == bloom_bits(1_000_000) > folded.num_bits
    assert folded.num_bits == direct.num_bits == bloom_bits(len(keys))
    assert np.array_equal(folded.bits, direct.bits)
    assert (folded.min_pk, folded.max_pk, folded.num_keys) == (
        direct.min_pk,
        direct.max_pk,
        len(keys),
    )
    assert folded.may_contain(keys).all()


def test_sizes_give_every_key_at_least_its_bits_and_a_filter_answers_like_one() -> None:
    for n in (1, 100, 102, 103, 1_000, 99_999, 1_000_000):
        size = bloom_bits(n)
        assert size & (size - 1) == 0 and size >= max(1024, n * BITS_PER_KEY)
        assert size < 2 * max(1024, n * BITS_PER_KEY)
    keys, strangers = _keys(20_000, seed=2), _keys(200_000, seed=3)
    stats = PkStats.build(keys)
    # strangers inside the key range: only the filter can turn them away
    false_positive = stats.bloom_hits(hash_pks(strangers)).mean()
    assert false_positive < 0.01


def test_a_filter_of_any_size_written_before_still_answers(tmp_path: Path) -> None:
    """Stats written when a filter had exactly 10 bits per key (no power of two) probe
    with a division, and are found by the same keys after a reload."""
    keys = _keys(5_000, seed=4)
    old = PkStats(5_000 * BITS_PER_KEY, np.zeros(5_000 * BITS_PER_KEY // 8, np.uint8))
    old.add(keys)
    assert old.fold() is old  # no power of two: nothing to fold
    path = tmp_path / "stats.arrow"
    old.save(path)
    back = PkStats.load(path)
    assert back.num_bits == 50_000 and back.may_contain(keys).all()
    strangers = _keys(50_000, seed=5)
    assert back.bloom_hits(hash_pks(strangers)).mean() < 0.02
