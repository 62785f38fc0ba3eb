"""Typed, checked expression nodes and their vectorised evaluation with Arrow compute.

Each node has a static :class:`Kind`; the compiler only builds well-typed trees, so the
evaluators here trust their operands' kinds. Evaluation follows SQL three-valued logic:
a comparison with NULL (a NULL column value, a missing JSON key, a JSON value of another
type) is NULL, ``and``/``or`` are Kleene, ``not NULL`` is NULL; the caller turns NULL into
false at the very end. Predicates on JSON paths then get Milvus's answers (``jsonsem.py``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.errors import ElanusError, ErrorCode
from elanus.expr.values import (
    JsonValues,
    decode_json,
    list_element,
    list_length,
    list_parts,
    mask_array,
    normalize,
)
from elanus.schema import DYNAMIC_FIELD, DataType, Field

Value = Any  # pa.Array | pa.Scalar | JsonValues
Quote = Callable[[str], str]


class Kind(enum.Enum):
    BOOL = "boolean"
    INT = "integer"
    FLOAT = "floating-point"
    STRING = "string"
    JSON = "JSON"
    ARRAY = "array"
    LIST = "list"


NUMERIC = (Kind.INT, Kind.FLOAT)
SCALAR = (Kind.BOOL, Kind.INT, Kind.FLOAT, Kind.STRING)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def kind_of_dtype(dt: DataType) -> Kind:
    if dt == DataType.BOOL:
        return Kind.BOOL
    if dt in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64):
        return Kind.INT
    if dt in (DataType.FLOAT, DataType.DOUBLE):
        return Kind.FLOAT
    if dt == DataType.VARCHAR:
        return Kind.STRING
    if dt == DataType.JSON:
        return Kind.JSON
    return Kind.ARRAY


def kind_of_value(v: Any) -> Kind:
    if isinstance(v, bool):
        return Kind.BOOL
    if isinstance(v, int):
        return Kind.INT
    if isinstance(v, float):
        return Kind.FLOAT
    if isinstance(v, str):
        return Kind.STRING
    return Kind.LIST


class Context:
    """Per-evaluation state: the table, decoded JSON columns and memoised node values."""

    def __init__(self, table: pa.Table | pa.RecordBatch, fields: dict[str, Field]) -> None:
        self.table = table
        self.n = table.num_rows
        self.fields = fields
        self._columns: dict[str, pa.Array] = {}
        self._json: dict[tuple[str, tuple[str | int, ...]], JsonValues] = {}
        self._values: dict[int, Value] = {}
        self.text_indexes: Any = None  # a textmatch.TextIndexes: where text indexes come from

    def column(self, name: str) -> pa.Array:
        if name not in self._columns:
            if name in self.table.column_names:
                arr = normalize(self.table.column(name))
            elif name == DYNAMIC_FIELD:
                arr = pa.nulls(self.n, pa.string())
            elif name in self.fields and self.fields[name].nullable:
                arr = pa.nulls(self.n, self.fields[name].arrow_type())
            else:
                raise ElanusError(
                    ErrorCode.SCHEMA_MISMATCH,
                    f"the filter needs column {name!r}, which the data does not have",
                )
            self._columns[name] = arr
        return self._columns[name]

    def json(self, name: str, path: tuple[str | int, ...]) -> JsonValues:
        key = (name, path)
        if key not in self._json:
            if not path:
                self._json[key] = decode_json(self.column(name))
            else:
                parent = self.json(name, path[:-1])
                step = path[-1]
                self._json[key] = parent.index(step) if isinstance(step, int) else parent.get(step)
        return self._json[key]

    def value(self, node: Node) -> Value:
        key = id(node)
        if key not in self._values:
            self._values[key] = node.eval(self)
        return self._values[key]


class Node:
    """A checked expression node. ``desc`` names it in error messages."""

    kind: Kind = Kind.BOOL
    children: tuple[Node, ...] = ()

    def __init__(self, desc: str, line: int, column: int) -> None:
        self.desc = desc
        self.line = line
        self.column = column

    def eval(self, ctx: Context) -> Value:
        raise NotImplementedError

    def columns(self) -> set[str]:
        return set().union(*(c.columns() for c in self.children))

    def sql(self, quote: Quote) -> str | None:
        return None


# ---- leaves -------------------------------------------------------------------------------------
class Const(Node):
    def __init__(
        self, value: Any, desc: str, line: int, column: int, arrow_type: pa.DataType | None = None
    ) -> None:
        super().__init__(desc, line, column)
        self.value = value
        self.kind = kind_of_value(value)
        self.arrow_type = arrow_type or {
            Kind.BOOL: pa.bool_(),
            Kind.INT: pa.int64(),
            Kind.FLOAT: pa.float64(),
            Kind.STRING: pa.string(),
        }.get(self.kind, pa.null())

    def as_float32(self) -> Const:
        """This number as float32 (to compare with a Float field as Milvus does)."""
        if self.kind not in NUMERIC or abs(self.value) > _FLOAT32_MAX:
            return self
        return Const(self.value, self.desc, self.line, self.column, pa.float32())

    def eval(self, ctx: Context) -> Value:
        return pa.scalar(self.value, self.arrow_type)

    def sql(self, quote: Quote) -> str | None:
        return sql_literal(self.value, self.arrow_type)


class ListConst(Node):
    kind = Kind.LIST

    def __init__(self, values: list[Any], desc: str, line: int, column: int) -> None:
        super().__init__(desc, line, column)
        self.values = values


class Column(Node):
    """A scalar (Bool, numbers, VarChar) column."""

    def __init__(self, f: Field, line: int, column: int) -> None:
        super().__init__(f"{f.dtype.value} field {f.name!r}", line, column)
        self.field = f
        self.kind = kind_of_dtype(f.dtype)
        self.arrow_type = f.arrow_type()

    def eval(self, ctx: Context) -> Value:
        return ctx.column(self.field.name)

    def columns(self) -> set[str]:
        return {self.field.name}

    def sql(self, quote: Quote) -> str | None:
        return quote(self.field.name)


class ArrayColumn(Node):
    kind = Kind.ARRAY

    def __init__(self, f: Field, line: int, column: int) -> None:
        assert f.element_type is not None
        super().__init__(f"Array<{f.element_type.value}> field {f.name!r}", line, column)
        self.field = f
        self.element_type: DataType = f.element_type
        self.element_kind = kind_of_dtype(f.element_type)

    def eval(self, ctx: Context) -> Value:
        return ctx.column(self.field.name)

    def columns(self) -> set[str]:
        return {self.field.name}


class ArrayElement(Node):
    def __init__(self, array: ArrayColumn, index: int, desc: str, line: int, column: int) -> None:
        super().__init__(desc, line, column)
        self.array = array
        self.index = index
        self.children = (array,)
        self.kind = array.element_kind
        self.arrow_type = Field("x", array.element_type).arrow_type()

    def eval(self, ctx: Context) -> Value:
        return list_element(ctx.value(self.array), self.index)


class JsonPath(Node):
    """A value inside a JSON column (or the dynamic ``$meta`` column): ``meta["a"][0]``."""

    kind = Kind.JSON

    def __init__(
        self, column_name: str, path: tuple[str | int, ...], desc: str, line: int, column: int
    ) -> None:
        super().__init__(desc, line, column)
        self.column_name = column_name
        self.path = path

    def eval(self, ctx: Context) -> Value:
        return ctx.json(self.column_name, self.path)

    def columns(self) -> set[str]:
        return {self.column_name}


# ---- typed views --------------------------------------------------------------------------------
def view(node: Node, want: Kind, ctx: Context) -> Value:
    """The node's value as an Arrow array/scalar of kind ``want`` (JSON is narrowed)."""
    v = ctx.value(node)
    if node.kind is not Kind.JSON:
        return v
    if want in NUMERIC:
        return v.number()
    if want is Kind.STRING:
        return v.string()
    if want is Kind.BOOL:
        return v.boolean()
    raise AssertionError(want)


def predicate(node: Node, ctx: Context) -> Value:
    return view(node, Kind.BOOL, ctx)


def _broadcast(v: Value, n: int) -> pa.Array:
    return pa.repeat(v, n) if isinstance(v, pa.Scalar) else v


def to_float64(v: Value) -> Value:
    """``v`` (an Arrow array or scalar) as float64, rounding integers above 2**53 to the
    nearest double as C++ and Milvus do, where Arrow's checked cast would raise."""
    return pc.cast(v, pa.float64(), safe=False)


def numeric_pair(a: Value, b: Value) -> tuple[Value, Value]:
    """Operands of one comparison: an integer beside a float is compared as a double."""
    a_int, b_int = pa.types.is_integer(a.type), pa.types.is_integer(b.type)
    if a_int and pa.types.is_floating(b.type):
        return to_float64(a), b
    if b_int and pa.types.is_floating(a.type):
        return a, to_float64(b)
    return a, b


def _null_where(mask: Value, result: Value) -> Value:
    """``result`` with NULL where ``mask`` (is_null of an operand) is true."""
    return pc.if_else(mask, pa.scalar(None, pa.bool_()), result)


# ---- operators ----------------------------------------------------------------------------------
_CMP = {
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
_SQL_CMP = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class Compare(Node):
    def __init__(self, op: str, left: Node, right: Node, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.op = op
        self.children = (left, right)

    def eval(self, ctx: Context) -> Value:
        left, right = self.children
        fn = _CMP[self.op]
        if left.kind is Kind.JSON and right.kind is Kind.JSON:
            lv, rv = ctx.value(left), ctx.value(right)
            parts = [fn(*numeric_pair(lv.number(), rv.number())), fn(lv.string(), rv.string())]
            if self.op in ("==", "!="):
                parts.append(fn(lv.boolean(), rv.boolean()))
            return pc.coalesce(*parts)
        want = right.kind if left.kind is Kind.JSON else left.kind
        return fn(*numeric_pair(view(left, want, ctx), view(right, want, ctx)))

    def sql(self, quote: Quote) -> str | None:
        left, right = (c.sql(quote) for c in self.children)
        if left is None or right is None:
            return None
        return f"({left} {_SQL_CMP[self.op]} {right})"


class BoolOp(Node):
    """n-ary ``and`` / ``or`` (Kleene logic)."""

    def __init__(self, op: str, operands: Sequence[Node], desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.op = op
        self.children = tuple(operands)

    def eval(self, ctx: Context) -> Value:
        fn = pc.and_kleene if self.op == "and" else pc.or_kleene
        acc = predicate(self.children[0], ctx)
        for child in self.children[1:]:
            acc = fn(acc, predicate(child, ctx))
        return acc

    def sql(self, quote: Quote) -> str | None:
        parts = [c.sql(quote) for c in self.children]
        if any(p is None for p in parts):
            return None
        return "(" + f" {self.op.upper()} ".join(p for p in parts if p is not None) + ")"


class Not(Node):
    def __init__(self, operand: Node, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.children = (operand,)

    def eval(self, ctx: Context) -> Value:
        return pc.invert(predicate(self.children[0], ctx))

    def sql(self, quote: Quote) -> str | None:
        inner = self.children[0].sql(quote)
        return None if inner is None else f"(NOT {inner})"


class IsNull(Node):
    def __init__(self, operand: Node, negate: bool, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.negate = negate
        self.children = (operand,)

    def eval(self, ctx: Context) -> Value:
        operand = self.children[0]
        v = ctx.value(operand)
        null = v.is_null() if operand.kind is Kind.JSON else pc.is_null(v)
        return pc.invert(null) if self.negate else null

    def sql(self, quote: Quote) -> str | None:
        inner = self.children[0].sql(quote)
        if inner is None:
            return None
        return f"({inner} IS {'NOT ' if self.negate else ''}NULL)"


class Exists(Node):
    def __init__(self, path: JsonPath, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.children = (path,)

    def eval(self, ctx: Context) -> Value:
        return pc.invert(ctx.value(self.children[0]).is_null())


class Like(Node):
    def __init__(self, operand: Node, pattern: str, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.pattern = pattern
        self.children = (operand,)

    def eval(self, ctx: Context) -> Value:
        v = _broadcast(view(self.children[0], Kind.STRING, ctx), ctx.n)
        return pc.match_like(v, self.pattern)

    def sql(self, quote: Quote) -> str | None:
        inner = self.children[0].sql(quote)
        if inner is None or "\\" in self.pattern:
            return None
        return f"({inner} LIKE {sql_literal(self.pattern, pa.string())})"


def _group(values: Iterable[Any]) -> dict[Kind, list[Any]]:
    """Distinct values by kind (numbers together; ``True`` is not ``1``)."""
    groups: dict[Kind, list[Any]] = {}
    seen: dict[Kind, set[Any]] = {}
    for v in values:
        k = kind_of_value(v)
        k = Kind.FLOAT if k is Kind.INT else k
        if v not in seen.setdefault(k, set()):
            seen[k].add(v)
            groups.setdefault(k, []).append(v)
    return groups


def _value_set(arr: pa.Array, kind: Kind, values: list[Any]) -> tuple[pa.Array, pa.Array]:
    """``arr`` (a typed view) and ``values`` as one Arrow type, for is_in / index_in."""
    if kind is Kind.FLOAT:
        t = arr.type
        if pa.types.is_float32(t) and all(abs(v) <= _FLOAT32_MAX for v in values):
            return arr, pa.array(values, pa.float32())
        if pa.types.is_integer(t) and all(isinstance(v, int) for v in values):
            return arr.cast(pa.int64()), pa.array(values, pa.int64())
        return to_float64(arr), pa.array([float(v) for v in values], pa.float64())
    t = pa.string() if kind is Kind.STRING else pa.bool_()
    return arr.cast(t), pa.array(values, t)


class InList(Node):
    def __init__(
        self, operand: Node, values: list[Any], negate: bool, desc: str, line: int, column: int
    ):
        super().__init__(desc, line, column)
        self.values = values
        self.negate = negate
        self.children = (operand,)

    def eval(self, ctx: Context) -> Value:
        operand = self.children[0]
        groups = _group(self.values)
        parts = []
        for kind, values in groups.items():
            v = _broadcast(view(operand, kind, ctx), ctx.n)
            arr, vset = _value_set(v, kind, values)
            parts.append(_null_where(pc.is_null(arr), pc.is_in(arr, value_set=vset)))
        if not parts:  # ``x in []``: false, or NULL where x is NULL
            v = ctx.value(operand)
            null = v.is_null() if operand.kind is Kind.JSON else pc.is_null(_broadcast(v, ctx.n))
            parts.append(_null_where(null, pa.repeat(pa.scalar(False), ctx.n)))
        # A JSON value has one type, so at most one group gives a non-NULL answer.
        result = pc.coalesce(*parts) if len(parts) > 1 else parts[0]
        return pc.invert(result) if self.negate else result

    def sql(self, quote: Quote) -> str | None:
        inner = self.children[0].sql(quote)
        if inner is None or not self.values:
            return None
        items = ", ".join(str(sql_literal(v, None)) for v in self.values)
        return f"({inner} {'NOT IN' if self.negate else 'IN'} ({items}))"


class Arith(Node):
    def __init__(self, op: str, operands: Sequence[Node], desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.op = op
        self.children = tuple(operands)
        kinds = [c.kind for c in operands]
        self.kind = Kind.INT if all(k is Kind.INT for k in kinds) and op != "**" else Kind.FLOAT

    def _operand(self, node: Node, ctx: Context) -> Value:
        v = view(node, Kind.FLOAT, ctx)
        return v.cast(pa.int64()) if self.kind is Kind.INT else to_float64(v)

    def eval(self, ctx: Context) -> Value:
        if self.op == "neg":
            return pc.negate(self._operand(self.children[0], ctx))
        a, b = (self._operand(c, ctx) for c in self.children)
        if self.op in ("/", "%") and not isinstance(b, pa.Scalar):
            b = pc.if_else(pc.equal(b, 0), pa.scalar(None, b.type), b)  # x / 0 is NULL
        fn = {
            "+": pc.add,
            "-": pc.subtract,
            "*": pc.multiply,
            "/": pc.divide,
            "%": pc.remainder,
            "**": pc.power,
        }[self.op]
        return fn(a, b)

    def sql(self, quote: Quote) -> str | None:
        parts = [c.sql(quote) for c in self.children]
        if any(p is None for p in parts):
            return None
        if self.op == "neg":
            return f"(-{parts[0]})"
        if self.op not in ("+", "-", "*"):
            return None  # integer division and remainder differ between engines
        return f"({parts[0]} {self.op} {parts[1]})"


class Contains(Node):
    """``array_contains`` / ``json_contains`` (mode ``one``), ``..._all``, ``..._any``."""

    def __init__(
        self, target: Node, values: list[Any], mode: str, desc: str, line: int, column: int
    ):
        super().__init__(desc, line, column)
        self.values = values
        self.mode = mode
        self.children = (target,)

    def _parts(self, ctx: Context) -> tuple[Callable[[Kind], pa.Array], np.ndarray, np.ndarray]:
        target = self.children[0]
        if target.kind is Kind.JSON:
            elements, parents, valid = ctx.value(target).array_parts()
            views: dict[Kind, Callable[[], pa.Array]] = {
                Kind.FLOAT: elements.number,
                Kind.STRING: elements.string,
                Kind.BOOL: elements.boolean,
            }
            return (lambda k: views[k]()), parents, valid
        flat, parents, valid = list_parts(ctx.value(target))
        return (lambda k: flat), parents, valid

    def eval(self, ctx: Context) -> Value:
        element_view, parents, valid = self._parts(ctx)
        groups = _group(self.values)
        n = ctx.n
        if self.mode in ("one", "any"):
            hit_rows: list[np.ndarray] = []
            for kind, values in groups.items():
                arr, vset = _value_set(element_view(kind), kind, values)
                hits = np.asarray(pc.fill_null(pc.is_in(arr, value_set=vset), False), dtype=bool)
                hit_rows.append(parents[hits])
            found = np.zeros(n, dtype=bool)
            for rows in hit_rows:
                found[rows] = True
            return mask_array(found, valid)
        total = sum(len(v) for v in groups.values())
        if total == 0:
            return mask_array(np.ones(n, dtype=bool), valid)
        # For each (row, wanted value) pair seen, mark it; a row matches if it saw them all.
        row_parts: list[np.ndarray] = []
        slot_parts: list[np.ndarray] = []
        base = 0
        for kind, values in groups.items():
            arr, vset = _value_set(element_view(kind), kind, values)
            pos = np.asarray(pc.fill_null(pc.index_in(arr, value_set=vset), -1), dtype=np.int64)
            sel = pos >= 0
            row_parts.append(parents[sel])
            slot_parts.append(base + pos[sel])
            base += len(values)
        row, slot = np.concatenate(row_parts), np.concatenate(slot_parts)
        if n * total <= 1 << 26:
            seen = np.zeros((n, total), dtype=bool)
            seen[row, slot] = True
            return mask_array(np.asarray(seen.all(axis=1)), valid)
        distinct = np.unique(row * total + slot)
        counts = np.bincount(distinct // total, minlength=n)
        return mask_array(counts == total, valid)


class ArrayLength(Node):
    kind = Kind.INT

    def __init__(self, target: Node, desc: str, line: int, column: int):
        super().__init__(desc, line, column)
        self.children = (target,)

    def eval(self, ctx: Context) -> Value:
        target = self.children[0]
        v = ctx.value(target)
        return v.array_length() if target.kind is Kind.JSON else list_length(v)


# ---- SQL ----------------------------------------------------------------------------------------
def sql_literal(value: Any, arrow_type: pa.DataType | None) -> str | None:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        text = repr(value)
        if arrow_type is not None and pa.types.is_float32(arrow_type):
            return f"CAST({text} AS FLOAT)"
        return text
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return None
