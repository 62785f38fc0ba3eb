"""A growing segment's settled rows as a few contiguous blocks of geometric sizes.

Settling appended rows into one table copied the whole segment on the first read after
every append (and computed its norms again): at 300k x 128-d rows, 150 MB per Strong
read, which held a write-heavy collection's read p99 at 2-3 s. Blocks are merged like a
binary counter instead (the last two while the older is at most ``MERGE_RATIO`` times the
newer), up to ``BLOCK_BYTES``: a row is copied O(log n) times in its life, a settle copies
at most one block's worth, and each block keeps its exact kernel (norms included) until it
is merged. A sealed segment is one block. 1 M x 128-d rows appended 2,000 at a time with a
search after each (``bench/growing.py``): read p99 504 ms and max 3.8 s as one table,
37 ms and 65 ms in blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.index.kernels import BM25, VectorIndexExact, topk
from elanus.reduce import larger_is_better

MERGE_RATIO = 2
"""Merge the two newest blocks while the older holds at most this many times the newer's
rows: past the full blocks, sizes halve, so a tail of at most log2(rows) of them."""

BLOCK_BYTES = 8 << 20
"""No merge makes a block larger: a read that settles copies at most this much (with no
cap, merging into one 100 MB block put 165 ms reads into the p99 at 200k x 128-d)."""


@dataclass
class Block:
    """Contiguous rows ``[offset, offset + rows)`` of the segment and the exact kernels over
    its vector columns, made on first use."""

    table: pa.Table
    offset: int
    exact: dict[str, VectorIndexExact] = field(default_factory=dict)
    pks: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return self.table.num_rows

    def kernel(self, name: str) -> VectorIndexExact:
        if name not in self.exact:
            self.exact[name] = VectorIndexExact(self.table.column(name))
        return self.exact[name]

    def keys(self, pk_field: str) -> np.ndarray:
        if self.pks is None:
            self.pks = self.table.column(pk_field).to_numpy(zero_copy_only=False)
        return self.pks


def settle(blocks: list[Block], new: list[pa.Table]) -> list[Block]:
    """``blocks`` with the rows of ``new`` after them, newest blocks merged down to size."""
    out = list(blocks)
    start = out[-1].offset + out[-1].rows if out else 0
    out.append(Block(pa.concat_tables(new).combine_chunks(), start))
    while (
        len(out) > 1
        and out[-2].rows <= MERGE_RATIO * out[-1].rows
        and out[-2].table.nbytes + out[-1].table.nbytes <= BLOCK_BYTES
    ):
        newer, older = out.pop(), out.pop()
        merged = pa.concat_tables([older.table, newer.table]).combine_chunks()
        out.append(Block(merged, older.offset))
    return out


def whole(blocks: list[Block]) -> pa.Table:
    """The blocks as one table, chunked, not copied."""
    if len(blocks) == 1:
        return blocks[0].table
    return pa.concat_tables([b.table for b in blocks])


def keys(blocks: list[Block], pk_field: str) -> np.ndarray:
    """Every row's primary key, in row order (each block's converted once)."""
    parts = [b.keys(pk_field) for b in blocks]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class BlockedExact:
    """Exact search over a field of several blocks, answered as ``VectorIndexExact`` answers
    over their rows as one column: rows are the segment's, the best ``k`` over all blocks."""

    def __init__(self, blocks: list[Block], name: str) -> None:
        self._parts = [(b.offset, b.rows, b.kernel(name)) for b in blocks if b.rows]

    def search(
        self,
        queries: Any,
        k: int,
        metric: str,
        valid: np.ndarray | None = None,
        radius: float | None = None,
        range_filter: float | None = None,
        bm25: BM25 | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        dists, rows = [], []
        for offset, n, kernel in self._parts:
            mask = None if valid is None else valid[offset : offset + n]
            d, r = kernel.search(queries, k, metric, mask, radius, range_filter, bm25)
            dists.append(d)
            rows.append(np.where(r >= 0, r + offset, -1))
        scores = np.concatenate(dists, axis=1)
        found = np.concatenate(rows, axis=1)
        if not found.shape[1]:
            return scores, found
        best, cols = topk(scores, k, larger_is_better(metric))
        return best, np.where(cols >= 0, np.take_along_axis(found, np.maximum(cols, 0), 1), -1)

    def term_stats(
        self, terms: np.ndarray, valid: np.ndarray | None = None
    ) -> tuple[int, float, np.ndarray]:
        total_rows, tokens, df = 0, 0.0, np.zeros(len(terms), np.int64)
        for offset, n, kernel in self._parts:
            mask = None if valid is None else valid[offset : offset + n]
            r, t, d = kernel.term_stats(terms, mask)
            total_rows, tokens, df = total_rows + r, tokens + t, df + d
        return total_rows, tokens, df
