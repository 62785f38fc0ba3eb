"""Search and query in the proxy (seed 000 §6.4; DESIGN.md, read path).

The proxy checks the request, turns the consistency level into a guarantee timestamp,
asks the delegator of every vchannel (they wait for their tsafe, search growing data and
fan out to workers), then reduces across shards and shapes the answer.

Consistency levels set the guarantee: Strong a fresh TSO timestamp, after asking the coord
for an immediate tick; Bounded the staleness bound; Session the caller's own last write
(``guarantee_timestamp``); Eventually nothing. A read that names no level takes the
collection's, raised to ``session_ts`` when the caller sends one (the Elanus SDK sends its
newest write, so a client reads its own writes; Milvus's face never does). Each delegator
reads at its tsafe once that passes the guarantee. ``as_of`` reads at an earlier timestamp
(time travel) inside the retention window.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import pyarrow as pa

from elanus import bfloat16
from elanus.api.base import Call, ask_many_sync
from elanus.api.indexcoord import DescribeIndex, IndexDescription
from elanus.api.querycoord import NodeUnreachable, QueryRoute, Route
from elanus.api.querynode import QueryNodeAPI, ReadShard, SearchShard, ShardHits
from elanus.channels.runtime.metrics import PROXY_FAILOVERS
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.expr.keypins import read_partitions
from elanus.flight.metacache import CollectionInfo
from elanus.flight.registry import check_request
from elanus.flight.search.aggregate import aggregate, aggregate_plan, is_aggregate
from elanus.flight.search.bodies import check_query_ids
from elanus.flight.search.bykeys import keyed_queries
from elanus.flight.search.check import (
    SearchIndexes,
    check_filter,
    check_index_params,
    check_range,
    group_field,
    resolve_metric,
)
from elanus.flight.search.highlight import add_highlights
from elanus.flight.search.hits import shape_hits, widened
from elanus.flight.search.order import order_keys
from elanus.flight.search.plan import SearchPlan, SearchPlans
from elanus.flight.search.readtime import ReadTimes
from elanus.flight.search.text import METRIC as TEXT_METRIC
from elanus.flight.search.text import (
    check_text_params,
    not_text,
    query_texts,
    text_function,
    text_metric,
    text_request,
)
from elanus.flight.search.vectors import query_vectors
from elanus.grouping import reduce_grouped
from elanus.newestrow import newest_rows
from elanus.ops.reads import Query, QueryReply
from elanus.ops.search import Search, SearchOptions, SearchReply, check_data, split_search_params
from elanus.outputs import (
    COUNT,
    entity,
    json_fields,
    resolve_outputs,
    stored_columns,
    with_primary_first,
)
from elanus.partitionkey import partition_name_refused
from elanus.reduce import reduce_parts
from elanus.schema import TIMESTAMP_FIELD, Field
from elanus.searchrequest import SearchRequest
from elanus.wire.bodyshape import body_objects, check_body_shape

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.channels.bus import Bus
    from elanus.flight import ports
    from elanus.settings import Settings

log = logging.getLogger(__name__)
R = TypeVar("R")

SEARCH_TIMEOUT_S = 120.0
UNREACHABLE_WAIT_S = 5.0
"""How long a read waits for the coord to place again the replicas of nodes it found gone."""
ROUTE_TTL_S = 1.0
"""How long a collection's route (vchannel → query node) is reused before it is asked for
again, in the background; a stale one only costs a fall back to the ordinary path, which
asks at once."""
FAILOVER = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT, ErrorCode.COLLECTION_NOT_LOADED})
"""A replica whose delegator answers this (its node gone, stuck, or no longer serving the
vchannel) is passed over at once for the next one."""
STALE_ROUTE = frozenset({ErrorCode.COLLECTION_NOT_LOADED, ErrorCode.UNAVAILABLE})
"""When every replica of a cached route failed so, the route is asked for again, once."""


class QueryService:
    """Search, query and count, given what they use (``flight/ports.py``), never the proxy."""

    def __init__(
        self,
        *,
        loop: ports.LoopBridge,
        coord: CoordAPI,
        bus: Bus,
        settings: Settings,
        collections: ports.CollectionLookup,
        gate: ports.ReadGate,
        clock: ports.TsoClock,
        cache: ports.CacheGeneration,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.bus = bus
        """The query nodes' bus (hybrid search and full-text statistics ask them too)."""
        self.settings = settings
        self.collections = collections
        self.gate = gate
        self.clock = clock
        self.cache = cache
        self.times = ReadTimes(loop=loop, coord=coord, clock=clock, settings=settings)
        self._routes: dict[int, tuple[float, Route]] = {}
        self._refreshing: set[int] = set()
        self.plans = SearchPlans()
        self.indexes = SearchIndexes(self._index_entries)
        self._nodes: dict[str, QueryNodeAPI] = {}
        self._turn = itertools.count()
        """Reads take the replicas in turn (round robin)."""

    def _index_entries(self, collection_id: int) -> list[IndexDescription]:
        described = self.loop.run(
            self.coord.index.describe(DescribeIndex(collection_id=collection_id))
        )
        return described.indexes

    def _info(self, request: SearchOptions) -> CollectionInfo:
        return self.gate.read_collection(request.db, request.collection)

    def partition_ids(
        self,
        info: CollectionInfo,
        names: list[str] | None,
        text: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> list[int] | None:
        """The partitions a read visits (None: all): those named, or in a partition key
        collection those of the key values the filter ``text`` pins (Milvus's pruning)."""
        key = info.schema.partition_key
        if key is not None:
            if names:
                raise partition_name_refused(info.name, key, "a search or query")
            return read_partitions(info.schema, info.partitions, info.name, text, params)
        if not names:
            return None
        return [self.collections.partition_id(info, n) for n in names]

    def forget_route(self, collection_id: int) -> None:
        """A load or release changes where the collection is served: ask again next time."""
        self._routes.pop(collection_id, None)

    # -- shared pieces ----------------------------------------------------------------------
    def route(self, info: CollectionInfo, partition_ids: list[int] | None) -> dict[str, str]:
        """vchannel -> query node serving its delegator, in the first serving replica: the
        one a read plan's tickets go to, as its plan did (``fan_out(spread=False)``)."""
        return self._route(info, partition_ids).replicas[0]

    def _route(self, info: CollectionInfo, partition_ids: list[int] | None) -> Route:
        """The collection's route (cached for ``ROUTE_TTL_S``); refuses a read of
        ``partition_ids`` that are not all loaded."""
        cid = info.collection_id
        cached = self._routes.get(cid)
        now = time.monotonic()
        if cached is None or cached[0] + ROUTE_TTL_S <= now:
            route = self.loop.run(self.coord.query.route(QueryRoute(collection_id=cid)))
            self._routes[cid] = (now + ROUTE_TTL_S, route)
        else:
            expiry, route = cached
            if expiry <= now and cid not in self._refreshing:
                # A busy collection's route is renewed in the background, used meanwhile for
                # up to one more TTL: a search waited on the coord once a second before.
                self._refreshing.add(cid)
                self.loop.spawn(self._refresh_route(cid))
        loaded = route.partition_ids
        if partition_ids and loaded is not None:
            missing = sorted(set(partition_ids) - set(loaded))
            if missing:
                names = [n for n, p in info.partitions.items() if p in missing]
                raise ElanusError(
                    ErrorCode.COLLECTION_NOT_LOADED,
                    f"partition(s) {', '.join(names)} of {info.name!r} are not loaded",
                )
        if not route.replicas:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED, f"no replica of {info.name!r} is serving"
            )
        return route

    def fan_out(
        self,
        info: CollectionInfo,
        partition_ids: list[int] | None,
        call: Callable[[QueryNodeAPI, str], Call[R]],
        spread: bool = True,
    ) -> list[R]:
        """One call to the delegator of every shard (``call(node, vchannel)``), all at once
        (``ask_many_sync``: one deadline, every reply or the first failure), in one replica:
        the next in turn, or with ``spread`` off the first (``route``'s). A replica that
        fails (``FAILOVER``) is passed over at once for the next one, counted in
        ``PROXY_FAILOVERS``; when all failed, a cached route that has gone stale is asked
        for again, once. Query nodes found gone on the way are reported to the coord
        first, which places their replicas again before it answers (``node_unreachable``):
        without replicas, a node's death costs a read the placement, not a session TTL."""
        for attempt in (0, 1):
            unreachable: set[str] = set()
            try:
                replicas = self._route(info, partition_ids).replicas
                first = next(self._turn) if spread else 0
                return self._first_answering(replicas, call, first, unreachable)
            except ElanusError as exc:
                if attempt or exc.code not in STALE_ROUTE:
                    raise in_shard_words(info, exc) from None
                self._routes.pop(info.collection_id, None)
                if unreachable:
                    self._report_unreachable(unreachable)
        raise AssertionError("unreachable")

    def _first_answering(
        self,
        replicas: list[dict[str, str]],
        call: Callable[[QueryNodeAPI, str], Call[R]],
        first: int,
        unreachable: set[str],
    ) -> list[R]:
        """The first replica's answers; the nodes of replicas that were UNAVAILABLE go
        into ``unreachable``."""
        for i in range(len(replicas)):
            shards = replicas[(first + i) % len(replicas)]
            calls = [call(self.node(node), v) for v, node in shards.items()]
            try:
                return ask_many_sync(self.bus, calls, SEARCH_TIMEOUT_S)
            except ElanusError as exc:
                if exc.code == ErrorCode.UNAVAILABLE:
                    unreachable.update(shards.values())
                if exc.code not in FAILOVER or i + 1 == len(replicas):
                    raise
                function = calls[0].method.replace(".", "_") if calls else "read"
                PROXY_FAILOVERS.labels(function).inc()
                log.info("%s failed over to another replica: %s", function, exc.message)
        raise AssertionError("unreachable")

    def _report_unreachable(self, nodes: set[str]) -> None:
        """Tell the coord; it probes them and re-places what was theirs (bounded wait: a
        read that failed anyway must not wait long for a coord that is away)."""
        req = NodeUnreachable(node_ids=sorted(nodes))
        try:
            self.loop.run(
                self.coord.query.node_unreachable(req, UNREACHABLE_WAIT_S),
                UNREACHABLE_WAIT_S + 1,
            )
        except Exception as exc:  # noqa: BLE001 - the read's own error is what matters
            log.info("reporting unreachable query nodes %s failed: %s", sorted(nodes), exc)

    def node(self, node_id: str) -> QueryNodeAPI:
        """The stub of a query node's delegators (one per node, made once)."""
        api = self._nodes.get(node_id)
        if api is None:
            api = self._nodes[node_id] = QueryNodeAPI(self.bus, node_id)
        return api

    async def _refresh_route(self, collection_id: int) -> None:
        try:
            route = await self.coord.query.route(QueryRoute(collection_id=collection_id))
            self._routes[collection_id] = (time.monotonic() + ROUTE_TTL_S, route)
        except Exception as exc:  # noqa: BLE001 - the next search asks again, and says why
            log.debug("route of collection %d not refreshed: %s", collection_id, exc)
            self._routes.pop(collection_id, None)
        finally:
            self._refreshing.discard(collection_id)

    def _search_shards(self, info: CollectionInfo, req: SearchRequest) -> list[ShardHits]:
        """Every delegator's answer. Delegators in this process run on this Flight thread
        (no event-loop hop, no encoding: seed 000 §6.5); others are asked over NATS
        meanwhile."""
        return self.fan_out(
            info,
            req.partition_ids,
            lambda node, v: node.search(SearchShard(vchannel=v, request=req)),
        )

    def _outputs(self, info: CollectionInfo, names: list[Any]) -> list[str]:
        return resolve_outputs(info.schema, info.name, names)

    # -- search -----------------------------------------------------------------------------
    def search_action(
        self, raw: bytes, authorize: Callable[[str, str], None] | None = None
    ) -> SearchReply:
        """The ``search`` action. A request shaped like an earlier one reuses that one's
        checked plan and only has its vectors checked (see ``flight/search/plan.py``).
        ``authorize(db, collection)`` raises if the caller may not search there."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None  # NaN, huge integers, bad JSON: the full check has the words
        plan = shape = None
        if isinstance(body, dict) and body.get("ids") is None:  # by keys: no plan reuse
            had_data = "data" in body
            data = body.pop("data", None)
            key = self.plans.key(body)
            plan = self.plans.get(key, self.cache.generation)
            if had_data:
                body["data"] = data
            # A plan's body had the same objects; data's lists are not walked.
            shape = plan.body_shape if plan is not None and type(data) is list else None
            if shape is None:
                shape = body_objects(body)
            check_body_shape(raw, body, "search body", shape)
        if plan is None:
            request: Search = check_request("search", raw)[1]
            if authorize is not None:
                authorize(request.db, request.collection)
            generation = self.cache.generation  # before the lookup: see SearchPlan
            plan = self.prepare_search(self._info(request), request, generation)
            if request.ids is None and shape is not None:
                self.plans.put(key, dataclasses.replace(plan, body_shape=shape))
            return self._first(plan, request)
        if authorize is not None:
            authorize(plan.info.db, plan.info.name)
        return self._answer(plan, self.search_data(plan, check_data(data)))

    def search(self, request: Search) -> SearchReply:
        """A ``search`` record a face built (checked, authorised): no plan to reuse."""
        return self._first(self.prepare_search(self._info(request), request), request)

    def _first(self, plan: SearchPlan, request: Search) -> SearchReply:
        """The search a plan was just made for, by its vectors or by primary keys."""
        if request.ids is not None:
            return self._answer(*self.keyed_search_data(plan, request.ids))
        return self._answer(plan, self.search_data(plan, request.data))

    def _answer(self, plan: SearchPlan, queries: Any) -> SearchReply:
        merged, read_ts = self.run_search(plan, queries)
        # The metric tells a client which way "farther" lies (search iterators page by it).
        results = shape_hits(merged, plan.outputs, plan.info.schema)
        if plan.highlighter is not None:
            texts = queries if plan.text_fn is not None else None
            add_highlights(self, plan, texts, results, read_ts)
        return {"results": results, "ts": read_ts, "metric_type": plan.metric}

    def prepare_search(
        self,
        info: CollectionInfo,
        request: SearchOptions,
        generation: int = -1,
    ) -> SearchPlan:
        """The parts of a search that do not depend on its vectors, checked."""
        field = self._vector_field(info, request.anns_field)
        params = request.params
        index = self.indexes.of(
            info, field.name, generation if generation >= 0 else self.cache.generation
        )
        radius, range_filter, index_params = split_search_params(params)
        text_fn = text_function(info.schema, field)
        if text_fn is not None:
            metric = text_metric(field, index, params.get("metric_type"))
            index_params = check_text_params(index_params)
            for key, value in ((index.params if index else None) or {}).items():
                if key in ("bm25_k1", "bm25_b"):  # the index's, unless the search sets them
                    index_params.setdefault(key, float(value))
        else:
            metric = resolve_metric(info, field, index, params.get("metric_type"))
            if metric == TEXT_METRIC:
                raise invalid(
                    f"metric BM25 applies only to the output field of a BM25 function; "
                    f"{field.name!r} is not one"
                )
        check_range(metric, radius, range_filter)
        k = request.window
        group = group_field(info, request.group)
        group_size = request.per_group if group else 1
        check_index_params(field, index, index_params, k * group_size)
        outputs = self._outputs(info, request.outputs)
        if COUNT in outputs:
            raise invalid("search cannot output count(*)")
        if group is not None and group.name not in outputs:
            outputs.append(group.name)  # a grouped hit shows its group's value
        text, values = request.filter or None, request.filter_params or {}
        check_filter(info, text, values, search=True)
        node_body = {
            "field": field.name,
            "k": k,
            "metric": metric,
            "filter": text,
            "params": values,
            "output_fields": stored_columns(info.schema, outputs),
            "partition_ids": self.partition_ids(info, request.partition_names, text, values),
            "search_params": index_params,
            "radius": radius,
            "range_filter": range_filter,
            "ttl": info.ttl,
        }
        if group is not None:
            node_body["group_by_field"] = group.name
            node_body["group_size"] = group_size
        if isinstance(request, Search) and request.data is not None:
            request = dataclasses.replace(request, data=None)  # a plan outlives its vectors
        node_request = SearchRequest.from_body(node_body)
        node_request.expr(info.schema)  # parsed once per plan, carried by every request
        return SearchPlan(info, generation, request, field, metric, outputs, node_request, text_fn)

    @staticmethod
    def search_data(plan: SearchPlan, data: Any) -> Any:
        """A search's ``data`` checked against its field: query texts on a BM25 output
        field, else query vectors as segments take them (what ``run_search`` takes)."""
        if plan.text_fn is not None:
            return query_texts(plan.field, plan.text_fn, data)
        not_text(plan.field, data)
        return query_vectors(plan.field, data)

    def keyed_search_data(self, plan: SearchPlan, ids: list[Any]) -> tuple[SearchPlan, Any]:
        """A search by primary keys: (the plan pinned to the timestamp the keys' vectors
        were read at, those vectors as ``search_data`` shapes them; ``bykeys``)."""
        return keyed_queries(self, plan, ids)

    def run_search(self, plan: SearchPlan, queries: Any) -> tuple[dict[str, Any], int]:
        """One search across shards of ``queries`` (``search_data``'s): (merged part, read
        timestamp). Query text on a BM25 output field first gathers the collection's
        statistics (``flight/search/text.py``)."""
        guarantee, ts = self.times.read_at(plan.info, plan.request, plan.read_ts)
        if plan.text_fn is not None:
            req = text_request(self, plan, queries, ts, guarantee)
        else:
            req = plan.node_request.at(queries, ts, guarantee)
        replies = self._search_shards(plan.info, req)
        limit, offset = plan.request.top, plan.request.skip
        if len(replies) == 1 and not offset:  # a delegator's reply is already its top-k
            return widened(replies[0].part), replies[0].ts
        read_ts = max((r.ts for r in replies), default=ts)
        parts = [r.part for r in replies]
        group = plan.node_request.group_by
        if group is not None:
            size = plan.node_request.group_size
            return widened(reduce_grouped(parts, limit, size, plan.metric, group, offset)), read_ts
        return widened(reduce_parts(parts, limit, plan.metric, offset)), read_ts

    def _vector_field(self, info: CollectionInfo, name: str | None) -> Field:
        vectors = info.schema.vector_fields
        if name is None:
            if len(vectors) > 1:
                names = ", ".join(f.name for f in vectors)
                raise invalid(f"collection has several vector fields ({names}): set anns_field")
            return vectors[0]
        for f in vectors:
            if f.name == name:
                return f
        raise invalid(f"anns_field {name!r} is not a vector field of {info.name!r}")

    # -- query ------------------------------------------------------------------------------
    def query(self, info: CollectionInfo, request: Query) -> QueryReply:
        table, outputs, ts = self.query_table(info, request)
        if COUNT in outputs or request.groups or any(map(is_aggregate, outputs)):
            return {"rows": table.to_pylist(), "ts": ts}
        outputs = with_primary_first(outputs, info.schema.primary.name)
        json_names = json_fields(info.schema)
        return {"rows": [entity(r, outputs, json_names) for r in table.to_pylist()], "ts": ts}

    def query_table(
        self, info: CollectionInfo, request: Query, read_ts: int = 0
    ) -> tuple[pa.Table, list[str], int]:
        """Rows of a query as Arrow (stored columns; dynamic fields stay in ``$meta``), read
        at ``read_ts`` if given (``read_at``'s ``pinned``)."""
        pk = info.schema.primary.name
        text, params = request.filter or None, request.filter_params or {}
        if request.ids is not None:
            ids = check_query_ids(list(request.ids), info.schema.primary)
            text, params = f"{pk} in {{__ids}}", {"__ids": ids}
        check_filter(info, text, params)
        grouping = aggregate_plan(info, request.outputs, request.groups)
        outputs = (
            grouping.outputs
            if grouping is not None
            else self._outputs(info, request.outputs or [pk])
        )
        guarantee, ts = self.times.read_at(info, request, read_ts)
        pids = self.partition_ids(info, request.partition_names, text, params)

        def read(v: str, **more: Any) -> ReadShard:
            return ReadShard(
                vchannel=v,
                filter=text,
                params=params,
                guarantee_ts=guarantee,
                ts=ts,
                partition_ids=pids,
                ttl=info.ttl,
                **more,
            )

        if COUNT in outputs and grouping is None:
            counts = self.fan_out(info, pids, lambda node, v: node.count(read(v)))
            total = sum(r.count for r in counts)
            counted = pa.table({COUNT: pa.array([total], pa.int64())})
            return counted, outputs, max(r.ts for r in counts)
        order = order_keys(info, [str(o) for o in request.order_by_fields or ()])
        if order and grouping is not None:
            raise invalid("query: order_by_fields cannot be combined with group_by_fields")
        stored = grouping.columns if grouping else stored_columns(info.schema, outputs)
        columns = stored if pk in stored else [pk, *stored]
        columns += [k for k, _ in order if k not in columns]
        columns += [] if grouping else [TIMESTAMP_FIELD]  # a key's newest row answers
        offset, limit = request.offset or 0, request.limit
        window = None if limit is None or grouping or order else offset + limit
        replies = self.fan_out(
            info,
            pids,
            lambda node, v: node.query(read(v, output_fields=columns, limit=window)),
        )
        table = pa.concat_tables([r.rows for r in replies], promote_options="permissive")
        if grouping is not None:
            return aggregate(table, grouping, offset, limit), outputs, max(r.ts for r in replies)
        table = newest_rows(table, pk, order).slice(offset, limit)
        table = bfloat16.widen_table(table)
        return table, outputs, max(r.ts for r in replies)


def in_shard_words(info: CollectionInfo, exc: ElanusError) -> ElanusError:
    """A query node's error naming a vchannel (``by-dev-dml_3_1002v0``), told as users know
    the thing: a shard of their collection (the vchannel id only where they asked for it,
    ``elanus segments``)."""
    message = exc.message
    for i, vchannel in enumerate(info.vchannels):
        message = message.replace(vchannel, f"shard {i} of {info.name!r}")
    return exc if message == exc.message else ElanusError(exc.code, message)
