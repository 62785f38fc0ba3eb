"""Analyzers (Milvus's analyzer_params on Tantivy) and the BM25 function's schema rules."""

from __future__ import annotations

import zlib

import numpy as np
import pymilvus
import pytest

from elanus import DataType, ElanusError, Function, FunctionType, Schema
from elanus.analyzer import analyzer_for, check_params, term_ids


def test_builtin_analyzers_tokenize_as_milvus_documents() -> None:
    text = "The Runners were RUNNING, quickly! e-mail a@b.org"
    assert analyzer_for(None).tokens(text) == [
        "the",
        "runners",
        "were",
        "running",
        "quickly",
        "e",
        "mail",
        "a",
        "b",
        "org",
    ]
    # english: lowercase, English stemmer, English stop words ("the", "a" go)
    assert analyzer_for({"type": "english"}).tokens(text) == [
        "runner",
        "were",
        "run",
        "quick",
        "e",
        "mail",
        "b",
        "org",
    ]
    assert analyzer_for({"type": "standard", "stop_words": ["the", "were"]}).tokens(text)[:3] == [
        "runners",
        "running",
        "quickly",
    ]


def test_custom_analyzers() -> None:
    ws = analyzer_for({"tokenizer": "whitespace"})
    assert ws.tokens("Hello, World  foo-bar") == ["Hello,", "World", "foo-bar"]
    params = {
        "tokenizer": "standard",
        "filter": [
            "lowercase",
            "asciifolding",
            {"type": "length", "max": 5},
            {"type": "stop", "stop_words": ["cafe", "_english_"]},
            {"type": "stemmer", "language": "french"},
        ],
    }
    assert analyzer_for(params).tokens("Café de la Gare, the extraordinary") == [
        "de",
        "la",
        "gar",  # the French stemmer
    ]


def test_term_frequencies_count_each_term_per_document() -> None:
    a = analyzer_for({"type": "standard"})
    tf = a.term_frequencies(["b a b", None, "", "c"])
    rows = tf.to_pylist()
    ids = {w: zlib.crc32(w.encode()) for w in "abc"}
    assert dict(rows[0]) == {ids["a"]: 1.0, ids["b"]: 2.0}
    assert rows[1] == [] and rows[2] == []
    assert dict(rows[3]) == {ids["c"]: 1.0}
    assert list(term_ids(["b", "a", "b"])) == [ids["b"], ids["a"], ids["b"]]
    assert term_ids([]).dtype == np.uint32


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"type": "chinese"}, "analyzer type 'chinese' is not supported"),
        ({"tokenizer": "jieba"}, "tokenizer 'jieba' is not supported"),
        ({"tokenizer": "standard", "filter": ["upper"]}, "filter 'upper' is not supported"),
        ({"tokenizer": "standard", "filter": [{"type": "stemmer", "language": "x"}]}, "stemmer"),
        ({"tokenizer": "standard", "filter": [{"type": "stop"}]}, "needs 'stop_words'"),
        ({"tokenizer": "standard", "filter": [{"type": "stop", "stop_words": ["_xx_"]}]}, "_xx_"),
        ({"tokenizer": "standard", "filter": [{"type": "length", "max": 0}]}, "'max'"),
        ({"tokenizer": "standard", "colour": 1}, "unknown key(s) 'colour'"),
        ("{not json", "not valid JSON"),
        ([1], "must be an object"),
    ],
)
def test_bad_analyzer_params_are_named(params: object, words: str) -> None:
    with pytest.raises(ElanusError) as err:
        check_params(params, "body")
    assert "field 'body'" in str(err.value) and words in str(err.value)


def _schema(text_kwargs: dict[str, object], out_type: DataType = DataType.SPARSE_FLOAT_VECTOR):
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field("text", DataType.VARCHAR, max_length=100, **text_kwargs)
    s.add_field("out", out_type, **({"dim": 4} if out_type == DataType.FLOAT_VECTOR else {}))
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    return s


def test_bm25_function_schema_round_trips_and_takes_pymilvus_objects() -> None:
    s = _schema({"enable_analyzer": True, "analyzer_params": {"type": "english"}})
    s.add_function(pymilvus.Function("bm", pymilvus.FunctionType.BM25, ["text"], ["out"]))
    s.validate()
    again = Schema.from_dict(s.to_dict())
    assert again == s and again.function_output("out") is not None
    assert again.to_dict()["fields"][1]["analyzer_params"] == {"type": "english"}
    assert again.functions[0].function_type == FunctionType.BM25


@pytest.mark.parametrize(
    ("text_kwargs", "out_type", "fn", "words"),
    [
        ({}, DataType.SPARSE_FLOAT_VECTOR, ("text", "out"), "must set enable_analyzer"),
        (
            {"enable_analyzer": True},
            DataType.FLOAT_VECTOR,
            ("text", "out"),
            "must be SparseFloatVector",
        ),
        ({"enable_analyzer": True}, DataType.SPARSE_FLOAT_VECTOR, ("id", "out"), "must be VarChar"),
        ({"enable_analyzer": True}, DataType.SPARSE_FLOAT_VECTOR, ("nope", "out"), "'nope'"),
        ({"enable_match": True}, DataType.SPARSE_FLOAT_VECTOR, None, "needs enable_analyzer"),
    ],
)
def test_bad_bm25_schemas_are_refused(
    text_kwargs: dict[str, object], out_type: DataType, fn: tuple[str, str] | None, words: str
) -> None:
    s = _schema(text_kwargs, out_type)
    if fn:
        s.add_function(Function("bm", FunctionType.BM25, fn[0], fn[1]))
    with pytest.raises(ElanusError) as err:
        s.validate()
    assert words in str(err.value)


def test_analyzer_on_a_non_varchar_field_is_refused() -> None:
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field("n", DataType.INT64, enable_analyzer=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    with pytest.raises(ElanusError, match="need a VarChar field, not Int64"):
        s.validate()
    with pytest.raises(ElanusError, match="not supported"):
        Function("f", "TEXTEMBEDDING", "a", "b")
