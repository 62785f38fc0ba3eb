"""Full-text search with BM25 end to end (real nats-server, coord, data and query nodes,
proxy): BM25 scores computed by hand here, in plain Python over the analyzer's tokens,
compared with what search returns — on growing and sealed segments, after deletes and
compaction, with two shards, filters and several queries at once; outputs computed on
insert, upsert and import; and the refusals."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from conftest import Stack, own_stack, wait_for

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.analyzer import analyzer_for
from elanus.client.client import Client
from elanus.client.results import SearchResult
from elanus.functions import Function, FunctionType

pytestmark = pytest.mark.timeout(180)

STRONG = "Strong"
DOCS = [
    "The quick brown fox jumps over the lazy dog",
    "A fast brown fox leaps over sleeping dogs near the river",
    "Foxes are wild animals related to dogs and wolves",
    "The dog barks at the mailman every single morning",
    "Cats and dogs are the most popular pets in the world",
    "Wolves hunt in packs across the frozen tundra at night",
    "The lazy cat sleeps all day in the warm sun",
    "Running foxes run faster than running dogs run",
    "Search engines rank documents by relevance to a query",
    "BM25 is a ranking function used by search engines everywhere",
    "Vector databases store embeddings for similarity search",
    "Full text search finds documents containing the query terms quickly",
]
QUERIES = ["brown fox", "dogs and wolves running", "search documents query", "sleeping cats"]
ENGLISH = {"type": "english"}
STANDARD = {"type": "standard"}


# -- the reference: BM25 by hand ----------------------------------------------------------------


def bm25_by_hand(
    docs: dict[int, str], query: str, params: dict[str, Any], k1: float = 1.2, b: float = 0.75
) -> dict[int, float]:
    """Milvus's BM25 over ``docs`` (id -> text): Lucene IDF, query terms counted as often
    as they occur, ``avgdl`` at least 1; only documents sharing a term with the query
    score."""
    analyzer = analyzer_for(params)
    tokens = {i: analyzer.tokens(t) for i, t in docs.items()}
    n = len(tokens)
    avgdl = max(1.0, sum(len(t) for t in tokens.values()) / n)  # knowhere's floor
    df: Counter[str] = Counter()
    for toks in tokens.values():
        df.update(set(toks))
    scores: dict[int, float] = {}
    for i, toks in tokens.items():
        tf = Counter(toks)
        score = 0.0
        for term, qtf in Counter(analyzer.tokens(query)).items():
            if term not in tf:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            norm = tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(toks) / avgdl))
            score += qtf * idf * norm
        if score > 0:
            scores[i] = score
    return scores


def check_hits(hits: list[dict[str, Any]], expected: dict[int, float], limit: int) -> None:
    """The hits are the ``limit`` best of ``expected``, best first, with its scores (ties
    in either order)."""
    best = sorted(expected.items(), key=lambda kv: -kv[1])[:limit]
    assert len(hits) == len(best), (hits, best)
    got = [h["distance"] for h in hits]
    assert got == sorted(got, reverse=True)
    for h in hits:
        assert h["id"] in expected, (h, expected)
        assert h["distance"] == pytest.approx(expected[h["id"]], rel=1e-4)
    assert got == pytest.approx([s for _, s in best], rel=1e-4)


def text_search(client: Client, name: str, queries: list[str], **kw: Any) -> SearchResult:
    """A Strong search of ``queries`` (text) on the ``sparse`` output of BM25."""
    return client.search(name, data=queries, anns_field="sparse", consistency_level=STRONG, **kw)


def check_search(
    client: Client,
    name: str,
    docs: dict[int, str],
    params: dict[str, Any] = ENGLISH,
    queries: list[str] = QUERIES,
    limit: int = 5,
    **kw: Any,
) -> None:
    results = text_search(client, name, queries, limit=limit, **kw)
    assert len(results) == len(queries)
    for query, hits in zip(queries, results, strict=True):
        check_hits(hits, bm25_by_hand(docs, query, params), limit)


def test_kernel_statistics_and_scores_honour_the_visible_rows() -> None:
    """The sparse kernel alone: statistics of the visible rows only, and BM25 scores that
    equal the formula (no stack: the segment-level pieces a worker uses)."""
    from elanus.index.kernels import BM25, VectorIndexExact
    from elanus.reduce import bm25_idf

    analyzer = analyzer_for(ENGLISH)
    column = analyzer.term_frequencies(DOCS)
    index = VectorIndexExact(column)
    visible = np.array([i % 4 != 0 for i in range(len(DOCS))])
    terms = np.unique(analyzer.term_ids("dogs running fox"))
    rows, tokens, df = index.term_stats(terms, visible)
    docs = {i: d for i, d in enumerate(DOCS) if visible[i]}
    assert rows == len(docs)
    assert tokens == sum(len(analyzer.tokens(d)) for d in docs.values())
    for term, n in zip(terms.tolist(), df.tolist(), strict=True):
        assert n == sum(term in analyzer.term_ids(d).tolist() for d in docs.values())
    bm25 = BM25(1.2, 0.75, tokens / rows)
    query = dict(zip(terms.tolist(), bm25_idf(rows, df).tolist(), strict=True))
    distances, hits = index.search([query], 3, "BM25", visible, bm25=bm25)
    expected = bm25_by_hand(docs, "dogs running fox", ENGLISH)
    check_hits(
        [{"id": int(r), "distance": float(d)} for r, d in zip(hits[0], distances[0], strict=True)],
        expected,
        3,
    )


# -- set-up ---------------------------------------------------------------------------------------


def text_schema(params: dict[str, Any] = ENGLISH, with_vector: bool = False) -> Schema:
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field(
        "text", DataType.VARCHAR, max_length=256, enable_analyzer=True, analyzer_params=params
    )
    s.add_field("tag", DataType.INT32)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    if with_vector:
        s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    return s.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))


def rows(ids: list[int], texts: dict[int, str] | None = None) -> list[dict[str, Any]]:
    texts = texts or dict(enumerate(DOCS))
    return [{"id": i, "text": texts[i], "tag": i % 3} for i in ids]


def create(client: Client, name: str, shards: int = 1, **kw: Any) -> None:
    client.create_collection(name, schema=text_schema(**kw), num_shards=shards)
    client.load_collection(name)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the module; its roles talk over NATS, so every request and reply
    of a text search crosses the bus encoded."""
    with own_stack(
        tmp_path_factory.mktemp("bm25"), "bm25-tests", transport="nats", compaction_interval_s=0
    ) as stack:
        wait_for(lambda: len(stack.coord.sessions.of_role("querynode")) >= 1)  # type: ignore[union-attr]
        yield stack


@pytest.fixture(scope="module")
def client(shared: Stack) -> Client:
    return shared.client()


def flushed(client: Client, name: str) -> list[dict[str, Any]]:
    return [s for s in client.get_segment_info(name) if s["state"] == "Flushed"]


def wait_served(client: Client, name: str, docs: dict[int, str]) -> None:
    """Until a Strong count sees exactly ``docs`` (handoffs after a flush are async)."""

    def right() -> bool:
        (row,) = client.query(name, "", ["count(*)"], consistency_level=STRONG)
        return int(row["count(*)"]) == len(docs)

    wait_for(right, what=f"{len(docs)} rows served in {name}")


# -- scores -----------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [ENGLISH, STANDARD], ids=["english", "standard"])
def test_scores_equal_bm25_by_hand(client: Client, params: dict[str, Any]) -> None:
    name = f"hand_{params['type']}"
    create(client, name, params=params)
    client.insert(name, rows(list(range(len(DOCS)))))
    docs = dict(enumerate(DOCS))
    check_search(client, name, docs, params)
    # the same with BM25 named, Milvus's k1 and b changed, and every hit asked for
    check_search(
        client,
        name,
        docs,
        params,
        limit=len(DOCS),
        search_params={"metric_type": "BM25", "params": {"bm25_k1": 1.2, "bm25_b": 0.75}},
    )
    results = text_search(
        client,
        name,
        ["running dogs"],
        limit=3,
        search_params={"params": {"bm25_k1": 2.0, "bm25_b": 0.3}},
    )
    check_hits(results[0], bm25_by_hand(docs, "running dogs", params, k1=2.0, b=0.3), 3)


def test_statistics_follow_flushes_deletes_and_compaction(client: Client) -> None:
    name = "lifecycle"
    create(client, name)
    docs = dict(enumerate(DOCS))
    client.insert(name, rows(list(range(6))))
    client.flush(name, timeout=30)
    client.insert(name, rows(list(range(6, 9))))
    client.flush(name, timeout=30)
    client.insert(name, rows(list(range(9, 12))))  # growing
    wait_served(client, name, docs)
    assert len(flushed(client, name)) == 2
    check_search(client, name, docs)

    client.delete(name, [0, 2, 7, 10])  # sealed and growing rows: N, df and avgdl change
    for i in (0, 2, 7, 10):
        del docs[i]
    check_search(client, name, docs)

    client.flush(name, timeout=30)
    job = client.compact(name)
    wait_for(lambda: client.get_compaction_state(job) == "Completed", 60, "compaction")
    wait_served(client, name, docs)
    check_search(client, name, docs)


@pytest.mark.parametrize("index_type", ["SPARSE_INVERTED_INDEX", "SPARSE_WAND"])
def test_an_index_scores_as_the_exact_path(client: Client, shared: Stack, index_type: str) -> None:
    """A BM25 index on the output field (with its own k1 and b) gives the scores computed
    by hand, on its sealed segments and, through the proxy passing the index's k1 and b
    on, on the growing one scored exactly."""
    from test_index_service import served_indexes

    name = f"indexed_{index_type.lower()}"
    create(client, name)
    docs = dict(enumerate(DOCS))
    client.insert(name, rows(list(range(8))))
    client.flush(name, timeout=30)
    client.insert(name, rows(list(range(8, 12))))
    wait_served(client, name, docs)
    params = {"bm25_k1": 1.6, "bm25_b": 0.6, "inverted_index_algo": "DAAT_MAXSCORE"}
    if index_type == "SPARSE_WAND":
        params["inverted_index_algo"] = "DAAT_WAND"

    def bm25_indexes() -> int:
        found = served_indexes(shared, "sparse").values()
        return sum(1 for ix in found if ix.spec.metric == "BM25")

    before = bm25_indexes()
    client.create_index(name, "sparse", index_type=index_type, metric_type="BM25", params=params)
    if not shared.indexnodes:
        shared.add_indexnode()
    client.wait_for_index(name, timeout=120)
    wait_for(lambda: bm25_indexes() > before, 60, "the BM25 index served")
    for deleted in ([], [1, 9]):
        if deleted:
            client.delete(name, deleted)
        for i in deleted:
            del docs[i]
        for query in QUERIES:
            (hits,) = text_search(client, name, [query], limit=12)
            check_hits(hits, bm25_by_hand(docs, query, ENGLISH, k1=1.6, b=0.6), 12)
    # the search's own k1 and b win over the index's
    (hits,) = text_search(
        client,
        name,
        ["lazy dog"],
        limit=10,
        search_params={"params": {"bm25_k1": 1.2, "bm25_b": 0.75}},
    )
    check_hits(hits, bm25_by_hand(docs, "lazy dog", ENGLISH), 10)


def test_two_shards_score_with_collection_wide_statistics(client: Client) -> None:
    name = "sharded"
    create(client, name, shards=2)
    docs = dict(enumerate(DOCS))
    client.insert(name, rows(list(range(7))))
    client.flush(name, timeout=30)
    client.insert(name, rows(list(range(7, 12))))
    wait_served(client, name, docs)
    check_search(client, name, docs)
    client.delete(name, [1, 8])
    del docs[1], docs[8]
    check_search(client, name, docs)


def test_filters_outputs_and_several_queries(client: Client) -> None:
    name = "filtered"
    create(client, name)
    client.insert(name, rows(list(range(len(DOCS)))))
    docs = dict(enumerate(DOCS))
    results = text_search(
        client, name, QUERIES, limit=4, filter="tag == 1", output_fields=["text", "tag"]
    )
    for query, hits in zip(QUERIES, results, strict=True):
        # the filter narrows the hits, not the statistics: they are the collection's
        everything = bm25_by_hand(docs, query, ENGLISH)
        expected = {i: s for i, s in everything.items() if i % 3 == 1}
        check_hits(hits, expected, 4)
        for h in hits:
            assert h["entity"] == {"text": DOCS[h["id"]], "tag": h["id"] % 3}
    star = text_search(client, name, ["fox"], limit=2, output_fields=["*"])
    assert star[0] and all(set(h["entity"]) == {"id", "text", "tag"} for h in star[0])
    (row,) = client.query(name, "id == 3", ["*"], consistency_level=STRONG)
    assert set(row) == {"id", "text", "tag"}
    with pytest.raises(ElanusError, match="not allowed to retrieve raw data of field sparse"):
        client.query(name, "id == 3", ["sparse"], consistency_level=STRONG)
    with pytest.raises(ElanusError, match="not allowed to retrieve raw data of field sparse"):
        client.search(name, data=["fox"], anns_field="sparse", output_fields=["sparse"])
    # a query whose every word is a stop word matches nothing
    assert text_search(client, name, ["the and of"]) == [[]]


def test_upsert_recomputes_the_output(client: Client) -> None:
    name = "upserted"
    create(client, name)
    client.insert(name, rows(list(range(len(DOCS)))))
    client.flush(name, timeout=30)
    docs = dict(enumerate(DOCS))
    docs[4] = "Penguins waddle across the antarctic ice"
    client.upsert(name, rows([4], docs))
    check_search(client, name, docs, queries=["penguins ice", "cats pets", "dogs"])
    hits = text_search(client, name, ["penguins"])
    assert [h["id"] for h in hits[0]] == [4]
    assert text_search(client, name, ["pets"]) == [[]]


def test_import_computes_the_output(client: Client, tmp_path: Path) -> None:
    name = "imported"
    create(client, name)
    table = pa.table(
        {
            "id": pa.array(range(len(DOCS)), pa.int64()),
            "text": DOCS,
            "tag": pa.array([i % 3 for i in range(len(DOCS))], pa.int32()),
        }
    )
    path = tmp_path / "docs.parquet"
    pq.write_table(table, path)
    client.wait_import(client.bulk_import(name, [str(path)]), timeout=60)
    docs = dict(enumerate(DOCS))
    wait_served(client, name, docs)
    check_search(client, name, docs)
    # a file that gives the output itself is refused, as an insert is
    bad = table.append_column(
        "sparse", pa.array([[(1, 1.0)]] * len(DOCS), pa.map_(pa.uint32(), pa.float32()))
    )
    pq.write_table(bad, tmp_path / "bad.parquet")
    job = client.bulk_import(name, [str(tmp_path / "bad.parquet")])
    with pytest.raises(ElanusError, match="unexpected function output field `sparse`"):
        client.wait_import(job, timeout=60)


def test_describe_lists_the_function(client: Client) -> None:
    create(client, "described")
    desc = client.describe_collection("described")
    (fn,) = desc["functions"]
    assert fn["name"] == "bm25" and fn["type"] == FunctionType.BM25
    assert fn["input_field_names"] == ["text"] and fn["output_field_names"] == ["sparse"]
    by_name = {f["name"]: f for f in desc["fields"]}
    assert by_name["sparse"].get("is_function_output") is True
    assert not by_name["text"].get("is_function_output")
    assert [f.function_type for f in Schema.from_dict(desc["schema"]).functions] == [
        FunctionType.BM25
    ]


def test_range_group_by_and_do_exchange_with_text(client: Client, shared: Stack) -> None:
    name = "shapes"
    create(client, name)
    client.insert(name, rows(list(range(len(DOCS)))))
    docs = dict(enumerate(DOCS))
    expected = bm25_by_hand(docs, "dogs running", ENGLISH)
    # range search: radius < score <= range_filter (larger is better)
    (hits,) = text_search(
        client,
        name,
        ["dogs running"],
        limit=10,
        search_params={"params": {"radius": 0.5, "range_filter": 2.0}},
    )
    check_hits(hits, {i: s for i, s in expected.items() if 0.5 < s <= 2.0}, 10)
    # group by tag: the best hit of each tag, best group first
    (groups,) = text_search(client, name, ["dogs running"], limit=3, group_by_field="tag")
    best: dict[int, tuple[int, float]] = {}
    for i, score in expected.items():
        if i % 3 not in best or score > best[i % 3][1]:
            best[i % 3] = (i, score)
    want = sorted(best.values(), key=lambda kv: -kv[1])
    assert [h["id"] for h in groups] == [i for i, _ in want]
    # DoExchange: a string column of queries in, hits out
    fc = flight.FlightClient(shared.uri)
    command = {
        "collection": name,
        "anns_field": "sparse",
        "limit": 3,
        "consistency_level": "Strong",
    }
    descriptor = flight.FlightDescriptor.for_command(json.dumps(command).encode())
    writer, reader = fc.do_exchange(descriptor)
    schema = pa.schema([pa.field("text", pa.string())])
    writer.begin(schema)
    writer.write_batch(pa.record_batch([pa.array(QUERIES[:2])], schema=schema))
    writer.done_writing()
    table = reader.read_all()
    writer.close()
    for q, query in enumerate(QUERIES[:2]):
        got = table.filter(pc.equal(table["query_index"], q))
        hits = [
            {"id": i, "distance": d}
            for i, d in zip(got["id"].to_pylist(), got["distance"].to_pylist(), strict=True)
        ]
        check_hits(hits, bm25_by_hand(docs, query, ENGLISH), 3)
    fc.close()


# -- refusals ---------------------------------------------------------------------------------


def code_of(call: Any) -> ElanusError:
    with pytest.raises(ElanusError) as err:
        call()
    return err.value


def test_bad_inputs_are_refused_with_clear_errors(client: Client) -> None:
    name = "refusals"
    client.create_collection(name, schema=text_schema(with_vector=True))
    client.load_collection(name)
    client.insert(name, [{**r, "vector": [0.1, 0.2]} for r in rows([0, 1])])

    err = code_of(lambda: client.search(name, data=[{1: 0.5}], anns_field="sparse"))
    assert err.code is ErrorCode.INVALID_ARGUMENT and "query texts (strings)" in err.message
    err = code_of(lambda: client.search(name, data=["fox"], anns_field="vector"))
    assert err.code is ErrorCode.INVALID_ARGUMENT and "not the output of a BM25" in err.message
    err = code_of(
        lambda: client.search(
            name, data=["fox"], anns_field="sparse", search_params={"metric_type": "L2"}
        )
    )
    assert "expected=BM25][actual=L2]" in err.message
    err = code_of(
        lambda: client.search(
            name, data=[[0.1, 0.2]], anns_field="vector", search_params={"metric_type": "BM25"}
        )
    )
    assert "metric BM25 applies only to the output field of a BM25 function" in err.message
    for bad in ({"bm25_k1": 1.0}, {"bm25_k1": 2.5}, {"bm25_b": -0.1}, {"bm25_b": 1.5}):
        err = code_of(
            lambda bad=bad: client.search(
                name, data=["fox"], anns_field="sparse", search_params={"params": bad}
            )
        )
        assert err.code is ErrorCode.INVALID_ARGUMENT and "must be in [" in err.message, bad

    given = [{**rows([5])[0], "vector": [0.1, 0.2], "sparse": {3: 1.0}}]
    for write in (client.insert, client.upsert):
        err = code_of(lambda write=write: write(name, given))
        assert "Attempt to insert an unexpected function output field `sparse`" in err.message
    (row,) = client.query(name, "", ["count(*)"], consistency_level=STRONG)
    assert row["count(*)"] == 2  # nothing of the refused writes landed

    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    s.add_field("dense", DataType.FLOAT_VECTOR, dim=4)
    s.add_function(Function("bm25", FunctionType.BM25, ["text"], ["dense"]))
    err = code_of(lambda: client.create_collection("not_sparse", schema=s))
    assert err.code is ErrorCode.INVALID_ARGUMENT
    assert "output field 'dense' must be SparseFloatVector" in err.message
    assert "not_sparse" not in client.list_collections()

    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field("n", DataType.INT64, enable_analyzer=True)
    s.add_field("dense", DataType.FLOAT_VECTOR, dim=4)
    err = code_of(lambda: client.create_collection("analysed_int", schema=s))
    assert err.code is ErrorCode.INVALID_ARGUMENT
    assert "field 'n'" in err.message and "need a VarChar field, not Int64" in err.message
    assert "analysed_int" not in client.list_collections()


# -- the in-process transport and Spark -------------------------------------------------------


def test_in_process_roles_score_the_same(stack: Stack) -> None:
    """The function-scoped stack calls roles in-process (no encoding on the way)."""
    client = stack.client()
    create(client, "local", shards=2)
    client.insert("local", rows(list(range(len(DOCS)))))
    check_search(client, "local", dict(enumerate(DOCS)))


def test_spark_writes_text_and_reads_it_back(spark: Any, client: Client, shared: Stack) -> None:
    name = "sparked"
    create(client, name)
    df = spark.createDataFrame(
        [(i, DOCS[i], i % 3) for i in range(len(DOCS))], "id long, text string, tag int"
    )
    df.write.format("elanus").option("uri", shared.uri).option("collection", name).mode(
        "append"
    ).save()
    docs = dict(enumerate(DOCS))
    wait_served(client, name, docs)
    check_search(client, name, docs)
    back = spark.read.format("elanus").option("uri", shared.uri).option("collection", name).load()
    assert back.columns == ["id", "text", "tag"]  # the computed output is not returned
    assert sorted(tuple(r) for r in back.collect()) == [
        (i, DOCS[i], i % 3) for i in range(len(DOCS))
    ]


def test_hybrid_search_fuses_text_and_dense_requests(client: Client) -> None:
    """A BM25 request inside hybrid_search (query text as its data) beside a dense one:
    RRF over the two rankings, each computed by hand."""
    from elanus import AnnSearchRequest, RRFRanker

    name = "hybrid_text"
    client.create_collection(name, schema=text_schema(with_vector=True))
    client.load_collection(name)
    rng = np.random.default_rng(5)
    vectors = rng.random((len(DOCS), 2)).astype(np.float32)
    client.insert(
        name,
        [{**r, "vector": vectors[r["id"]].tolist()} for r in rows(list(range(len(DOCS))))],
    )
    docs = dict(enumerate(DOCS))
    query, qvec = "wild foxes hunt at night", np.array([0.3, 0.7], np.float32)  # no ties
    reqs = [
        AnnSearchRequest([qvec.tolist()], "vector", {"metric_type": "L2"}, 6),
        AnnSearchRequest([query], "sparse", {"metric_type": "BM25"}, 6),
    ]
    (hits,) = client.hybrid_search(name, reqs, RRFRanker(60), limit=5, consistency_level=STRONG)
    dense = np.argsort(((vectors - qvec) ** 2).sum(axis=1), kind="stable")[:6].tolist()
    text = sorted(bm25_by_hand(docs, query, ENGLISH).items(), key=lambda kv: -kv[1])[:6]
    fused: dict[int, float] = {}
    for ranking in (dense, [i for i, _ in text]):
        for rank, i in enumerate(ranking, start=1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (60 + rank)
    want = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [h["id"] for h in hits] == [i for i, _ in want]
    assert [h["distance"] for h in hits] == pytest.approx([s for _, s in want], rel=1e-6)
    with pytest.raises(ElanusError, match=r"reqs\[1\].*query texts"):
        client.hybrid_search(
            name, [reqs[0], AnnSearchRequest([[0.1, 0.2]], "sparse", {}, 5)], RRFRanker()
        )
