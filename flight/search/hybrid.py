"""The ``hybrid_search`` action: several ANN searches of one collection, fused into one
ranking by an RRF or weighted ranker (``elanus.rankers``), as Milvus's hybrid search.

Each sub-request is an ordinary search (its own field, params, filter and ``limit``; its
queries vectors or, by ``ids``, the stored vectors of primary keys), so any vector field a
search takes works here with no special case. All of them read the
collection at one timestamp: with ``as_of`` that one; otherwise the first sub-request reads
at the requested consistency level and the others (and, on a collection of several shards,
the first again) at the timestamp of its reply. Output fields are fetched once, for the
final hits, at that timestamp.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from elanus.boost import BoostRanker
from elanus.datatypes import DataType
from elanus.errors import ElanusError, invalid
from elanus.flight.registry import check_db, check_named
from elanus.flight.search.bodies import (
    MAX_TOPK,
    read_options,
    search_options,
    search_queries,
)
from elanus.flight.search.check import check_filter
from elanus.flight.search.plan import SearchPlan
from elanus.ops.reads import Query
from elanus.outputs import COUNT, entity, json_fields, resolve_outputs
from elanus.rankers import MAX_REQUESTS, BaseRanker, Hit, grouped, ranker_from_dict, window
from elanus.requests import Body
from elanus.rerankers import DecayRanker, function_ranker, is_function

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.searcher import Searcher

SUB_KEYS = (
    "data", "ids", "anns_field", "param", "search_params", "limit", "filter", "filter_params",
)  # fmt: skip
"""What one entry of ``reqs`` may hold (``param`` is pymilvus's name of ``search_params``;
``ids`` instead of ``data``: primary keys whose stored vectors are the queries)."""


def check_hybrid(b: Body) -> dict[str, Any]:
    """The ``hybrid_search`` action's request (``flight/query_actions.py`` declares it)."""
    reqs = b.list("reqs")
    if not reqs:
        raise invalid(
            "hybrid_search: 'reqs' holds no search requests (minimum of ann search requests is 1)"
        )
    if len(reqs) > MAX_REQUESTS:
        raise invalid(
            f"hybrid_search: maximum of ann search requests is {MAX_REQUESTS}, got {len(reqs)}"
        )
    limit = b.int("limit", 10, lo=1, hi=MAX_TOPK)
    offset = b.int("offset", 0, lo=0, hi=MAX_TOPK)
    if limit + offset > MAX_TOPK:
        raise invalid(f"hybrid_search: limit + offset must be at most {MAX_TOPK}")
    group_by = b.str("group_by_field", None) or None
    group_size = b.int("group_size", 1, lo=1, hi=MAX_TOPK)
    strict = b.bool("strict_group_size", False)
    if group_by is None and (group_size != 1 or strict):
        raise invalid("hybrid_search: group_size and strict_group_size need a group_by_field")
    if group_size * (limit + offset) > MAX_TOPK:
        raise invalid(f"hybrid_search: (limit + offset) * group_size must be at most {MAX_TOPK}")
    request = {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "limit": limit,
        "offset": offset,
        "output_fields": b.list("output_fields", []),
        "group_by_field": group_by,
        "group_size": group_size,
        "strict_group_size": strict,
        "ranker": checked_ranker(b.dict("ranker", None), len(reqs), group_by, "hybrid_search"),
        **read_options(b),
    }
    request["reqs"] = [_sub_request(r, i, request, limit + offset) for i, r in enumerate(reqs)]
    return request


def checked_ranker(body: Any, n_requests: int, group_by: str | None, what: str) -> BaseRanker:
    """The ranker of a body: the ``strategy`` form or a function ranker (decay, rrf,
    weighted, boost); decay and boost do not rank grouped searches, as in Milvus."""
    if not is_function(body):
        return ranker_from_dict(body, n_requests)
    ranker = function_ranker(body, n_requests, what)
    if isinstance(ranker, DecayRanker | BoostRanker) and group_by is not None:
        raise invalid(f"{what}: the {ranker.strategy} ranker does not support grouping searches")
    return ranker


SEARCH_SUB_KEYS = ("data", "ids", "anns_field", "filter", "filter_params", "search_params")
"""What of a ``search`` body with a ``ranker`` becomes its one hybrid sub-request."""


def search_as_hybrid(body: dict[str, Any]) -> dict[str, Any]:
    """A ``search`` body with a function ``ranker`` as the ``hybrid_search`` body of one
    request, as Milvus reranks a search: the request takes ``limit + offset`` candidates
    per query, the ranker rescores them, the window is cut after."""
    ranker = body.get("ranker")
    if not is_function(ranker):
        raise invalid(
            "search: 'ranker' must be a function ranker ({'input_field_names', 'params': "
            "{'reranker': 'decay' | 'rrf' | 'weighted' | 'boost', ...}}) or a FunctionScore "
            "of boost functions ({'functions': [...], 'params': {...}})"
        )
    sub = {k: body[k] for k in SEARCH_SUB_KEYS if k in body}
    rest = {k: v for k, v in body.items() if k not in SEARCH_SUB_KEYS}
    return {**rest, "reqs": [sub]}


@contextlib.contextmanager
def searched_as_hybrid(what: str = "search") -> Iterator[None]:
    """Errors of a search run as a hybrid search (``search_as_hybrid``) name the search,
    not the hybrid search or its one request."""
    try:
        yield
    except ElanusError as exc:
        message = exc.message.replace("hybrid_search: reqs[0]: ", f"{what}: ", 1)
        raise ElanusError(exc.code, message.replace("hybrid_search", what)) from None


def _sub_request(raw: Any, i: int, top: dict[str, Any], default_limit: int) -> dict[str, Any]:
    """One entry of ``reqs`` as a checked ``search`` request (without output fields)."""
    what = f"hybrid_search: reqs[{i}]"
    if not isinstance(raw, dict):
        raise invalid(f"{what} must be a JSON object with data, anns_field, param and limit")
    unknown = sorted(set(raw) - set(SUB_KEYS))
    if unknown:
        raise invalid(
            f"{what}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys are {', '.join(sorted(SUB_KEYS))}"
        )
    if raw.get("param") is not None and raw.get("search_params") is not None:
        raise invalid(f"{what}: give either 'param' or 'search_params', not both")
    body = {
        "db": top["db"],
        "collection": top["collection"],
        "anns_field": raw.get("anns_field"),
        "limit": raw.get("limit", default_limit),
        "filter": raw.get("filter"),
        "filter_params": raw.get("filter_params"),
        "search_params": raw.get("search_params", raw.get("param")),
        "group_by_field": top["group_by_field"],
        "group_size": top["group_size"],
        "consistency_level": top["consistency_level"],
        "guarantee_timestamp": top["guarantee_timestamp"],
        "session_ts": top["session_ts"],
        "as_of": top["as_of"],
        "partition_names": top["partition_names"],
    }
    checked = search_options(Body(body, what))
    checked.update(search_queries(Body({"data": raw.get("data"), "ids": raw.get("ids")}, what)))
    return checked


def hybrid_search(service: Searcher, request: dict[str, Any]) -> dict[str, Any]:
    """Run every sub-search at one timestamp, fuse per query vector, fetch the outputs."""
    info = service.gate.read_collection(request["db"], request["collection"])
    outputs, hits, ts = fused_hits(service, info, request)
    rows = _fetch(service, info, outputs, [pk for q in hits for pk, _ in q], ts)
    json_names = json_fields(info.schema)
    results = [
        [
            {
                "id": pk,
                "distance": score,
                "entity": entity(rows.get(pk, {}), outputs, json_names) if outputs else {},
            }
            for pk, score in q
        ]
        for q in hits
    ]
    return {"results": results, "ts": ts}


def fused_hits(
    service: Searcher, info: CollectionInfo, request: dict[str, Any]
) -> tuple[list[str], list[list[Hit]], int]:
    """(output names, the fused hits of each query, the read timestamp): a hybrid search
    up to its outputs, which each face fetches in its own shape (``fetch_outputs``)."""
    outputs = _outputs(info, request)
    ranker: BaseRanker = request["ranker"]
    if isinstance(ranker, DecayRanker):
        ranker.check_schema(info.schema, "hybrid_search")
    elif isinstance(ranker, BoostRanker):
        check_boost(info, ranker, request["reqs"][0].get("filter_params") or {})
    plans, vectors = _prepare(service, info, request["reqs"])
    nqs = {len(v) for v in vectors}
    if len(nqs) > 1:
        counts = ", ".join(f"reqs[{i}]: {len(v)}" for i, v in enumerate(vectors))
        raise invalid(f"hybrid_search: every request needs as many query vectors ({counts})")
    parts, ts = _search_all(service, info, plans, vectors, bool(request["as_of"]))
    if isinstance(ranker, DecayRanker):
        ranker = _with_values(service, info, ranker, parts, ts)
    elif isinstance(ranker, BoostRanker):
        params = request["reqs"][0].get("filter_params") or {}
        ranker = with_boosts(service, info, ranker, _candidates(parts), ts, params)
    metrics = [p.metric for p in plans]
    group = request["group_by_field"]
    hits = []
    for q in range(nqs.pop()):
        lists = [_hits(part, q) for part in parts]
        fused = ranker.fuse(lists, metrics)
        ranked = fused.ranked()
        if group is None:
            hits.append(window(ranked, request["limit"], request["offset"]))
        else:
            group_of: dict[Hashable, Any] = {}
            for part in parts:
                for pk, value in _group_values(part, q, group).items():
                    group_of.setdefault(pk, value)
            hits.append(
                grouped(
                    ranked,
                    fused.descending,
                    group_of,
                    request["limit"],
                    request["offset"],
                    request["group_size"],
                    request["strict_group_size"],
                )
            )
    return outputs, hits, ts


def _with_values(
    service: Searcher,
    info: CollectionInfo,
    ranker: DecayRanker,
    parts: list[dict[str, Any]],
    ts: int,
) -> DecayRanker:
    """The decay ranker bound to its input field's value in every candidate, read at
    ``ts`` in one query."""
    pks = _candidates(parts)
    pk_name = info.schema.primary.name
    if not pks:
        return ranker.bound({})
    table = fetch_outputs(service, info, [ranker.field], pks, ts)
    keys = table.column(pk_name).to_pylist()
    return ranker.bound(dict(zip(keys, table.column(ranker.field).to_pylist(), strict=True)))


def _candidates(parts: list[dict[str, Any]]) -> list[Any]:
    """The primary keys of every real hit of the parts."""
    return [
        pk
        for part in parts
        for pk in np.asarray(part["pks"])[np.isfinite(np.asarray(part["distances"]))].tolist()
    ]


def check_boost(info: CollectionInfo, ranker: BoostRanker, params: dict[str, Any]) -> None:
    """Every boost function's filter parses (with the search's ``filter_params``, as Milvus
    takes its template values) and its ``random_score.field`` is an Int64 field, before
    anything is searched."""
    for function in ranker.score.functions:
        if function.filter is not None:
            try:
                check_filter(info, function.filter, params)
            except ElanusError as exc:
                raise ElanusError(exc.code, f"boost ranker filter: {exc.message}") from None
        if function.field is not None:
            field = info.schema.field(function.field)
            if field.dtype != DataType.INT64:
                raise invalid(
                    f"boost ranker: random_score field {function.field!r} is {field.dtype}; "
                    "only an Int64 field can seed it"
                )


def with_boosts(
    service: Searcher,
    info: CollectionInfo,
    ranker: BoostRanker,
    pks: list[Any],
    ts: int,
    params: dict[str, Any],
) -> BoostRanker:
    """The boost ranker bound to each candidate's combined boost: every function's filter
    run over the candidates' keys (one query each) and its ``random_score`` field read,
    all at ``ts``."""
    keys = list(dict.fromkeys(pks))
    if not keys:
        return ranker.bound({})
    pk_name = info.schema.primary.name
    boosts, masks = [], []
    for function in ranker.score.functions:
        if function.filter is None:
            masks.append(np.ones(len(keys), bool))
        else:
            matched = set(_matching(service, info, function.filter, params, keys, ts))
            masks.append(np.array([k in matched for k in keys], bool))
        seeds = None
        if function.field is not None:
            table = fetch_outputs(service, info, [function.field], keys, ts)
            got = table.column(pk_name).to_pylist()
            by_key = dict(zip(got, table.column(function.field).to_pylist(), strict=True))
            seeds = [by_key[k] for k in keys]
        boosts.append(function.boosts(keys, seeds))
    merged = ranker.score.merge(boosts, masks)
    return ranker.bound(dict(zip(keys, merged.tolist(), strict=True)))


def _matching(
    service: Searcher,
    info: CollectionInfo,
    text: str,
    params: dict[str, Any],
    keys: list[Any],
    ts: int,
) -> list[Any]:
    """Which of ``keys`` a boost function's filter keeps, read at ``ts``."""
    pk = info.schema.primary.name
    try:
        query = Query(
            db=info.db,
            collection=info.name,
            output_fields=[pk],
            filter=f"({text}) and {pk} in {{__boost_keys}}",
            filter_params={**params, "__boost_keys": keys},
        )
        table, _, _ = service.query_table(info, query, ts)
    except ElanusError as exc:
        raise ElanusError(exc.code, f"boost ranker filter: {exc.message}") from None
    return table.column(pk).to_pylist()


def _prepare(
    service: Searcher, info: CollectionInfo, reqs: list[dict[str, Any]]
) -> tuple[list[SearchPlan], list[Any]]:
    """Each sub-request's checked plan and query vectors, before anything is searched; an
    error names the request it is about."""
    plans, vectors = [], []
    for i, sub in enumerate(reqs):
        try:
            plan = service.prepare_search(info, sub)
            if sub.get("ids") is not None:  # searched at the timestamp the keys were read at
                plan, queries = service.keyed_search_data(plan, sub["ids"])
            else:
                queries = service.search_data(plan, sub["data"])
            vectors.append(queries)
        except ElanusError as exc:
            raise ElanusError(exc.code, f"hybrid_search: reqs[{i}]: {exc.message}") from None
        plans.append(plan)
    return plans, vectors


def _outputs(info: CollectionInfo, request: dict[str, Any]) -> list[str]:
    """The output names the hits show, checked before anything is searched; grouped hits
    carry the group field, as in ``search``."""
    outputs = resolve_outputs(info.schema, info.name, request["output_fields"])
    if COUNT in outputs:
        raise invalid("hybrid_search cannot output count(*)")
    group = request["group_by_field"]
    if group is not None and group not in outputs:
        outputs.append(group)
    return outputs


def _search_all(
    service: Searcher,
    info: CollectionInfo,
    plans: list[SearchPlan],
    vectors: list[Any],
    as_of: bool,
) -> tuple[list[dict[str, Any]], int]:
    """Every sub-search's merged part, all read at one timestamp (returned)."""
    if as_of:
        parts = [service.run_search(p, v) for p, v in zip(plans, vectors, strict=True)]
        return [part for part, _ in parts], parts[0][1]
    first, ts = service.run_search(plans[0], vectors[0])
    if len(info.vchannels) > 1:  # its shards read at their own tsafe: read it again at ts
        first, _ = service.run_search(_pinned(plans[0], ts), vectors[0])
    rest = [
        service.run_search(_pinned(p, ts), v)[0]
        for p, v in zip(plans[1:], vectors[1:], strict=True)
    ]
    return [first, *rest], ts


def _pinned(plan: SearchPlan, ts: int) -> SearchPlan:
    return dataclasses.replace(plan, request={**plan.request, "read_ts": ts})


def _hits(part: dict[str, Any], q: int) -> list[Hit]:
    """Query ``q``'s real hits of one merged part, best first."""
    distances = np.asarray(part["distances"])
    if distances.ndim != 2 or q >= distances.shape[0]:
        return []
    pks = np.asarray(part["pks"])[q].tolist()
    return [(p, d) for p, d in zip(pks, distances[q].tolist(), strict=True) if np.isfinite(d)]


def _group_values(part: dict[str, Any], q: int, group: str) -> dict[Hashable, Any]:
    """Primary key -> group value of query ``q``'s hits in a grouped part."""
    distances = np.asarray(part["distances"])
    table = part.get("outputs")
    if distances.ndim != 2 or table is None or group not in table.column_names:
        return {}
    width = distances.shape[1]
    values = table.column(group).to_pylist()
    slots = {int(s): i for i, s in enumerate(part["output_rows"])}
    pks = np.asarray(part["pks"])[q].tolist()
    out: dict[Hashable, Any] = {}
    for c, pk in enumerate(pks):
        i = slots.get(q * width + c)
        if i is not None:
            out[pk] = values[i]
    return out


def _fetch(
    service: Searcher, info: CollectionInfo, outputs: list[str], pks: list[Any], ts: int
) -> dict[Any, dict[str, Any]]:
    """The output rows of the final hits, by primary key, read at ``ts``."""
    if not outputs or not pks:
        return {}
    table = fetch_outputs(service, info, outputs, pks, ts)
    pk = info.schema.primary.name
    return {row[pk]: row for row in table.to_pylist()}


def fetch_outputs(
    service: Searcher, info: CollectionInfo, outputs: list[str], pks: list[Any], ts: int
) -> pa.Table:
    """The rows of ``pks`` (each once, in no set order) with ``outputs``, read at ``ts``."""
    query = Query(
        db=info.db, collection=info.name, ids=list(dict.fromkeys(pks)), output_fields=outputs
    )
    table, _, _ = service.query_table(info, query, ts)
    return table
