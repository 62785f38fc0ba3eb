"""Which values of one field a filter pins (Milvus's partition key pruning).

``pinned_values(expr, "key")`` is the set of values the field must take in every row the
filter can match, or None when the filter does not narrow it to a finite set. Only forms
that surely pin are read: ``key == c`` (either side), ``key in [...]``, and ``and`` / ``or``
of those; ``and`` intersects what its operands pin (an operand that pins nothing leaves the
other's set), ``or`` unites them (and pins nothing if one operand pins nothing). Anything
else — ``not``, ``!=``, ranges, arithmetic — pins nothing, so it never prunes a partition
that may hold a match.
"""

from __future__ import annotations

from typing import Any

from elanus.expr.compiler import Expr
from elanus.expr.nodes import BoolOp, Column, Compare, Const, InList, Node
from elanus.schema import DataType, Field

Pins = frozenset[Any] | None


def pinned_values(expr: Expr, field: Field) -> Pins:
    """The values of ``field`` every matching row has, or None if not pinned."""
    return _pins(expr.root, field)


def _pins(node: Node, field: Field) -> Pins:
    if isinstance(node, BoolOp):
        sets = [_pins(child, field) for child in node.children]
        if node.op == "and":
            known = [s for s in sets if s is not None]
            return frozenset.intersection(*known) if known else None
        if any(s is None for s in sets):
            return None
        return frozenset().union(*(s for s in sets if s is not None))
    if isinstance(node, Compare) and node.op == "==":
        left, right = node.children
        if _is_field(right, field):
            left, right = right, left
        if _is_field(left, field) and isinstance(right, Const):
            return _values([right.value], field)
        return None
    if isinstance(node, InList) and not node.negate and _is_field(node.children[0], field):
        return _values(node.values, field)
    return None


def _is_field(node: Node, field: Field) -> bool:
    return isinstance(node, Column) and node.field.name == field.name


def _values(values: list[Any], field: Field) -> Pins:
    """The literals as the field stores them; a literal of another type pins nothing (it
    is never guessed at), and a float that is not a whole number matches no Int64 row."""
    out: set[Any] = set()
    for v in values:
        if field.dtype == DataType.VARCHAR:
            if not isinstance(v, str):
                return None
            out.add(v)
        elif isinstance(v, bool):
            return None
        elif isinstance(v, int):
            out.add(v)
        elif isinstance(v, float):
            if v.is_integer():
                out.add(int(v))
        else:
            return None
    return frozenset(out)
