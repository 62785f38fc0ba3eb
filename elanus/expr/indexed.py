"""Filters answered from scalar indexes: the predicates of an expression that a segment's
index covers take their rows from it; the rest of the expression is evaluated as always.

A :class:`ValueIndex` is the in-memory form of every scalar index type (how each is stored
is ``elanus.index.scalar``'s business): the distinct values of a field (or of a JSON path,
as the filter's typed view of it reads them) in sorted order, the rows holding each, and
the rows that are NULL (or NaN). A predicate ``target op constant``, ``target [not] in
[...]``, ``target like 'prefix%'`` or ``field is [not] null`` is answered by binary search
over the distinct values, each probe compared with the very Arrow kernels and casts the
plain evaluation uses, so both paths give the same three-valued answer on every row: NULL
where the value is NULL (or, on a JSON path, missing or of another type: ``jsonsem`` then
settles it as before), NaN matching only ``!=`` and ``not in``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.expr.jsonsem import Settled
from elanus.expr.nodes import (
    BoolOp,
    Column,
    Compare,
    Const,
    Context,
    InList,
    IsNull,
    JsonPath,
    Kind,
    Like,
    Node,
    Value,
    _group,
    _value_set,
    numeric_pair,
)
from elanus.schema import DataType, Field

_NO_ROWS = Context(pa.table({}), {})
"""Constants evaluate without a table."""
IndexKey = tuple[str, tuple[str | int, ...]]
"""(field name, JSON path): ``()`` for a plain scalar field."""

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_PREFIX = re.compile(r"[^%_\\]*%")
_KINDS = {
    DataType.BOOL: (Kind.BOOL,),
    DataType.DOUBLE: (Kind.INT, Kind.FLOAT),
    DataType.VARCHAR: (Kind.STRING,),
}
"""For a JSON path index: the constant kinds whose view of the path it holds."""


@dataclass(eq=False)
class ValueIndex:
    """Sorted distinct values of one indexed target with the rows holding each."""

    values: pa.Array
    """Distinct non-NULL, non-NaN values, ascending (Arrow's order: bytes for strings)."""
    offsets: np.ndarray
    """``rows[offsets[i]:offsets[i + 1]]`` hold ``values[i]``."""
    rows: np.ndarray
    nulls: np.ndarray
    nans: np.ndarray
    num_rows: int

    @classmethod
    def from_array(cls, arr: pa.Array | pa.ChunkedArray) -> ValueIndex:
        """Index the values of ``arr`` (row ``i`` is position ``i``)."""
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        n = len(arr)
        nulls = pc.is_null(arr)
        nans = pc.is_nan(arr) if pa.types.is_floating(arr.type) else None
        bad = nulls if nans is None else pc.or_(nulls, pc.fill_null(nans, False))
        keep = np.flatnonzero(~bad.to_numpy(zero_copy_only=False)).astype(np.int64)
        kept = arr.take(pa.array(keep))
        keys = [("v", "ascending")]
        columns = {"v": kept}
        if pa.types.is_floating(arr.type):  # -0.0 first: ``in`` tells it from 0.0
            columns["neg"] = pa.array(np.signbit(kept.to_numpy(zero_copy_only=False)))
            keys.append(("neg", "descending"))
        order = pc.sort_indices(pa.table(columns), sort_keys=keys).to_numpy()
        ordered = kept.take(pa.array(order))
        rows = keep[order]
        starts = distinct_starts(ordered)
        offsets = np.concatenate([starts, [len(rows)]]).astype(np.int64)
        nan_rows = (
            np.flatnonzero(pc.fill_null(nans, False).to_numpy(False))
            if nans is not None
            else np.zeros(0, np.int64)
        )
        return cls(
            ordered.take(pa.array(starts, pa.int64())),
            offsets,
            rows,
            np.flatnonzero(nulls.to_numpy(zero_copy_only=False)).astype(np.int64),
            nan_rows.astype(np.int64),
            n,
        )

    # -- lookups ----------------------------------------------------------------------------
    def first(self, pred: Callable[[pa.Array], Any], lo: int = 0) -> int:
        """The first distinct value position from ``lo`` where the monotone ``pred`` (a
        comparison on a one-element slice) holds; ``len(values)`` if none."""
        hi = len(self.values)
        while lo < hi:
            mid = (lo + hi) // 2
            if _true(pred(self.values.slice(mid, 1))):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def rows_between(self, lo: int, hi: int) -> np.ndarray:
        """Rows holding the distinct values ``lo`` to ``hi - 1``."""
        return self.rows[self.offsets[lo] : self.offsets[max(lo, hi)]]


def distinct_starts(ordered: pa.Array) -> np.ndarray:
    """Where each run of equal values starts in sorted ``ordered`` (-0.0 and 0.0 are
    separate runs: ``==`` joins them, ``in`` does not)."""
    if not len(ordered):
        return np.zeros(0, np.int64)
    change = pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    split = change.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(ordered.type):
        sign = np.signbit(ordered.to_numpy(zero_copy_only=False))
        split = split | (sign[1:] != sign[:-1])
    return np.concatenate([[0], np.flatnonzero(split) + 1]).astype(np.int64)


def _true(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if isinstance(v, pa.Array):
        v = v[0]
    return v.as_py() is True


def _compare_range(index: ValueIndex, op: str, const: Value) -> tuple[int, int]:
    """Distinct value positions ``[lo, hi)`` where ``value op const`` holds (for ``!=``:
    where ``==`` holds)."""
    d = len(index.values)

    def at(fn: Callable[..., Any]) -> Callable[[pa.Array], Any]:
        return lambda s: fn(*numeric_pair(s, const))

    if op == "<":
        return 0, index.first(at(pc.greater_equal))
    if op == "<=":
        return 0, index.first(at(pc.greater))
    if op == ">":
        return index.first(at(pc.greater)), d
    if op == ">=":
        return index.first(at(pc.greater_equal)), d
    lo = index.first(at(pc.greater_equal))
    return lo, index.first(at(pc.greater), lo)


def _in_rows(index: ValueIndex, kind: Kind, values: list[Any]) -> list[np.ndarray]:
    """Rows equal to one of ``values`` (one kind group), compared as ``InList`` does."""
    out: list[np.ndarray] = []
    for j in range(len(values)):  # the whole list decides the casts, as in ``InList``

        def cmp(fn: Callable[..., Any], j: int = j) -> Callable[[pa.Array], Any]:
            def probe(s: pa.Array) -> Any:
                arr, vset = _value_set(s, kind, values)
                return fn(arr, vset[j])

            return probe

        lo = index.first(cmp(pc.greater_equal))
        hi = index.first(cmp(pc.greater), lo)
        if hi > lo:  # the run of equal values; ``in`` itself says which of them match
            arr, vset = _value_set(index.values.slice(lo, hi - lo), kind, values)
            hit = pc.is_in(arr, value_set=vset).to_numpy(zero_copy_only=False)
            out.extend(index.rows_between(lo + i, lo + i + 1) for i in np.flatnonzero(hit).tolist())
    return out


def _prefix_range(index: ValueIndex, prefix: str) -> tuple[int, int]:
    """Distinct strings starting with ``prefix`` (contiguous in byte order)."""
    lo = index.first(lambda s: s[0].as_py() >= prefix)

    def past(s: pa.Array) -> bool:
        text = s[0].as_py()
        return text > prefix and not text.startswith(prefix)

    return lo, index.first(past, lo)


def _result(index: ValueIndex, hits: list[np.ndarray], negate: bool, null: bool) -> pa.Array:
    """Booleans per row: true on ``hits`` (inverted by ``negate``), NULL on NULL rows
    unless ``null`` is false (``is null`` itself never answers NULL)."""
    mask = np.zeros(index.num_rows, bool)
    for rows in hits:
        mask[rows] = True
    if negate:
        np.logical_not(mask, out=mask)
    if null and len(index.nulls):
        valid = np.ones(index.num_rows, bool)
        valid[index.nulls] = False
        return pa.array(mask, pa.bool_(), mask=~valid)
    return pa.array(mask, pa.bool_())


def _target(node: Node) -> tuple[IndexKey, Kind | None] | None:
    """The index key an operand reads and, for a JSON path, that it is one."""
    if isinstance(node, Column):
        return (node.field.name, ()), None
    if isinstance(node, JsonPath):
        return (node.column_name, node.path), Kind.JSON
    return None


@dataclass
class _Hits:
    """An indexed predicate's answer before it becomes a per-row array: true on ``rows``
    (inverted by ``negate``), NULL on the index's NULL rows when ``null``."""

    index: ValueIndex
    rows: list[np.ndarray]
    negate: bool
    null: bool


def _hits(node: Node, n: int, indexes: Mapping[IndexKey, Any]) -> _Hits | None:
    """How an index answers ``node`` on a segment of ``n`` rows (``None``: it does not)."""

    def lookup(operand: Node, kinds: tuple[Kind, ...]) -> ValueIndex | None:
        target = _target(operand)
        if target is None:
            return None
        key, json = target
        entry = indexes.get(key)
        if entry is None:
            return None
        index, dtype = entry
        if index.num_rows != n:
            return None
        if json is not None and not all(k in _KINDS.get(dtype, ()) for k in kinds):
            return None  # the path's index holds another typed view than this one reads
        return index  # type: ignore[no-any-return]

    if isinstance(node, Compare):
        left, right = node.children
        op = node.op
        if isinstance(left, Const):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(right, Const):
            return None
        index = lookup(left, (right.kind,))
        if index is None:
            return None
        lo, hi = _compare_range(index, op, right.eval(_NO_ROWS))
        return _Hits(index, [index.rows_between(lo, hi)], op == "!=", True)
    if isinstance(node, InList):
        groups = _group(node.values)
        if len(groups) != 1:
            return None  # several kinds (a JSON path): each kind is a different view
        ((kind, values),) = groups.items()
        index = lookup(node.children[0], (kind,))
        if index is None:
            return None
        return _Hits(index, _in_rows(index, kind, values), node.negate, True)
    if isinstance(node, Like) and _PREFIX.fullmatch(node.pattern):
        index = lookup(node.children[0], (Kind.STRING,))
        if index is None:
            return None
        lo, hi = _prefix_range(index, node.pattern[:-1])
        return _Hits(index, [index.rows_between(lo, hi)], False, True)
    if isinstance(node, IsNull) and isinstance(node.children[0], Column):
        index = lookup(node.children[0], ())
        if index is None:
            return None
        return _Hits(index, [index.nulls], node.negate, False)
    return None


def _sorted_unique(parts: list[np.ndarray], n: int) -> np.ndarray:
    """The rows of ``parts`` once each, ascending: sorted when few, through a mask of the
    ``n`` rows when many (a mask is cheaper than sorting a large share of them)."""
    total = sum(len(p) for p in parts)
    if total * 32 > n:
        mask = np.zeros(n, bool)
        for p in parts:
            mask[p] = True
        return np.flatnonzero(mask)
    rows = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    return rows[np.r_[True, rows[1:] != rows[:-1]]] if len(rows) else rows


def answer(node: Node, ctx: Context, indexes: Mapping[IndexKey, Any]) -> pa.Array | None:
    """``node``'s value from an index, or ``None`` when no index covers it."""
    hits = _hits(node, ctx.n, indexes)
    return None if hits is None else _result(hits.index, hits.rows, hits.negate, hits.null)


def true_rows(node: Node, n: int, indexes: Mapping[IndexKey, Any]) -> np.ndarray | None:
    """The rows (ascending) where ``node`` is TRUE, when indexes answer all of it: indexed
    predicates joined by ``and`` / ``or`` (Kleene logic: TRUE and TRUE, TRUE or anything);
    ``None`` otherwise. No per-row array is built for a predicate that is not negated."""
    if isinstance(node, BoolOp):
        parts = [true_rows(c, n, indexes) for c in node.children]
        if any(p is None for p in parts):
            return None
        sets = sorted((p for p in parts if p is not None), key=len)
        if node.op == "or":
            return _sorted_unique(sets, n)
        acc = sets[0]
        for other in sets[1:]:
            member = np.zeros(n, bool)
            member[other] = True
            acc = acc[member[acc]]
        return acc
    if isinstance(node, Settled):
        # fill=False: NULL became false, so TRUE is the inner predicate's TRUE
        return None if node.fill else true_rows(node.children[0], n, indexes)
    hits = _hits(node, n, indexes)
    if hits is None:
        return None
    if not hits.negate:
        return _sorted_unique(hits.rows, n)
    result = _result(hits.index, hits.rows, hits.negate, hits.null)
    return np.flatnonzero(pc.fill_null(result, False).to_numpy(zero_copy_only=False))


_ANSWERABLE = (Compare, InList, Like, IsNull)


class IndexedContext(Context):
    """A :class:`Context` whose indexed predicates take their value from the index.

    ``indexes`` maps :data:`IndexKey` to ``(ValueIndex, indexed DataType)``; ``used``
    counts the predicates answered so."""

    def __init__(
        self,
        table: pa.Table | pa.RecordBatch,
        fields: dict[str, Field],
        indexes: Mapping[IndexKey, Any],
    ) -> None:
        super().__init__(table, fields)
        self.indexes = indexes
        self.used = 0
        self._answers: dict[int, pa.Array | None] = {}

    def value(self, node: Node) -> Value:
        if isinstance(node, _ANSWERABLE):
            key = id(node)
            if key not in self._answers:
                self._answers[key] = answer(node, self, self.indexes)
                self.used += self._answers[key] is not None
            found = self._answers[key]
            if found is not None:
                return found
        return super().value(node)
