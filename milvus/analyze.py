"""RunAnalyzer (pymilvus's ``run_analyzer``): texts through an analyzer, as BM25 and
``TEXT_MATCH`` see them. The analyzer is the request's ``analyzer_params``, or, with a
collection and field, that field's own (from the collection's description). Tokens carry
UTF-8 byte offsets and positions when detailed, and the BM25 term id when hashed: Elanus's
CRC-32 (``elanus/analyzer.py``), not Milvus's hash."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.analyzer import Analyzer, analyzer_for, term_ids
from elanus.errors import invalid
from elanus.flight.limits import Kind
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops.collections import DescribeCollection
from elanus.schema import Schema


class AnalyzerRpcs(Servicer):
    @served(Kind.DQL)
    def RunAnalyzer(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        analyzer = self._analyzer(ctx, request)
        results = [
            _result(analyzer, _text(raw), request.with_detail, request.with_hash)
            for raw in request.placeholder
        ]
        return milvus_pb2.RunAnalyzerResponse(status=ok(), results=results)

    def _analyzer(self, ctx: Ctx, request: Any) -> Analyzer:
        """The field's analyzer when a collection is named, else the request's parameters
        (none: the standard analyzer, as in Milvus)."""
        if not request.collection_name:
            return analyzer_for(request.analyzer_params or None)
        if not request.field_name:
            raise invalid("RunAnalyzer: give the field whose analyzer to run")
        doc = self.run_op(ctx, DescribeCollection(db=ctx.db, name=request.collection_name))
        field = Schema.from_dict(doc["schema"]).field(request.field_name)
        if not field.enable_analyzer:
            raise invalid(
                f"field {field.name!r} of {request.collection_name!r} has no analyzer "
                "(enable_analyzer is not set)"
            )
        return analyzer_for(field.analyzer_params, field.name)


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise invalid("RunAnalyzer: a text is not valid UTF-8") from None


def _result(analyzer: Analyzer, text: str, detail: bool, with_hash: bool) -> Any:
    if detail:
        found = analyzer.detailed(text)
        tokens = [
            milvus_pb2.AnalyzerToken(
                token=t.text,
                start_offset=t.start,
                end_offset=t.end,
                position=t.position,
                position_length=1,
            )
            for t in found
        ]
    else:
        tokens = [milvus_pb2.AnalyzerToken(token=t) for t in analyzer.tokens(text)]
    if with_hash:
        for token, term in zip(tokens, term_ids([t.token for t in tokens]), strict=True):
            token.hash = int(term)
    return milvus_pb2.AnalyzerResult(tokens=tokens)
