"""HybridSearch: Milvus's request as the ``hybrid_search`` action's record (checked as its
body is), the query vectors of each sub-request decoded from their placeholders, fused by
the same code (``fused_hits``), outputs fetched as Arrow and returned as columnar
``FieldData``."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from elanus.errors import invalid
from elanus.flight.limits import Kind
from elanus.flight.search.hybrid import fetch_outputs, fused_hits, searched_as_hybrid
from elanus.milvus.params import consistency_of, group_options, int_param, kv_values
from elanus.milvus.read import (
    PLACEHOLDER,
    pinned,
    query_data,
    request_ids,
    results_data,
    round_decimal,
    search_record,
)
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import checked
from elanus.ops import search as ops
from elanus.privileges import Need
from elanus.rankers import Hit

_RANK_KEYS = ("strategy", "params")


def hybrid_record(ctx: Ctx, request: Any, params: dict[str, Any]) -> ops.HybridSearch:
    """The ``hybrid_search`` (unchecked, vectors left out) of a ``HybridSearchRequest``
    whose ``rank_params`` are ``params``."""
    reqs = []
    for sub in request.requests:
        one = search_record(ctx, sub, kv_values(sub.search_params))
        reqs.append(
            ops.SubSearch(
                data=PLACEHOLDER,
                anns_field=one.anns_field,
                search_params=one.search_params,
                limit=one.limit,
                filter=one.filter,
                filter_params=one.filter_params or None,
            )
        )
    function = function_score_body(request.function_score)
    return ops.HybridSearch(
        db=ctx.db,
        collection=request.collection_name,
        reqs=reqs,
        ranker=function or {k: params[k] for k in _RANK_KEYS if k in params} or None,
        limit=int_param(params, "limit", 10),
        offset=int_param(params, "offset", 0),
        output_fields=list(request.output_fields),
        partition_names=list(request.partition_names) or None,
        **group_options(params),
        **pinned(consistency_of(request), request, params),
    )


def function_score_body(score: Any) -> dict[str, Any] | None:
    """A ``FunctionScore`` as the Flight ranker body: its one function, or all of them
    with its params (``elanus.rerankers`` runs several when all are boost); parameter
    values stay strings, which the rankers parse as Milvus does. None when it is empty."""
    if not score.functions:
        if score.params:
            raise invalid("function_score: params without a rerank function")
        return None
    bodies = []
    for function in score.functions:
        if function.type != schema_pb2.FunctionType.Rerank:
            raise invalid(f"function_score: function {function.name!r} is not a rerank function")
        bodies.append(
            {
                "name": function.name,
                "input_field_names": list(function.input_field_names),
                "params": {kv.key: kv.value for kv in function.params},
            }
        )
    if len(bodies) == 1 and not score.params:
        return bodies[0]
    return {"functions": bodies, "params": {kv.key: kv.value for kv in score.params}}


def hits_as_table(
    hits: list[list[Hit]], pk_type: pa.DataType, fetched: pa.Table | None, pk: str
) -> pa.Table:
    """Fused hits as the Arrow rows ``results_data`` takes, output columns joined by key."""
    counts = [len(q) for q in hits]
    table = pa.table(
        {
            "query_index": pa.array(np.repeat(np.arange(len(hits)), counts).astype(np.int32)),
            "id": pa.array([key for q in hits for key, _ in q], pk_type),
            "distance": pa.array([s for q in hits for _, s in q], pa.float32()),
        }
    )
    if fetched is None or not fetched.num_rows:
        return table
    picked = fetched.take(pc.index_in(table.column("id"), fetched.column(pk)))
    for name in picked.column_names:
        if name != pk:
            table = table.append_column(name, picked.column(name))
    return table


class HybridRpcs(Servicer):
    @served(Kind.DQL)
    def HybridSearch(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        params = kv_values(request.rank_params)
        return self._fused(ctx, hybrid_record(ctx, request, params), list(request.requests), params)

    def reranked_search(self, ctx: Ctx, request: Any) -> Any:
        """A Search with a ``function_score``: a hybrid search of its one request, as
        Milvus reranks ``limit + offset`` candidates per query and cuts the window after."""
        if request.HasField("highlighter"):
            raise invalid("Search: Elanus highlights a search without a function_score only")
        params = kv_values(request.search_params)
        search = dataclasses.replace(
            search_record(ctx, request, params),
            data=PLACEHOLDER,
            ranker=function_score_body(request.function_score),
        )
        with searched_as_hybrid("Search"):
            return self._fused(ctx, search.as_hybrid(), [request], params)

    def _fused(self, ctx: Ctx, hybrid: ops.HybridSearch, protos: list[Any], params: Any) -> Any:
        """Check and run a hybrid search whose requests' vectors are ``protos``'."""
        hybrid = checked(hybrid)
        ctx.caller.require(Need("Search", hybrid.db, hybrid.collection))
        service = self.proxy.query
        info = self.proxy.dbgate.read_collection(hybrid.db, hybrid.collection)
        searches: list[ops.Search] = []
        for sub, proto in zip(hybrid.searches, protos, strict=True):
            ids = request_ids(proto, info.schema.primary)
            if ids is None:
                searches.append(dataclasses.replace(sub, data=query_data(proto)))
            else:
                searches.append(dataclasses.replace(sub, data=None, ids=ids))
        outputs, hits, ts = fused_hits(service, info, hybrid, searches)
        pk = info.schema.primary
        keys = [key for q in hits for key, _ in q]
        fetched = fetch_outputs(service, info, outputs, keys, ts) if outputs and keys else None
        table = hits_as_table(hits, pk.arrow_type(), fetched, pk.name)
        results = results_data(
            table,
            len(hits),
            hybrid.top,
            outputs,
            info.schema,
            round_decimal(params),
        )
        return milvus_pb2.SearchResults(
            status=ok(), results=results, collection_name=info.name, session_ts=ts
        )
