"""pymilvus's searches against the Milvus face: hybrid search, search and query iterators,
BM25 text search, group-by, range search, sparse and binary vectors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import own_stack
from milvus_stack import MilvusStack, milvus_client, milvus_stack
from pymilvus import (
    AnnSearchRequest,
    DataType,
    Function,
    FunctionType,
    LexicalHighlighter,
    MilvusClient,
    MilvusException,
    RRFRanker,
    SemanticHighlighter,
    WeightedRanker,
)

DIM = 8
N = 300


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusClient]:
    """One stack for the file's pymilvus searches: each test reads collections of its own
    (``multi`` is made once, by ``multi``, and only read)."""
    tmp = tmp_path_factory.mktemp("search")
    with own_stack(tmp, "milvus-search", kind=MilvusStack) as s:
        s.add_indexnode()  # as ``milvus_stack`` gives
        yield from milvus_client(s)


@pytest.fixture(scope="module")
def multi(client: MilvusClient) -> np.ndarray:
    """``_two_vector_collection``'s dense vectors, the collection made once."""
    return _two_vector_collection(client)


def _two_vector_collection(client: MilvusClient) -> np.ndarray:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("bits", DataType.BINARY_VECTOR, dim=16)
    schema.add_field("kind", DataType.VARCHAR, max_length=8)
    params = client.prepare_index_params()
    params.add_index("dense", index_type="FLAT", metric_type="L2")
    params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    params.add_index("bits", index_type="BIN_FLAT", metric_type="HAMMING")
    client.create_collection(
        "multi", schema=schema, index_params=params, consistency_level="Strong"
    )
    rng = np.random.default_rng(7)
    vecs = rng.random((N, DIM), dtype=np.float32)
    bits = rng.integers(0, 256, (N, 2), dtype=np.uint8)
    rows = [
        {
            "id": i,
            "dense": vecs[i],
            "sparse": {int(i % 50): 1.0 + i / N, 100 + int(i % 7): 0.5},
            "bits": bits[i].tobytes(),
            "kind": ["a", "b", "c"][i % 3],
        }
        for i in range(N)
    ]
    assert client.insert("multi", rows)["insert_count"] == N
    return vecs


def test_hybrid_sparse_binary_group_range(client: MilvusClient, multi: np.ndarray) -> None:
    vecs = multi
    # sparse and binary searches
    sparse = client.search(
        "multi", data=[{3: 1.0}], anns_field="sparse", limit=4, output_fields=["kind"]
    )[0]
    assert sparse and all(h["id"] % 50 == 3 for h in sparse)
    bits = client.query("multi", filter="id == 9", output_fields=["bits"])[0]["bits"]
    binary = client.search("multi", data=[bits[0]], anns_field="bits", limit=3)[0]
    assert binary[0]["id"] == 9 and binary[0]["distance"] == 0
    # hybrid search, RRF and weighted: the exact dense match and the sparse matches fuse
    dense_req = AnnSearchRequest([vecs[3]], "dense", {"metric_type": "L2"}, limit=10)
    sparse_req = AnnSearchRequest([{3: 1.0}], "sparse", {"metric_type": "IP"}, limit=10)
    rrf = client.hybrid_search(
        "multi", [dense_req, sparse_req], RRFRanker(60), limit=5, output_fields=["kind", "dense"]
    )[0]
    assert len(rrf) == 5 and rrf[0]["id"] == 3
    assert rrf[0]["entity"]["kind"] == "a"
    assert np.allclose(rrf[0]["entity"]["dense"], vecs[3])
    assert rrf[0]["distance"] == pytest.approx(1 / 61 + 1 / 66)  # sparse: 6th of its 6
    weighted = client.hybrid_search(
        "multi", [dense_req, sparse_req], WeightedRanker(1.0, 0.0), limit=3
    )[0]
    plain = client.search("multi", data=[vecs[3]], anns_field="dense", limit=3)[0]
    assert [h["id"] for h in weighted] == [h["id"] for h in plain]
    filtered = client.hybrid_search(
        "multi",
        [AnnSearchRequest([vecs[3]], "dense", {}, limit=10, expr='kind == "b"'), sparse_req],
        RRFRanker(),
        limit=20,
        output_fields=["kind"],
    )[0]
    assert any(h["entity"]["kind"] == "b" for h in filtered)
    # group by: one hit per kind
    groups = client.search(
        "multi",
        data=[vecs[0]],
        anns_field="dense",
        limit=3,
        group_by_field="kind",
        output_fields=["kind"],
    )[0]
    assert sorted(h["entity"]["kind"] for h in groups) == ["a", "b", "c"]
    # range search: L2 keeps range_filter <= d < radius
    everything = client.search("multi", data=[vecs[0]], anns_field="dense", limit=50)[0]
    lo, hi = everything[5]["distance"], everything[20]["distance"]
    ranged = client.search(
        "multi",
        data=[vecs[0]],
        anns_field="dense",
        limit=50,
        search_params={"metric_type": "L2", "params": {"radius": hi, "range_filter": lo}},
    )[0]
    assert ranged and all(lo <= h["distance"] < hi for h in ranged)
    assert len(ranged) == 15


def test_search_and_query_iterators_page_without_gaps(
    client: MilvusClient, multi: np.ndarray
) -> None:
    vecs = multi
    seen: list[int] = []
    distances: list[float] = []
    it = client.search_iterator(
        "multi", data=[vecs[0]], anns_field="dense", batch_size=37, output_fields=["kind"]
    )
    while page := it.next():
        assert len(page) <= 37
        seen += [h["id"] for h in page]
        distances += [h["distance"] for h in page]
        assert all("kind" in h["entity"] for h in page)
    it.close()
    assert sorted(seen) == list(range(N)), "every row once, none twice"
    assert distances == sorted(distances)
    filtered = client.search_iterator(
        "multi", data=[vecs[0]], anns_field="dense", batch_size=10, filter='kind == "c"',
        limit=45,
    )  # fmt: skip
    got = []
    while page := filtered.next():
        got += [h["id"] for h in page]
    assert len(got) == 45 and len(set(got)) == 45 and all(i % 3 == 2 for i in got)
    rows: list[int] = []
    qi = client.query_iterator("multi", batch_size=64, filter="id >= 10", output_fields=["kind"])
    while page := qi.next():
        rows += [r["id"] for r in page]
    qi.close()
    assert rows == list(range(10, N))


def _text_collection(client: MilvusClient, name: str, dense: bool = False) -> None:
    """A collection of ``id``, ``text`` (analysed, TEXT_MATCH-able) and its BM25 vectors
    ``sparse`` (and a 2-d ``v`` with ``dense``)."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field(
        "text", DataType.VARCHAR, max_length=2000, enable_analyzer=True, enable_match=True
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse"],
        )
    )
    params = client.prepare_index_params()
    params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    if dense:
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
        params.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=params, consistency_level="Strong")


def test_bm25_text_search(client: MilvusClient) -> None:
    _text_collection(client, "docs")
    texts = [
        "the quick brown fox jumps",
        "a lazy dog sleeps all day",
        "vector databases search embeddings",
        "the fox and the dog are friends",
    ]
    client.insert("docs", [{"id": i, "text": t} for i, t in enumerate(texts)])
    hits = client.search(
        "docs", data=["fox"], anns_field="sparse", limit=3, output_fields=["text"]
    )[0]
    assert {h["entity"]["text"] for h in hits} == {texts[0], texts[3]}
    assert hits[0]["distance"] > 0


HIGHLIGHT_DOCS = [
    "my first test doc",
    "my second test doc",
    "my first test doc. Milvus is an open-source vector database built for GenAI applications.",
    "my second test doc. Milvus is an open-source vector database that suits AI applications "
    "of every size from running a demo chatbot to building web-scale search.",
]


def test_lexical_highlighter(client: MilvusClient) -> None:
    """Milvus's Text Highlighter examples (userGuide text-highlighter.md, 2.6.8), whose
    outputs follow its source (proxy/highlighter.go, fetchFragmentsFromOffsets). Milvus
    Lite 3.2 takes a highlighter and returns no highlight, so it is no reference here."""
    _text_collection(client, "hl", dense=True)
    rows = [{"id": i, "text": t, "v": [i, 1.0]} for i, t in enumerate(HIGHLIGHT_DOCS)]
    client.insert("hl", rows)

    def marked(data: list[str], **kw: Any) -> list[dict[int, list[str]]]:
        filter_ = kw.pop("filter", "")
        got = client.search(
            "hl", data, anns_field="sparse", limit=10, filter=filter_,
            highlighter=LexicalHighlighter(**kw),
        )  # fmt: skip
        return [{h["id"]: h["highlight"]["text"]["fragments"] for h in q} for q in got]

    braces = {"pre_tags": ["{"], "post_tags": ["}"]}
    assert marked(["test"], highlight_search_text=True, **braces) == [
        {
            0: ["{test} doc"],
            1: ["{test} doc"],
            2: ["{test} doc. Milvus is an open-source vector database built for GenAI "
                "applications."],
            3: ["{test} doc. Milvus is an open-source vector database that suits AI "
                "applications of every size from run"],
        }
    ]  # fmt: skip
    with_query = marked(
        ["test"], highlight_search_text=True,
        highlight_query=[{"type": "TextMatch", "field": "text", "text": "my doc"}], **braces,
    )  # fmt: skip
    assert with_query[0][1] == ["{my} second {test} {doc}"]
    assert with_query[0][3][0].startswith("{my} second {test} {doc}. Milvus is an open-source")
    assert marked(
        ["test", "Milvus"], highlight_search_text=True, fragment_offset=20, fragment_size=60,
        num_of_fragments=1, **braces,
    )[1] == {
        2: ["my first test doc. {Milvus} is an open-source vector database "],
        3: ["my second test doc. {Milvus} is an open-source vector database"],
    }  # fmt: skip
    # tags rotate by a span's place in its fragment; a span past a fragment opens the next
    rotated = marked(
        ["milvus an applications"], highlight_search_text=True, fragment_size=20,
        pre_tags=["<a>", "<b>"], post_tags=["</a>", "</b>"],
    )[0][3]  # fmt: skip
    assert rotated == ["<a>Milvus</a> is <b>an</b> open-so", "<a>applications</a> of ever"]
    # the terms of a TEXT_MATCH filter, found by highlight_query without the search text
    assert marked(
        ["database"], filter='TEXT_MATCH(text, "second")',
        highlight_query=[{"type": "TextMatch", "field": "text", "text": "second"}],
    )[0] == {3: ["<em>second</em> test doc. Milvus is an open-source vector database that "
                 "suits AI applications of every size f"]}  # fmt: skip
    with pytest.raises(MilvusException, match="BM25"):
        client.search("hl", [[0.0, 1.0]], anns_field="v", highlighter=LexicalHighlighter(
            highlight_search_text=True))  # fmt: skip
    for bad, words in [
        ({"fragment_size": 0}, "fragment_size"),
        ({"pre_tags": []}, "pre_tags"),
        ({"highlight_query": [{"type": "PhraseMatch", "field": "text", "text": "x"}]},
         "PhraseMatch"),
        ({"highlight_query": [{"type": "TextMatch", "field": "nope", "text": "x"}]}, "nope"),
    ]:  # fmt: skip
        with pytest.raises(MilvusException, match=words) as info:
            marked(["test"], **bad)
        assert info.value.code == 1100
    semantic = SemanticHighlighter(queries=["q"], input_fields=["text"])
    with pytest.raises(MilvusException, match="SemanticHighlighter") as info:
        client.search("hl", ["test"], anns_field="sparse", highlighter=semantic)
    assert info.value.code == 1100


def test_the_sdk_highlights_as_the_milvus_face(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The Flight ``search`` action (and the SDK's ``highlighter=``) marks the same
    fragments as the Milvus face, per hit as pymilvus shows them
    (``hit["highlight"][field]["fragments"]``); bad highlighters are refused by name."""
    from elanus.errors import ElanusError

    for s in milvus_stack(request, tmp_path):
        theirs = MilvusClient(uri=s.milvus_uri, timeout=60)
        ours = s.client()
        try:
            _text_collection(theirs, "hl", dense=True)
            rows = [{"id": i, "text": t, "v": [i, 1.0]} for i, t in enumerate(HIGHLIGHT_DOCS)]
            theirs.insert("hl", rows)
            cases: list[dict[str, Any]] = [
                {"highlight_search_text": True, "pre_tags": ["{"], "post_tags": ["}"]},
                {"highlight_search_text": True, "fragment_offset": 20, "fragment_size": 60,
                 "num_of_fragments": 1},
                {"highlight_query": [{"type": "TextMatch", "field": "text", "text": "my doc"}]},
            ]  # fmt: skip
            for params in cases:
                want = theirs.search(
                    "hl", ["test milvus"], anns_field="sparse", limit=10,
                    highlighter=LexicalHighlighter(**params),
                )  # fmt: skip
                for highlighter in (LexicalHighlighter(**params), params):
                    got = ours.search(
                        "hl", ["test milvus"], anns_field="sparse", limit=10,
                        highlighter=highlighter,
                    )  # fmt: skip
                    assert [[(h["id"], h["highlight"]) for h in q] for q in got] == [
                        [(h["id"], {"text": {"fragments": h["highlight"]["text"]["fragments"]}})
                         for h in q] for q in want
                    ]  # fmt: skip
                    assert got[0] and all(h["highlight"]["text"]["fragments"] for h in got[0])
            plain = ours.search("hl", ["test"], anns_field="sparse", limit=10)
            assert plain[0] and all("highlight" not in h for h in plain[0])
            # a vector search highlights highlight_query fields, not its search text
            by_vector = ours.search(
                "hl", [[3.0, 1.0]], anns_field="v", limit=1,
                highlighter={"highlight_query": [
                    {"type": "TextMatch", "field": "text", "text": "chatbot"}]},
            )  # fmt: skip
            assert by_vector[0][0]["highlight"]["text"]["fragments"][0].startswith("<em>chatbot")
            for bad, words in [
                ({"highlight_search_text": True, "colour": "red"}, "colour"),
                ({"fragment_size": 0}, "fragment_size"),
                ({"pre_tags": "<b>"}, "pre_tags"),
                ({"highlight_search_text": "yes"}, "highlight_search_text"),
                ({"highlight_query": [{"type": "TextMatch", "field": "nope", "text": "x"}]},
                 "nope"),
                (SemanticHighlighter(queries=["q"], input_fields=["text"]), "LexicalHighlighter"),
            ]:  # fmt: skip
                with pytest.raises(ElanusError, match=words) as info:
                    ours.search("hl", ["test"], anns_field="sparse", highlighter=bad)
                assert info.value.code.name == "INVALID_ARGUMENT"
            with pytest.raises(ElanusError, match="BM25"):
                ours.search("hl", [[0.0, 1.0]], anns_field="v",
                            highlighter={"highlight_search_text": True})  # fmt: skip
        finally:
            ours.close()
            theirs.close()
