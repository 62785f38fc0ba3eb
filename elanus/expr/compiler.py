"""Parse tree -> checked expression nodes, with errors that name the problem and its place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from elanus.errors import ElanusError, ErrorCode
from elanus.expr.expression import Expr
from elanus.expr.grammar import end_position, expected_words, last_token, parser
from elanus.expr.jsonsem import settle_json
from elanus.expr.literals import (
    BAD,
    INT64_MAX,
    INT64_MIN,
    LIST_PARAM,
    lift_lists,
    number_literal,
    param_value,
    show,
    unescape,
    value_desc,
)
from elanus.expr.nodes import (
    NUMERIC,
    SCALAR,
    Arith,
    ArrayColumn,
    ArrayElement,
    ArrayLength,
    BoolOp,
    Column,
    Compare,
    Const,
    Contains,
    Context,
    Exists,
    InList,
    IsNull,
    JsonPath,
    Kind,
    Like,
    ListConst,
    Node,
    Not,
    kind_of_value,
)
from elanus.expr.sample import NAME as SAMPLE
from elanus.expr.sample import check_placement, sample_node
from elanus.expr.textmatch import TEXT_FUNCTIONS, text_match_node
from elanus.schema import DYNAMIC_FIELD, DataType, Field, Schema

MAX_EXPRESSION_LENGTH = 1 << 20
#: name -> (mode, number of arguments)
FUNCTIONS: dict[str, tuple[str, int]] = {
    "json_contains": ("one", 2),
    "json_contains_all": ("all", 2),
    "json_contains_any": ("any", 2),
    "array_contains": ("one", 2),
    "array_contains_all": ("all", 2),
    "array_contains_any": ("any", 2),
    "array_length": ("length", 1),
}


def parse(text: str, schema: Schema, params: dict[str, Any] | None = None) -> Expr:
    """Parse and type-check a Milvus boolean expression against ``schema``.

    ``params`` fills ``{name}`` templates (scalars or lists). Raises
    ``ElanusError(BAD_EXPRESSION)`` naming the problem and its position.
    """
    if not isinstance(text, str):
        raise ElanusError(
            ErrorCode.BAD_EXPRESSION, f"the expression must be a string, not {type(text).__name__}"
        )
    compiler = _Compiler(text, schema, params or {})
    return Expr(text, settle_json(compiler.run()), schema)


class _Compiler:
    def __init__(self, text: str, schema: Schema, params: dict[str, Any]) -> None:
        self.text = text
        self.schema = schema
        self.params = params
        self.fields = {f.name: f for f in schema.fields}
        self.multiline = "\n" in text.strip()

    # -- errors ------------------------------------------------------------------------------
    def at(self, line: int, column: int) -> str:
        return f"line {line}, column {column}" if self.multiline else f"column {column}"

    def fail(self, message: str, line: int, column: int, hint: str = "") -> NoReturn:
        where = self.at(line, column)
        raise ElanusError(ErrorCode.BAD_EXPRESSION, f"{message} at {where}{hint}")

    def fail_at(self, message: str, where: Tree | Token | Node) -> NoReturn:
        line, column = _position(where)
        self.fail(message, line, column)

    def source(self, t: Tree | Token) -> str:
        if isinstance(t, Token):
            return str(t.value)
        if t.meta.empty:
            return "?"
        return self.text[t.meta.start_pos : t.meta.end_pos]

    # -- entry -------------------------------------------------------------------------------
    def run(self) -> Node:
        if not self.text.strip():
            self.fail("empty expression", 1, 1)
        if len(self.text) > MAX_EXPRESSION_LENGTH:
            self.fail(f"expression is longer than {MAX_EXPRESSION_LENGTH} characters", 1, 1)
        text, self.params = lift_lists(self.text, self.params)
        try:
            tree = parser().parse(text)
        except UnexpectedInput as e:
            self.syntax_error(e)
        try:
            root = self.node(tree)
        except RecursionError:
            self.fail("expression is nested too deeply", 1, 1)
        if root.kind not in (Kind.BOOL, Kind.JSON):
            self.fail_at(f"the filter must be a boolean expression, but {root.desc} is not", root)
        check_placement(root, self.fail_at)
        return root

    def syntax_error(self, e: UnexpectedInput) -> NoReturn:
        if isinstance(e, UnexpectedCharacters):
            pos = e.pos_in_stream or 0
            ch = self.text[pos] if pos < len(self.text) else ""
            if ch in ("'", '"'):
                self.fail("unterminated string literal", e.line, e.column)
            hint = " (use '==' to compare)" if ch == "=" else ""
            self.fail(f"unexpected character {ch!r}", e.line, e.column, hint)
        if isinstance(e, UnexpectedToken):
            expected = expected_words(e.expected)
            if e.token.type == "$END":
                last = last_token(self.text)
                after = f" after {last.value!r}" if last is not None else ""
                line, column = end_position(self.text)
                self.fail(
                    f"unexpected end of expression{after}", line, column, f"; expected {expected}"
                )
            tok = e.token
            shown = str(tok.value)
            if tok.start_pos is not None and tok.end_pos is not None:
                shown = self.text[tok.start_pos : tok.end_pos]  # not a lifted list's placeholder
            self.fail(f"unexpected token {shown!r}", tok.line, tok.column, f"; expected {expected}")
        self.fail(f"syntax error: {e}", e.line, e.column)

    # -- dispatch ----------------------------------------------------------------------------
    def node(self, t: Tree | Token) -> Node:
        if isinstance(t, Token):  # pragma: no cover - every atom is aliased to a tree
            self.fail_at(f"unexpected token {t.value!r}", t)
        method: Callable[[Tree], Node] | None = getattr(self, f"c_{t.data}", None)
        if method is None:  # pragma: no cover - grammar and compiler out of step
            self.fail_at(f"unsupported syntax {self.source(t)!r}", t)
        return method(t)

    def describe(self, t: Tree, kind: Kind) -> str:
        return f"{kind.value} expression {self.source(t)!r}"

    # -- boolean logic -----------------------------------------------------------------------
    def _bool_operand(self, n: Node, op: str) -> Node:
        if n.kind not in (Kind.BOOL, Kind.JSON):
            self.fail_at(f"'{op}' needs boolean operands, but {n.desc} is not boolean", n)
        return n

    def _flatten(self, t: Tree) -> list[Tree]:
        """Operands of a left-nested ``a or b or c`` chain, without recursion."""
        data = t.data
        out: list[Tree] = []
        while isinstance(t, Tree) and t.data == data:
            out.append(t.children[2])
            t = t.children[0]
        out.append(t)
        return out[::-1]

    def _boolop(self, t: Tree, op: str) -> Node:
        operands = [self._bool_operand(self.node(c), op) for c in self._flatten(t)]
        line, column = _position(t)
        return BoolOp(op, operands, self.describe(t, Kind.BOOL), line, column)

    def c_or_(self, t: Tree) -> Node:
        return self._boolop(t, "or")

    def c_and_(self, t: Tree) -> Node:
        return self._boolop(t, "and")

    def c_not_(self, t: Tree) -> Node:
        op = str(_token(t, 0).value).lower()
        operand = self._bool_operand(self.node(t.children[1]), op)
        if isinstance(operand, Const):
            return self.const(not operand.value, t)
        line, column = _position(t)
        return Not(operand, self.describe(t, Kind.BOOL), line, column)

    def c_exists(self, t: Tree) -> Node:
        target = self.node(t.children[1])
        if not isinstance(target, JsonPath) or not target.path:
            self.fail_at(
                f"'exists' needs a JSON path like meta[\"key\"], got {target.desc}", target
            )
        line, column = _position(t)
        return Exists(target, self.describe(t, Kind.BOOL), line, column)

    # -- comparisons -------------------------------------------------------------------------
    def c_compare(self, t: Tree) -> Node:
        items = t.children
        operands = [self.node(c) for c in items[0::2]]
        ops = [_token(t, i) for i in range(1, len(items), 2)]
        parts: list[Node] = []
        for i, op in enumerate(ops):
            parts.append(self.compare(str(op.value), operands[i], operands[i + 1], op, t))
        if len(parts) == 1:
            return parts[0]
        line, column = _position(t)
        return BoolOp("and", parts, self.describe(t, Kind.BOOL), line, column)

    def compare(self, op: str, left: Node, right: Node, tok: Token, t: Tree) -> Node:
        lk, rk = left.kind, right.kind
        if lk in (Kind.ARRAY, Kind.LIST) or rk in (Kind.ARRAY, Kind.LIST):
            bad = left if lk in (Kind.ARRAY, Kind.LIST) else right
            hint = " (use array_contains / json_contains)" if bad.kind is Kind.ARRAY else ""
            self.fail_at(f"cannot compare {left.desc} with {right.desc}{hint}", tok)
        ok = (
            Kind.JSON in (lk, rk)
            or (lk in NUMERIC and rk in NUMERIC)
            or (lk is Kind.STRING and rk is Kind.STRING)
            or (lk is Kind.BOOL and rk is Kind.BOOL)
        )
        if not ok:
            self.fail_at(f"cannot compare {left.desc} with {right.desc}", tok)
        if lk is Kind.BOOL and rk is Kind.BOOL and op not in ("==", "!="):
            self.fail_at(
                f"booleans can only be compared with == and !=, not {op!r} "
                f"({left.desc} {op} {right.desc})",
                tok,
            )
        left, right = _float32_literals(left, right)
        line, column = left.line, left.column
        desc = f"boolean expression {self.source(t)!r}"
        if isinstance(left, Const) and isinstance(right, Const):
            node = Compare(op, left, right, desc, line, column)
            return self.const(bool(node.eval(_EMPTY_CONTEXT).as_py()), t)
        return Compare(op, left, right, desc, line, column)

    def _in(self, t: Tree, negate: bool) -> Node:
        operand = self.node(t.children[0])
        values_tree = t.children[-1]
        values = self.node(values_tree)
        word = "not in" if negate else "in"
        if not isinstance(values, ListConst):
            self.fail_at(
                f"'{word}' needs a list like [1, 2] on its right, got {values.desc}", values
            )
        if operand.kind not in (*SCALAR, Kind.JSON):
            hint = " (use array_contains_any)" if operand.kind is Kind.ARRAY else ""
            self.fail_at(f"'{word}' cannot test {operand.desc}{hint}", operand)
        for v in values.values:
            self.check_value(operand, v, values, f"cannot compare {operand.desc} with")
        line, column = _position(t)
        if isinstance(operand, Const):
            group = _value_group(operand.value)
            found = any(_value_group(v) == group and v == operand.value for v in values.values)
            return self.const(found != negate, t)
        return InList(operand, values.values, negate, self.describe(t, Kind.BOOL), line, column)

    def c_in_(self, t: Tree) -> Node:
        return self._in(t, negate=False)

    def c_not_in(self, t: Tree) -> Node:
        return self._in(t, negate=True)

    def check_value(self, target: Node, v: Any, where: Node, message: str) -> None:
        """Fail unless literal ``v`` can be compared with ``target`` (scalar or array)."""
        vk = kind_of_value(v)
        if vk is Kind.LIST:
            self.fail_at(f"{message} nested list {show(v)} (nested lists are not supported)", where)
        tk = target.element_kind if isinstance(target, ArrayColumn) else target.kind
        if tk is Kind.JSON or tk == vk or (tk in NUMERIC and vk in NUMERIC):
            return
        self.fail_at(f"{message} {value_desc(v)}", where)

    def c_like(self, t: Tree) -> Node:
        operand = self.node(t.children[0])
        pattern = self.node(t.children[2])
        if operand.kind not in (Kind.STRING, Kind.JSON):
            self.fail_at(
                f"'like' needs a VarChar or JSON operand, got {operand.desc}", t.children[1]
            )
        if not isinstance(pattern, Const) or pattern.kind is not Kind.STRING:
            self.fail_at(f"'like' needs a string pattern, got {pattern.desc}", pattern)
        line, column = _position(t)
        node = Like(operand, pattern.value, self.describe(t, Kind.BOOL), line, column)
        if isinstance(operand, Const):
            return self.const(
                bool(pc.match_like(pa.array([operand.value]), pattern.value)[0].as_py()), t
            )
        return node

    def _is_null(self, t: Tree, negate: bool) -> Node:
        operand = self.node(t.children[0])
        if isinstance(operand, ListConst):
            self.fail_at(f"'is null' cannot test {operand.desc}", operand)
        if isinstance(operand, Const):
            return self.const(negate, t)
        line, column = _position(t)
        return IsNull(operand, negate, self.describe(t, Kind.BOOL), line, column)

    def c_is_null(self, t: Tree) -> Node:
        return self._is_null(t, negate=False)

    def c_is_not_null(self, t: Tree) -> Node:
        return self._is_null(t, negate=True)

    # -- arithmetic --------------------------------------------------------------------------
    def _numeric(self, n: Node, op: str, where: Tree | Token | Node) -> Node:
        if n.kind not in (*NUMERIC, Kind.JSON):
            self.fail_at(f"'{op}' needs numeric operands, got {n.desc}", where)
        return n

    def c_arith(self, t: Tree) -> Node:
        left_t, op_t, right_t = t.children[0], _token(t, 1), t.children[2]
        op = str(op_t.value)
        left = self._numeric(self.node(left_t), op, op_t)
        right = self._numeric(self.node(right_t), op, op_t)
        if op in ("/", "%") and isinstance(right, Const) and right.value == 0:
            self.fail_at(f"division by zero in {self.source(t)!r}", op_t)
        line, column = _position(t)
        node = Arith(op, [left, right], "", line, column)
        node.desc = self.describe(t, node.kind)
        return node

    def c_unary(self, t: Tree) -> Node:
        op_t, operand_t = _token(t, 0), t.children[1]
        op = str(op_t.value)
        if op == "-" and isinstance(operand_t, Tree) and operand_t.data == "number":
            negated = self.c_number(operand_t, negate=True)  # so -9223372036854775808 fits
            assert isinstance(negated, Const)
            return self.const(negated.value, t)
        operand = self._numeric(self.node(operand_t), op, op_t)
        if op == "+":
            return operand
        if isinstance(operand, Const):
            return self.const(-operand.value, t)
        line, column = _position(t)
        node = Arith("neg", [operand], "", line, column)
        node.desc = self.describe(t, node.kind)
        return node

    # -- paths and indexing ------------------------------------------------------------------
    def c_index(self, t: Tree) -> Node:
        base_t, bracket, key_t = t.children
        base = self.node(base_t)
        key = self.node(key_t)
        if not isinstance(key, Const) or key.kind not in (Kind.STRING, Kind.INT):
            self.fail_at(f"an index must be a string or integer literal, got {key.desc}", key)
        if key.kind is Kind.INT and key.value < 0:
            self.fail_at(f"an index must not be negative, got {key.value}", key)
        line, column = _position(base_t)
        src = self.source(t)
        if isinstance(base, JsonPath):
            desc = f"JSON value {src}"
            return JsonPath(base.column_name, (*base.path, key.value), desc, line, column)
        if isinstance(base, ArrayColumn):
            if key.kind is not Kind.INT:
                self.fail_at(f"{base.desc} takes an integer index, got {key.desc}", key)
            desc = f"{base.element_type.value} element {src}"
            return ArrayElement(base, key.value, desc, line, column)
        self.fail_at(f"cannot index {base.desc}: only JSON and Array fields take [...]", bracket)

    def c_name(self, t: Tree) -> Node:
        tok = _token(t, 0)
        name = str(tok.value)
        line, column = _position(tok)
        f = self.fields.get(name)
        if f is not None:
            return self.field_node(f, line, column)
        if self.schema.enable_dynamic_field:
            if name == DYNAMIC_FIELD:
                return JsonPath(DYNAMIC_FIELD, (), "dynamic field column $meta", line, column)
            return JsonPath(DYNAMIC_FIELD, (name,), f"dynamic field {name!r}", line, column)
        self.fail(f"unknown field {name!r}", line, column)

    def field_node(self, f: Field, line: int, column: int) -> Node:
        if f.dtype.is_vector:
            self.fail(f"vector field {f.name!r} cannot be used in a filter", line, column)
        if f.dtype == DataType.JSON:
            return JsonPath(f.name, (), f"JSON field {f.name!r}", line, column)
        if f.dtype == DataType.ARRAY:
            return ArrayColumn(f, line, column)
        return Column(f, line, column)

    # -- functions ---------------------------------------------------------------------------
    def c_call(self, t: Tree) -> Node:
        name_tok = _token(t, 0)
        args_t = t.children[1]
        name = str(name_tok.value)
        if name.lower() in TEXT_FUNCTIONS:
            text_args = [self.node(a) for a in (args_t.children if args_t is not None else [])]
            line, column = _position(name_tok)
            desc = self.describe(t, Kind.BOOL)
            return text_match_node(name, text_args, desc, line, column, self.fail_at, name_tok)
        if name.lower() == SAMPLE:
            args = [self.node(a) for a in (args_t.children if args_t is not None else [])]
            line, column = _position(name_tok)
            return sample_node(
                name,
                args,
                self.schema.primary,
                self.source(t),
                line,
                column,
                self.fail_at,
                name_tok,
            )
        spec = FUNCTIONS.get(name.lower())
        if spec is None:
            known = ", ".join(sorted([*FUNCTIONS, *TEXT_FUNCTIONS, SAMPLE]))
            self.fail_at(f"unknown function {name!r} (known: {known})", name_tok)
        mode, arity = spec
        arg_trees = list(args_t.children) if args_t is not None else []
        if len(arg_trees) != arity:
            plural = "s" if arity != 1 else ""
            self.fail_at(f"{name}() takes {arity} argument{plural}, got {len(arg_trees)}", name_tok)
        args = [self.node(a) for a in arg_trees]
        target = args[0]
        line, column = _position(name_tok)
        if not isinstance(target, ArrayColumn | JsonPath):
            self.fail_at(
                f"{name}() needs an Array field or a JSON value as its first argument, "
                f"got {target.desc}",
                target,
            )
        if mode == "length":
            return ArrayLength(target, self.describe(t, Kind.INT), line, column)
        value = args[1]
        if mode == "one":
            if not isinstance(value, Const):
                what = "a list" if isinstance(value, ListConst) else value.desc
                self.fail_at(
                    f"{name}() needs a literal value as its second argument, got {what}"
                    + (f" (use {name}_all or {name}_any)" if isinstance(value, ListConst) else ""),
                    value,
                )
            values = [value.value]
        else:
            if not isinstance(value, ListConst):
                self.fail_at(
                    f"{name}() needs a list as its second argument, got {value.desc}", value
                )
            values = value.values
        for v in values:
            self.check_value(target, v, value, f"{name}(): {target.desc} cannot contain")
        return Contains(target, values, mode, self.describe(t, Kind.BOOL), line, column)

    # -- literals ----------------------------------------------------------------------------
    def const(self, value: Any, t: Tree | Token) -> Const:
        line, column = _position(t)
        return Const(value, value_desc(value), line, column)

    def c_number(self, t: Tree, negate: bool = False) -> Node:
        tok = _token(t, 0)
        text = str(tok.value)
        value = number_literal(text, negate)
        if isinstance(value, str):
            self.fail_at(value, tok)
        return self.const(value, tok)

    def c_string(self, t: Tree) -> Node:
        tok = _token(t, 0)
        try:
            return self.const(unescape(str(tok.value)[1:-1]), tok)
        except ValueError as exc:
            self.fail_at(str(exc), tok)

    def c_true(self, t: Tree) -> Node:
        return self.const(True, t)

    def c_false(self, t: Tree) -> Node:
        return self.const(False, t)

    def c_list(self, t: Tree) -> Node:
        args_t = t.children[0]
        values: list[Any] = []
        for item_t in args_t.children if args_t is not None else []:
            item = self.node(item_t)
            if isinstance(item, ListConst):
                self.fail_at("nested lists are not supported", item)
            if not isinstance(item, Const):
                self.fail_at(f"list elements must be literals, got {item.desc}", item)
            values.append(item.value)
        line, column = _position(t)
        return ListConst(values, f"list {show(values)}", line, column)

    def c_template(self, t: Tree) -> Node:
        tok = _token(t, 0)
        name = str(tok.value)
        line, column = _position(t)
        if name not in self.params:
            self.fail(f"unknown template parameter {{{name}}}", line, column)
        value = param_value(self.params[name])
        if value is BAD:
            kind = type(self.params[name]).__name__
            self.fail(f"template parameter {{{name}}} has unsupported type {kind}", line, column)
        if isinstance(value, list) and name.startswith(LIST_PARAM):
            return ListConst(value, f"list {show(value)}", line, column)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, list):
                self.fail(f"template parameter {{{name}}} holds a nested list", line, column)
            if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
                self.fail(f"template parameter {{{name}}} = {v} is out of range", line, column)
        if isinstance(value, list):
            return ListConst(value, f"parameter {{{name}}} (list {show(value)})", line, column)
        return Const(value, f"parameter {{{name}}} ({value_desc(value)})", line, column)


_EMPTY_CONTEXT = Context(pa.table({}), {})


def _value_group(v: Any) -> str:
    return "number" if isinstance(v, int | float) and not isinstance(v, bool) else type(v).__name__


def _float32_literals(left: Node, right: Node) -> tuple[Node, Node]:
    """A number compared with a Float (float32) field is compared as float32, as in Milvus."""

    def is_f32(n: Node) -> bool:
        return isinstance(n, Column | ArrayElement) and pa.types.is_float32(n.arrow_type)

    if is_f32(left) and isinstance(right, Const):
        right = right.as_float32()
    elif is_f32(right) and isinstance(left, Const):
        left = left.as_float32()
    return left, right


def _token(t: Tree, i: int) -> Token:
    tok = t.children[i]
    assert isinstance(tok, Token)
    return tok


def _position(x: Tree | Token | Node) -> tuple[int, int]:
    if isinstance(x, Token):
        return x.line or 1, x.column or 1
    if isinstance(x, Node):
        return x.line, x.column
    if x.meta.empty:
        return 1, 1
    return x.meta.line, x.meta.column
