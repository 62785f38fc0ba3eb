"""A search's lexical highlighter (``elanus.highlight``) on a collection: which text fields
it marks, their terms, and each hit's tagged fragments. Both faces use it: the Flight
``search`` action puts them in each hit (``hit["highlight"][field]["fragments"]``, the
shape pymilvus gives a hit) and the Milvus face wraps them in ``HighlightResult``s.

Which fields, as Milvus's proxy picks them (``proxy/highlighter.go``): with
``highlight_search_text`` the input field of the searched BM25 function, its terms those
of each query's search text; every ``highlight_query`` field, its terms those of its
texts, for every query. The hits' texts are read at the search's timestamp (they need not
be output fields).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elanus.analyzer import Analyzer, analyzer_for
from elanus.errors import invalid
from elanus.flight.search.hybrid import fetch_outputs
from elanus.flight.search.text import text_function
from elanus.highlight import Highlighter
from elanus.ops.search import HighlightedHit
from elanus.schema import DataType, Field

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.plan import SearchPlan
    from elanus.flight.search.searcher import Searcher


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


def fragments(
    service: Searcher,
    info: CollectionInfo,
    highlighter: Highlighter,
    fields: list[FieldTerms],
    hits: list[tuple[Any, int]],
    ts: int,
) -> dict[str, list[list[str]]]:
    """Per marked field, each hit's fragments; ``hits``: (primary key, query index) in
    the order of the reply."""
    if not fields or not hits:
        return {}
    pk = info.schema.primary.name
    table = fetch_outputs(service, info, [f.field.name for f in fields], [k for k, _ in hits], ts)
    rows = {row[pk]: row for row in table.to_pylist()}
    out = {}
    for terms in fields:
        name = terms.field.name
        texts = [(rows.get(key, {}).get(name) or "", q) for key, q in hits]
        out[name] = [highlighter.fragments(t, terms.spans(t, q)) for t, q in texts]
    return out


def add_highlights(
    service: Searcher,
    plan: SearchPlan,
    texts: list[Any] | None,
    results: list[list[HighlightedHit]],
    ts: int,
) -> None:
    """The Flight ``search`` action's highlighter: each hit of ``results`` gets
    ``highlight`` ``{field: {"fragments": [...]}}``."""
    if plan.highlighter is None:
        return
    highlighter = Highlighter.from_body(plan.highlighter)
    fields = field_terms(plan, highlighter, texts)
    hits = [(hit["id"], q) for q, row in enumerate(results) for hit in row]
    marked = fragments(service, plan.info, highlighter, fields, hits, ts)
    flat = [hit for row in results for hit in row]
    for i, hit in enumerate(flat):
        hit["highlight"] = {name: {"fragments": frags[i]} for name, frags in marked.items()}
