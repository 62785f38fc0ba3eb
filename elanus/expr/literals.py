"""The literal text of a filter expression: number literals (C-style octal and hex, int64
range), string escapes (Go's, as Milvus unquotes them), template parameter values, how a
value is shown in a message, and the lifting of long literal lists (``id in [1, 2, ...]``)
out of the text into parameters before parsing."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RE = re.compile(r"0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*")
_FLOAT_RE = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "a": "\a",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "/": "/",
}


def number_literal(text: str, negate: bool = False) -> int | float | str:
    """The value of a number literal, or a message saying why it is not one."""
    sign = "-" if negate else ""
    if _INT_RE.fullmatch(text):
        if text[:2].lower() in ("0x", "0b", "0o"):
            value = int(text, 0)
        elif len(text) > 1 and text.startswith("0"):
            value = int(text, 8)  # C-style octal, as in Milvus
        else:
            value = int(text)
        value = -value if negate else value
        if not INT64_MIN <= value <= INT64_MAX:
            return f"integer literal {sign}{text} is out of range"
        return value
    if _FLOAT_RE.fullmatch(text):
        f = float(text)
        if not math.isfinite(f):
            return f"number literal {sign}{text} is out of range"
        return -f if negate else f
    return f"invalid number literal {text!r}"


def unescape(body: str) -> str:
    """Go's string escapes, as Milvus unquotes literals: an unknown one (``\\_``) is an
    error, so a like pattern escapes ``%`` and ``_`` with a doubled backslash."""

    def sub(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[esc]
        if esc[0] in "uUx" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        if esc[0] in "01234567":
            return chr(int(esc, 8))
        raise ValueError(f"unknown escape sequence \\{esc}")

    return _ESCAPE_RE.sub(sub, body)


# Long lists of literals (``id in [1, 2, ...]`` with thousands of keys) are common and
# slow to parse token by token, so before parsing they are lifted out of the text into
# internal template parameters; the placeholder is padded to the list's length so every
# later position is unchanged. Lists that do not fit this shape are left to the parser.
LIST_PARAM = "__elanus_list_"


_MIN_LIFTED = 16
_STR = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
_LIT = rf"(?:-[ \t]*)?(?:\d|\.\d)(?:[eE][+-]\d|[\w.])*|{_STR}|(?i:true|false)\b"
_SCAN_RE = re.compile(rf"{_STR}|\[\s*(?:(?:{_LIT})\s*,\s*)*(?:{_LIT})\s*,?\s*\]")
_ITEM_RE = re.compile(_LIT)


def lift_lists(text: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if text.count(",") < _MIN_LIFTED - 1:
        return text, params
    out: list[str] = []
    lifted = dict(params)
    last = 0
    for m in _SCAN_RE.finditer(text):
        span = m.group()
        if span[0] != "[":
            continue
        if _is_index(text, m.start()):
            continue
        items = _ITEM_RE.findall(span)
        if len(items) < _MIN_LIFTED:
            continue
        values = [_item_value(item) for item in items]
        if any(v is BAD for v in values):
            continue  # let the parser report the bad literal with its position
        name = f"{LIST_PARAM}{len(lifted)}"
        lifted[name] = values
        placeholder = "{" + name + "}"
        padding = "".join("\n" if ch == "\n" else " " for ch in span[len(placeholder) :])
        out.append(text[last : m.start()] + placeholder + padding)
        last = m.end()
    if not out:
        return text, params
    out.append(text[last:])
    return "".join(out), lifted


def _is_index(text: str, start: int) -> bool:
    """Whether the ``[`` at ``start`` follows an operand (``x[...]``) rather than an operator."""
    end = start
    while end > 0 and text[end - 1].isspace():
        end -= 1
    if end == 0 or text[end - 1] in "])}":
        return end > 0
    begin = end
    while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] in "_$"):
        begin -= 1
    word = text[begin:end].lower()
    return bool(word) and word not in ("in", "and", "or", "not", "exists", "is", "like")


def _item_value(item: str) -> Any:
    if item[0] in "\"'":
        try:
            return unescape(item[1:-1])
        except ValueError:
            return BAD
    low = item.lower()
    if low in ("true", "false"):
        return low == "true"
    negate = item.startswith("-")
    value = number_literal(item.lstrip("-").strip(), negate)
    return BAD if isinstance(value, str) else value


BAD: Any = object()


def param_value(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else BAD
    if isinstance(v, list | tuple | np.ndarray):
        items = [param_value(x) for x in v]
        return BAD if any(x is BAD for x in items) else items
    return BAD


def show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        items = [show(x) for x in v[:5]] + (["..."] if len(v) > 5 else [])
        return "[" + ", ".join(items) + "]"
    return repr(v)


def value_desc(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {show(v)}"
    if isinstance(v, int | float):
        return f"number {show(v)}"
    if isinstance(v, str):
        return f"string {show(v)}"
    return f"list {show(v)}"
