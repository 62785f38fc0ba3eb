"""HybridSearch: Milvus's request as the ``hybrid_search`` action's body (checked by it),
the query vectors of each sub-request decoded from their placeholders, fused by the same
code (``fused_hits``), outputs fetched as Arrow and returned as columnar ``FieldData``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from elanus.errors import invalid
from elanus.flight.actions import check_body
from elanus.flight.limits import Kind
from elanus.flight.search.hybrid import (
    fetch_outputs,
    fused_hits,
    search_as_hybrid,
    searched_as_hybrid,
)
from elanus.milvus.params import consistency_of, group_options, int_param, kv_values
from elanus.milvus.read import (
    pinned,
    query_data,
    request_ids,
    results_data,
    round_decimal,
    search_body,
)
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.privileges import Need
from elanus.rankers import Hit

_RANK_KEYS = ("strategy", "params")
_PLACEHOLDER = [[0.0]]
"""Stands for a sub-request's vectors while the body is checked; the real ones are
decoded from its placeholder group afterwards (no JSON round trip for vectors), or are
the stored vectors of the primary keys in its ``ids``."""


def hybrid_body(ctx: Ctx, request: Any) -> dict[str, Any]:
    """The ``hybrid_search`` body of a ``HybridSearchRequest`` (vectors left out)."""
    rank = kv_values(request.rank_params)
    reqs = []
    for sub in request.requests:
        one = search_body(ctx, sub)
        reqs.append(
            {
                "data": _PLACEHOLDER,
                "anns_field": one.get("anns_field"),
                "search_params": one["search_params"],
                "limit": one["limit"],
                "filter": one.get("filter"),
                "filter_params": one.get("filter_params") or None,
            }
        )
    function = function_score_body(request.function_score)
    body: dict[str, Any] = {
        "db": ctx.db,
        "collection": request.collection_name,
        "reqs": [{k: v for k, v in r.items() if v is not None} for r in reqs],
        "ranker": function or {k: rank[k] for k in _RANK_KEYS if k in rank} or None,
        "limit": int_param(rank, "limit", 10),
        "offset": int_param(rank, "offset", 0),
        "output_fields": list(request.output_fields),
        **consistency_of(request),
        "partition_names": list(request.partition_names) or None,
    }
    body.update(group_options(rank))
    return {k: v for k, v in body.items() if v is not None}


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
        body = pinned(hybrid_body(ctx, request), request, params)
        return self._fused(ctx, body, list(request.requests), params)

    def reranked_search(self, ctx: Ctx, request: Any) -> Any:
        """A Search with a ``function_score``: a hybrid search of its one request, as
        Milvus reranks ``limit + offset`` candidates per query and cuts the window after."""
        if request.HasField("highlighter"):
            raise invalid("Search: Elanus highlights a search without a function_score only")
        params = kv_values(request.search_params)
        body = pinned(search_body(ctx, request), request, params)
        body["data"] = _PLACEHOLDER
        body["ranker"] = function_score_body(request.function_score)
        with searched_as_hybrid("Search"):
            return self._fused(ctx, search_as_hybrid(body), [request], params)

    def _fused(self, ctx: Ctx, body: dict[str, Any], protos: list[Any], params: Any) -> Any:
        """Check and run a ``hybrid_search`` body whose requests' vectors are ``protos``'."""
        _, checked = check_body("hybrid_search", body)
        ctx.caller.require(Need("Search", checked["db"], checked["collection"]))
        service = self.proxy.query
        info = self.proxy.dbgate.read_collection(checked["db"], checked["collection"])
        for sub, proto in zip(checked["reqs"], protos, strict=True):
            ids = request_ids(proto, info.schema.primary)
            if ids is None:
                sub["data"] = query_data(proto)
            else:
                sub["data"], sub["ids"] = None, ids
        outputs, hits, ts = fused_hits(service, info, checked)
        pk = info.schema.primary
        keys = [key for q in hits for key, _ in q]
        fetched = fetch_outputs(service, info, outputs, keys, ts) if outputs and keys else None
        table = hits_as_table(hits, pk.arrow_type(), fetched, pk.name)
        results = results_data(
            table,
            len(hits),
            checked["limit"],
            outputs,
            info.schema,
            round_decimal(params),
        )
        return milvus_pb2.SearchResults(
            status=ok(), results=results, collection_name=info.name, session_ts=ts
        )
