"""A Search's ``highlighter`` (pymilvus ``LexicalHighlighter``): the reply's
``highlight_results``, one per highlighted text field, one ``HighlightData`` per hit.

Which fields, as Milvus's proxy picks them (``proxy/highlighter.go``): with
``highlight_search_text`` the input field of the searched BM25 function, its terms those
of each query's search text; every ``highlight_query`` field, its terms those of its
texts, for every query. The hits' texts are read at the search's timestamp (they need not
be output fields); ``elanus.highlight`` cuts and tags the fragments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pymilvus.grpc_gen import common_pb2

from elanus.analyzer import Analyzer, analyzer_for
from elanus.errors import invalid
from elanus.flight.search.hybrid import fetch_outputs
from elanus.flight.search.text import text_function
from elanus.highlight import Highlighter
from elanus.schema import DataType, Field

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.plan import SearchPlan
    from elanus.flight.search.service import QueryService


class FieldTerms:
    """The terms to mark in one text field: per query (search text) and for all."""

    def __init__(self, field: Field) -> None:
        if field.dtype != DataType.VARCHAR or not field.enable_analyzer:
            raise invalid(
                f"highlighter: field {field.name!r} has no analyzer (a VarChar field with "
                "enable_analyzer) to highlight with"
            )
        self.field = field
        self.analyzer: Analyzer = analyzer_for(field.analyzer_params, field.name)
        self.per_query: list[set[str]] = []
        self.shared: set[str] = set()

    def terms(self, text: str) -> set[str]:
        return set(self.analyzer.tokens(text))

    def spans(self, text: str, q: int) -> list[tuple[int, int]]:
        wanted = self.shared | (self.per_query[q] if q < len(self.per_query) else set())
        return [(s, e) for token, s, e in self.analyzer.located(text) if token in wanted]


def highlighter_of(request: Any) -> Highlighter | None:
    """The request's lexical highlighter, checked; None without one."""
    if not request.HasField("highlighter"):
        return None
    return Highlighter.from_params({kv.key: kv.value for kv in request.highlighter.params})


def field_terms(
    plan: SearchPlan, highlighter: Highlighter, texts: list[Any] | None
) -> list[FieldTerms]:
    """The fields a highlighter marks and their terms, checked before the search runs;
    ``texts``: the search's query texts (None when it searched vectors)."""
    schema = plan.info.schema
    out: dict[str, FieldTerms] = {}
    if highlighter.search_text:
        fn = text_function(schema, plan.field) if plan.metric == "BM25" else None
        if fn is None or texts is None:
            raise invalid(
                'highlighter: search highlight only supports metric type "BM25" (a full '
                f"text search), but was {plan.metric}"
            )
        terms = out[fn.input_field_names[0]] = FieldTerms(schema.field(fn.input_field_names[0]))
        terms.per_query = [terms.terms(str(t)) for t in texts]
    for query in highlighter.queries:
        if query.field not in {f.name for f in schema.fields}:
            raise invalid(f"highlighter: highlight field not found in schema: {query.field}")
        if query.field not in out:
            out[query.field] = FieldTerms(schema.field(query.field))
        out[query.field].shared |= out[query.field].terms(query.text)
    return list(out.values())


def highlight_results(
    service: QueryService,
    info: CollectionInfo,
    highlighter: Highlighter,
    fields: list[FieldTerms],
    hits: pa.Table,
    ts: int,
) -> list[Any]:
    """One ``HighlightResult`` per field over the hits (rows of ``query_index``, ``id``)."""
    if not fields or not hits.num_rows:
        return []
    pk = info.schema.primary.name
    keys = hits.column("id").to_pylist()
    names = [f.field.name for f in fields]
    table = fetch_outputs(service, info, names, keys, ts)
    rows = {row[pk]: row for row in table.to_pylist()}
    queries = hits.column("query_index").to_pylist()
    results = []
    for terms in fields:
        datas = []
        for key, q in zip(keys, queries, strict=True):
            text = rows.get(key, {}).get(terms.field.name) or ""
            frags = highlighter.fragments(text, terms.spans(text, q))
            datas.append(common_pb2.HighlightData(fragments=frags))
        results.append(common_pb2.HighlightResult(field_name=terms.field.name, datas=datas))
    return results
