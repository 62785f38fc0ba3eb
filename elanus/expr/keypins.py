"""Which values of one field a filter pins (Milvus's partition key pruning).

``pinned_values(expr, "key")`` is the set of values the field must take in every row the
filter can match, or None when the filter does not narrow it to a finite set. Only forms
that surely pin are read: ``key == c`` (either side), ``key in [...]``, and ``and`` / ``or``
of those; ``and`` intersects what its operands pin (an operand that pins nothing leaves the
other's set), ``or`` unites them (and pins nothing if one operand pins nothing). Anything
else — ``not``, ``!=``, ranges, arithmetic — pins nothing, so it never prunes a partition
that may hold a match. ``read_partitions`` turns those values into the partitions a read of a
partition key collection visits.
"""

from __future__ import annotations

from typing import Any

from elanus.expr.cache import parse_cached
from elanus.expr.compiler import Expr
from elanus.expr.nodes import BoolOp, Column, Compare, Const, InList, Node
from elanus.partitionkey import key_partition_ids, partitions_of_values
from elanus.schema import DataType, Field, Schema

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


def read_partitions(
    schema: Schema,
    partitions: dict[str, int],
    collection: str,
    text: str | None,
    params: dict[str, Any] | None,
) -> list[int] | None:
    """The partitions a read with filter ``text`` must visit in a partition key collection:
    those of the key values the filter pins, or None (all) when it pins none."""
    key = schema.partition_key
    if key is None or not text:
        return None
    values = pinned_values(parse_cached(text, schema, params), key)
    if not values:  # not pinned, or pinned to no value (nothing matches): read all
        return None
    ids = key_partition_ids(partitions, collection)
    return sorted({ids[i] for i in partitions_of_values(key, values, len(ids))})
