"""Which rows of a segment a read at timestamp ``T`` sees (MVCC over ``_ts`` and deletes).

Every row carries its insert timestamp ``_ts`` and a *death* timestamp: the earliest delete
of its key that came after the insert (``MAX`` while there is none). A read at ``T`` sees
the row exactly when ``_ts <= T < death``. Deletes only ever lower a death timestamp, so
applying them is idempotent and order-free, and any ``T`` inside the retention window —
time travel — is answered by the same two comparisons.

A collection TTL adds a third: a read at ``T`` with a TTL also drops rows inserted before
``expire_floor(T, ttl)`` (``elanus.properties``), so a read at an old ``T`` still sees what
was live then. Every read of loaded rows (search, query, get, count, BM25 statistics) asks
here; reads from a segment's files apply the same floor (``snapshot_files``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.properties import expire_floor

ALIVE = np.iinfo(np.uint64).max
MAX_KEY_CHUNKS = 64
"""Appended key chunks kept apart at most; past it they are joined once (a read that
looks keys up pays a little per chunk)."""


class RowVersions:
    """Insert and death timestamps of a segment's rows, keyed by primary key.

    A growing segment appends a few thousand rows at a time, up to a million: the
    timestamps live in buffers that double when full and the keys in a list of chunks, so
    an append copies only its own rows. Concatenating everything on every append made the
    appends quadratic: 47 % of a query node's samples under ``bench/flow.py --cluster``."""

    def __init__(self, pks: pa.Array, insert_ts: np.ndarray) -> None:
        self._pk_chunks = [pks]
        self._n = len(pks)
        self._insert = insert_ts.astype(np.uint64, copy=False)
        self._death = np.full(self._n, ALIVE, dtype=np.uint64)
        self.max_insert = int(self._insert.max()) if self._n else 0
        self.min_insert = int(self._insert.min()) if self._n else int(ALIVE)
        self.min_death = int(ALIVE)
        """Bounds that let ``all_visible`` answer without touching every row."""

    def __len__(self) -> int:
        return self._n

    @property
    def pks(self) -> pa.Array | pa.ChunkedArray:
        """Every row's key, in row order (chunked while a growing segment appends)."""
        if len(self._pk_chunks) == 1:
            return self._pk_chunks[0]
        return pa.chunked_array(self._pk_chunks, self._pk_chunks[0].type)

    @property
    def insert_ts(self) -> np.ndarray:
        return self._insert[: self._n]

    @property
    def death_ts(self) -> np.ndarray:
        """A view: lowering an entry here lowers the row's death timestamp."""
        return self._death[: self._n]

    def append(self, pks: pa.Array, insert_ts: np.ndarray) -> None:
        """New rows (a growing segment)."""
        n, more = self._n, len(pks)
        if not more:
            return
        if n + more > len(self._insert) or not self._insert.flags.writeable:
            size = max(n + more, 2 * len(self._insert), 1024)
            self._insert = _grown(self._insert[:n], size, 0)
            self._death = _grown(self._death[:n], size, ALIVE)
        self._insert[n : n + more] = insert_ts
        self._death[n : n + more] = ALIVE
        chunks = [*self._pk_chunks, pks] if n else [pks]
        self._pk_chunks = [pa.concat_arrays(chunks)] if len(chunks) > MAX_KEY_CHUNKS else chunks
        self._n = n + more
        self.max_insert = max(self.max_insert, int(insert_ts.max()))
        self.min_insert = min(self.min_insert, int(insert_ts.min()))

    def delete(self, pks: pa.Array, ts: np.ndarray | int) -> int:
        """Apply deletes ``(pk, ts)`` (keys may repeat); returns the rows they touched."""
        if len(pks) == 0 or len(self.pks) == 0:
            return 0
        del_ts = np.broadcast_to(np.asarray(ts, dtype=np.uint64), (len(pks),))
        touched = 0
        # ``index_in`` needs unique keys: take the deletes in rounds, one per key each.
        for batch in _unique_rounds(pks):
            touched += self._delete_unique(pks.take(pa.array(batch)), del_ts[batch])
        return touched

    def _delete_unique(self, pks: pa.Array, del_ts: np.ndarray) -> int:
        where = pc.index_in(self.pks, value_set=pks)
        found = pc.is_valid(where)
        rows = np.nonzero(_numpy(found))[0]
        if not len(rows):
            return 0
        cand = del_ts[_numpy(where.filter(found))]
        later = cand > self.insert_ts[rows]  # a delete never kills a later insert
        rows, cand = rows[later], cand[later]
        np.minimum.at(self._death, rows, cand)
        if len(cand):
            self.min_death = min(self.min_death, int(cand.min()))
        return int(len(rows))

    def visible(self, ts: int, ttl: int = 0) -> np.ndarray:
        """The rows a read at ``ts`` sees (``ttl``: the collection's TTL in ms, 0 none)."""
        t = np.uint64(ts)
        mask = (self.insert_ts <= t) & (self.death_ts > t)
        floor = expire_floor(ts, ttl)
        if floor > self.min_insert:
            mask &= self.insert_ts >= np.uint64(floor)
        return mask

    def all_visible(self, ts: int, ttl: int = 0) -> bool:
        """Whether a read at ``ts`` sees every row (the common case of a sealed segment
        without deletes or expired rows): then no per-row mask is needed."""
        return self.max_insert <= ts < self.min_death and expire_floor(ts, ttl) <= self.min_insert

    def live_count(self, ts: int, ttl: int = 0) -> int:
        return int(np.count_nonzero(self.visible(ts, ttl)))


def _grown(values: np.ndarray, size: int, fill: int) -> np.ndarray:
    out = np.full(size, fill, dtype=np.uint64)
    out[: len(values)] = values
    return out


def _numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(values, pa.ChunkedArray):
        return values.to_numpy()
    return values.to_numpy(zero_copy_only=False)


def _unique_rounds(pks: pa.Array) -> list[np.ndarray]:
    """Positions of ``pks`` split so that no key repeats within a round."""
    codes = pc.dictionary_encode(pks).indices.to_numpy(zero_copy_only=False)
    if len(np.unique(codes)) == len(codes):
        return [np.arange(len(codes))]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_codes))[0] + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    occurrence = np.empty(len(codes), dtype=np.int64)
    occurrence[order] = np.arange(len(codes)) - group_start
    return [np.nonzero(occurrence == r)[0] for r in range(int(occurrence.max()) + 1)]
