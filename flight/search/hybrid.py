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
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa

from elanus.boost import BoostRanker
from elanus.datatypes import DataType
from elanus.errors import ElanusError, invalid
from elanus.flight.search.check import check_filter
from elanus.flight.search.plan import SearchPlan
from elanus.ops.reads import Query
from elanus.ops.replies import PrimaryKey, SearchHit
from elanus.ops.search import HybridReply, HybridSearch, Search
from elanus.outputs import COUNT, entity, json_fields, resolve_outputs
from elanus.rankers import Hit, grouped, window
from elanus.rerankers import DecayRanker

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.searcher import Searcher


@contextlib.contextmanager
def searched_as_hybrid(what: str = "search") -> Iterator[None]:
    """Errors of a search run as a hybrid search (``Search.as_hybrid``) name the search,
    not the hybrid search or its one request."""
    try:
        yield
    except ElanusError as exc:
        message = exc.message.replace("hybrid_search: reqs[0]: ", f"{what}: ", 1)
        raise ElanusError(exc.code, message.replace("hybrid_search", what)) from None


def hybrid_search(service: Searcher, request: HybridSearch) -> HybridReply:
    """Run every sub-search at one timestamp, fuse per query vector, fetch the outputs."""
    info = service.gate.read_collection(request.db, request.collection)
    outputs, hits, ts = fused_hits(service, info, request)
    rows = _fetch(service, info, outputs, [pk for q in hits for pk, _ in q], ts)
    json_names = json_fields(info.schema)
    results: list[list[SearchHit]] = [
        [
            {
                "id": cast(PrimaryKey, pk),  # a fused hit's key is a primary key's value
                "distance": score,
                "entity": entity(rows.get(pk, {}), outputs, json_names) if outputs else {},
            }
            for pk, score in q
        ]
        for q in hits
    ]
    return {"results": results, "ts": ts}


def fused_hits(
    service: Searcher,
    info: CollectionInfo,
    request: HybridSearch,
    searches: list[Search] | None = None,
) -> tuple[list[str], list[list[Hit]], int]:
    """(output names, the fused hits of each query, the read timestamp): a hybrid search
    up to its outputs, which each face fetches in its own shape (``fetch_outputs``).
    ``searches``: its requests' searches, if not ``request.searches`` as they are (the
    Milvus face's, with the query vectors of their placeholders)."""
    searches = request.searches if searches is None else searches
    outputs = _outputs(info, request)
    ranker = request.fusion
    first_params = searches[0].filter_params or {}
    if isinstance(ranker, DecayRanker):
        ranker.check_schema(info.schema, "hybrid_search")
    elif isinstance(ranker, BoostRanker):
        check_boost(info, ranker, first_params)
    plans, vectors = _prepare(service, info, searches)
    nqs = {len(v) for v in vectors}
    if len(nqs) > 1:
        counts = ", ".join(f"reqs[{i}]: {len(v)}" for i, v in enumerate(vectors))
        raise invalid(f"hybrid_search: every request needs as many query vectors ({counts})")
    parts, ts = _search_all(service, info, plans, vectors, bool(request.as_of))
    if isinstance(ranker, DecayRanker):
        ranker = _with_values(service, info, ranker, parts, ts)
    elif isinstance(ranker, BoostRanker):
        ranker = with_boosts(service, info, ranker, _candidates(parts), ts, first_params)
    metrics = [p.metric for p in plans]
    group = request.group
    hits = []
    for q in range(nqs.pop()):
        lists = [_hits(part, q) for part in parts]
        fused = ranker.fuse(lists, metrics)
        ranked = fused.ranked()
        if group is None:
            hits.append(window(ranked, request.top, request.skip))
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
                    request.top,
                    request.skip,
                    request.per_group,
                    request.strict,
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
    service: Searcher, info: CollectionInfo, reqs: list[Search]
) -> tuple[list[SearchPlan], list[Any]]:
    """Each sub-request's checked plan and query vectors, before anything is searched; an
    error names the request it is about."""
    plans, vectors = [], []
    for i, sub in enumerate(reqs):
        try:
            plan = service.prepare_search(info, sub)
            if sub.ids is not None:  # searched at the timestamp the keys were read at
                plan, queries = service.keyed_search_data(plan, sub.ids)
            else:
                queries = service.search_data(plan, sub.data)
            vectors.append(queries)
        except ElanusError as exc:
            raise ElanusError(exc.code, f"hybrid_search: reqs[{i}]: {exc.message}") from None
        plans.append(plan)
    return plans, vectors


def _outputs(info: CollectionInfo, request: HybridSearch) -> list[str]:
    """The output names the hits show, checked before anything is searched; grouped hits
    carry the group field, as in ``search``."""
    outputs = resolve_outputs(info.schema, info.name, request.outputs)
    if COUNT in outputs:
        raise invalid("hybrid_search cannot output count(*)")
    group = request.group
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
    return dataclasses.replace(plan, read_ts=ts)


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
