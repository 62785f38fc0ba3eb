"""Milvus-style boolean filter expressions: parse, type-check, evaluate with Arrow compute.

    expr = parse('age > {min} and color in ["red", "blue"]', schema, {"min": 18})
    mask = expr.evaluate(table)          # pa.BooleanArray, NULL counted as false
    expr.fields                          # {"age", "$meta"}: the columns to load
    expr.to_sql()                        # a pushdown predicate, or None

See ``elanus.expr.grammar`` for the language and ``elanus.expr.values`` for JSON handling.
"""

from elanus.expr.cache import parse_cached
from elanus.expr.compiler import FUNCTIONS, parse
from elanus.expr.expression import Expr
from elanus.expr.nodes import Kind
from elanus.expr.sample import sampled

__all__ = ["FUNCTIONS", "Expr", "Kind", "parse", "parse_cached", "sampled"]
