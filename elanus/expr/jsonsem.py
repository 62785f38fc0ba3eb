"""Milvus's answers for JSON values that are missing or of another type.

Elanus evaluates with SQL three-valued logic (``nodes.py``); Milvus's segment code does not
for JSON. There a predicate on a JSON path (``j["x"] == 1``, ``j["x"] in [..]``,
``j["x"] like ".."``, ``json_contains(j["tags"], 1)``, ``j["x"] + 1 > 2``) is *false* when
the key is missing, holds JSON null, or holds a value of another type, except ``!=``, which
is then *true* ("if the types are different, the comparison is always false, NotEqual is
true": ``UnaryRangeJSONCompareNotEqual`` and ``BinaryArithRangeJSONCompareNotEqual`` in
Milvus 2.5's ``internal/core/src/exec/expression``). Only a row whose JSON *field* is null
gives "unknown" (Milvus's valid bitmap), so ``not P`` is true exactly where P is false and
the field is not null (``PhyLogicalUnaryExpr``: flip, then and with the valid bitmap). The
dynamic ``$meta`` column is never null in Milvus (a row without dynamic keys holds ``{}``),
so a dynamic key is never unknown.

``settle_json`` rewrites a checked tree so that each such predicate gets these answers: its
NULLs become false (true for ``!=`` and for ``not in``), except on rows whose JSON field is
null, which stay NULL.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from elanus.expr.nodes import (
    Arith,
    ArrayLength,
    Compare,
    Const,
    Contains,
    Context,
    Exists,
    InList,
    JsonPath,
    Like,
    Node,
    Value,
    predicate,
)
from elanus.schema import DYNAMIC_FIELD


class Settled(Node):
    """A predicate on one JSON path, with Milvus's answer where the value is unusable."""

    def __init__(self, inner: Node, path: JsonPath, fill: bool) -> None:
        super().__init__(inner.desc, inner.line, inner.column)
        self.children = (inner,)
        self.path = path
        self.fill = fill

    def eval(self, ctx: Context) -> Value:
        result = predicate(self.children[0], ctx)
        if isinstance(result, pa.Scalar):
            result = pa.repeat(result, ctx.n)
        filled = pc.fill_null(result, self.fill)
        valid = field_valid(ctx, self.path.column_name)
        return filled if valid is None else pc.if_else(valid, filled, pa.scalar(None, pa.bool_()))


def field_valid(ctx: Context, name: str) -> pa.Array | None:
    """Where the JSON field is not null (None: everywhere; ``$meta`` is never null)."""
    if name == DYNAMIC_FIELD:
        return None
    column = ctx.column(name)
    return None if column.null_count == 0 else column.is_valid()


def settle_json(node: Node) -> Node:
    """``node`` with every JSON-path predicate answering as Milvus does (see module doc)."""
    node.children = tuple(settle_json(c) for c in node.children)
    settled = _settled(node)
    return settled if settled is not None else node


def _settled(node: Node) -> Settled | None:
    if isinstance(node, Compare):
        left, right = node.children
        if isinstance(left, Const):
            left, right = right, left
        path = _json_operand(left) if isinstance(right, Const) else None
        if path is None:
            return None  # JSON against a field or another path: plain three-valued logic
        ne_true = node.op == "!=" and not isinstance(left, ArrayLength)
        return Settled(node, path, fill=ne_true)
    if isinstance(node, InList | Like | Contains | Exists):
        target = node.children[0]
        path = target if isinstance(target, JsonPath) else None
        if path is None:
            return None
        return Settled(node, path, fill=isinstance(node, InList) and node.negate)
    return None


def _json_operand(node: Node) -> JsonPath | None:
    """The JSON path a comparison operand reads: the path itself, ``path op constant``
    arithmetic, or ``array_length(path)`` (the forms Milvus evaluates on JSON)."""
    if isinstance(node, JsonPath):
        return node
    if isinstance(node, Arith | ArrayLength):
        paths = [c for c in node.children if isinstance(c, JsonPath)]
        rest = [c for c in node.children if not isinstance(c, JsonPath)]
        if len(paths) == 1 and all(isinstance(c, Const) for c in rest):
            return paths[0]
    return None
