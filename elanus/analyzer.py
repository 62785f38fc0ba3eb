"""Text analyzers for full-text search: Milvus's ``analyzer_params`` turned into Tantivy
text analyzers, and analysed text turned into term-frequency sparse vectors.

Milvus builds its analyzers on Tantivy; so does Elanus (the ``tantivy`` bindings), so a
tokenizer, a stop list or a stemmer behaves as it does there. What Milvus accepts:

- ``{"type": "standard" | "english"}`` built-in analyzers, optionally with ``stop_words``;
- ``{"tokenizer": "standard" | "whitespace", "filter": [...]}`` custom ones, with filters
  ``lowercase``, ``asciifolding``, ``alphanumonly``, ``{"type": "stop", "stop_words": [...]}``
  (``"_english_"`` and the other ``_language_`` names expand to that language's list),
  ``{"type": "stemmer", "language": ...}`` and ``{"type": "length", "max": n}``.

Parameters are checked without Tantivy (the proxy refuses a bad schema before anything is
stored); Tantivy is imported only where text is analysed.

A term's id in a sparse vector is the CRC-32 of its UTF-8 bytes (Milvus uses its own
32-bit string hash: ids differ from Milvus's, scores do not).
"""

from __future__ import annotations

import functools
import itertools
import json
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from elanus.errors import invalid

BUILTIN_TYPES = ("standard", "english")
TOKENIZERS = ("standard", "whitespace")
# fmt: off
STOP_LANGUAGES = frozenset({
    "danish", "dutch", "english", "finnish", "french", "german", "hungarian", "italian",
    "norwegian", "portuguese", "russian", "spanish", "swedish",
})
# fmt: on
"""Languages with a built-in stop word list (``"_english_"`` and so on)."""
STEMMER_LANGUAGES = STOP_LANGUAGES | {"arabic", "greek", "romanian", "tamil", "turkish"}
SIMPLE_FILTERS = ("lowercase", "asciifolding", "alphanumonly")
DEFAULT_PARAMS: dict[str, Any] = {"type": "standard"}


def check_params(params: Any, field: str) -> dict[str, Any]:
    """``params`` in canonical form (``{"tokenizer", "filter"}``), or an error naming the
    field and the problem."""
    where = f"field {field!r}: analyzer_params" if field else "analyzer_params"
    if params is None:
        params = DEFAULT_PARAMS
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except (ValueError, RecursionError):
            raise invalid(f"{where} is not valid JSON (or nests too deeply)") from None
    if not isinstance(params, dict):
        raise invalid(f"{where} must be an object, got {type(params).__name__}")
    if "type" in params:
        return _builtin(params, where)
    unknown = sorted(set(params) - {"tokenizer", "filter"})
    if unknown:
        raise invalid(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    tokenizer = params.get("tokenizer")
    if isinstance(tokenizer, dict):
        extra = sorted(set(tokenizer) - {"type"})
        if extra:
            raise invalid(f"{where}: tokenizer option(s) {', '.join(map(repr, extra))} unknown")
        tokenizer = tokenizer.get("type")
    if tokenizer not in TOKENIZERS:
        raise invalid(
            f"{where}: tokenizer {tokenizer!r} is not supported (use one of "
            f"{', '.join(TOKENIZERS)})"
        )
    filters = params.get("filter", [])
    if not isinstance(filters, list):
        raise invalid(f"{where}: 'filter' must be a list")
    return {"tokenizer": tokenizer, "filter": [_filter(f, where) for f in filters]}


def _builtin(params: dict[str, Any], where: str) -> dict[str, Any]:
    kind = params["type"]
    if kind not in BUILTIN_TYPES:
        raise invalid(
            f"{where}: analyzer type {kind!r} is not supported (use one of "
            f"{', '.join(BUILTIN_TYPES)}, or a tokenizer with filters)"
        )
    unknown = sorted(set(params) - {"type", "stop_words"})
    if unknown:
        raise invalid(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    filters: list[Any] = ["lowercase"]
    if kind == "english":
        filters += [{"type": "stemmer", "language": "english"}]
        filters += [{"type": "stop", "stop_words": ["_english_"]}]
    if params.get("stop_words"):
        filters.append(_filter({"type": "stop", "stop_words": params["stop_words"]}, where))
    return {"tokenizer": "standard", "filter": filters}


def _filter(spec: Any, where: str) -> Any:
    if isinstance(spec, str):
        if spec not in SIMPLE_FILTERS:
            raise invalid(f"{where}: filter {spec!r} is not supported")
        return spec
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise invalid(f"{where}: a filter is a name or an object with a 'type'")
    kind = spec["type"]
    if kind in SIMPLE_FILTERS and len(spec) == 1:
        return kind
    if kind == "stop":
        words = spec.get("stop_words")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise invalid(f"{where}: a stop filter needs 'stop_words', a list of strings")
        for w in words:
            if w.startswith("_") and w.endswith("_") and w[1:-1] not in STOP_LANGUAGES:
                raise invalid(f"{where}: no built-in stop word list {w!r}")
        return {"type": "stop", "stop_words": list(words)}
    if kind == "stemmer":
        language = str(spec.get("language", "")).lower()
        if language not in STEMMER_LANGUAGES:
            raise invalid(f"{where}: stemmer language {spec.get('language')!r} is not supported")
        return {"type": "stemmer", "language": language}
    if kind == "length":
        limit = spec.get("max")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise invalid(f"{where}: a length filter needs 'max', a positive integer")
        return {"type": "length", "max": limit}
    raise invalid(f"{where}: filter {kind!r} is not supported")


class Token(NamedTuple):
    """One token of an analysed text; offsets in UTF-8 bytes, ``position`` its word's
    place in the text (stop words removed keep theirs)."""

    text: str
    start: int
    end: int
    position: int


def _byte_ends(text: str) -> Sequence[int]:
    """The UTF-8 byte offset of each character position of ``text`` (and of its end)."""
    if text.isascii():
        return range(len(text) + 1)
    return list(itertools.accumulate((len(c.encode()) for c in text), initial=0))


class Analyzer:
    """One field's analyzer: text in, tokens (``tokens``) or term-frequency vectors
    (``term_frequencies``) out. Built once per parameter set (``analyzer_for``)."""

    def __init__(self, params: dict[str, Any]) -> None:
        import tantivy  # the engine, loaded only where text is analysed

        self.params = params
        tokenizer = (
            tantivy.Tokenizer.whitespace()
            if params["tokenizer"] == "whitespace"
            else tantivy.Tokenizer.simple()
        )
        builder = tantivy.TextAnalyzerBuilder(tokenizer)
        for spec in params["filter"]:
            for f in _tantivy_filters(tantivy, spec):
                builder = builder.filter(f)
        self.tantivy = builder.build()

    def tokens(self, text: str) -> list[str]:
        return list(self.tantivy.analyze(text))

    def detailed(self, text: str) -> list[Token]:
        """A text's tokens with where they were found, as Milvus's ``RunAnalyzer`` details
        them: UTF-8 byte offsets (Tantivy's own; its Python binding gives characters)."""
        found = self.tantivy.pre_tokenize(text).tokens
        ends = _byte_ends(text)
        return [
            Token(t.text, ends[t.char_offset_from], ends[t.char_offset_to], t.position)
            for t in found
        ]

    def located(self, text: str) -> list[tuple[str, int, int]]:
        """A text's tokens with their character offsets (where a highlighter marks them)."""
        return [
            (t.text, t.char_offset_from, t.char_offset_to)
            for t in self.tantivy.pre_tokenize(text).tokens
        ]

    def term_ids(self, text: str) -> np.ndarray:
        """The ids of a text's tokens, in order, repeats kept (a query's terms)."""
        return term_ids(self.tokens(text))

    def term_frequencies(self, texts: Sequence[str | None]) -> pa.MapArray:
        """Per text, ``{term id: count}`` as Milvus's BM25 function outputs it (a null or
        empty text gives an empty vector)."""
        per_doc = [self.tantivy.analyze(t) if t else [] for t in texts]
        lengths = np.fromiter((len(d) for d in per_doc), dtype=np.int64, count=len(per_doc))
        flat = pa.array([tok for doc in per_doc for tok in doc], pa.string())
        ids = _hash_tokens(flat)
        doc_of = np.repeat(np.arange(len(per_doc), dtype=np.uint64), lengths)
        keys, counts = np.unique(
            (doc_of << np.uint64(32)) | ids.astype(np.uint64), return_counts=True
        )
        docs = (keys >> np.uint64(32)).astype(np.int64)
        offsets = np.zeros(len(per_doc) + 1, dtype=np.int32)
        np.cumsum(np.bincount(docs, minlength=len(per_doc)), out=offsets[1:])
        return pa.MapArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.array((keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), pa.uint32()),
            pa.array(counts.astype(np.float32), pa.float32()),
        )


def _tantivy_filters(tantivy: Any, spec: Any) -> list[Any]:
    if spec == "lowercase":
        return [tantivy.Filter.lowercase()]
    if spec == "asciifolding":
        return [tantivy.Filter.ascii_fold()]
    if spec == "alphanumonly":
        return [tantivy.Filter.alphanum_only()]
    kind = spec["type"]
    if kind == "stemmer":
        return [tantivy.Filter.stemmer(spec["language"])]
    if kind == "length":
        return [tantivy.Filter.remove_long(spec["max"] + 1)]
    words = [w for w in spec["stop_words"] if not (w.startswith("_") and w.endswith("_"))]
    lists = [w[1:-1] for w in spec["stop_words"] if w.startswith("_") and w.endswith("_")]
    out = [tantivy.Filter.stopword(language) for language in lists]
    if words:
        out.append(tantivy.Filter.custom_stopword(words))
    return out


def term_ids(tokens: Sequence[str]) -> np.ndarray:
    """Tokens to their 32-bit term ids (repeats kept, order kept)."""
    return _hash_tokens(pa.array(list(tokens), pa.string()))


def _hash_tokens(tokens: pa.Array) -> np.ndarray:
    """CRC-32 per token, hashing each distinct token once."""
    if not len(tokens):
        return np.zeros(0, dtype=np.uint32)
    encoded = tokens.dictionary_encode()
    distinct = np.fromiter(
        (zlib.crc32(t.encode()) for t in encoded.dictionary.to_pylist()),
        dtype=np.uint32,
        count=len(encoded.dictionary),
    )
    return distinct[encoded.indices.to_numpy()]


@functools.lru_cache(maxsize=64)
def _analyzer(canonical: str) -> Analyzer:
    return Analyzer(json.loads(canonical))


def analyzer_for(params: dict[str, Any] | None, field: str = "") -> Analyzer:
    """The analyzer of a parameter set, built once per process."""
    canonical = check_params(params, field)
    return _analyzer(json.dumps(canonical, sort_keys=True))
