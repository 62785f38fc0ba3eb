"""``text_match`` and ``phrase_match``: keyword filters answered by a Tantivy index.

Milvus answers both from a Tantivy inverted index of the field, built with the field's
analyzer; so does Elanus. A ``TextIndex`` indexes one column of one table in memory: one
document per row (a NULL row gets an empty document), in row order, each carrying its row
number as a fast field, so hits turn into a row mask without a Python loop over rows.

- ``text_match(f, 'a b')``: rows holding ANY of the query's tokens (after the analyzer);
  a query that analyses to no token matches nothing.
- ``phrase_match(f, 'a b', slop)``: the tokens in order, kept at the distances the analyzer
  gave them (a removed stop word leaves its gap), with at most ``slop`` position moves
  (Tantivy's phrase slop, as in Milvus: ``slop`` 2 lets two words swap). One token is a
  plain term match.

A NULL text is neither a match nor a non-match (NULL, so ``not text_match(...)`` leaves it
out too), like any other predicate on a NULL value.

Indexes are costly next to a filter, so evaluation asks a ``TextIndexes`` for them: a
segment keeps one for as long as its rows do not change; other callers get a fresh one per
evaluation (the index is then built over the table being filtered).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa

from elanus.analyzer import Analyzer, analyzer_for
from elanus.expr.nodes import Column, Const, Context, Kind, Node, Value
from elanus.expr.values import mask_array
from elanus.schema import DataType, Field

TEXT_FUNCTIONS = ("text_match", "phrase_match")
MAX_SLOP = (1 << 32) - 1
_TEXT = "text"
_ROW = "row"
_TOKENIZER = "field_analyzer"
_WRITER_HEAP = 50_000_000


class TextIndex:
    """An in-memory Tantivy index of one text column, positions kept (for phrases)."""

    def __init__(self, values: pa.Array, analyzer: Analyzer) -> None:
        import tantivy

        self._tantivy = tantivy
        self.analyzer = analyzer
        self.num_rows = len(values)
        builder = tantivy.SchemaBuilder()
        builder.add_text_field(_TEXT, tokenizer_name=_TOKENIZER, index_option="position")
        builder.add_unsigned_field(_ROW, fast=True)
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        index.register_tokenizer(_TOKENIZER, analyzer.tantivy)
        writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        for row, text in enumerate(values.to_pylist()):
            doc = tantivy.Document()
            doc.add_unsigned(_ROW, row)
            if text:
                doc.add_text(_TEXT, text)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()

    def _rows(self, query: Any) -> np.ndarray:
        """A row mask of the documents ``query`` matches."""
        mask = np.zeros(self.num_rows, dtype=bool)
        if not self.num_rows:
            return mask
        hits = self._searcher.search(query, limit=self.num_rows, count=False).hits
        if hits:
            addresses = [address for _, address in hits]
            rows = self._searcher.fast_field_values(_ROW, addresses)
            mask[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
        return mask

    def match_any(self, text: str) -> np.ndarray:
        """Rows holding any token of ``text``."""
        tokens = sorted(set(self.analyzer.tokens(text)))
        if not tokens:
            return np.zeros(self.num_rows, dtype=bool)
        return self._rows(self._tantivy.Query.term_set_query(self._schema, _TEXT, tokens))

    def match_phrase(self, text: str, slop: int) -> np.ndarray:
        """Rows holding the tokens of ``text`` as a phrase, within ``slop`` moves."""
        tokens = self.analyzer.tantivy.pre_tokenize(text).tokens
        if not tokens:
            return np.zeros(self.num_rows, dtype=bool)
        query = self._tantivy.Query
        if len(tokens) == 1:  # Tantivy's phrase needs two terms; one is a term match
            return self._rows(query.term_query(self._schema, _TEXT, tokens[0].text))
        first = tokens[0].position
        words: list[str | tuple[int, str]] = [(t.position - first, t.text) for t in tokens]
        return self._rows(query.phrase_query(self._schema, _TEXT, words, slop))


class TextIndexes:
    """The text indexes of one table's fields, each built on first use and then kept.

    A segment holds one per version of its rows; ``Expr.evaluate`` makes a throwaway one
    when it is given none."""

    def __init__(self) -> None:
        self._built: dict[str, TextIndex] = {}
        self._lock = threading.Lock()

    def get(self, field: Field, values: pa.Array) -> TextIndex:
        """``field``'s index, built from ``values`` (the table's column) the first time."""
        with self._lock:
            index = self._built.get(field.name)
            if index is None or index.num_rows != len(values):
                index = TextIndex(values, analyzer_for(field.analyzer_params, field.name))
                self._built[field.name] = index
            return index


class TextMatch(Node):
    """``text_match(field, text)``, or ``phrase_match(field, text, slop)`` when ``slop``
    is not None. Never pushed down to SQL (``sql`` stays None)."""

    def __init__(
        self, field: Field, text: str, slop: int | None, desc: str, line: int, column: int
    ) -> None:
        super().__init__(desc, line, column)
        self.field = field
        self.text = text
        self.slop = slop

    def columns(self) -> set[str]:
        return {self.field.name}

    def eval(self, ctx: Context) -> Value:
        values = ctx.column(self.field.name)
        indexes = ctx.text_indexes
        if indexes is None:
            indexes = ctx.text_indexes = TextIndexes()
        index = indexes.get(self.field, values)
        if self.slop is None:
            hits = index.match_any(self.text)
        else:
            hits = index.match_phrase(self.text, self.slop)
        valid = None if values.null_count == 0 else values.is_valid().to_numpy(False)
        return mask_array(hits, valid)


def text_match_node(
    name: str,
    args: list[Node],
    desc: str,
    line: int,
    column: int,
    fail: Callable[[str, Any], NoReturn],
    where: Any,
) -> TextMatch:
    """The checked node of a ``text_match`` / ``phrase_match`` call (``name`` as written),
    or ``fail(message, place)`` naming what is wrong with it."""
    phrase = name.lower() == "phrase_match"
    if len(args) not in ((2, 3) if phrase else (2,)):
        arity = "2 or 3 arguments" if phrase else "2 arguments"
        fail(f"{name}() takes {arity}, got {len(args)}", where)
    target, query = args[0], args[1]
    if not isinstance(target, Column) or target.field.dtype != DataType.VARCHAR:
        fail(f"{name}() needs a VarChar field as its first argument, got {target.desc}", target)
    f = target.field
    if not (f.enable_analyzer and f.enable_match):
        fail(
            f"{name}(): field {f.name!r} does not enable match (set enable_analyzer and "
            "enable_match on it)",
            target,
        )
    if not isinstance(query, Const) or query.kind is not Kind.STRING:
        fail(f"{name}() needs a string as its second argument, got {query.desc}", query)
    slop: int | None = 0 if phrase else None
    if len(args) == 3:
        given = args[2]
        if not isinstance(given, Const) or given.kind is not Kind.INT:
            fail(f"{name}(): slop must be an integer, got {given.desc}", given)
        slop = given.value
        if not 0 <= given.value <= MAX_SLOP:
            fail(f"{name}(): slop must be between 0 and {MAX_SLOP}, got {given.value}", given)
    return TextMatch(f, query.value, slop, desc, line, column)
