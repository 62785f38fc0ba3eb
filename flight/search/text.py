"""Full-text search in the proxy: raw query text on a BM25 function's output field, scored
by BM25 with the statistics of the whole collection at the read timestamp.

A text search runs in two phases, both through the delegator of every shard (which asks
its workers for their sealed segments, as a search does):

1. ``term_stats``: for the distinct terms of the queries, the number of visible rows,
   their total length in tokens, and the rows holding each term. Each shard reads at its
   tsafe; a shard that answered at an earlier timestamp than another is asked again at
   the latest one, so every figure describes one snapshot ``T``.
2. ``search`` at ``T``: each query is the sparse vector ``tf_query * idf`` of its terms
   (``elanus.reduce.bm25_idf`` from the summed statistics) and the search params carry
   ``bm25_k1``, ``bm25_b`` and ``bm25_avgdl`` for the segments' BM25 kernel.

Nothing is kept between searches, so deletes, flushes and compactions never leave the
statistics stale. Milvus keeps running statistics per shard instead; with one shard the
scores are the same. This lives in the common search path (``QueryService.run_search``),
so any caller of it (hybrid search included) gets text queries for free.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from elanus.analyzer import analyzer_for
from elanus.api.base import as_body, ask_many_sync
from elanus.api.querynode import SearchShard, TermStats
from elanus.errors import invalid
from elanus.functions import Function
from elanus.reduce import add_term_stats, bm25_idf, normalize_metric
from elanus.schema import Field, Schema
from elanus.searchrequest import SearchRequest

if TYPE_CHECKING:
    from elanus.api.indexcoord import IndexDescription
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.plan import SearchPlan
    from elanus.flight.search.searcher import Searcher

METRIC = "BM25"
K1_RANGE = (1.2, 2.0)
B_RANGE = (0.0, 1.0)
STATS_TIMEOUT_S = 120.0


def text_function(schema: Schema, field: Field) -> Function | None:
    """The BM25 function whose output ``field`` is (it is then searched with text)."""
    return schema.function_output(field.name)


def text_metric(field: Field, index: IndexDescription | None, requested: Any) -> str:
    """BM25 is the only metric of a BM25 output field (and its default)."""
    actual = normalize_metric(requested) if requested else METRIC
    expected = normalize_metric(index.metric_type) if index else METRIC
    for got in (actual, expected):
        if got != METRIC:
            raise invalid(
                f"metric type not match: invalid parameter[expected={METRIC}][actual={got}]"
                f" (field {field.name!r} is a BM25 function's output, searched with BM25)"
            )
    return METRIC


def check_text_params(params: dict[str, Any]) -> dict[str, Any]:
    """``bm25_k1`` in [1.2, 2.0] and ``bm25_b`` in [0, 1], as Milvus checks them."""
    out = dict(params)
    for name, (lo, hi) in (("bm25_k1", K1_RANGE), ("bm25_b", B_RANGE)):
        value = out.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(f"search: param {name} must be a number, got {value!r}")
        if not lo <= value <= hi:
            raise invalid(f"search: param {name} must be in [{lo}, {hi}], got {value}")
        out[name] = float(value)
    if "bm25_avgdl" in out:
        raise invalid("search: bm25_avgdl is computed from the collection, not given")
    return out


def not_text(field: Field, data: Any) -> None:
    """Refuse query text on a field that is not a BM25 output."""
    if isinstance(data, pa.ChunkedArray | pa.Array):
        texts = pa.types.is_string(data.type) or pa.types.is_large_string(data.type)
    else:
        texts = isinstance(data, list) and any(isinstance(d, str) for d in data)
    if texts:
        raise invalid(
            f"search: field {field.name!r} is not the output of a BM25 function: it takes "
            "vectors as 'data', not text"
        )


def query_texts(field: Field, fn: Function, data: Any) -> list[str]:
    """The query texts of a search on a BM25 output field (refusing vectors)."""
    if isinstance(data, pa.ChunkedArray | pa.Array):
        data = data.to_pylist()
    if not isinstance(data, list) or not all(isinstance(d, str) for d in data):
        raise invalid(
            f"search: field {field.name!r} is the output of BM25 function {fn.name!r}: "
            "'data' must be query texts (strings), not vectors"
        )
    return data


@dataclasses.dataclass
class TextQueries:
    """Analysed queries: the distinct terms of all of them, and per query the index of
    each of its distinct terms in ``terms`` and how often it occurs (its query tf)."""

    terms: np.ndarray
    where: list[np.ndarray]
    tf: list[np.ndarray]

    @classmethod
    def analyse(cls, schema: Schema, fn: Function, texts: list[str]) -> TextQueries:
        src = next(f for f in schema.fields if f.name == fn.input_field_names[0])
        analyzer = analyzer_for(src.analyzer_params, src.name)
        per_query = [np.unique(analyzer.term_ids(t), return_counts=True) for t in texts]
        every = [ids for ids, _ in per_query] or [np.zeros(0, np.uint32)]
        terms = np.unique(np.concatenate(every)).astype(np.uint32)
        where = [np.searchsorted(terms, ids) for ids, _ in per_query]
        return cls(terms, where, [counts.astype(np.float64) for _, counts in per_query])

    def weights(self, rows: int, df: np.ndarray) -> list[dict[int, float]]:
        """Per query, ``{term: tf_query * idf}`` (Milvus's BM25 query vector)."""
        idf = bm25_idf(rows, df)
        return [
            dict(zip(self.terms[w].tolist(), (tf * idf[w]).tolist(), strict=True))
            for w, tf in zip(self.where, self.tf, strict=True)
        ]


def text_request(
    service: Searcher, plan: SearchPlan, texts: list[str], ts: int, guarantee: int
) -> SearchRequest:
    """The search request of a text search, its statistics gathered (phase 1)."""
    fn = plan.text_fn
    assert fn is not None
    queries = TextQueries.analyse(plan.info.schema, fn, texts)
    probe = plan.node_request.at(queries.terms, ts, guarantee)
    stats, read_ts = _gather(service, plan.info, probe)
    rows = int(stats["rows"])
    avgdl = float(stats["tokens"]) / rows if rows else 0.0
    params = {**plan.node_request.search_params, "bm25_avgdl": avgdl}
    return dataclasses.replace(  # keeps the plan's parsed filter, too
        plan.node_request,
        queries=queries.weights(rows, stats["df"]),
        ts=read_ts,
        guarantee_ts=read_ts,
        search_params=params,
    )


def _gather(
    service: Searcher, info: CollectionInfo, probe: SearchRequest
) -> tuple[dict[str, Any], int]:
    """Every shard's statistics at one read timestamp (the latest any shard read at)."""
    route = service.route(info, None)
    shards = list(route.items())

    def ask(targets: list[tuple[str, str]], req: SearchRequest) -> list[TermStats]:
        bus = service.bus
        calls = [
            service.node(node).term_stats(SearchShard(vchannel=v, request=req))
            for v, node in targets
        ]
        return ask_many_sync(bus, calls, STATS_TIMEOUT_S)

    replies = ask(shards, probe)
    read_ts = max(r.ts for r in replies)
    behind = [i for i, r in enumerate(replies) if r.ts != read_ts]
    if behind:
        again = ask([shards[i] for i in behind], probe.at(ts=read_ts, guarantee_ts=read_ts))
        for i, reply in zip(behind, again, strict=True):
            replies[i] = reply
    terms = 0 if probe.queries is None else len(probe.queries)
    return add_term_stats([as_body(r) for r in replies], terms), read_ts
