"""A segment held in memory for search and query: what workers (sealed segments) and
delegators (growing segments) answer from.

Rows are an Arrow table (user columns plus ``_ts``); vectors are searched through zero-copy
views (``VectorIndexExact``); every read takes a timestamp and sees exactly the rows
visible then (``RowVersions``), further narrowed by a filter expression. A sealed segment
whose index holds a field's vectors drops that column and answers from the index
(``heldvectors``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.expr import Expr
from elanus.expr.textmatch import TextIndexes
from elanus.functions import fill_outputs
from elanus.index.kernels import BM25, VectorIndexExact
from elanus.newestrow import has_repeats
from elanus.schema import TIMESTAMP_FIELD, Schema
from elanus.segments import storage
from elanus.segments.querynode import blocks
from elanus.segments.querynode.heldvectors import HeldVectors
from elanus.segments.querynode.visibility import RowVersions

F = TypeVar("F", bound=Callable[..., Any])


def _guarded(method: F) -> F:
    @functools.wraps(method)
    def call(self: MemSegment, *args: Any, **kwargs: Any) -> Any:
        with self._guard:
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


@dataclass
class SearchHits:
    """Per-query top hits of one segment: distances, primary keys and row positions."""

    distances: np.ndarray  # (nq, k') float32
    pks: np.ndarray  # (nq, k') int64 or object
    rows: np.ndarray  # (nq, k') int64, -1 for padding


class MemSegment:
    def __init__(
        self,
        segment_id: int,
        partition_id: int,
        schema: Schema,
        table: pa.Table | None = None,
        files: str | None = None,
    ) -> None:
        """``table``: a sealed segment's rows (``None``: a growing segment, empty); it may
        lack vector columns that an index attached next will hold. ``files``: the
        sealed segment's Lance dataset, where such a field's values are read back."""
        self.segment_id = segment_id
        self.partition_id = partition_id
        self.schema = schema
        self.pk_field = schema.primary.name
        empty = schema.to_arrow(with_ts=True).empty_table()
        self.table = empty if table is None else table.combine_chunks()
        pks = _one_chunk(self.table.column(self.pk_field))  # the table's own buffer
        ts = self.table.column(TIMESTAMP_FIELD).to_numpy()
        self.versions = RowVersions(pks, ts)
        self._blocks = [blocks.Block(self.table, 0)]
        """The settled rows (``table``) as contiguous blocks, each with its exact kernels:
        one for a sealed segment, a few of geometric sizes for a growing one (replaced
        whole, under ``_swap`` when a held column goes or comes back)."""
        self._files = files
        self.mapped_columns: frozenset[str] = frozenset()
        """Columns of ``table`` mapped from disk (``querynode/mappedcolumns``), not held."""
        self._held: dict[str, HeldVectors] = {}
        """Vector fields served from their index, their columns dropped (replaced whole,
        under ``_swap``, together with ``table``)."""
        self._swap = threading.Lock()
        self._restoring = threading.Lock()
        self._ann: dict[str, Any] = {}
        """Built ANN indexes (``elanus.index.engine.SegmentIndex``) by field: sealed only."""
        self._scalar: dict[tuple[str, tuple[str | int, ...]], Any] = {}
        """Built scalar indexes (``elanus.index.scalar.ScalarSegmentIndex``) by field and
        JSON path: sealed only."""
        self._served_by: dict[int, tuple[str, tuple[str | int, ...] | None]] = {}
        """What each built index (by index id) serves: a field's ANN (path ``None``) or a
        scalar key, so that dropping one index detaches only that one."""
        self.scalar_uses = 0
        """Filter predicates answered from scalar indexes so far (to observe that they are)."""
        self._pks: np.ndarray | None = None
        self._text = TextIndexes()
        """Text indexes for text_match / phrase_match, built on first use; a growing
        segment starts a new set whenever appended rows settle in."""
        self._pending: list[pa.Table] = []
        self._guard: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if table is None else contextlib.nullcontext()
        )
        """Growing segments change while readers on other threads look (the proxy's direct
        search path): appends and reads take turns (a search only while it settles and
        picks its rows). Sealed ones only see deletes, which
        readers at earlier timestamps never notice, so they need no lock."""

    @property
    def num_rows(self) -> int:
        return self.table.num_rows + sum(t.num_rows for t in self._pending)

    # -- changes ----------------------------------------------------------------------------
    def append(self, rows: pa.Table) -> None:
        """Rows of a growing segment (with ``_ts``); indexed again on the next read."""
        # rows sent before a field was added lack it: they take its default (or null), or a
        # function's output, computed
        rows = fill_outputs(rows, self.schema)
        rows = storage.conform(rows, self.table.schema, storage.column_defaults(self.schema))
        with self._guard:
            self._pending.append(rows)
            self.versions.append(
                rows.column(self.pk_field).combine_chunks(),
                rows.column(TIMESTAMP_FIELD).to_numpy(),
            )

    def adopt(self, schema: Schema) -> None:
        """Take the collection's newer schema (a field was added): the rows held read the
        new field's default, or null. Row positions, keys and indexes stay as they are."""
        with self._guard, self._swap:
            self._settle()
            target = pa.schema(
                [f for f in schema.to_arrow(with_ts=True) if f.name not in self._held]
            )
            table = storage.conform(self.table, target, storage.column_defaults(schema))
            self.table = table.combine_chunks()
            self._blocks = [blocks.Block(self.table, 0)]
            self._pks = None
            self.schema = schema

    def delete(self, pks: pa.Array, ts: np.ndarray | int) -> int:
        with self._guard:
            return self.versions.delete(pks, ts)

    def _settle(self) -> None:
        if self._pending:
            self._blocks = blocks.settle(self._blocks, self._pending)
            self.table = blocks.whole(self._blocks)
            self._pending = []
            self._pks = None
            self._text = TextIndexes()

    def _index(
        self, field: str, held: list[blocks.Block]
    ) -> VectorIndexExact | blocks.BlockedExact:
        held = [b for b in held if b.rows] or held
        if len(held) > 1:
            return blocks.BlockedExact(held, field)
        return held[0].kernel(field)

    def _vectors(self) -> tuple[pa.Table, list[blocks.Block], dict[str, HeldVectors]]:
        """The table, its blocks and the held fields, as one consistent set (a field is in
        the table or held, whatever another thread swaps meanwhile)."""
        with self._swap:
            return self.table, self._blocks, self._held

    def _rebuilt(self, table: pa.Table, dropped: str | None = None) -> None:
        """A sealed segment's one block over its new ``table`` (a held column gone or back),
        keeping the other fields' kernels and the keys. Under ``_swap``."""
        (old,) = self._blocks
        kernels = {f: k for f, k in old.exact.items() if f != dropped}
        self.table = table
        self._blocks = [blocks.Block(table, 0, kernels, old.pks)]

    def _held_exact(
        self,
        field: str,
        source: HeldVectors,
        queries: Any,
        k: int,
        metric: str,
        mask: np.ndarray | None,
        radius: float | None,
        range_filter: float | None,
        bm25: BM25 | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The exact top ``k`` of a held field: from the index holding it, or (an index that
        cannot answer ``metric``) from its column read back."""
        found = source.index.exact_search(queries, k, metric, mask, radius, range_filter)
        if found is not None:
            return found
        self._read_back(field)
        _, settled, _ = self._vectors()
        kernel = self._index(field, settled)
        return kernel.search(queries, k, metric, mask, radius, range_filter, bm25)

    def attach_index(self, field: str, index: Any, index_id: int | None = None) -> None:
        """Serve ``field`` from a built index from now on (one assignment: a search that
        already picked the exact path finishes on it). A sealed segment then drops the
        field's column if the index holds its vectors (``heldvectors``), or reads it back
        if it was left unread for an index that cannot hold it."""
        self._own(index_id, (field, None))
        self._ann[field] = index
        if self._files is None:
            return
        holds = getattr(index, "holds_vectors", False) and index.num_rows == self.num_rows
        if holds:
            with self._swap:
                self._held = {
                    **self._held,
                    field: HeldVectors(index, self._files, self._field(field)),
                }
                if field in self.table.column_names:
                    self._rebuilt(self.table.drop_columns([field]), dropped=field)
        elif field not in self.table.column_names and field not in self._held:
            self._read_back(field)

    def _field(self, name: str) -> pa.Field:
        return self.schema.to_arrow(with_ts=True).field(name)

    def _read_back(self, field: str) -> pa.Table:
        """Put a held (or unread) field's column back from the files; the table with it."""
        with self._restoring:  # one read at a time; a second caller finds it done
            table, _, held = self._vectors()
            if field in table.column_names:
                return table
            source = held.get(field) or HeldVectors(None, self._files or "", self._field(field))
            column = source.column()
            names = self.schema.to_arrow(with_ts=True).names
            before = set(names[: names.index(field)])
            with self._swap:
                at = sum(1 for n in self.table.column_names if n in before)
                self._rebuilt(self.table.add_column(at, self._field(field), column))
                self._held = {f: h for f, h in self._held.items() if f != field}
                return self.table

    def attach_scalar(self, index: Any, index_id: int | None = None) -> None:
        """Answer filters on ``index.key`` (field, JSON path) from a built scalar index."""
        self._own(index_id, index.key)
        self._scalar = {**self._scalar, index.key: index}

    def _own(self, index_id: int | None, key: tuple[str, tuple[str | int, ...] | None]) -> None:
        # the newcomer replaces whatever served the key before: an older index's drop,
        # arriving late, must not detach it
        self._served_by = {i: k for i, k in self._served_by.items() if k != key}
        if index_id is not None:
            self._served_by[index_id] = key

    def detach_index(self, index_id: int) -> None:
        """Stop serving from the index ``index_id`` (dropped); other indexes of its field
        (other JSON paths) stay."""
        key = self._served_by.pop(index_id, None)
        if key is None:
            return
        field, path = key
        if path is None:
            self._ann.pop(field, None)
        else:
            self._scalar = {k: v for k, v in self._scalar.items() if k != (field, path)}

    def has_scalar(self, field: str, path: tuple[str | int, ...] | None = None) -> bool:
        """Whether a scalar index serves ``field`` (at ``path``, or at any path)."""
        return any(k[0] == field and path in (None, k[1]) for k in self._scalar)

    def index_of(self, field: str) -> Any:
        return self._ann.get(field)

    def _pk_values(self) -> np.ndarray:
        if self._pks is None:
            self._pks = blocks.keys(self._blocks, self.pk_field)
        return self._pks

    # -- reads ------------------------------------------------------------------------------
    def visible(self, ts: int, expr: Expr | None = None, ttl: int = 0) -> np.ndarray:
        """Rows a read at ``ts`` with filter ``expr`` sees (``ttl``: the collection's TTL
        in ms, 0 none; every read below takes it)."""
        self._settle()
        mask = self.versions.visible(ts, ttl)
        if expr is not None and mask.any():
            mask &= self._filter(expr).to_numpy(zero_copy_only=False)
        return mask

    def _indexed_rows(self, ts: int, expr: Expr | None, ttl: int) -> np.ndarray | None:
        """The visible rows matching ``expr`` when scalar indexes answer all of it (no
        per-row evaluation; ``None``: they do not)."""
        scalar = self._scalar
        if expr is None or not scalar or self._pending:
            return None
        wanted = expr.fields
        usable = {k: s.entry for k, s in scalar.items() if k[0] in wanted}
        rows = expr.index_rows(usable, self.table.num_rows) if usable else None
        if rows is None:
            return None
        self.scalar_uses += 1
        if not self.versions.all_visible(ts, ttl):
            rows = rows[self.versions.visible(ts, ttl)[rows]]
        return rows

    def _filter(self, expr: Expr) -> pa.BooleanArray:
        scalar = self._scalar  # one read: an index swapped in meanwhile waits for the next
        if not scalar or self._pending:
            return expr.evaluate(self.table, text_indexes=self._text)
        wanted = expr.fields
        usable = {k: s.entry for k, s in scalar.items() if k[0] in wanted}
        if not usable:
            return expr.evaluate(self.table, text_indexes=self._text)
        mask, used = expr.evaluate_indexed(self.table, usable, self._text)
        self.scalar_uses += used
        return mask

    def search_mask(self, ts: int, expr: Expr | None = None, ttl: int = 0) -> np.ndarray | None:
        """Like ``visible``, but ``None`` when every row is visible (no mask to build)."""
        self._settle()
        if expr is None and self.versions.all_visible(ts, ttl):
            return None
        rows = self._indexed_rows(ts, expr, ttl)
        if rows is not None:
            mask = np.zeros(self.table.num_rows, bool)
            mask[rows] = True
            return mask
        return self.visible(ts, expr, ttl)

    def search(
        self,
        field: str,
        queries: Any,
        k: int,
        metric: str,
        ts: int,
        expr: Expr | None = None,
        radius: float | None = None,
        range_filter: float | None = None,
        params: dict[str, Any] | None = None,
        ttl: int = 0,
    ) -> SearchHits:
        """Top ``k`` visible rows; from the field's built index when it has one for this
        metric (and the filter leaves enough rows for it, and it answers range searches if
        this is one), else by the exact kernel. The scan runs outside the guard, on the rows
        settled when it began: a delegator's appends never wait for a search."""
        with self._guard:
            mask = self.search_mask(ts, expr, ttl)
            table, settled, held = self._vectors()
            pks = self._pk_values()
        source = held.get(field)
        ann = self._ann.get(field)
        distances = rows = None
        bm25 = BM25.from_params(params or {}) if metric == "BM25" else None
        ranged = radius is not None
        if ann is not None and (not ranged or ann.serves_range) and ann.spec.metric == metric:
            share = 1.0 if mask is None else float(np.count_nonzero(mask)) / max(len(mask), 1)
            if table.num_rows and share and not ann.prefers_exact(share):
                distances, rows = ann.search(
                    queries, k, params or {}, mask, radius=radius, range_filter=range_filter
                )
        if distances is None or rows is None:
            if source is not None:
                distances, rows = self._held_exact(
                    field, source, queries, k, metric, mask, radius, range_filter, bm25
                )
            else:
                distances, rows = self._index(field, settled).search(
                    queries, k, metric, mask, radius, range_filter, bm25
                )
        if not len(pks):
            hit_pks = np.zeros(rows.shape, dtype=np.int64)
        elif len(rows) == 1 and rows.shape[1] and rows[0, -1] >= 0:
            hit_pks = pks[rows]  # one query, every slot a hit (padding sits at the end)
        else:
            hit_pks = pks[np.where(rows >= 0, rows, 0)]
        return SearchHits(distances, hit_pks, rows)

    @_guarded
    def term_stats(
        self, field: str, terms: np.ndarray, ts: int, ttl: int = 0
    ) -> tuple[int, float, np.ndarray]:
        """BM25 statistics of the rows visible at ``ts`` (no filter: the corpus is every
        visible row): rows, total tokens, rows holding each term."""
        mask = self.search_mask(ts, ttl=ttl)  # first: it settles appended rows into the table
        return self._index(field, self._blocks).term_stats(terms, mask)

    @_guarded
    def take(self, rows: np.ndarray, columns: list[str]) -> pa.Table:
        """Output fields of the given rows (search results), in that order."""
        self._settle()
        table, _, held = self._vectors()
        if not any(c in held for c in columns):
            return table.select(columns).take(pa.array(rows, pa.int64()))
        present = table.select([c for c in columns if c not in held])
        out = present.take(pa.array(rows, pa.int64()))
        values = [held[c].take(rows) if c in held else out.column(c) for c in columns]
        fields = [held[c].field if c in held else out.schema.field(c) for c in columns]
        return pa.Table.from_arrays(values, schema=pa.schema(fields))

    def mapped_bytes(self) -> int:
        """Bytes of its columns and indexes mapped from files (``mmap.enabled``), not held."""
        table = self._vectors()[0]
        buffers: dict[int, int] = {}
        for name in self.mapped_columns & set(table.column_names):
            _add_buffers(buffers, table.column(name).chunks)
        indexes = sum(int(getattr(i, "mapped_nbytes", 0)) for i in self._indexes())
        return sum(buffers.values()) + indexes

    def _indexes(self) -> list[Any]:
        _table, _settled, held = self._vectors()
        unique = {id(i): i for i in [*self._ann.values(), *(h.index for h in held.values())]}
        return list(unique.values())

    def memory_bytes(self) -> int:
        """Bytes held by the segment's structures: its table, row versions, built indexes
        (vector and scalar, less what they map: :meth:`mapped_bytes`) and exact kernels'
        per-row statistics."""
        table, settled, held = self._vectors()
        buffers: dict[int, int] = {}  # address -> size: a buffer two structures share counts once
        for part in [table, *self._pending]:
            for name, column in zip(part.column_names, part.columns, strict=True):
                if name not in self.mapped_columns:
                    _add_buffers(buffers, column.chunks)
        pks = self.versions.pks
        _add_buffers(buffers, pks.chunks if isinstance(pks, pa.ChunkedArray) else [pks])
        for a in (self.versions.insert_ts, self.versions.death_ts):
            buffers[a.ctypes.data] = a.nbytes
        total = sum(buffers.values())
        total += sum(int(getattr(i, "nbytes", 0)) for i in self._indexes())
        total -= sum(int(getattr(i, "mapped_nbytes", 0)) for i in self._indexes())
        total += sum(int(getattr(s, "nbytes", 0)) for s in self._scalar.values())
        kernels = [k for b in settled for k in list(b.exact.values())]
        return int(total + sum(k.own_nbytes for k in kernels))

    @_guarded
    def query(
        self,
        ts: int,
        expr: Expr | None,
        columns: list[str],
        limit: int | None = None,
        ttl: int = 0,
    ) -> pa.Table:
        self._settle()
        rows = self._indexed_rows(ts, expr, ttl)
        if rows is None:
            rows = np.nonzero(self.visible(ts, expr, ttl))[0]
        if limit is not None and len(rows) > limit:
            rows = self._first_keys(rows, limit)
        return self.take(rows, columns)

    def _first_keys(self, rows: np.ndarray, limit: int) -> np.ndarray:
        """The proxy pages by primary key: a segment offers the rows of its ``limit``
        smallest keys, every copy of a key inserted twice (the proxy keeps the newest for
        a query, ``elanus.newestrow``; a snapshot read keeps them all). Keys repeat rarely,
        so the check is a comparison over the candidates and a count of ``limit``."""
        keys = self.table.column(self.pk_field).take(rows)
        picked = _smallest(keys, limit)
        chosen = keys.take(picked)
        if not has_repeats(chosen):
            edge = pc.max(chosen)
            within = pc.less_equal(keys, edge)
            if pc.sum(within).as_py() == limit:
                return np.sort(rows[picked])
        distinct = pc.unique(keys)
        if len(distinct) <= limit:
            return rows
        edge = distinct.take(_smallest(distinct, limit))
        within = pc.less_equal(keys, pc.max(edge))
        return rows[within.to_numpy(zero_copy_only=False)]

    @_guarded
    def count(self, ts: int, expr: Expr | None = None, ttl: int = 0) -> int:
        self._settle()
        rows = self._indexed_rows(ts, expr, ttl)
        if rows is not None:
            return len(rows)
        return int(np.count_nonzero(self.visible(ts, expr, ttl)))


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _add_buffers(seen: dict[int, int], arrays: list[pa.Array]) -> None:
    for array in arrays:
        for b in array.buffers():
            if b is not None:
                seen[b.address] = b.size


def _smallest(keys: pa.ChunkedArray | pa.Array, limit: int) -> np.ndarray:
    """Positions of ``limit`` smallest keys (ties at the edge: any of them; the proxy's
    pages start again at a page's last key). Integer keys by partition, O(n): a full
    sort of 250k shuffled int64 keys took 134 ms, ``argpartition`` 7 ms."""
    if pa.types.is_integer(keys.type) and keys.null_count == 0:
        values = keys.to_numpy() if isinstance(keys, pa.ChunkedArray) else keys.to_numpy(False)
        return np.argpartition(values, limit - 1)[:limit]
    return pc.sort_indices(keys).to_numpy()[:limit]
