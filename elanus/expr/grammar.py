"""The grammar of Milvus-style boolean filter expressions (LALR(1), parsed by lark).

Precedence, loosest first::

    or  ||            left-assoc
    and &&            left-assoc
    not !  exists     prefix
    == != < <= > >=   chained: ``1 < a <= 5`` means ``1 < a and a <= 5``
    in / not in / like / is [not] null
    + -               left-assoc
    * / %             left-assoc
    unary + -         prefix
    **                right-assoc, binds tighter than unary minus (``-2 ** 2 == -4``)
    x[...]            JSON path / array index
    atoms             literals, names, calls, ``{param}``, ``[list]``, ``( ... )``

Keywords are case-insensitive (``and``/``AND``/``And``) and whole words only, so a field
called ``order`` or ``in_stock`` is still a name. Unlike Milvus's ANTLR grammar, ``not``
binds looser than comparisons (``not a == 1`` is ``not (a == 1)``), as in SQL and Python.
"""

from __future__ import annotations

import functools

from lark import Lark, Token
from lark.exceptions import UnexpectedInput

GRAMMAR = r"""
?start: or_test

?or_test: and_test
        | or_test OR and_test                   -> or_
?and_test: not_test
        | and_test AND not_test                 -> and_
?not_test: comparison
        | NOT not_test                          -> not_
        | BANG not_test                         -> not_
        | EXISTS postfix                        -> exists
?comparison: sum
        | sum (CMP sum)+                        -> compare
        | sum IN sum                            -> in_
        | sum NOT IN sum                        -> not_in
        | sum LIKE sum                          -> like
        | sum IS NULL                           -> is_null
        | sum IS NOT NULL                       -> is_not_null
?sum: product
        | sum ADD_OP product                    -> arith
?product: unary
        | product MUL_OP unary                  -> arith
?unary: power
        | ADD_OP unary                          -> unary
?power: postfix
        | postfix POW unary                     -> arith
?postfix: atom
        | postfix LSQB or_test "]"              -> index
?atom: NUMBER                                   -> number
        | STRING                                -> string
        | TRUE                                  -> true
        | FALSE                                 -> false
        | NAME                                  -> name
        | NAME "(" [args] ")"                   -> call
        | "{" NAME "}"                          -> template
        | "[" [args] "]"                        -> list
        | "(" or_test ")"
args: or_test ("," or_test)* ","?

OR.2: /\|\||(?i:or)\b/
AND.2: /&&|(?i:and)\b/
NOT.2: /(?i:not)\b/
IN.2: /(?i:in)\b/
LIKE.2: /(?i:like)\b/
IS.2: /(?i:is)\b/
NULL.2: /(?i:null)\b/
EXISTS.2: /(?i:exists)\b/
TRUE.2: /(?i:true)\b/
FALSE.2: /(?i:false)\b/
BANG: "!"
CMP: /==|!=|<=|>=|<|>/
ADD_OP: /[+-]/
POW: "**"
MUL_OP: /[*\/%]/
LSQB: "["
NAME: /\$meta\b|[A-Za-z_][A-Za-z0-9_]*/
NUMBER: /(?:\d|\.\d)(?:[eE][+-]\d|[\w.])*/
STRING: /"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/

%import common.WS
%ignore WS
"""

#: Human names of terminals, for "expected one of ..." in syntax errors.
TERMINAL_NAMES: dict[str, str] = {
    "OR": "'or'",
    "AND": "'and'",
    "NOT": "'not'",
    "IN": "'in'",
    "LIKE": "'like'",
    "IS": "'is'",
    "NULL": "'null'",
    "EXISTS": "'exists'",
    "TRUE": "'true'",
    "FALSE": "'false'",
    "BANG": "'!'",
    "CMP": "a comparison (== != < <= > >=)",
    "ADD_OP": "'+' or '-'",
    "POW": "'**'",
    "MUL_OP": "'*', '/' or '%'",
    "NAME": "a field name",
    "NUMBER": "a number",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "$END": "the end of the expression",
}


@functools.cache
def parser() -> Lark:
    """The (cached) LALR parser; trees carry positions (``tree.meta``)."""
    return Lark(
        GRAMMAR,
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        maybe_placeholders=True,
    )


def expected_words(names: set[str]) -> str:
    """What the parser wanted next, in words, for a syntax error."""
    operand = {"NAME", "NUMBER", "STRING"}
    if operand <= names:
        return "a value (a field, a literal, a function call, '[' or '(')"
    shown = sorted({TERMINAL_NAMES.get(n, n) for n in names})
    if len(shown) == 1:
        return shown[0]
    return "one of " + ", ".join(shown)


def last_token(text: str) -> Token | None:
    """The last token the lexer reads from ``text`` (the place of an unexpected end)."""
    last: Token | None = None
    try:
        for tok in parser().lex(text):
            last = tok
    except UnexpectedInput:
        return last
    return last


def end_position(text: str) -> tuple[int, int]:
    """(line, column) just after the last non-blank character of ``text``."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column
