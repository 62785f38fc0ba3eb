"""Which ranges of one field a filter confines its matches to (Milvus's segment pruning by
the clustering key's partition stats).

``key_intervals(expr, field)`` is a union of intervals the field's value lies in for every
row the filter can match, or None when the filter does not confine it. Only forms that
surely confine are read: ``key <op> c`` for ``==``, ``<``, ``<=``, ``>``, ``>=`` (either
side), ``key in [...]``, and ``and`` / ``or`` of those; ``and`` intersects (an operand that
confines nothing leaves the other's), ``or`` unites (and confines nothing if one operand
confines nothing). ``not``, ``!=``, ``is null``, arithmetic and a literal of another type
confine nothing, so a segment that may hold a match is never skipped. A comparison never
matches a null key, so a segment whose keys are all null is skipped when any interval
applies (``may_match`` with ``[None, None]``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from elanus.expr.compiler import Expr
from elanus.expr.nodes import BoolOp, Column, Compare, Const, InList, Node
from elanus.schema import DataType, Field

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


@dataclass(frozen=True)
class Interval:
    """Values between ``lo`` and ``hi`` (None: unbounded), each end inclusive or not."""

    lo: Any = None
    lo_in: bool = True
    hi: Any = None
    hi_in: bool = True

    def meets(self, lo: Any, hi: Any) -> bool:
        """Whether a value in ``[lo, hi]`` can lie in this interval."""
        if self.lo is not None and (hi < self.lo or (hi == self.lo and not self.lo_in)):
            return False
        return not (self.hi is not None and (lo > self.hi or (lo == self.hi and not self.hi_in)))

    def clip(self, other: Interval) -> Interval | None:
        """The intersection, None when empty."""
        lo, lo_in = self.lo, self.lo_in
        if other.lo is not None and (lo is None or other.lo > lo):
            lo, lo_in = other.lo, other.lo_in
        elif other.lo is not None and other.lo == lo:
            lo_in = lo_in and other.lo_in
        hi, hi_in = self.hi, self.hi_in
        if other.hi is not None and (hi is None or other.hi < hi):
            hi, hi_in = other.hi, other.hi_in
        elif other.hi is not None and other.hi == hi:
            hi_in = hi_in and other.hi_in
        if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_in and hi_in))):
            return None
        return Interval(lo, lo_in, hi, hi_in)


Intervals = tuple[Interval, ...] | None


def key_intervals(expr: Expr | None, field: Field) -> Intervals:
    """The intervals of ``field`` every matching row lies in, or None if not confined."""
    return None if expr is None else _walk(expr.root, field)


def may_match(intervals: Intervals, key_range: Sequence[Any] | None) -> bool:
    """Whether a segment whose key lies in ``key_range`` ([min, max]; None: unknown, [None,
    None]: only nulls) may hold a row of the filter."""
    if intervals is None or key_range is None:
        return True
    lo, hi = key_range
    if lo is None or hi is None:
        return False
    return any(i.meets(lo, hi) for i in intervals)


def _walk(node: Node, field: Field) -> Intervals:
    if isinstance(node, BoolOp):
        parts = [_walk(child, field) for child in node.children]
        if node.op == "and":
            known = [p for p in parts if p is not None]
            if not known:
                return None
            acc = known[0]
            for p in known[1:]:
                acc = tuple(c for a in acc for b in p if (c := a.clip(b)) is not None)
            return acc
        if any(p is None for p in parts):
            return None
        return tuple(i for p in parts if p is not None for i in p)
    if isinstance(node, Compare) and node.op in _FLIP:
        left, right = node.children
        op = node.op
        if _is_field(right, field):
            left, right, op = right, left, _FLIP[op]
        if not (_is_field(left, field) and isinstance(right, Const)):
            return None
        v = _literal(right.value, field)
        if v is None:
            return None
        return (_compare(op, v, field),)
    if isinstance(node, InList) and not node.negate and _is_field(node.children[0], field):
        values = [_literal(v, field) for v in node.values]
        if any(v is None for v in values):
            return None
        return tuple(_compare("==", v, field) for v in values)
    return None


def _is_field(node: Node, field: Field) -> bool:
    return isinstance(node, Column) and node.field.name == field.name


def _literal(v: Any, field: Field) -> Any:
    """The literal as comparable with the field's values, None for another type (never
    guessed at: such a filter confines nothing)."""
    if field.dtype == DataType.VARCHAR:
        return v if isinstance(v, str) else None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if isinstance(v, float) and math.isnan(v) else v


def _compare(op: str, v: Any, field: Field) -> Interval:
    if field.dtype == DataType.FLOAT:
        # Float is stored as float32 and literals are rounded to it: widen each bound by
        # one float32 step and include it, whichever rounding the comparison makes.
        with np.errstate(over="ignore"):
            lo = float(np.nextafter(np.float32(v), np.float32(-np.inf)))
            hi = float(np.nextafter(np.float32(v), np.float32(np.inf)))
        return Interval(
            lo=lo if op in ("==", ">", ">=") else None, hi=hi if op in ("==", "<", "<=") else None
        )
    if op == "==":
        return Interval(v, True, v, True)
    if op in ("<", "<="):
        return Interval(hi=v, hi_in=op == "<=")
    return Interval(lo=v, lo_in=op == ">=")
