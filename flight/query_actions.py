"""DoAction entries of the read path: load, release, load state, search, query.

Search and query are also offered as JSON actions — one round trip, any Flight client —
besides the Arrow streams (DoExchange, DoGet) documented in docs/protocol.md.
"""

from __future__ import annotations

from typing import Any

from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.flight.actions import _action, _db, _name
from elanus.flight.wire import decode_body
from elanus.requests import Body
from elanus.schema import check_name

MAX_TOPK = 16_384
MAX_NQ = 16_384
QUERY_ACTIONS = ("load_collection", "release_collection", "get_load_state", "search", "query")
READ_KEYS = ("consistency_level", "guarantee_timestamp", "as_of", "partition_names")


def _partitions(b: Body) -> list[str] | None:
    names = b.list("partition_names", None)
    if names is None:
        return None
    return [check_name(n, "partition") for n in names]


def _read_options(b: Body) -> dict[str, Any]:
    level = b.str("consistency_level", None)
    try:
        parsed = ConsistencyLevel.parse(level).value if level else None
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return {
        "consistency_level": parsed,
        "guarantee_timestamp": b.int("guarantee_timestamp", 0, lo=0),
        "as_of": b.int("as_of", 0, lo=0),
        "partition_names": _partitions(b),
    }


@_action(
    "load_collection",
    "Load a collection (or some partitions) into the query nodes. Body: collection, "
    "partition_names. Result: state, progress, loaded_rows, persisted_rows.",
    ("collection", "partition_names"),
)
def _load(b: Body) -> dict[str, Any]:
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "partition_names": _partitions(b),
    }


@_action("release_collection", "Release a loaded collection. Body: collection.", ("collection",))
def _release(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


@_action(
    "get_load_state",
    "Load state of a collection. Body: collection. Result: state (NotLoad, Loading, "
    "Loaded), progress, loaded_rows, persisted_rows.",
    ("collection",),
)
def _load_state(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


@_action(
    "search",
    "Vector search. Body: collection, data (list of vectors), anns_field, limit, offset, "
    "filter, filter_params, output_fields, search_params (metric_type, radius, "
    "range_filter), consistency_level, guarantee_timestamp, as_of, partition_names. "
    "Result: results (per query: id, distance, entity), ts.",
    (
        "collection",
        "data",
        "anns_field",
        "limit",
        "offset",
        "filter",
        "filter_params",
        "output_fields",
        "search_params",
        *READ_KEYS,
    ),
)
def _search(b: Body) -> dict[str, Any]:
    return {**_search_options(b), "data": _search_data(b)}


def _search_data(b: Body) -> list[Any]:
    data = b.list("data")
    if not data:
        raise invalid("search: 'data' holds no query vectors")
    if len(data) > MAX_NQ:
        raise invalid(f"search: at most {MAX_NQ} query vectors per request, got {len(data)}")
    return data


def check_search_data(data: Any) -> list[Any]:
    """The ``data`` of a search body, checked as ``search`` checks it (for a request whose
    other keys were checked before)."""
    if type(data) is list and 0 < len(data) <= MAX_NQ:
        return data
    return _search_data(Body({"data": data}, "search"))


def check_search_stream(raw: bytes) -> dict[str, Any]:
    """The command of a DoExchange search: a ``search`` body without ``data`` (the query
    vectors arrive as record batches)."""
    b = Body(decode_body(raw, "DoExchange command"), "DoExchange command")
    request = _search_options(b)
    b.done()
    return request


def _search_options(b: Body) -> dict[str, Any]:
    limit = b.int("limit", 10, lo=1, hi=MAX_TOPK)
    offset = b.int("offset", 0, lo=0, hi=MAX_TOPK)
    if limit + offset > MAX_TOPK:
        raise invalid(f"search: limit + offset must be at most {MAX_TOPK}")
    params = b.dict("search_params", {})
    unknown = sorted(set(params) - {"metric_type", "radius", "range_filter", "params"})
    if unknown:
        raise invalid(f"search: unknown search_params key(s) {', '.join(unknown)}")
    for key in ("radius", "range_filter"):
        value = params.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise invalid(f"search: search_params {key!r} must be a number, got {value!r}")
    if not isinstance(params.get("params") or {}, dict):
        raise invalid("search: search_params 'params' must be an object, e.g. {\"nprobe\": 16}")
    if "metric_type" in params and not isinstance(params["metric_type"], str):
        raise invalid("search: search_params 'metric_type' must be a string")
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "anns_field": b.str("anns_field", None),
        "limit": limit,
        "offset": offset,
        "filter": b.str("filter", "") or None,
        "filter_params": b.dict("filter_params", {}),
        "output_fields": b.list("output_fields", []),
        "search_params": params,
        **_read_options(b),
    }


@_action(
    "query",
    "Entities matching a filter (or by ids). Body: collection, filter, ids, output_fields "
    '("count(*)" counts), limit, offset, filter_params, consistency_level, '
    "guarantee_timestamp, as_of, partition_names. Result: rows (or count), ts.",
    (
        "collection",
        "filter",
        "ids",
        "output_fields",
        "limit",
        "offset",
        "filter_params",
        *READ_KEYS,
    ),
)
def _query(b: Body) -> dict[str, Any]:
    filt = b.str("filter", "") or None
    ids = b.list("ids", None)
    outputs = b.list("output_fields", [])
    limit = b.int("limit", None, lo=1, hi=10_000_000)
    if filt is None and ids is None and outputs != ["count(*)"] and limit is None:
        # Milvus: "empty expression should be used with limit"
        raise invalid(
            "query: an empty filter needs a 'limit' (or give a 'filter' or 'ids'; "
            "only count(*) may go without)"
        )
    if filt is not None and ids is not None:
        raise invalid("query: give either 'filter' or 'ids', not both")
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "filter": filt,
        "ids": ids,
        "output_fields": outputs,
        "limit": limit,
        "offset": b.int("offset", 0, lo=0),
        "filter_params": b.dict("filter_params", {}),
        **_read_options(b),
    }
