"""The query-node worker (seed 001): sealed segments in memory, searched and queried on
the delegator's behalf over the list of segments it names.

A segment is loaded from its Lance dataset with its delta logs applied; later deletes
arrive from the delegator. Loading and scanning run off the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from elanus import freemem, layout, objstore
from elanus.api.querynode import (
    ReadSegmentRows,
    ReadSegments,
    ReadShard,
    SegmentSpec,
    ServedIndex,
)
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr
from elanus.grouping import reduce_grouped, regroup
from elanus.indexparams import MAX_EF
from elanus.reduce import add_term_stats, reduce_parts
from elanus.scalarindex import is_scalar_spec
from elanus.schema import PK_COLUMN, Schema
from elanus.searchrequest import SearchRequest
from elanus.segments import storage
from elanus.segments.querynode.admission import admit
from elanus.segments.querynode.mappedcolumns import map_columns
from elanus.segments.querynode.memseg import MemSegment

log = logging.getLogger(__name__)

MAX_GROUP_SCAN = MAX_EF
"""Hits a segment looks at, at most, to fill a grouped search's groups (HNSW's ef bound)."""


IndexFailure = Callable[[int, ServedIndex], None]
"""Told (on the loop) of a built index a worker could not load: segment id, index entry."""


def load_segment(
    spec: SegmentSpec,
    schema: Schema,
    failed: list[ServedIndex] | None = None,
    mmap_dir: Path | None = None,
) -> MemSegment:
    """Read a flushed segment, its persisted deletes and its built indexes (in a thread);
    index entries that did not load are added to ``failed``. The indexes load first: a
    vector column that an index holds is not read at all (``segments/querynode/heldvectors``)."""
    seg_dir = layout.parent(spec.path)
    built = [(entry, read_index(spec.segment_id, entry, mmap_dir)) for entry in spec.indexes]
    held = frozenset(e.field for e, ix in built if getattr(ix, "holds_vectors", False))
    table = storage.read_segment(seg_dir, schema, skip=held)
    mapped: list[str] = []
    if spec.mmap_fields:
        directory = mmap_dir or Path(tempfile.gettempdir())
        table, mapped = map_columns(table, spec.mmap_fields, directory)
    seg = MemSegment(spec.segment_id, spec.partition_id, schema, table, layout.data_path(seg_dir))
    seg.mapped_columns = frozenset(mapped)
    deltas = storage.read_deltas(seg_dir)
    if deltas is not None and deltas.num_rows:
        seg.delete(deltas.column(PK_COLUMN).combine_chunks(), deltas.column("ts").to_numpy())
    for entry, index in built:
        if index is None:
            if failed is not None:
                failed.append(entry)
        else:
            _attach(seg, entry, index)
    return seg


def read_index(segment_id: int, entry: ServedIndex, mmap_dir: Path | None = None) -> Any:
    """One built index of a segment, read from its files (in a thread); ``None`` when it
    does not load (the segment then stays searchable, exactly).

    A vector index with ``entry.mmap`` maps its file. Local storage maps the stored file
    itself; from object storage the copy goes to ``mmap_dir`` (the node's disk, not a
    memory-backed temporary directory) and is unlinked at once: the kernel keeps a mapped
    file's blocks until the index is freed (its segment released), then the disk space
    comes back, with no cache to clean up after a crash."""
    from elanus.index.engine import load_index  # faiss-heavy: only where indexes are served
    from elanus.index.scalar import load_segment_scalar

    mmap = entry.mmap and not is_scalar_spec(entry.spec)
    try:
        with objstore.local_copy(entry.dir, mmap_dir if mmap else None) as directory:
            if is_scalar_spec(entry.spec):
                return load_segment_scalar(entry.field, directory)
            return load_index(directory, mmap=mmap)
    except Exception as exc:  # noqa: BLE001 - the segment stays searchable, exactly
        log.warning("segment %s: index %s not loaded: %s", segment_id, entry.dir, exc)
        return None


def _attach(seg: MemSegment, entry: ServedIndex, index: Any) -> None:
    if is_scalar_spec(entry.spec):
        seg.attach_scalar(index, entry.index_id)
    else:
        seg.attach_index(entry.field, index, entry.index_id)


def attach_index(seg: MemSegment, entry: ServedIndex, mmap_dir: Path | None = None) -> bool:
    """Load one built index into a segment (runs in a thread); whether it loaded."""
    index = read_index(seg.segment_id, entry, mmap_dir)
    if index is not None:
        _attach(seg, entry, index)
    return index is not None


def mapped_index(index: ServedIndex) -> ServedIndex:
    """``index`` loaded mapped, if it is a vector index (scalar ones are never mapped)."""
    return index if is_scalar_spec(index.spec) else dataclasses.replace(index, mmap=True)


def mapped_spec(spec: SegmentSpec, schema: Schema) -> SegmentSpec:
    """``spec`` with every vector index and every raw column but the key mapped."""
    fields = [f.name for f in schema.fields if f.name != schema.primary.name]
    indexes = [mapped_index(i) for i in spec.indexes]
    return dataclasses.replace(spec, indexes=indexes, mmap_fields=fields)


class Worker:
    """``on_index_failure`` hears of every finished index that did not load, so that the
    coord can have it built again rather than leave the segment on exact search."""

    def __init__(
        self,
        on_index_failure: IndexFailure | None = None,
        mmap_dir: Path | None = None,
        memory_limit: int | None = None,
        node: str = "",
        always_mapped: bool = False,
    ) -> None:
        self.always_mapped = always_mapped
        """Load every index and raw column mapped, whatever ``mmap.enabled`` says: a node
        group's members (a standalone's serving processes) then share one page-cache copy
        of the index files instead of holding one each (docs/process-model.md)."""
        self.mmap_dir = mmap_dir
        self.memory_limit, self.node = memory_limit, node
        """The admission budget (``querynode/admission.py``): ``None`` admits every load."""
        """Where mapped index files copied from object storage go (``read_index``)."""
        self.segments: dict[int, MemSegment] = {}
        self.collection_of: dict[int, int] = {}
        self.on_index_failure = on_index_failure

    async def load(self, collection_id: int, schema: Schema, specs: list[SegmentSpec]) -> list[int]:
        new = [s for s in specs if s.segment_id not in self.segments]
        if self.always_mapped:
            new = [mapped_spec(s, schema) for s in new]
        if self.memory_limit is not None:
            held = sum(self.memory_by_collection().values())
            await asyncio.to_thread(admit, new, schema, self.memory_limit, held, self.node)
        failed: list[list[ServedIndex]] = [[] for _ in new]
        loaded = await asyncio.gather(
            *(
                asyncio.to_thread(load_segment, s, schema, f, self.mmap_dir)
                for s, f in zip(new, failed, strict=True)
            )
        )
        for seg, bad in zip(loaded, failed, strict=True):
            self.segments[seg.segment_id] = seg
            self.collection_of[seg.segment_id] = collection_id
            for index in bad:
                self._index_failed(seg.segment_id, index)
        if new:  # what the reads freed (Lance's buffers, combined chunks) goes back
            await asyncio.to_thread(freemem.release)
        return [s.segment_id for s in specs]

    def _index_failed(self, segment_id: int, index: ServedIndex) -> None:
        if self.on_index_failure is not None:
            self.on_index_failure(segment_id, index)

    async def load_index(self, segment_id: int, index: ServedIndex) -> bool:
        """Swap a finished index in; searches before the swap used the exact kernel."""
        seg = self.segments.get(segment_id)
        if seg is None:
            return False
        if self.always_mapped:
            index = mapped_index(index)
        if not await asyncio.to_thread(attach_index, seg, index, self.mmap_dir):
            self._index_failed(segment_id, index)
        await asyncio.to_thread(freemem.release)  # the column the index now holds
        if is_scalar_spec(index.spec):
            return seg.has_scalar(index.field, tuple(index.spec.get("path") or ()))
        return seg.index_of(index.field) is not None

    def drop_index(self, collection_id: int, index_id: int) -> None:
        """Detach one dropped index from the collection's segments (by id: a JSON field
        may have several path indexes, and only this one goes)."""
        for sid, cid in self.collection_of.items():
            if cid == collection_id:
                self.segments[sid].detach_index(index_id)

    def adopt(self, collection_id: int, schema: Schema) -> None:
        """The collection's newer schema for every segment of it held here."""
        for sid, cid in list(self.collection_of.items()):
            seg = self.segments.get(sid)
            if cid == collection_id and seg is not None:
                seg.adopt(schema)

    def release(self, segment_ids: list[int]) -> None:
        """Forget the segments (their memory goes once running reads finish with them;
        the caller hands it back with ``freemem.release``)."""
        for sid in segment_ids:
            self.segments.pop(sid, None)
            self.collection_of.pop(sid, None)

    def release_collection(self, collection_id: int) -> None:
        self.release([s for s, c in self.collection_of.items() if c == collection_id])

    def delete(self, segment_ids: list[int], pks: pa.Array, ts: np.ndarray | int) -> int:
        return sum(self.segments[s].delete(pks, ts) for s in segment_ids if s in self.segments)

    def memory_by_collection(self, mapped: bool = False) -> dict[int, int]:
        """Bytes the held segments' structures take in memory, by collection; with
        ``mapped``, those their indexes map from disk instead."""
        out: dict[int, int] = {}
        for sid, seg in list(self.segments.items()):
            cid = self.collection_of.get(sid)
            if cid is not None:
                out[cid] = out.get(cid, 0) + (seg.mapped_bytes() if mapped else seg.memory_bytes())
        return out

    def rows(self, segment_ids: list[int]) -> int:
        return sum(self.segments[s].num_rows for s in segment_ids if s in self.segments)

    def _held(self, segment_ids: list[int]) -> list[MemSegment]:
        missing = [s for s in segment_ids if s not in self.segments]
        if missing:  # released since the delegator picked them (a drop or release racing)
            raise ElanusError(
                ErrorCode.SEGMENT_NOT_FOUND,
                f"segments {missing} are not loaded on this worker (released meanwhile?); "
                "retry the read",
            )
        return [self.segments[s] for s in segment_ids]

    def search(self, segment_ids: list[int], req: SearchRequest) -> list[dict[str, Any]]:
        return [search_part(seg, req) for seg in self._held(segment_ids)]

    def term_stats(self, segment_ids: list[int], req: SearchRequest) -> dict[str, Any]:
        return term_stats(self._held(segment_ids), req)

    def query(
        self,
        segment_ids: list[int],
        ts: int,
        expr: Expr | None,
        columns: list[str],
        limit: int | None,
        ttl: int = 0,
    ) -> pa.Table:
        tables = [seg.query(ts, expr, columns, limit, ttl) for seg in self._held(segment_ids)]
        return concat_or_empty(tables, columns, self._held(segment_ids))

    def count(self, segment_ids: list[int], ts: int, expr: Expr | None, ttl: int = 0) -> int:
        return sum(seg.count(ts, expr, ttl) for seg in self._held(segment_ids))


def search_part(seg: MemSegment, req: SearchRequest) -> dict[str, Any]:
    """One segment's hits with their output fields (one row per hit, query-major); for a
    grouped search its ``k`` best groups."""
    if req.group_by is None:
        return _hits_part(seg, req, req.k, req.search_params)
    return grouped_part(seg, req)


def term_stats(segments: list[MemSegment], req: SearchRequest) -> dict[str, Any]:
    """BM25 statistics of ``segments`` at ``req.ts`` for the terms in ``req.queries``:
    ``rows`` and ``tokens`` (their total length) of the visible rows, ``df`` per term."""
    terms = np.asarray(req.queries, np.uint32)
    parts = [seg.term_stats(req.field, terms, req.ts, req.ttl) for seg in segments]
    return add_term_stats([{"rows": r, "tokens": t, "df": d} for r, t, d in parts], len(terms))


def grouped_part(seg: MemSegment, req: SearchRequest) -> dict[str, Any]:
    """A segment's best groups: searched ever wider until every query has ``k`` full
    groups (then no farther hit can change them) or the segment is exhausted."""
    assert req.group_by is not None
    k = req.k * req.group_size
    params = req.search_params
    while True:
        part = _hits_part(seg, req, k, params)
        grouped, complete = regroup(part, req.k, req.group_size, 0, req.group_by, req.metric)
        if complete.all() or k >= min(seg.num_rows, MAX_GROUP_SCAN):
            return {**grouped, "segment_id": seg.segment_id}
        k = min(k * 4, seg.num_rows, MAX_GROUP_SCAN)
        params = {n: v for n, v in params.items() if n != "ef"}  # HNSW widens ef to k


def reduce_request(parts: list[dict[str, Any]], req: SearchRequest) -> dict[str, Any]:
    """Merge the parts of one search (grouped or not) into its top ``k``."""
    if req.group_by is not None:
        return reduce_grouped(parts, req.k, req.group_size, req.metric, req.group_by)
    return reduce_parts(parts, req.k, req.metric)


def _hits_part(
    seg: MemSegment, req: SearchRequest, k: int, params: dict[str, Any]
) -> dict[str, Any]:
    hits = seg.search(
        req.field,
        req.queries,
        k,
        req.metric,
        req.ts,
        req.expr(seg.schema),
        req.radius,
        req.range_filter,
        params,
        req.ttl,
    )
    part: dict[str, Any] = {
        "distances": hits.distances,
        "pks": hits.pks,
        "segment_id": seg.segment_id,
    }
    if req.output_fields:
        rows = hits.rows.ravel()
        valid = rows >= 0
        part["outputs"] = seg.take(rows[valid], req.output_fields)
        part["output_rows"] = np.nonzero(valid)[0]
    return part


def concat_or_empty(
    tables: list[pa.Table], columns: list[str], segments: list[MemSegment]
) -> pa.Table:
    if tables:
        return pa.concat_tables(tables, promote_options="permissive")
    if segments:
        return segments[0].take(np.empty(0, np.int64), columns)
    return pa.table({c: pa.array([]) for c in columns})


def segment_read(req: ReadShard | ReadSegments, ts: int, segment_ids: list[int]) -> ReadSegmentRows:
    """A worker's part of a shard's query or count, or of a snapshot read's page."""
    return ReadSegmentRows(
        segment_ids=segment_ids,
        ts=ts,
        filter=req.filter,
        params=req.params,
        output_fields=req.output_fields,
        limit=req.limit,
        ttl=req.ttl,
    )
