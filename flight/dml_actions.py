"""DoAction entries of the write path: delete, flush, flush state, segment info.

Registered in the same catalogue as the DDL actions (``actions.ACTIONS``) so ListActions,
the unknown-key check and the docs cover them; the proxy runs them through ``DmlService``.
"""

from __future__ import annotations

from typing import Any

from elanus.errors import invalid
from elanus.flight.actions import _action, _db, _name
from elanus.requests import Body
from elanus.schema import check_name

MAX_DELETE_KEYS = 1_000_000
DML_ACTIONS = (
    "delete",
    "flush",
    "get_flush_state",
    "get_segment_info",
    "compact",
    "get_compaction_state",
    "get_collection_stats",
)


@_action(
    "delete",
    "Delete entities by primary key or by a filter expression (the collection must be "
    "loaded for a filter). Body: collection, ids | filter, filter_params, partition. "
    "Result: delete_count, ts.",
    ("collection", "ids", "filter", "filter_params", "partition"),
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
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "ids": ids,
        "filter": filt,
        "filter_params": b.dict("filter_params", {}),
        "partition": _name(b, "partition", "partition") if partition else None,
    }


@_action(
    "get_collection_stats",
    "Row count of a collection: rows in flushed segments, as Milvus counts num_entities. "
    "Body: collection. Result: row_count.",
    ("collection",),
)
def _collection_stats(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


@_action(
    "flush",
    "Seal the growing segments of a collection and have them written (seed 004). "
    "Body: collection. Result: segment_ids, flush_ts; poll get_flush_state.",
    ("collection",),
)
def _flush(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


@_action(
    "get_flush_state",
    "Whether the given segments are flushed. Body: segment_ids. Result: flushed, done, total.",
    ("segment_ids",),
)
def _flush_state(b: Body) -> dict[str, Any]:
    ids = b.list("segment_ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise invalid("get_flush_state: 'segment_ids' must be a list of integers")
    return {"segment_ids": ids}


@_action(
    "get_segment_info",
    "Segments of a collection (or the given ids): state, rows, channel, positions. "
    "Body: collection | segment_ids. Result: segments.",
    ("collection", "segment_ids"),
)
def _segment_info(b: Body) -> dict[str, Any]:
    ids = b.list("segment_ids", None)
    collection = b.str("collection", None)
    if (ids is None) == (collection is None):
        raise invalid("get_segment_info: give exactly one of 'collection' and 'segment_ids'")
    if ids is not None:
        return {"segment_ids": ids}
    return {"db": _db(b), "collection": check_name(collection, "collection")}


@_action(
    "compact",
    "Merge the collection's flushed segments and drop deleted rows. Body: collection. "
    "Result: compaction_id, plans; poll get_compaction_state.",
    ("collection",),
)
def _compact(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


@_action(
    "get_compaction_state",
    "Progress of a compaction. Body: compaction_id. Result: state (executing | completed | "
    "failed), pending, executing, completed, failed, and reason when failed. An unknown id "
    "is COMPACTION_NOT_FOUND.",
    ("compaction_id",),
)
def _compaction_state(b: Body) -> dict[str, Any]:
    return {"compaction_id": b.int("compaction_id", lo=1)}
