"""A checked filter expression (what ``elanus.expr.parse`` returns): evaluation over Arrow
tables, with a segment's text and scalar indexes when it lends them, and SQL pushdown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.expr.indexed import IndexedContext, IndexKey, true_rows
from elanus.expr.nodes import Context, Node, predicate
from elanus.expr.textmatch import TextIndexes
from elanus.schema import Schema


class Expr:
    """A parsed, type-checked filter expression, ready to evaluate on Arrow tables."""

    def __init__(self, text: str, root: Node, schema: Schema) -> None:
        self._text = text
        self._root = root
        self._fields = {f.name: f for f in schema.fields}

    @property
    def text(self) -> str:
        return self._text

    @property
    def root(self) -> Node:
        """The checked expression tree (for analyses such as ``elanus.expr.keypins``)."""
        return self._root

    @property
    def fields(self) -> set[str]:
        """Columns the filter reads (``$meta`` for dynamic fields)."""
        return self._root.columns()

    def evaluate(
        self, table: pa.Table | pa.RecordBatch, text_indexes: TextIndexes | None = None
    ) -> pa.BooleanArray:
        """The rows where the filter is TRUE (NULL counts as false).

        ``text_indexes`` lends ``text_match`` / ``phrase_match`` the indexes of ``table``'s
        text columns (a segment's cache); without it they are built for this call."""
        ctx = Context(table, self._fields)
        ctx.text_indexes = text_indexes
        return self._truth(ctx)

    def evaluate_indexed(
        self,
        table: pa.Table | pa.RecordBatch,
        indexes: Mapping[IndexKey, Any],
        text_indexes: TextIndexes | None = None,
    ) -> tuple[pa.BooleanArray, int]:
        """:meth:`evaluate` with what scalar ``indexes`` cover answered from them
        (``elanus.expr.indexed``), and how many predicates were."""
        ctx = IndexedContext(table, self._fields, indexes)
        ctx.text_indexes = text_indexes
        return self._truth(ctx), ctx.used

    def index_rows(self, indexes: Mapping[IndexKey, Any], n: int) -> np.ndarray | None:
        """The TRUE rows of ``n`` when ``indexes`` answer the whole filter, else None."""
        return true_rows(self._root, n, indexes)

    def _truth(self, ctx: Context) -> pa.BooleanArray:
        result = predicate(self._root, ctx)
        if isinstance(result, pa.Scalar):
            return pa.array(np.full(ctx.n, result.as_py() is True), pa.bool_())
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        filled: pa.BooleanArray = pc.fill_null(result, False)
        return filled

    def to_sql(self, dialect: Literal["duckdb", "lance"] = "duckdb") -> str | None:
        """An equivalent SQL predicate for pushdown, or None if it cannot be expressed.

        Covers comparisons, ``in``, ``like``, ``and``/``or``/``not``, ``is [not] null`` and
        ``+ - *`` on plain scalar columns; JSON paths, arrays and functions give None.
        """

        def quote(name: str) -> str:
            if dialect == "lance":
                return "`" + name.replace("`", "``") + "`"
            return '"' + name.replace('"', '""') + '"'

        return self._root.sql(quote)

    def __repr__(self) -> str:
        return f"Expr({self._text!r})"

    def __str__(self) -> str:
        return self._text
