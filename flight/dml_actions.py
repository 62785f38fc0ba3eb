"""DoAction entries of the write path (delete, flush, compaction, segment state). The
command of a DoPut (insert, upsert, upload) is ``putcommand``'s; the writes themselves are
``DmlService``'s.
"""

from __future__ import annotations

from typing import Any

from elanus.api.base import as_body
from elanus.api.compaction import GetCompactionState, TriggerCompaction
from elanus.api.datacoord import FlushState, SegmentInfo
from elanus.errors import invalid
from elanus.flight.actions import action, check_db, check_named
from elanus.flight.executors import Call
from elanus.flight.limits import Kind
from elanus.privileges import OPEN
from elanus.requests import Body, decode
from elanus.schema import check_name
from elanus.states import SegmentState

MAX_DELETE_KEYS = 1_000_000


def _run_delete(c: Call) -> dict[str, Any]:
    request, dml = c.request, c.proxy.dml
    info = dml.collection(request["db"], request["collection"])
    if request["partition"]:
        dml.partition_id(info, request["partition"], "a delete")  # refused by a partition key
    c.proxy.dbgate.admit_write(info, f"delete from {info.name}")
    keys = request["ids"]
    if keys is None:  # by filter: the keys it matches now, then delete those
        keys = c.proxy.query.matching_keys(info, request)
        if not keys:
            return {"delete_count": 0, "ts": 0}
    result = dml.delete(info, request["partition"], keys)
    return {"delete_count": result.count, "ts": result.ts}


@action(
    "delete",
    "Delete entities by primary key or by a filter expression (the collection must be "
    "loaded for a filter). Body: collection, ids | filter, filter_params, partition. "
    "Result: delete_count, ts.",
    ("collection", "ids", "filter", "filter_params", "partition"),
    privilege="Delete",
    rate=Kind.DML,
    run=_run_delete,
)
def _delete(b: Body) -> dict[str, Any]:
    ids = b.list("ids", None)
    filt = b.str("filter", "") or None
    if (ids is None) == (filt is None):
        raise invalid("delete: give exactly one of 'ids' and 'filter'")
    if ids is not None and not ids:
        raise invalid("delete: 'ids' is empty")
    if ids is not None and len(ids) > MAX_DELETE_KEYS:
        raise invalid(f"delete: at most {MAX_DELETE_KEYS} ids per request, got {len(ids)}")
    partition = b.str("partition", None)
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "ids": ids,
        "filter": filt,
        "filter_params": b.dict("filter_params", {}),
        "partition": check_named(b, "partition", "partition") if partition else None,
    }


def _run_collection_stats(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    reply = c.proxy.run(
        c.proxy.datacoord.segment_info(SegmentInfo(collection_id=info.collection_id))
    )
    return {"row_count": sum(s.num_rows for s in reply.segments if s.state == SegmentState.FLUSHED)}


@action(
    "get_collection_stats",
    "Row count of a collection: rows in flushed segments, as Milvus counts num_entities. "
    "Body: collection. Result: row_count.",
    ("collection",),
    privilege="GetStatistics",
    run=_run_collection_stats,
)
def _collection_stats(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "collection": check_named(b, "collection", "collection")}


def _run_flush(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    return as_body(c.proxy.run(c.proxy.dml.flush(info)))


@action(
    "flush",
    "Seal the growing segments of a collection and have them written (seed 004). "
    "Body: collection. Result: segment_ids, flush_ts; poll get_flush_state.",
    ("collection",),
    privilege="Flush",
    run=_run_flush,
)
def _flush(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "collection": check_named(b, "collection", "collection")}


@action(
    "get_flush_state",
    "Whether the given segments are flushed. Body: segment_ids. Result: flushed, done, total.",
    ("segment_ids",),
    privilege=OPEN,
    run=lambda c: as_body(
        c.proxy.run(c.proxy.datacoord.flush_state(decode(FlushState, c.request)))
    ),
)
def _flush_state(b: Body) -> dict[str, Any]:
    ids = b.list("segment_ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise invalid("get_flush_state: 'segment_ids' must be a list of integers")
    return {"segment_ids": ids}


def _run_segment_info(c: Call) -> dict[str, Any]:
    request = c.request
    if "collection" in request:
        info = c.proxy.dml.collection(request["db"], request["collection"])
        which = SegmentInfo(collection_id=info.collection_id)
    else:
        which = decode(SegmentInfo, request)
    return as_body(c.proxy.run(c.proxy.datacoord.segment_info(which)))


@action(
    "get_segment_info",
    "Segments of a collection (or the given ids): state, rows, channel, positions. "
    "Body: collection | segment_ids. Result: segments.",
    ("collection", "segment_ids"),
    privilege="GetStatistics",
    run=_run_segment_info,
)
def _segment_info(b: Body) -> dict[str, Any]:
    ids = b.list("segment_ids", None)
    collection = b.str("collection", None)
    if (ids is None) == (collection is None):
        raise invalid("get_segment_info: give exactly one of 'collection' and 'segment_ids'")
    if ids is not None:
        return {"segment_ids": ids}
    return {"db": check_db(b), "collection": check_name(collection, "collection")}


def _run_compact(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    trigger = TriggerCompaction(
        collection_id=info.collection_id, target_size_mb=c.request.get("target_size_mb")
    )
    return as_body(c.proxy.run(c.proxy.compaction.trigger(trigger)))


@action(
    "compact",
    "Merge the collection's flushed segments and drop deleted rows. Body: collection, "
    "target_size_mb (optional, Milvus's force merge: targets of up to this size). "
    "Result: compaction_id, plans; poll get_compaction_state.",
    ("collection", "target_size_mb"),
    privilege="Compaction",
    run=_run_compact,
)
def _compact(b: Body) -> dict[str, Any]:
    body = {"db": check_db(b), "collection": check_named(b, "collection", "collection")}
    target = b.int("target_size_mb", None, lo=1)
    return body if target is None else {**body, "target_size_mb": target}


@action(
    "get_compaction_state",
    "Progress of a compaction. Body: compaction_id. Result: state (executing | completed | "
    "failed), pending, executing, completed, failed, and reason when failed. An unknown id "
    "is COMPACTION_NOT_FOUND.",
    ("compaction_id",),
    privilege=OPEN,
    run=lambda c: c.proxy.run(
        c.proxy.compaction.state(decode(GetCompactionState, c.request))
    ).to_body(),
)
def _compaction_state(b: Body) -> dict[str, Any]:
    return {"compaction_id": b.int("compaction_id", lo=1)}
