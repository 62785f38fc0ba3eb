"""Full-text search, text_match and the analysed field's description, against Milvus Lite:
the same small corpus in both, searched and filtered alike.

Milvus Lite 3.2 is a Python re-implementation of Milvus; where it departs from Milvus's
documented behaviour, Elanus follows Milvus and the test says so:

- Lite's ``bm25_k1`` is 1.5 whatever the index says; Milvus's default is 1.2 (docs: "Value
  range: [1.2, 2.0]", the value in every example; Elanus: ``index.kernels.BM25_K1``).
  pymilvus 3.0.2 sends an index's ``params`` as keys of their own and Lite reads only a
  ``params`` key, so Lite never sees ``bm25_k1``/``bm25_b`` and keeps its defaults (1.5,
  0.75). Both collections here are given ``bm25_k1=1.5`` on the index, so they score
  alike; a second Elanus collection shows Milvus's default.
- Lite returns BM25 hits with ``distance = -score`` (its internal "smaller is closer"
  convention leaks out); Milvus returns the score itself, higher is better.
- Lite has no ``phrase_match`` (its parser lists only ``text_match``), and no ``english``
  analyzer ("supported: 'standard', 'jieba'"): phrases are checked in
  tests/test_text_match.py against hand-worked answers instead.
- Lite's ``standard`` tokenizer is the regex ``\\w+``, Milvus's is Unicode word
  segmentation: they split ``don't`` or ``3.5`` differently, so the corpus has no such
  words.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elanus import DataType, Schema
from elanus.client.client import Client
from elanus.functions import Function, FunctionType

pymilvus = pytest.importorskip("pymilvus", reason="the dev extra pins pymilvus and milvus-lite")
pytestmark = [pytest.mark.conformance, pytest.mark.slow]  # Milvus Lite in a child Python

NAME = "conformance_fulltext"
MILVUS_DEFAULTS = "conformance_fulltext_defaults"
STANDARD = {"type": "standard"}
STOPPED = {
    "tokenizer": "standard",
    "filter": ["lowercase", {"type": "stop", "stop_words": ["the", "a", "and", "of", "is"]}],
}
# repeated words, stop words, one-word and long documents, a document of stop words only,
# an empty one (it counts in N and in avgdl with length 0)
DOCS: dict[int, str] = {
    1: "the cat sat on the mat",
    2: "The dog sat on the log",
    3: "cats and dogs and birds",
    4: "a quick brown fox jumps over the lazy dog",
    5: "the fox the fox the fox",
    6: "brown bread and brown butter",
    7: "dog",
    8: "lazy afternoons are the best afternoons of the summer",
    9: "search engines rank documents by relevance to the query",
    10: "the query is short",
    11: "a very long document about the history of search engines and how they rank "
    "documents with term frequencies and inverse document frequencies over the years",
    12: "BM25 ranks documents",
    13: "fox hunting is banned in the north",
    14: "mat and log and cat",
    15: "the the the the",
    16: "",
}
QUERIES = [
    "the fox",
    "brown dog",
    "search engines rank documents",
    "cat mat log",
    "the",
    "dog dog fox",  # a repeated query word weighs twice
    "zebra",  # no document: no hit
]
K1_B = {"bm25_k1": 1.5, "bm25_b": 0.75}  # Lite's own values: it ignores those given
TEXT_FILTERS = [
    "text_match(text, 'fox')",
    "text_match(text, 'cat dog')",  # several words: any of them
    "TEXT_MATCH(text, 'THE')",  # the analyzer lowercases the query too
    "text_match(text, 'cats')",  # no stemming in the standard analyzer
    "text_match(text, 'fox') and n == 1",
    "text_match(text, 'documents query') and n >= 1",
    "n == 0 or text_match(text, 'brown')",
    "not text_match(text, 'the')",
    "text_match(text, 'zebra')",
    "text_match(text, 'the fox') and text_match(note, 'lazy')",
]
# Lite's text_match tokenizes with a plain standard analyzer whatever the field's analyzer
# is; Milvus uses the field's, stop filter included. Worked out by hand here.
STOPPED_FILTERS = [
    ("text_match(note, 'the fox')", [4, 5, 13]),  # "the" is dropped: only "fox" is sought
    ("text_match(note, 'the and of')", []),  # stop words only: nothing is sought
    ("text_match(note, 'The') or n == 0", [3, 6, 9, 12, 15]),
]


def rows() -> list[dict[str, Any]]:
    return [{"id": i, "text": t, "note": t, "n": i % 3} for i, t in DOCS.items()]


def analysed(analyzer_params: dict[str, Any]) -> dict[str, Any]:
    """A VARCHAR field's options for an analysed, text_match-able field (both schemas)."""
    return {
        "max_length": 256,
        "enable_analyzer": True,
        "analyzer_params": analyzer_params,
        "enable_match": True,
    }


ANALYSED = {"text": STANDARD, "note": STOPPED}
"""The analysed fields, by their analyzer: ``text`` feeds BM25, ``note`` drops stop words."""


def lite_schema() -> Any:
    s = pymilvus.MilvusClient.create_schema(auto_id=False)
    s.add_field("id", pymilvus.DataType.INT64, is_primary=True)
    for name, analyzer in ANALYSED.items():
        s.add_field(name, pymilvus.DataType.VARCHAR, **analysed(analyzer))
    s.add_field("n", pymilvus.DataType.INT64)
    s.add_field("sparse", pymilvus.DataType.SPARSE_FLOAT_VECTOR)
    s.add_function(
        pymilvus.Function(
            name="bm25",
            function_type=pymilvus.FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse"],
        )
    )
    return s


def elanus_schema() -> Schema:
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    for name, analyzer in ANALYSED.items():
        s.add_field(name, DataType.VARCHAR, **analysed(analyzer))
    s.add_field("n", DataType.INT64)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    return s.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Milvus Lite with the corpus, a BM25 index on the function's output."""
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    client = pymilvus.MilvusClient(str(Path(tmp_path_factory.mktemp("lite-fts")) / "fts.db"))
    index = client.prepare_index_params()
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=K1_B)
    client.create_collection(
        NAME, schema=lite_schema(), index_params=index, consistency_level="Strong"
    )
    client.insert(NAME, rows())
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def ela(server: Any) -> Iterator[Client]:
    """Elanus: half the rows in a sealed segment, half growing (the statistics are the
    whole collection's either way)."""
    client = Client(server.uri, timeout=60)
    client.create_collection(NAME, schema=elanus_schema(), consistency_level="Strong")
    client.create_index(
        NAME, "sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=K1_B
    )
    data = rows()
    client.insert(NAME, data[: len(data) // 2])
    client.flush(NAME)
    client.insert(NAME, data[len(data) // 2 :])
    client.load_collection(NAME)
    client.create_collection(MILVUS_DEFAULTS, schema=elanus_schema(), consistency_level="Strong")
    client.insert(MILVUS_DEFAULTS, data)
    client.load_collection(MILVUS_DEFAULTS)
    try:
        yield client
    finally:
        client.close()


def ranked(hits: list[dict[str, Any]], sign: float = 1.0) -> list[tuple[float, int]]:
    return [(sign * float(h["distance"]), int(h["id"])) for h in hits]


def assert_same_ranking(got: list[tuple[float, int]], want: list[tuple[float, int]]) -> None:
    """The same scores in the same order (float32 rounding apart), and the same ids, in
    any order among equal scores."""
    assert len(got) == len(want), (got, want)
    for (g, _), (w, _) in zip(got, want, strict=True):
        assert math.isclose(g, w, rel_tol=1e-5, abs_tol=1e-6), (got, want)
    groups: dict[float, tuple[set[int], set[int]]] = {}
    for (w, wid), (_, gid) in zip(want, got, strict=True):
        key = next((k for k in groups if math.isclose(k, w, rel_tol=1e-5)), w)
        mine, theirs = groups.setdefault(key, (set(), set()))
        mine.add(gid)
        theirs.add(wid)
    for score, (mine, theirs) in groups.items():
        assert mine == theirs, (score, got, want)


def search(client: Any, name: str, queries: list[str], **kw: Any) -> list[Any]:
    return list(
        client.search(
            name,
            data=queries,
            anns_field="sparse",
            limit=len(DOCS),
            output_fields=["id"],
            consistency_level="Strong",
            **kw,
        )
    )


def test_bm25_ranks_and_scores_as_lite(lite: Any, ela: Client) -> None:
    """Every query alone and all of them in one call: the same hits, the same scores."""
    together_lite = search(lite, NAME, QUERIES)
    together_ela = search(ela, NAME, QUERIES)
    assert len(together_ela) == len(QUERIES)
    for i, query in enumerate(QUERIES):
        [alone_lite] = search(lite, NAME, [query])
        [alone_ela] = search(ela, NAME, [query])
        want = ranked(alone_lite, sign=-1.0)  # Lite's distance is -score
        assert ranked(together_lite[i], sign=-1.0) == want
        assert_same_ranking(ranked(alone_ela), want)
        assert_same_ranking(ranked(together_ela[i]), want)
    assert together_ela[-1] == []  # "zebra"
    assert all(h["distance"] > 0 for hits in together_ela for h in hits)


def test_milvus_default_k1_is_not_lites(lite: Any, ela: Client) -> None:
    """Without k1 on the index Elanus scores with Milvus's 1.2, not Lite's 1.5: Lite's
    scores are Elanus's with ``bm25_k1=1.5`` asked for at search time, and not its
    defaults'."""
    queries = QUERIES[:3]
    want = search(lite, NAME, queries)
    as_lite = search(ela, MILVUS_DEFAULTS, queries, search_params={"params": {"bm25_k1": 1.5}})
    milvus = search(ela, MILVUS_DEFAULTS, queries)
    for lite_hits, got, ours in zip(want, as_lite, milvus, strict=True):
        assert_same_ranking(ranked(got), ranked(lite_hits, sign=-1.0))
        assert [s for s, _ in ranked(ours)] != pytest.approx([s for s, _ in ranked(got)])


@pytest.mark.parametrize("expr", TEXT_FILTERS)
def test_text_match_finds_the_same_rows(lite: Any, ela: Client, expr: str) -> None:
    want = sorted(int(r["id"]) for r in lite.query(NAME, filter=expr, output_fields=["id"]))
    got = sorted(
        int(r["id"])
        for r in ela.query(NAME, filter=expr, output_fields=["id"], consistency_level="Strong")
    )
    assert got == want


@pytest.mark.parametrize(("expr", "expected"), STOPPED_FILTERS)
def test_text_match_uses_the_fields_analyzer(
    lite: Any, ela: Client, expr: str, expected: list[int]
) -> None:
    got = ela.query(NAME, filter=expr, output_fields=["id"], consistency_level="Strong")
    assert sorted(int(r["id"]) for r in got) == expected
    lite_rows = lite.query(NAME, filter=expr, output_fields=["id"])
    assert sorted(int(r["id"]) for r in lite_rows) != expected  # Lite's departure, as above


def test_a_filtered_bm25_search_keeps_the_collections_statistics(lite: Any, ela: Client) -> None:
    """A filter picks the hits, not the statistics: Milvus weighs terms with the whole
    collection's N, df and avgdl, so a filtered hit scores as it does unfiltered. Lite
    builds its BM25 statistics over the rows the filter keeps, so only its hits (and their
    order) are compared."""
    expr = "text_match(text, 'fox dog') and n != 2"
    query = ["the lazy fox"]
    [want] = search(lite, NAME, query, filter=expr)
    [got] = search(ela, NAME, query, filter=expr)
    [unfiltered] = search(ela, NAME, query)
    assert [i for _, i in ranked(got)] == [i for _, i in ranked(want)]
    scores = dict((i, s) for s, i in ranked(unfiltered))
    assert [s for s, _ in ranked(got)] == pytest.approx([scores[i] for _, i in ranked(got)])


def _field(f: dict[str, Any]) -> dict[str, Any]:
    """A described field without its id, the type by name and the analyzer's JSON decoded
    (Milvus echoes the text it was given; Elanus keeps the parameters, not their key
    order)."""
    out = {k: v.name if k == "type" else v for k, v in f.items() if k != "field_id"}
    if "analyzer_params" in out["params"]:
        params = dict(out["params"])
        params["analyzer_params"] = json.loads(params["analyzer_params"])
        out["params"] = params
    return out


def _shape(desc: dict[str, Any]) -> dict[str, Any]:
    """What both describe: the fields and the functions, ids aside."""
    fields = [_field(f) for f in desc["fields"]]
    keys = ("name", "type", "params", "input_field_names", "output_field_names", "description")
    functions = [
        {k: v.name if k == "type" else v for k, v in fn.items() if k in keys}
        for fn in desc["functions"]
    ]
    return {"fields": fields, "functions": functions}


def test_describe_collection_has_pymilvus_shape(lite: Any, ela: Client) -> None:
    """The analysed fields carry ``enable_analyzer``, ``enable_match`` and
    ``analyzer_params`` under ``params`` as pymilvus gives them (strings: Milvus keeps type
    params as text), and the BM25 function and its output field are described alike."""
    want = _shape(lite.describe_collection(NAME))
    got = _shape(ela.describe_collection(NAME))
    assert got == want
    text = next(f for f in got["fields"] if f["name"] == "text")
    assert text["params"]["enable_analyzer"] == "true"
