"""Search and Query: the request is checked as the ``search`` / ``query`` actions check
theirs, then runs where DoExchange and DoGet run (``QueryService.prepare_search`` /
``run_search``, ``query_table``), so hits and rows stay Arrow until they become columnar
``FieldData``."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus import bfloat16
from elanus.errors import invalid
from elanus.flight.actions import check_request
from elanus.flight.limits import Kind
from elanus.flight.search.bodies import check_search_stream
from elanus.flight.search.hits import hits_table
from elanus.milvus.fielddata import from_arrow, ids_of, sparse_to_arrow
from elanus.milvus.params import group_options, int_param, kv_values, level_of, templates, truthy
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.milvus.walks import Walks, advance, page_request
from elanus.outputs import COUNT
from elanus.privileges import Need
from elanus.schema import DYNAMIC_FIELD, Schema


def search_body(ctx: Ctx, request: Any) -> dict[str, Any]:
    """An Elanus ``search`` body (without ``data``) from a Milvus ``SearchRequest``."""
    params = kv_values(request.search_params)
    index_params = params.get("params") or {}
    if isinstance(index_params, str):
        index_params = orjson.loads(index_params) if index_params else {}
    search_params: dict[str, Any] = {"params": index_params}
    if params.get("metric_type"):
        search_params["metric_type"] = params["metric_type"]
    body: dict[str, Any] = {
        "db": ctx.db,
        "collection": request.collection_name,
        "limit": int_param(params, "topk", 10),
        "offset": int_param(params, "offset", 0),
        "filter": request.dsl or None,
        "filter_params": templates(request.expr_template_values),
        "output_fields": list(request.output_fields),
        "search_params": search_params,
        "consistency_level": level_of(request),
        "guarantee_timestamp": request.guarantee_timestamp or None,
        "partition_names": list(request.partition_names) or None,
    }
    if params.get("anns_field"):
        body["anns_field"] = params["anns_field"]
    body.update(group_options(params))
    return {k: v for k, v in body.items() if v is not None}


def query_data(group_bytes: bytes) -> Any:
    """The query vectors of a ``PlaceholderGroup``, as numpy rows where they are dense
    (one ``frombuffer`` over all of them), sparse maps, or texts (BM25)."""
    group = common_pb2.PlaceholderGroup()
    group.ParseFromString(group_bytes)
    if len(group.placeholders) != 1:
        raise invalid("search: send one placeholder of query vectors")
    ph = group.placeholders[0]
    values = list(ph.values)
    if not values:
        raise invalid("search: no query vectors")
    kind = ph.type
    if kind == common_pb2.PlaceholderType.VarChar:
        return [v.decode() for v in values]
    if kind == common_pb2.PlaceholderType.SparseFloatVector:
        return sparse_to_arrow(values).to_pylist()
    raw = b"".join(values)
    if kind == common_pb2.PlaceholderType.FloatVector:
        flat = np.frombuffer(raw, dtype=np.float32)
    elif kind == common_pb2.PlaceholderType.Float16Vector:
        flat = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
    elif kind == common_pb2.PlaceholderType.BFloat16Vector:
        flat = bfloat16.widen(np.frombuffer(raw, dtype=np.uint16))
    elif kind == common_pb2.PlaceholderType.BinaryVector:
        return np.frombuffer(raw, dtype=np.uint8).reshape(len(values), -1)
    else:
        raise invalid(
            f"search: query type {common_pb2.PlaceholderType.Name(kind)} is not supported"
        )
    dim = len(flat) // len(values)
    if dim * len(values) != len(flat):
        raise invalid("search: the query vectors have different lengths")
    return flat.reshape(len(values), dim)


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


def pinned(body: dict[str, Any], request: Any, params: dict[str, Any]) -> dict[str, Any]:
    """An iterator's page reads at the timestamp of its first page, which pymilvus sends
    as the guarantee timestamp (Milvus reads an iterator's pages at it)."""
    if truthy(params.get("iterator")) and request.guarantee_timestamp > 1:
        body = {k: v for k, v in body.items() if k not in ("consistency_level",)}
        body["as_of"] = body.pop("guarantee_timestamp")
    return body


class ReadRpcs(Servicer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.walks = Walks()

    @served(Kind.DQL)
    def Search(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        if request.sub_reqs or request.search_by_primary_keys:
            raise invalid("Search: sub-requests and search by primary keys are not supported")
        params = kv_values(request.search_params)
        body = pinned(search_body(ctx, request), request, params)
        request_doc = check_search_stream(orjson.dumps(body))
        ctx.caller.require(Need("Search", request_doc["db"], request_doc["collection"]))
        query = self.proxy.query
        info = self.proxy.dml.collection(request_doc["db"], request_doc["collection"])
        plan = query.prepare_search(info, {**request_doc, "data": None})
        walk = None
        if truthy(params.get("search_iter_v2")):
            token, walk = self.walks.get(
                params.get("search_iter_id") or None, params.get("search_iter_last_bound")
            )
            page = page_request(request_doc, info.schema.primary.name, plan.metric, walk)
            plan = query.prepare_search(info, {**page, "data": None})
        data = query_data(request.placeholder_group)
        merged, ts = query.run_search(plan, query.search_data(plan, data))
        pk = info.schema.primary
        table = hits_table(merged, pk.arrow_type())
        outputs = [n for n in plan.outputs if n != COUNT]
        round_decimal = int_param(params, "round_decimal", -1)
        results = results_data(
            table, len(data), request_doc["limit"], outputs, info.schema, round_decimal
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
        body = {
            "db": ctx.db,
            "collection": request.collection_name,
            "filter": request.expr or None,
            "output_fields": list(request.output_fields),
            "limit": int(params["limit"]) if params.get("limit") not in (None, "") else None,
            "offset": int_param(params, "offset", 0),
            "filter_params": templates(request.expr_template_values),
            "consistency_level": level_of(request),
            "guarantee_timestamp": request.guarantee_timestamp or None,
            "partition_names": list(request.partition_names) or None,
        }
        body = pinned({k: v for k, v in body.items() if v is not None}, request, params)
        raw = orjson.dumps(body)
        _, checked = check_request("query", raw)
        ctx.caller.require(Need("Query", checked["db"], checked["collection"]))
        info = self.proxy.dml.collection(checked["db"], checked["collection"])
        table, outputs, ts = self.proxy.query.query_table(info, checked)
        pk = info.schema.primary.name
        if COUNT in outputs:
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
