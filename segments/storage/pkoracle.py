"""The PK oracle of seed 001: which segments may hold which primary keys.

A delete names keys, not segments; the delegator forwards it to the workers whose sealed
segments may hold a key, and the datanode writes it to the delta logs of the flushed
segments that may. Both ask here, once per delete, over every segment at once: the keys
are hashed and sorted once, each segment's min/max key cuts the sorted keys to the slice
it could hold (a binary search), and only that slice meets its bloom filter. No per-key
Python loop; the only loop is over segments.

A segment known without statistics (its stats file is missing) may hold any key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.pkhash import hash_pks
from elanus.segments.storage.pkstats import PkStats


class _Keys:
    """The keys of one question, sorted once, hashed once."""

    def __init__(self, pks: pa.Array | pa.ChunkedArray) -> None:
        if isinstance(pks, pa.ChunkedArray):
            pks = pks.combine_chunks()
        self.n = len(pks)
        self.order = pc.sort_indices(pks).to_numpy()
        self.sorted: Any = pks.take(pa.array(self.order)).to_numpy(zero_copy_only=False)
        self.hashes = hash_pks(pks)[self.order]

    def hits(self, stats: PkStats) -> np.ndarray:
        """Positions (into the original keys) the segment may hold."""
        if stats.num_keys == 0:
            return np.zeros(0, dtype=np.int64)
        lo = int(np.searchsorted(self.sorted, stats.min_pk, side="left"))
        hi = int(np.searchsorted(self.sorted, stats.max_pk, side="right"))
        if lo >= hi:
            return np.zeros(0, dtype=np.int64)
        return self.order[lo:hi][stats.bloom_hits(self.hashes[lo:hi])]


class PkOracle:
    """Primary-key statistics of a set of segments, by segment id."""

    def __init__(self) -> None:
        self._stats: dict[int, PkStats | None] = {}

    def add(self, segment_id: int, stats: PkStats | None) -> None:
        self._stats[segment_id] = stats

    def remove(self, segment_id: int) -> None:
        self._stats.pop(segment_id, None)

    def get(self, segment_id: int) -> PkStats | None:
        return self._stats.get(segment_id)

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._stats

    def __len__(self) -> int:
        return len(self._stats)

    def masks(
        self, pks: pa.Array | pa.ChunkedArray, segment_ids: Iterable[int] | None = None
    ) -> dict[int, np.ndarray]:
        """For each segment (of ``segment_ids``, default all) that may hold any of ``pks``,
        a boolean mask over ``pks``; segments that certainly hold none are left out."""
        wanted = list(self._stats) if segment_ids is None else list(segment_ids)
        if not len(pks) or not wanted:
            return {}
        keys: _Keys | None = None
        out: dict[int, np.ndarray] = {}
        for sid in wanted:
            stats = self._stats.get(sid)
            if stats is None:  # unknown, or known without statistics: may hold anything
                out[sid] = np.ones(len(pks), dtype=bool)
                continue
            if keys is None:
                keys = _Keys(pks)
            hit = keys.hits(stats)
            if len(hit):
                mask = np.zeros(keys.n, dtype=bool)
                mask[hit] = True
                out[sid] = mask
        return out

    def candidates(
        self, pks: pa.Array | pa.ChunkedArray, segment_ids: Iterable[int] | None = None
    ) -> list[int]:
        """The segments (of ``segment_ids``, default all) that may hold any of ``pks``."""
        return list(self.masks(pks, segment_ids))
