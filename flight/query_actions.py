"""DoAction entries of the read path: load, release, load state, replicas, search, query.

Search and query are also offered as JSON actions — one round trip, any Flight client —
besides the Arrow streams (DoExchange, DoGet) documented in docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from elanus.errors import invalid
from elanus.flight.actions import action, check_request
from elanus.flight.auth import Caller
from elanus.flight.executors import Call, OpCall
from elanus.flight.limits import Kind
from elanus.flight.registry import operation
from elanus.flight.search import (
    GROUP_KEYS,
    READ_KEYS,
    check_hybrid,
    hybrid_search,
    search_as_hybrid,
    search_options,
    search_queries,
    searched_as_hybrid,
)
from elanus.highlight import Highlighter
from elanus.ops import loads as ops
from elanus.ops.reads import PlanRead, Query
from elanus.privileges import Need
from elanus.requests import Body
from elanus.wire.codec import DEFAULT_DB, decode_request


def _run_load(c: OpCall[ops.LoadCollection]) -> dict[str, Any]:
    r = c.request
    return c.proxy.loads.load(r.db, r.collection, r.partition_names, r.replica_number)


operation(
    ops.LoadCollection,
    "Load a collection (or some partitions) into the query nodes. Body: collection, "
    "partition_names, replica_number (in-memory copies, each on query nodes of its own; "
    "default: the database's database.replica.number, else 1). Result: state, progress, "
    "loaded_rows, persisted_rows.",
    privilege="Load",
    run=_run_load,
)


def _run_release(c: OpCall[ops.ReleaseCollection]) -> dict[str, Any]:
    return c.proxy.loads.release(c.request.db, c.request.collection)


operation(
    ops.ReleaseCollection,
    "Release a loaded collection. Body: collection.",
    privilege="Release",
    run=_run_release,
)


def _run_load_state(c: OpCall[ops.GetLoadState]) -> dict[str, Any]:
    return c.proxy.loads.state(c.request.db, c.request.collection)


operation(
    ops.GetLoadState,
    "Load state of a collection. Body: collection. Result: state (NotLoad, Loading, "
    "Loaded), progress, loaded_rows, persisted_rows, memory_bytes (held by its query nodes).",
    privilege="GetLoadState",
    run=_run_load_state,
)


def _run_replicas(c: OpCall[ops.DescribeReplica]) -> dict[str, Any]:
    return c.proxy.loads.replicas(c.request.db, c.request.collection)


operation(
    ops.DescribeReplica,
    "Where the in-memory replicas of a loaded collection are. Body: collection. Result: "
    "replicas (replica_id, node_ids, shard_leaders: vchannel -> query node, serving).",
    privilege="GetLoadState",
    run=_run_replicas,
)


def _run_search(c: Call) -> dict[str, Any]:
    """The hot path: a body shaped like an earlier one reuses that one's checked plan. A
    body with a function ``ranker`` runs as a hybrid search of one request (reranked)."""
    if b'"ranker"' in c.raw:
        body = decode_request(c.raw, "search body")
        if body.get("ranker") is not None:
            if body.get("highlighter") is not None:  # as Milvus: not with a function score
                raise invalid("search: a highlighter cannot go with a ranker")
            with searched_as_hybrid():
                _, request = check_request("hybrid_search", orjson.dumps(search_as_hybrid(body)))
                check = _searcher(c.caller)
                if check is not None:
                    check(request["db"], request["collection"])
                return hybrid_search(c.proxy.query, request)
    return c.proxy.query.search_action(c.raw, _searcher(c.caller))


def _searcher(caller: Caller) -> Callable[[str, str], None] | None:
    """The search privilege check for ``caller`` (none for a superuser: the hot path)."""
    if caller.superuser:
        return None
    return lambda db, collection: caller.require(Need("Search", db or DEFAULT_DB, collection))


@action(
    "search",
    "Vector search. Body: collection, data (list of vectors) or ids (primary keys whose "
    "stored vectors are the queries), anns_field, limit, offset, "
    "filter, filter_params, output_fields, search_params (metric_type, radius, "
    "range_filter, params), group_by_field, group_size, strict_group_size, ranker (a "
    "function ranker: input_field_names, params with reranker decay|rrf|weighted), "
    "highlighter (a lexical highlighter: pre_tags, post_tags, fragment_offset, "
    "fragment_size, num_of_fragments, highlight_search_text, highlight_query), "
    "consistency_level, guarantee_timestamp, session_ts, as_of, partition_names. "
    "Result: results (per query: id, distance, entity; highlight with a highlighter), ts.",
    (
        "collection",
        "data",
        "ids",
        "anns_field",
        "limit",
        "offset",
        "filter",
        "filter_params",
        "output_fields",
        "search_params",
        "ranker",
        "highlighter",
        *GROUP_KEYS,
        *READ_KEYS,
    ),
    privilege="Search",
    rate=Kind.DQL,
    self_checked=True,
    run=_run_search,
)
def _search(b: Body) -> dict[str, Any]:
    if b.dict("ranker", None) is not None:  # _run_search sends these to hybrid_search
        raise invalid("search: a body with a 'ranker' runs as a hybrid search")
    highlighter = b.dict("highlighter", None)
    if highlighter is not None:
        Highlighter.from_body(highlighter)  # checked once, with the plan
    return {**search_options(b), **search_queries(b), "highlighter": highlighter}


def _run_query(c: OpCall[Query]) -> dict[str, Any]:
    service = c.proxy.query
    info = service.gate.read_collection(c.request.db, c.request.collection)
    return service.query(info, c.request)


operation(
    Query,
    "Entities matching a filter (or by ids). Body: collection, filter, ids, output_fields "
    '("count(*)" counts), limit, offset, filter_params, consistency_level, '
    "guarantee_timestamp, session_ts, as_of, partition_names, group_by_fields (with "
    '"count(*)", "sum(f)", "avg(f)", "min(f)", "max(f)" outputs: one row per group), '
    'order_by_fields ("field" or "field:desc"). '
    "Result: rows (or count), ts.",
    privilege="Query",
    rate=Kind.DQL,
    run=_run_query,
)


# -- declared here, checked beside their services (flight/search/) ----------------------
def _run_hybrid(c: Call) -> dict[str, Any]:
    return hybrid_search(c.proxy.query, c.request)


action(
    "hybrid_search",
    "Several ANN searches fused into one ranking. Body: collection, reqs (each: data or "
    "ids, anns_field, param or search_params, limit, filter, filter_params), ranker (strategy "
    "rrf|weighted, params), limit, offset, output_fields, group_by_field, group_size, "
    "strict_group_size, consistency_level, guarantee_timestamp, session_ts, as_of, "
    "partition_names. "
    "Result: results (per query: id, distance = fused score, entity), ts.",
    (
        "collection",
        "reqs",
        "ranker",
        "limit",
        "offset",
        "output_fields",
        *GROUP_KEYS,
        *READ_KEYS,
    ),
    privilege="Search",
    rate=Kind.DQL,
    run=_run_hybrid,
)(check_hybrid)


def _run_read_plan(c: OpCall[PlanRead]) -> dict[str, Any]:
    return c.proxy.reads.plan(c.request).to_json()


operation(
    PlanRead,
    "A snapshot read plan for parallel readers (what GetFlightInfo returns, as JSON). Body: "
    "collection, partition_names, snapshot_ts, filter, filter_params, columns, files_only. "
    "Result: ts, "
    "collection_id, schema, columns, total_records, endpoints (ticket, kind, rows).",
    privilege="Query",
    rate=Kind.DQL,
    run=_run_read_plan,
)
