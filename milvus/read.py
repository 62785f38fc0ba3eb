"""Search and Query: the request is checked as the ``search`` / ``query`` actions check
theirs (plus what only Milvus's request carries: its placeholder group, ``nq``,
``round_decimal``, the query result window), then runs where DoExchange and DoGet run
(``QueryService.prepare_search`` / ``run_search``, ``query_table``), so hits and rows stay
Arrow until they become columnar ``FieldData``."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus import bfloat16
from elanus.errors import invalid
from elanus.flight.limits import Kind
from elanus.flight.search import AggregatePlan, aggregate_plan, is_aggregate
from elanus.flight.search.highlight import field_terms
from elanus.flight.search.hits import hits_table
from elanus.milvus.fielddata import from_arrow, ids_of, sparse_to_arrow
from elanus.milvus.fields import check
from elanus.milvus.highlight import highlight_results, highlighter_of
from elanus.milvus.honoured_reads import PLACEHOLDER_GROUP
from elanus.milvus.params import (
    consistency_of,
    group_options,
    int_param,
    json_param,
    kv_values,
    templates,
    truthy,
)
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.milvus.walks import Walks, advance, page_request
from elanus.ops import checked
from elanus.ops.reads import Query
from elanus.ops.search import MAX_NQ, MAX_TOPK, Search
from elanus.outputs import COUNT
from elanus.privileges import Need
from elanus.schema import DYNAMIC_FIELD, DataType, Field, Schema

_PH = common_pb2.PlaceholderType
_WIDTHS = {_PH.FloatVector: 4, _PH.Float16Vector: 2, _PH.BFloat16Vector: 2, _PH.BinaryVector: 1}
"""Bytes per value of each dense query-vector type."""
MAX_ROUND_DECIMAL = 6
"""Milvus rounds distances to -1 (not at all) or 0 to 6 decimals."""
PLACEHOLDER = [[0.0]]
"""Stands for a request's query vectors while it is checked; the real ones are decoded
from its placeholder group afterwards (no JSON round trip for vectors), or are the stored
vectors of the primary keys in its ``ids``."""


def search_record(ctx: Ctx, request: Any, params: dict[str, Any]) -> Search:
    """The Elanus ``search`` (without ``data``, unchecked) of a Milvus ``SearchRequest``
    whose ``search_params`` are ``params``; an iterator's page reads at its first's
    timestamp (``pinned``)."""
    index_params = json_param(params.get("params") or {}, "search_params 'params'")
    search_params: dict[str, Any] = {"params": index_params}
    if params.get("metric_type"):
        search_params["metric_type"] = params["metric_type"]
    return Search(
        db=ctx.db,
        collection=request.collection_name,
        limit=page_size(params),
        offset=int_param(params, "offset", 0),
        filter=request.dsl or None,
        filter_params=templates(request.expr_template_values),
        output_fields=list(request.output_fields),
        search_params=search_params,
        partition_names=list(request.partition_names) or None,
        anns_field=params.get("anns_field") or None,
        **group_options(params),
        **pinned(consistency_of(request), request, params),
    )


def page_size(params: dict[str, Any]) -> int:
    """The hits a search returns: ``topk``, or an iterator v2's ``search_iter_batch_size``
    (Milvus pages by the batch size; pymilvus sends both, equal)."""
    if truthy(params.get("search_iter_v2")) and params.get("search_iter_batch_size"):
        return int_param(params, "search_iter_batch_size", 10)
    return int_param(params, "topk", 10)


def same_collection(params: dict[str, Any], collection_id: int, rpc: str) -> None:
    """An iterator's ``collection_id`` must still be the named collection's, as Milvus
    checks: else the name (an alias, a database) now means another collection."""
    if params.get("collection_id") in (None, ""):
        return
    given = int_param(params, "collection_id", 0)
    if given > 0 and given != collection_id:
        raise invalid(
            f"{rpc}: collection_id {given} is not the id of the collection named "
            f"({collection_id}); the name, an alias or the database has changed"
        )


def round_decimal(params: dict[str, Any]) -> int:
    """The ``round_decimal`` of a search's (or a rank's) parameters: -1 or 0 to 6."""
    n = int_param(params, "round_decimal", -1)
    if not -1 <= n <= MAX_ROUND_DECIMAL:
        raise invalid(
            f"round_decimal {n} is out of range: -1 (no rounding) or 0 to {MAX_ROUND_DECIMAL}"
        )
    return n


def query_data(request: Any) -> Any:
    """The query vectors of a ``SearchRequest``'s placeholder group, as numpy rows where
    they are dense (one ``frombuffer`` over all of them), sparse maps, or texts (BM25);
    their number checked against ``nq`` (when sent) and Milvus's limit."""
    group = common_pb2.PlaceholderGroup()
    try:
        group.ParseFromString(request.placeholder_group)
    except DecodeError:
        raise invalid("search: placeholder_group is not a PlaceholderGroup message") from None
    check(group, PLACEHOLDER_GROUP, "search: placeholder_group")
    if len(group.placeholders) != 1:
        raise invalid("search: send one placeholder of query vectors in placeholder_group")
    ph = group.placeholders[0]
    values = list(ph.values)
    nq = request.nq or len(values)
    if not 1 <= nq <= MAX_NQ:
        raise invalid(f"search: nq {nq} is out of range [1, {MAX_NQ}] (query vectors)")
    if nq != len(values):
        raise invalid(f"search: nq is {nq}, but the placeholder holds {len(values)} query vectors")
    kind = ph.type
    if kind == _PH.VarChar:
        return _texts(values)
    if kind == _PH.SparseFloatVector:
        return sparse_to_arrow(values).to_pylist()
    width = _WIDTHS.get(kind)
    if width is None:
        label = _PH.Name(kind) if kind in _PH.values() else kind
        raise invalid(f"search: query vectors of type {label} are not supported")
    size = len(values[0])
    if any(len(v) != size for v in values):
        raise invalid("search: the query vectors have different lengths")
    if not size or size % width:
        raise invalid(
            f"search: a query vector of {size} bytes is not a whole number of "
            f"{_PH.Name(kind)} values ({width} bytes each)"
        )
    raw = b"".join(values)
    if kind == _PH.BinaryVector:
        return np.frombuffer(raw, dtype=np.uint8).reshape(len(values), -1)
    if kind == _PH.FloatVector:
        flat = np.frombuffer(raw, dtype=np.float32)
    elif kind == _PH.Float16Vector:
        flat = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
    else:
        flat = bfloat16.widen(np.frombuffer(raw, dtype=np.uint16))
    return flat.reshape(len(values), -1)


def request_ids(request: Any, pk: Field) -> list[Any] | None:
    """The primary keys of a search by keys (``ids``), None for a search by vectors; in
    Milvus's words where it refuses them (one or the other, of the key's type, ``nq``)."""
    if not request.HasField("ids"):
        if request.search_by_primary_keys:
            raise invalid("search: search_by_primary_keys needs the primary keys in ids")
        return None
    if request.placeholder_group:
        raise invalid("search: Either ids or data must be provided, not both")
    kind = request.ids.WhichOneof("id_field")
    ids = list(getattr(request.ids, kind).data) if kind else []
    if not ids:
        raise invalid("search: `ids` value [] is illegal")
    if (kind == "int_id") != (pk.dtype is DataType.INT64):
        key = "int64" if pk.dtype is DataType.INT64 else "varchar"
        raise invalid(f"search: primary key is {key}, but IDs type mismatch")
    if request.nq and request.nq != len(ids):
        raise invalid(f"search: nq is {request.nq}, but ids holds {len(ids)} primary keys")
    if len(ids) > MAX_NQ:
        raise invalid(f"search: nq {len(ids)} is out of range [1, {MAX_NQ}] (primary keys)")
    return ids


def _texts(values: list[bytes]) -> list[str]:
    try:
        return [v.decode() for v in values]
    except UnicodeDecodeError:
        raise invalid("search: a query text is not UTF-8") from None


def result_columns(
    table: pa.Table, names: list[str], schema: Schema, rename: dict[str, str]
) -> list[Any]:
    """``FieldData`` for the output ``names`` from an Arrow table of rows: schema fields,
    and ``$meta`` (dynamic keys) once if any name is not a field."""
    fields = {f.name: f for f in schema.fields}
    out, seen = [], set()
    for name in names:
        column = rename.get(name, name)
        if name in fields and column in table.column_names:
            out.append(from_arrow(table.column(column), fields[name], name))
            seen.add(name)
    if DYNAMIC_FIELD in table.column_names and any(n not in fields for n in names):
        out.append(from_arrow(table.column(DYNAMIC_FIELD), None, DYNAMIC_FIELD))
    return out


def results_data(
    table: pa.Table, nq: int, top_k: int, outputs: list[str], schema: Schema, round_decimal: int
) -> Any:
    """``SearchResultData`` from hits as Arrow rows (``query_index``, ``id``, ``distance``
    and output columns, queries in order, each best first)."""
    pk = schema.primary
    scores = table.column("distance").to_numpy()
    if round_decimal >= 0:
        scores = np.round(scores.astype(np.float64), round_decimal)
    return schema_pb2.SearchResultData(
        num_queries=nq,
        top_k=top_k,
        fields_data=result_columns(table, outputs, schema, {pk.name: "id"}),
        scores=scores.tolist(),
        ids=ids_of(table.column("id"), pk),
        topks=np.bincount(table.column("query_index").to_numpy(), minlength=nq).tolist(),
        output_fields=outputs,
        primary_field_name=pk.name,
    )


def aggregate_columns(table: pa.Table, plan: AggregatePlan, schema: Schema) -> list[Any]:
    """An aggregating query's reply: group keys as their fields, aggregates as computed
    columns typed as Milvus types them (counts Int64, averages Double)."""
    computed = {a.name: a.result_field() for a in plan.aggregates}
    return [
        from_arrow(table.column(n), computed.get(n) or schema.field(n), n) for n in plan.outputs
    ]


def pinned(keys: dict[str, Any], request: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A read's consistency keys (``consistency_of``'s); an iterator's page reads at the
    timestamp of its first page, which pymilvus sends as the guarantee timestamp (Milvus
    reads an iterator's pages at it)."""
    if truthy(params.get("iterator")) and request.guarantee_timestamp > 1:
        keys = {k: v for k, v in keys.items() if k not in ("consistency_level",)}
        keys["as_of"] = keys.pop("guarantee_timestamp")
    return keys


def query_window(request: Any, params: dict[str, Any]) -> tuple[int | None, int]:
    """A query's (limit, offset) within Milvus's result window (offset + limit at most
    16384); with no filter, a limit is needed unless the query counts rows (as Milvus)."""
    limit = int_param(params, "limit", 0) if params.get("limit") not in (None, "") else None
    offset = int_param(params, "offset", 0)
    if offset < 0 or (limit is not None and (limit < 0 or not 0 < limit + offset <= MAX_TOPK)):
        raise invalid(
            f"Query: limit ({limit}) and offset ({offset}) must be at least 0 and add up to "
            f"1 to {MAX_TOPK} (Milvus's query result window)"
        )
    if params.get("order_by_fields") and truthy(params.get("iterator")):
        raise invalid("Query: a query iterator pages in primary-key order; drop order_by_fields")
    grouped = params.get("group_by_fields") or any(map(is_aggregate, request.output_fields))
    if limit is None and not request.expr and COUNT not in request.output_fields and not grouped:
        raise invalid("Query: an empty expr needs a limit in query_params (or count(*))")
    return limit, offset


class ReadRpcs(Servicer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.walks = Walks()

    @served(Kind.DQL)
    def Search(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        if request.function_score.functions:
            return self.reranked_search(ctx, request)
        params = kv_values(request.search_params)
        search = checked(dataclasses.replace(search_record(ctx, request, params), data=PLACEHOLDER))
        ctx.caller.require(Need("Search", search.db, search.collection))
        query = self.proxy.query
        info = self.proxy.dbgate.read_collection(search.db, search.collection)
        same_collection(params, info.collection_id, "Search")
        plan = query.prepare_search(info, search)
        walk = None
        if truthy(params.get("search_iter_v2")):
            token, walk = self.walks.get(
                params.get("search_iter_id") or None, params.get("search_iter_last_bound")
            )
            page = page_request(search, info.schema.primary.name, plan.metric, walk)
            plan = query.prepare_search(info, page)
        ids = request_ids(request, info.schema.primary)
        highlighter = highlighter_of(request)
        if ids is None:
            data = query_data(request)
            nq, queries = len(data), query.search_data(plan, data)
        else:
            data, nq = None, len(ids)
            plan, queries = query.keyed_search_data(plan, ids)
        marked = [] if highlighter is None else field_terms(plan, highlighter, data)
        merged, ts = query.run_search(plan, queries)
        pk = info.schema.primary
        table = hits_table(merged, pk.arrow_type())
        outputs = [n for n in plan.outputs if n != COUNT]
        results = results_data(table, nq, search.top, outputs, info.schema, round_decimal(params))
        if highlighter is not None:
            results.highlight_results.extend(
                highlight_results(query, info, highlighter, marked, table, ts)
            )
        if walk is not None:
            bound = advance(
                walk,
                table.column("id").to_pylist(),
                table.column("distance").to_pylist(),
                plan.metric,
            )
            results.search_iterator_v2_results.token = token
            results.search_iterator_v2_results.last_bound = bound
        return milvus_pb2.SearchResults(
            status=ok(), results=results, collection_name=info.name, session_ts=ts
        )

    @served(Kind.DQL)
    def Query(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        params = kv_values(request.query_params)
        limit, offset = query_window(request, params)
        group_by = params.get("group_by_fields")
        order_by = params.get("order_by_fields")
        query = checked(
            Query(
                db=ctx.db,
                collection=request.collection_name,
                filter=request.expr or None,
                output_fields=list(request.output_fields),
                group_by_fields=[g.strip() for g in group_by.split(",")] if group_by else None,
                order_by_fields=order_by.split(",") if order_by else None,
                limit=limit,
                offset=offset,
                filter_params=templates(request.expr_template_values),
                partition_names=list(request.partition_names) or None,
                **pinned(consistency_of(request), request, params),
            )
        )
        ctx.caller.require(Need("Query", query.db, query.collection))
        info = self.proxy.dbgate.read_collection(query.db, query.collection)
        same_collection(params, info.collection_id, "Query")
        table, outputs, ts = self.proxy.query.query_table(info, query)
        pk = info.schema.primary.name
        grouping = aggregate_plan(info, query.outputs, query.groups)
        if grouping is not None:
            columns = aggregate_columns(table, grouping, info.schema)
        elif COUNT in outputs:
            columns = [from_arrow(table.column(COUNT), None, COUNT)]
        else:
            if pk not in outputs:
                outputs = [pk, *outputs]
            columns = result_columns(table, outputs, info.schema, {})
        return milvus_pb2.QueryResults(
            status=ok(),
            fields_data=columns,
            collection_name=info.name,
            output_fields=outputs,
            session_ts=ts,
            primary_field_name=pk,
        )
