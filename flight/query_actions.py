"""DoAction entries of the read path: load, release, load state, search, query.

Search and query are also offered as JSON actions — one round trip, any Flight client —
besides the Arrow streams (DoExchange, DoGet) documented in docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elanus.api.base import as_body
from elanus.api.querycoord import LoadCollection, LoadState, ReleaseCollection
from elanus.client.wire import DEFAULT_DB, decode_request
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.actions import Call, action, check_db, check_named
from elanus.flight.auth import Caller
from elanus.flight.limits import Kind
from elanus.flight.searchcheck import split_search_params
from elanus.privileges import Need
from elanus.requests import Body
from elanus.schema import DataType, Field, check_name

MAX_TOPK = 16_384
MAX_NQ = 16_384
GROUP_KEYS = ("group_by_field", "group_size", "strict_group_size")
READ_KEYS = ("consistency_level", "guarantee_timestamp", "as_of", "partition_names")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def check_query_ids(ids: list[Any], pk: Field) -> list[Any]:
    """``ids`` of a query, checked against the primary key: exact JSON integers in the int64
    range for an Int64 key (no strings, floats or booleans, so no key is ever rounded),
    strings for a VarChar key. A wrong id is BAD_EXPRESSION, as Milvus reports ids (which
    it turns into ``pk in [...]``), naming the value rather than an internal expression."""
    if pk.dtype == DataType.INT64:
        for v in ids:
            if isinstance(v, bool) or not isinstance(v, int):
                raise _bad_id(f"of Int64 primary key {pk.name!r} must be JSON integers, got {v!r}")
            if not _INT64_MIN <= v <= _INT64_MAX:
                raise _bad_id(f"value {v} is out of the Int64 range")
    elif not all(isinstance(v, str) for v in ids):
        bad = next(v for v in ids if not isinstance(v, str))
        raise _bad_id(f"of VarChar primary key {pk.name!r} must be strings, got {bad!r}")
    return ids


def _bad_id(message: str) -> ElanusError:
    return ElanusError(ErrorCode.BAD_EXPRESSION, f"query: 'ids' {message}")


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


def _run_load(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    c.proxy.query.forget_route(info.collection_id)
    names = c.request["partition_names"]
    partitions = [c.proxy.dml.partition_id(info, n, "a load") for n in names] if names else None
    req = LoadCollection(collection_id=info.collection_id, partition_ids=partitions)
    return c.proxy.run(c.proxy.coord.query.load(req)).to_body()


@action(
    "load_collection",
    "Load a collection (or some partitions) into the query nodes. Body: collection, "
    "partition_names. Result: state, progress, loaded_rows, persisted_rows.",
    ("collection", "partition_names"),
    privilege="Load",
    run=_run_load,
)
def _load(b: Body) -> dict[str, Any]:
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "partition_names": _partitions(b),
    }


def _run_release(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    c.proxy.query.forget_route(info.collection_id)
    req = ReleaseCollection(collection_id=info.collection_id)
    return as_body(c.proxy.run(c.proxy.coord.query.release(req)))


@action(
    "release_collection",
    "Release a loaded collection. Body: collection.",
    ("collection",),
    privilege="Release",
    run=_run_release,
)
def _release(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "collection": check_named(b, "collection", "collection")}


def _run_load_state(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    req = LoadState(collection_id=info.collection_id)
    return c.proxy.run(c.proxy.coord.query.state(req)).to_body()


@action(
    "get_load_state",
    "Load state of a collection. Body: collection. Result: state (NotLoad, Loading, "
    "Loaded), progress, loaded_rows, persisted_rows.",
    ("collection",),
    privilege="GetLoadState",
    run=_run_load_state,
)
def _load_state(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "collection": check_named(b, "collection", "collection")}


def _run_search(c: Call) -> dict[str, Any]:
    """The hot path: a body shaped like an earlier one reuses that one's checked plan."""
    return c.proxy.query.search_action(c.raw, _searcher(c.caller))


def _searcher(caller: Caller) -> Callable[[str, str], None] | None:
    """The search privilege check for ``caller`` (none for a superuser: the hot path)."""
    if caller.superuser:
        return None
    return lambda db, collection: caller.require(Need("Search", db or DEFAULT_DB, collection))


@action(
    "search",
    "Vector search. Body: collection, data (list of vectors), anns_field, limit, offset, "
    "filter, filter_params, output_fields, search_params (metric_type, radius, "
    "range_filter, params), group_by_field, group_size, strict_group_size, "
    "consistency_level, guarantee_timestamp, as_of, partition_names. "
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
        *GROUP_KEYS,
        *READ_KEYS,
    ),
    privilege="Search",
    rate=Kind.DQL,
    self_checked=True,
    run=_run_search,
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
    b = Body(decode_request(raw, "DoExchange command"), "DoExchange command")
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
    if not isinstance(params.get("params") or {}, dict):
        raise invalid("search: search_params 'params' must be an object, e.g. {\"nprobe\": 16}")
    split_search_params(params)  # the range bounds are numbers, wherever they sit
    group_by = b.str("group_by_field", None) or None
    group_size = b.int("group_size", 1, lo=1, hi=MAX_TOPK)
    strict = b.bool("strict_group_size", False)
    if group_by is None and (group_size != 1 or strict):
        raise invalid("search: group_size and strict_group_size need a group_by_field")
    if group_size * (limit + offset) > MAX_TOPK:
        raise invalid(
            f"search: (limit + offset) * group_size must be at most {MAX_TOPK}, "
            f"got {(limit + offset) * group_size}"
        )
    if "metric_type" in params and not isinstance(params["metric_type"], str):
        raise invalid("search: search_params 'metric_type' must be a string")
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "anns_field": b.str("anns_field", None),
        "limit": limit,
        "offset": offset,
        "filter": b.str("filter", "") or None,
        "filter_params": b.dict("filter_params", {}),
        "output_fields": b.list("output_fields", []),
        "search_params": params,
        "group_by_field": group_by,
        "group_size": group_size,
        "strict_group_size": strict,
        **_read_options(b),
    }


def _run_query(c: Call) -> dict[str, Any]:
    info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
    return c.proxy.query.query(info, c.request)


@action(
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
    privilege="Query",
    rate=Kind.DQL,
    run=_run_query,
)
def _query(b: Body) -> dict[str, Any]:
    filt = b.str("filter", "") or None
    ids = b.list("ids", None)
    outputs = b.list("output_fields", [])
    if "count(*)" in outputs and any(n != "count(*)" for n in outputs):
        others = [repr(n) for n in outputs if n != "count(*)"]
        others = others[:3] + (["..."] if len(others) > 3 else [])
        raise invalid(
            f"query: 'count(*)' must be the only output field (also asked for: "
            f"{', '.join(others)}); "
            "count in one query and fetch fields in another"
        )
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
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "filter": filt,
        "ids": ids,
        "output_fields": outputs,
        "limit": limit,
        "offset": b.int("offset", 0, lo=0),
        "filter_params": b.dict("filter_params", {}),
        **_read_options(b),
    }
