"""The bodies of reads checked for shape and bounds, before any collection is looked at:
search options and data, query ids, read options (consistency, timestamps, partitions).
The action checkers (``query_actions``, ``hybrid``) and the DoExchange search share them,
so every way in refuses the same body with the same words."""

from __future__ import annotations

from typing import Any

from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.registry import check_db, check_named
from elanus.flight.search.check import split_search_params
from elanus.ops.reads import ReadOptions
from elanus.requests import Body
from elanus.schema import DataType, Field, check_name
from elanus.wire.codec import decode_request

MAX_TOPK = 16_384
MAX_NQ = 16_384
GROUP_KEYS = ("group_by_field", "group_size", "strict_group_size")
READ_KEYS = (
    "consistency_level", "guarantee_timestamp", "session_ts", "as_of", "partition_names",
)  # fmt: skip
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def check_query_ids(
    ids: list[Any], pk: Field, what: str = "query", code: ErrorCode = ErrorCode.BAD_EXPRESSION
) -> list[Any]:
    """``ids`` of a query (or of a search by primary keys: ``what``), checked against the
    primary key: exact JSON integers in the int64 range for an Int64 key (no strings,
    floats or booleans, so no key is ever rounded), strings for a VarChar key. A query's
    wrong id is BAD_EXPRESSION, as Milvus reports ids (which it turns into ``pk in
    [...]``), naming the value rather than an internal expression."""

    def bad(message: str) -> ElanusError:
        return ElanusError(code, f"{what}: 'ids' {message}")

    if pk.dtype == DataType.INT64:
        for v in ids:
            if isinstance(v, bool) or not isinstance(v, int):
                raise bad(f"of Int64 primary key {pk.name!r} must be JSON integers, got {v!r}")
            if not _INT64_MIN <= v <= _INT64_MAX:
                raise bad(f"value {v} is out of the Int64 range")
    elif not all(isinstance(v, str) for v in ids):
        bad_id = next(v for v in ids if not isinstance(v, str))
        raise bad(f"of VarChar primary key {pk.name!r} must be strings, got {bad_id!r}")
    return ids


def partition_names(b: Body) -> list[str] | None:
    """A read's ``partition_names``: None (all) or checked names."""
    names = b.list("partition_names", None)
    if names is None:
        return None
    return [check_name(n, "partition") for n in names]


def read_options(b: Body) -> dict[str, Any]:
    """The keys every read takes (``READ_KEYS``): consistency, timestamps, partitions."""
    level = b.str("consistency_level", None)
    try:
        parsed = ConsistencyLevel.parse(level).value if level else None
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return {
        "consistency_level": parsed,
        "guarantee_timestamp": b.int("guarantee_timestamp", 0, lo=0),
        "session_ts": b.int("session_ts", 0, lo=0),
        "as_of": b.int("as_of", 0, lo=0),
        "partition_names": partition_names(b),
    }


def read_options_of(request: dict[str, Any]) -> ReadOptions:
    """The read options of a checked search body (search plans still hold the body)."""
    return ReadOptions(
        consistency_level=request.get("consistency_level"),
        guarantee_timestamp=request.get("guarantee_timestamp") or 0,
        session_ts=request.get("session_ts") or 0,
        as_of=request.get("as_of") or 0,
        partition_names=request.get("partition_names"),
    )


def search_data(b: Body) -> list[Any]:
    """The ``data`` of a search body: 1 to ``MAX_NQ`` queries (checked against the field
    later, by ``vectors`` or ``text``)."""
    data = b.list("data")
    if not data:
        raise invalid("search: 'data' holds no query vectors")
    if len(data) > MAX_NQ:
        raise invalid(f"search: at most {MAX_NQ} query vectors per request, got {len(data)}")
    return data


def search_queries(b: Body) -> dict[str, Any]:
    """A search's queries: ``data`` (vectors or texts), or ``ids``, primary keys whose
    stored vectors are the queries (Milvus 2.6's search by primary keys); one of them."""
    ids = b.list("ids", None)
    if ids is None:
        if b.raw.get("data") is None:
            raise invalid(f"{b.what}: give the query vectors in 'data' or primary keys in 'ids'")
        return {"data": search_data(b), "ids": None}
    if b.list("data", None) is not None:
        raise invalid(f"{b.what}: give either 'data' or 'ids', not both")
    if not ids:
        raise invalid(f"{b.what}: 'ids' holds no primary keys")
    if len(ids) > MAX_NQ:
        raise invalid(f"{b.what}: at most {MAX_NQ} primary keys per request, got {len(ids)}")
    return {"data": None, "ids": ids}


def check_search_data(data: Any) -> list[Any]:
    """The ``data`` of a search body, checked as ``search`` checks it (for a request whose
    other keys were checked before)."""
    if type(data) is list and 0 < len(data) <= MAX_NQ:
        return data
    return search_data(Body({"data": data}, "search"))


def check_search_stream(raw: bytes) -> dict[str, Any]:
    """The command of a DoExchange search: a ``search`` body without ``data`` (the query
    vectors arrive as record batches)."""
    b = Body(decode_request(raw, "DoExchange command"), "DoExchange command")
    request = search_options(b)
    b.done()
    return request


def search_options(b: Body) -> dict[str, Any]:
    """Everything of a search body but its ``data`` (shared by ``search``, the DoExchange
    search and each sub-request of ``hybrid_search``)."""
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
        **read_options(b),
    }
