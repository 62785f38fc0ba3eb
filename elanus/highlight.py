"""Milvus 2.6's lexical highlighter (pymilvus ``LexicalHighlighter``): which terms of a
hit's text field to mark, and the tagged fragments around them.

The terms are the analysed tokens of the BM25 search text (``highlight_search_text``,
per query) and of each ``highlight_query`` (``{"type": "TextMatch", "field", "text"}``,
for every query); a hit's text is analysed with the field's analyzer, and each token
found among them is a span (character offsets). As Milvus does (``proxy/highlighter.go``
and the query node's ``fetchFragmentsFromOffsets``): overlapping or touching spans merge;
a fragment opens at a span not inside the previous fragment, from ``fragment_offset``
characters before it to ``fragment_size`` characters after that start (at least to the
span's end, at most to the text's end); a later span inside it joins it and may stretch
its end; at most ``num_of_fragments`` fragments. In a fragment the i-th span is wrapped
in ``pre_tags[i % len]`` and ``post_tags[i % len]``. Defaults: ``<em>``/``</em>``,
fragment size 100, 5 fragments, offset 0.

Pure: parameters in, fragments out; the Milvus face finds the fields and texts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elanus.errors import invalid

SEARCH_TEXT, QUERY = "highlight_search_text", "highlight_query"
KEYS = ("pre_tags", "post_tags", "fragment_offset", "fragment_size", "num_of_fragments",
        SEARCH_TEXT, QUERY)  # fmt: skip
"""The parameters of a lexical highlighter (pymilvus ``LexicalHighlighter.params``)."""
QUERY_TYPES = ("TextMatch",)
"""The ``highlight_query`` types Milvus runs (a ``TEXT_MATCH`` filter's terms)."""
Span = tuple[int, int]


@dataclass(frozen=True)
class HighlightQuery:
    field: str
    text: str


@dataclass(frozen=True)
class Highlighter:
    """A checked ``LexicalHighlighter``."""

    pre_tags: tuple[str, ...] = ("<em>",)
    post_tags: tuple[str, ...] = ("</em>",)
    fragment_offset: int = 0
    fragment_size: int = 100
    num_of_fragments: int = 5
    search_text: bool = False
    queries: tuple[HighlightQuery, ...] = ()

    @classmethod
    def from_params(cls, params: dict[str, str]) -> Highlighter:
        """From the highlighter's key-value params as pymilvus sends them (lists and
        objects as JSON, numbers and flags as text)."""
        return cls(
            _tags(params, "pre_tags", cls.pre_tags),
            _tags(params, "post_tags", cls.post_tags),
            _count(params, "fragment_offset", 0, 0),
            _count(params, "fragment_size", 100, 1),
            _count(params, "num_of_fragments", 5, 0),
            _flag(params.get(SEARCH_TEXT, "false")),
            _queries(params.get(QUERY)),
        )

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Highlighter:
        """From a Flight search body's ``highlighter`` object: the same parameters as JSON
        values (lists, numbers, a flag), each checked as ``from_params`` checks its text."""
        unknown = sorted(set(body) - set(KEYS))
        if unknown:
            raise invalid(
                f"highlighter: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed keys are {', '.join(KEYS)}"
            )
        params = {}
        for key, value in body.items():
            if isinstance(value, bool):
                params[key] = "true" if value else "false"
            elif isinstance(value, list | dict):
                params[key] = json.dumps(value)
            else:
                params[key] = str(value)
        return cls.from_params(params)

    def fragments(self, text: str, spans: Sequence[Span]) -> list[str]:
        """The tagged fragments of ``text`` around ``spans`` (character offsets)."""
        return [self._render(text, f) for f in self._cut(len(text), merged(spans))]

    def _cut(self, length: int, spans: list[Span]) -> list[tuple[int, int, list[Span]]]:
        out: list[tuple[int, int, list[Span]]] = []
        for start, end in spans:
            if out and start <= out[-1][1]:
                first, last, inside = out[-1]
                out[-1] = (first, max(last, end), [*inside, (start, end)])
                continue
            if len(out) >= self.num_of_fragments:
                break
            first = max(0, start - self.fragment_offset)
            out.append((first, min(max(end, first + self.fragment_size), length), [(start, end)]))
        return out

    def _render(self, text: str, fragment: tuple[int, int, list[Span]]) -> str:
        first, last, spans = fragment
        parts, cursor = [], first
        for i, (start, end) in enumerate(spans):
            pre, post = (
                self.pre_tags[i % len(self.pre_tags)],
                self.post_tags[i % len(self.post_tags)],
            )
            parts += [text[cursor:start], pre, text[start:end], post]
            cursor = end
        parts.append(text[cursor:last])
        return "".join(parts)


def merged(spans: Sequence[Span]) -> list[Span]:
    """Spans sorted, those that overlap or touch made one (Milvus's ``mergeOffsets``)."""
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def _tags(params: dict[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in params:
        return default
    try:
        tags = json.loads(params[key])
    except ValueError:
        tags = None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise invalid(f"highlighter: {key} must be a list of strings, got {params[key]!r}")
    if not tags:
        raise invalid(f"highlighter: {key} cannot be an empty list")
    return tuple(tags)


def _count(params: dict[str, str], key: str, default: int, least: int) -> int:
    if key not in params:
        return default
    try:
        value = int(params[key])
    except ValueError:
        value = least - 1
    if value < least:
        raise invalid(f"highlighter: invalid {key}: {params[key]!r} (an integer >= {least})")
    return value


def _flag(text: str) -> bool:
    """A flag as Milvus parses it (Go's ``strconv.ParseBool``)."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise invalid(f"highlighter: {SEARCH_TEXT} must be true or false, got {text!r}")


def _queries(text: str | None) -> tuple[HighlightQuery, ...]:
    if text is None:
        return ()
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    if not isinstance(items, list):
        raise invalid(f"highlighter: {QUERY} must be a JSON array of queries")
    return tuple(_query(item) for item in items)


def _query(item: Any) -> HighlightQuery:
    if not isinstance(item, dict):
        raise invalid(f"highlighter: each {QUERY} must be an object (type, field, text)")
    unknown = sorted(set(item) - {"type", "field", "text"})
    if unknown:
        raise invalid(f"highlighter: unknown {QUERY} key(s) {', '.join(map(repr, unknown))}")
    for key in ("type", "field", "text"):
        if not isinstance(item.get(key), str):
            raise invalid(f"highlighter: a {QUERY} needs `{key}`, a string")
    if item["type"] not in QUERY_TYPES:
        raise invalid(
            f"highlighter: invalid highlight query type {item['type']!r}; Milvus runs "
            f"{', '.join(QUERY_TYPES)}"
        )
    return HighlightQuery(item["field"], item["text"])
