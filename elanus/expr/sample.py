"""``RANDOM_SAMPLE(p)`` (Milvus 2.6): keep about a fraction ``p`` (0 < p < 1) of the rows
the rest of the filter keeps.

As in Milvus's grammar it stands alone or as the last term of the filter's top-level
``and`` (``color == "red" and RANDOM_SAMPLE(0.1)``: filter, then sample); under ``or`` or
``not``, before another ``and`` term, or with anything but a literal factor it is refused,
naming its place.

A row is kept when a hash of its primary key falls below ``p`` of the hash range
(``elanus.pkhash``, vectorised over the key column), so each row is drawn independently
with probability ``p``, on whatever segment, shard or compaction result it lives: the same
filter samples the same rows each time (the pages of a query iterator agree, and a larger
``p`` keeps a superset). Milvus draws anew on each query, per segment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa

from elanus.expr.nodes import BoolOp, Const, Context, Node, Value
from elanus.pkhash import hash_pks, splitmix64
from elanus.schema import Field

NAME = "random_sample"
_SALT = np.uint64(0x5A3D_1E07_C0FF_EE11)
"""Mixed into the key hash so the sample does not follow the shard routing's hash."""

Fail = Callable[[str, Any], NoReturn]


class RandomSample(Node):
    """``RANDOM_SAMPLE(factor)``: TRUE for the rows whose key hash falls in the sample."""

    def __init__(self, pk: Field, factor: float, desc: str, line: int, column: int) -> None:
        super().__init__(desc, line, column)
        self.pk = pk
        self.factor = factor

    def columns(self) -> set[str]:
        return {self.pk.name}

    def eval(self, ctx: Context) -> Value:
        keys = ctx.column(self.pk.name)
        if not len(keys):
            return pa.array([], pa.bool_())
        mixed = splitmix64(hash_pks(keys) ^ _SALT)
        bound = np.uint64(min(int(self.factor * 2.0**64), 2**64 - 1))
        return pa.array(mixed < bound, pa.bool_())


def sample_node(
    name: str,
    args: list[Node],
    pk: Field,
    desc: str,
    line: int,
    column: int,
    fail: Fail,
    where: Any,
) -> RandomSample:
    """The node of a ``RANDOM_SAMPLE(...)`` call (``name`` as written, at ``where``), its
    one argument checked."""
    if len(args) != 1:
        fail(f"{name}() takes 1 argument, the sampling factor, got {len(args)}", where)
    factor = args[0]
    value = factor.value if isinstance(factor, Const) else None
    if not isinstance(value, float) or not 0.0 < value < 1.0:
        fail(
            f"{name}() needs a literal number strictly between 0 and 1 (the fraction of rows "
            f"to keep), got {factor.desc}",
            factor,
        )
    return RandomSample(pk, value, desc, line, column)


def check_placement(root: Node, fail: Fail) -> None:
    """Refuse a ``RANDOM_SAMPLE`` anywhere but alone or last in the top-level ``and``."""
    allowed = sampled(root)
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, RandomSample) and node is not allowed:
            fail(
                f"{node.desc} must be the whole filter or the last term of its top-level "
                "'and' (it samples the rows the rest of the filter keeps; not under 'or' "
                "or 'not')",
                node,
            )
        stack.extend(node.children)


def sampled(root: Node) -> RandomSample | None:
    """The ``RANDOM_SAMPLE`` a filter ends with (alone, or the last term of its top-level
    ``and``, however parenthesised), else None."""
    node = root
    while isinstance(node, BoolOp) and node.op == "and":
        node = node.children[-1]
    return node if isinstance(node, RandomSample) else None
