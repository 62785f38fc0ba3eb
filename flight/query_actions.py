"""DoAction entries of the read path: load, release, load state, replicas, search, query.

Search and query are also offered as JSON actions — one round trip, any Flight client —
besides the Arrow streams (DoExchange, DoGet) documented in docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Callable

from elanus.api.base import Ack
from elanus.api.querycoord import LoadProgress, Replicas
from elanus.flight.actions import check_request
from elanus.flight.auth import Caller
from elanus.flight.executors import Call, OpCall
from elanus.flight.limits import Kind
from elanus.flight.registry import operation
from elanus.flight.search import QueryService, hybrid_search, searched_as_hybrid
from elanus.ops import checked
from elanus.ops import loads as ops
from elanus.ops.reads import PlanRead, Query, QueryReply, ReadPlanReply
from elanus.ops.search import HybridReply, HybridSearch, Search, SearchReply
from elanus.privileges import Need
from elanus.wire.codec import DEFAULT_DB


def _run_load(c: OpCall[ops.LoadCollection]) -> LoadProgress:
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


def _run_release(c: OpCall[ops.ReleaseCollection]) -> Ack:
    return c.proxy.loads.release(c.request.db, c.request.collection)


operation(
    ops.ReleaseCollection,
    "Release a loaded collection. Body: collection.",
    privilege="Release",
    run=_run_release,
)


def _run_load_state(c: OpCall[ops.GetLoadState]) -> LoadProgress:
    return c.proxy.loads.state(c.request.db, c.request.collection)


operation(
    ops.GetLoadState,
    "Load state of a collection. Body: collection. Result: state (NotLoad, Loading, "
    "Loaded), progress, loaded_rows, persisted_rows, memory_bytes (held by its query nodes).",
    privilege="GetLoadState",
    run=_run_load_state,
)


def _run_replicas(c: OpCall[ops.DescribeReplica]) -> Replicas:
    return c.proxy.loads.replicas(c.request.db, c.request.collection)


operation(
    ops.DescribeReplica,
    "Where the in-memory replicas of a loaded collection are. Body: collection. Result: "
    "replicas (replica_id, node_ids, shard_leaders: vchannel -> query node, serving).",
    privilege="GetLoadState",
    run=_run_replicas,
)


def _run_search(c: Call) -> SearchReply | HybridReply:
    """The hot path: a body shaped like an earlier one reuses that one's checked plan. A
    search with a function ``ranker`` runs as a hybrid search of one request (reranked).
    A record (``perform_op``) is checked and authorised already."""
    service = c.proxy.query
    if isinstance(c.request, Search):
        return _ranked(service, c.request) if c.request.ranker else service.search(c.request)
    if b'"ranker"' in c.raw:
        search: Search = check_request("search", c.raw)[1]
        if search.ranker is not None:
            check = _searcher(c.caller)
            if check is not None:
                check(search.db, search.collection)
            return _ranked(service, search)
    return service.search_action(c.raw, _searcher(c.caller))


def _ranked(service: QueryService, search: Search) -> HybridReply:
    with searched_as_hybrid():
        return hybrid_search(service, checked(search.as_hybrid()))


def _searcher(caller: Caller) -> Callable[[str, str], None] | None:
    """The search privilege check for ``caller`` (none for a superuser: the hot path)."""
    if caller.superuser:
        return None
    return lambda db, collection: caller.require(Need("Search", db or DEFAULT_DB, collection))


operation(
    Search,
    "Vector search. Body: collection, data (list of vectors) or ids (primary keys whose "
    "stored vectors are the queries), anns_field, limit, offset, "
    "filter, filter_params, output_fields, search_params (metric_type, radius, "
    "range_filter, params), group_by_field, group_size, strict_group_size, ranker (a "
    "function ranker: input_field_names, params with reranker decay|rrf|weighted), "
    "highlighter (a lexical highlighter: pre_tags, post_tags, fragment_offset, "
    "fragment_size, num_of_fragments, highlight_search_text, highlight_query), "
    "consistency_level, guarantee_timestamp, session_ts, as_of, partition_names. "
    "Result: results (per query: id, distance, entity; highlight with a highlighter), ts.",
    privilege="Search",
    rate=Kind.DQL,
    run=_run_search,
    self_checked=True,  # the executor checks and authorises: it reuses plans by body shape
)


def _run_query(c: OpCall[Query]) -> QueryReply:
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


def _run_hybrid(c: OpCall[HybridSearch]) -> HybridReply:
    return hybrid_search(c.proxy.query, c.request)


operation(
    HybridSearch,
    "Several ANN searches fused into one ranking. Body: collection, reqs (each: data or "
    "ids, anns_field, param or search_params, limit, filter, filter_params), ranker (strategy "
    "rrf|weighted, params), limit, offset, output_fields, group_by_field, group_size, "
    "strict_group_size, consistency_level, guarantee_timestamp, session_ts, as_of, "
    "partition_names. "
    "Result: results (per query: id, distance = fused score, entity), ts.",
    privilege="Search",
    rate=Kind.DQL,
    run=_run_hybrid,
)


def _run_read_plan(c: OpCall[PlanRead]) -> ReadPlanReply:
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
