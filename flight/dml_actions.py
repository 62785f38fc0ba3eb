"""DoAction entries of the write path (delete, flush, compaction, segment state). The
command of a DoPut (insert, upsert, upload) is ``putcommand``'s; the writes themselves are
``DmlService``'s.
"""

from __future__ import annotations

from elanus.api.compaction import (
    CompactionProgress,
    CompactionStarted,
    GetCompactionState,
    TriggerCompaction,
)
from elanus.api.datacoord import Flushing, FlushProgress, FlushState, SegmentInfo, Segments
from elanus.flight.executors import OpCall
from elanus.flight.limits import Kind
from elanus.flight.registry import operation
from elanus.ops import segments as ops
from elanus.ops.reads import Query
from elanus.ops.replies import DeleteResult
from elanus.ops.writes import Delete
from elanus.privileges import OPEN
from elanus.requests import decode
from elanus.states import SegmentState
from elanus.wire.codec import DEFAULT_DB


def _run_delete(c: OpCall[Delete]) -> DeleteResult:
    request, dml = c.request, c.proxy.dml
    info = dml.collection(request.db, request.collection)
    partition = request.partition or None
    if partition:
        dml.partition_id(info, partition, "a delete")  # refused by a partition key
    c.proxy.dbgate.admit_write(info, f"delete from {info.name}")
    keys = request.ids
    if keys is None:  # by filter: the keys it matches now (Strong), then delete those
        pk = info.schema.primary.name
        matching = Query(
            db=info.db,
            collection=info.name,
            filter=request.filter,
            filter_params=request.filter_params,
            output_fields=[pk],
            consistency_level="Strong",
            partition_names=[partition] if partition else None,
        )
        keys = [row[pk] for row in c.proxy.query.query(info, matching)["rows"]]
        if not keys:
            return {"delete_count": 0, "ts": 0}
    result = dml.delete(info, partition, keys)
    return {"delete_count": result.count, "ts": result.ts}


operation(
    Delete,
    "Delete entities by primary key or by a filter expression (the collection must be "
    "loaded for a filter). Body: collection, ids | filter, filter_params, partition. "
    "Result: delete_count, ts.",
    privilege="Delete",
    rate=Kind.DML,
    run=_run_delete,
)


def _run_collection_stats(c: OpCall[ops.GetCollectionStats]) -> ops.CollectionStats:
    info = c.proxy.dml.collection(c.request.db, c.request.collection)
    reply = c.proxy.run(
        c.proxy.datacoord.segment_info(SegmentInfo(collection_id=info.collection_id))
    )
    flushed = sum(s.num_rows for s in reply.segments if s.state == SegmentState.FLUSHED)
    return ops.CollectionStats(row_count=flushed)


operation(
    ops.GetCollectionStats,
    "Row count of a collection: rows in flushed segments, as Milvus counts num_entities. "
    "Body: collection. Result: row_count.",
    privilege="GetStatistics",
    run=_run_collection_stats,
)


def _run_flush(c: OpCall[ops.Flush]) -> Flushing:
    info = c.proxy.dml.collection(c.request.db, c.request.collection)
    return c.proxy.run(c.proxy.dml.flush(info))


operation(
    ops.Flush,
    "Seal the growing segments of a collection and have them written (seed 004). "
    "Body: collection. Result: segment_ids, flush_ts; poll get_flush_state.",
    privilege="Flush",
    run=_run_flush,
)


def _run_flush_state(c: OpCall[ops.GetFlushState]) -> FlushProgress:
    req = FlushState(segment_ids=c.request.segment_ids)
    return c.proxy.run(c.proxy.datacoord.flush_state(req))


operation(
    ops.GetFlushState,
    "Whether the given segments are flushed. Body: segment_ids. Result: flushed, done, total.",
    privilege=OPEN,
    run=_run_flush_state,
)


def _run_segment_info(c: OpCall[ops.GetSegmentInfo]) -> Segments:
    r = c.request
    if r.collection is not None:
        info = c.proxy.dml.collection(r.db or DEFAULT_DB, r.collection)
        which = SegmentInfo(collection_id=info.collection_id)
    else:  # the ids' items are the data coord request's to check
        which = decode(SegmentInfo, {"segment_ids": r.segment_ids})
    return c.proxy.run(c.proxy.datacoord.segment_info(which))


operation(
    ops.GetSegmentInfo,
    "Segments of a collection (or the given ids): state, rows, channel, positions. "
    "Body: collection | segment_ids. Result: segments.",
    privilege="GetStatistics",
    run=_run_segment_info,
)


def _run_compact(c: OpCall[ops.Compact]) -> CompactionStarted:
    r = c.request
    info = c.proxy.dml.collection(r.db, r.collection)
    trigger = TriggerCompaction(
        collection_id=info.collection_id,
        target_size_mb=r.target_size_mb,
        clustering=bool(r.clustering),
    )
    return c.proxy.run(c.proxy.compaction.trigger(trigger))


operation(
    ops.Compact,
    "Merge the collection's flushed segments and drop deleted rows. Body: collection, "
    "target_size_mb (optional, Milvus's force merge: targets of up to this size), "
    "clustering (optional: a clustering compaction, by the collection's clustering key). "
    "Result: compaction_id, plans; poll get_compaction_state.",
    privilege="Compaction",
    run=_run_compact,
)


def _run_compaction_state(c: OpCall[ops.GetCompactionState]) -> CompactionProgress:
    req = GetCompactionState(compaction_id=c.request.compaction_id)
    return c.proxy.run(c.proxy.compaction.state(req))


operation(
    ops.GetCompactionState,
    "Progress of a compaction. Body: compaction_id. Result: state (executing | completed | "
    "failed), pending, executing, completed, failed, and reason when failed. An unknown id "
    "is COMPACTION_NOT_FOUND.",
    privilege=OPEN,
    run=_run_compaction_state,
)
