"""A Search's ``highlighter`` (pymilvus ``LexicalHighlighter``): the reply's
``highlight_results``, one per highlighted text field, one ``HighlightData`` per hit. The
fields, their terms and the fragments are ``flight/search/highlight.py``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pymilvus.grpc_gen import common_pb2

from elanus.flight.search.highlight import FieldTerms, fragments
from elanus.highlight import Highlighter

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search.service import QueryService


def highlighter_of(request: Any) -> Highlighter | None:
    """The request's lexical highlighter, checked; None without one."""
    if not request.HasField("highlighter"):
        return None
    return Highlighter.from_params({kv.key: kv.value for kv in request.highlighter.params})


def highlight_results(
    service: QueryService,
    info: CollectionInfo,
    highlighter: Highlighter,
    fields: list[FieldTerms],
    hits: pa.Table,
    ts: int,
) -> list[Any]:
    """One ``HighlightResult`` per field over the hits (rows of ``query_index``, ``id``)."""
    if not hits.num_rows:
        return []
    keyed = list(
        zip(hits.column("id").to_pylist(), hits.column("query_index").to_pylist(), strict=True)
    )
    marked = fragments(service, info, highlighter, fields, keyed, ts)
    return [
        common_pb2.HighlightResult(
            field_name=name, datas=[common_pb2.HighlightData(fragments=f) for f in frags]
        )
        for name, frags in marked.items()
    ]
