"""text_match / phrase_match filters: Tantivy indexes built with the field's analyzer.

Expected ids are worked out by hand from the english analyzer's tokens (lowercase, English
stemmer, English stop words; a removed stop word keeps its position), shown beside each
text as ``token@position``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, wait_for

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.expr import parse
from elanus.expr.textmatch import TextIndexes
from elanus.segments.querynode.memseg import MemSegment

CORPUS: dict[int, str | None] = {
    1: "Machine learning boosts efficiency",  # machin@0 learn@1 boost@2 effici@3
    2: "Learning machines are everywhere",  # learn@0 machin@1 everywher@3
    3: "Deep learning for machine translation",  # deep@0 learn@1 machin@3 translat@4
    4: "The machine of the future learns",  # machin@1 futur@4 learn@5
    5: "Running runners run quickly",  # run@0 runner@1 run@2 quick@3
    6: "Cats and dogs",  # cat@0 dog@2
    7: None,
    8: "",
    9: "machine machine learning learning",  # machin@0,1 learn@2,3
    10: "MACHINE Learning",  # machin@0 learn@1
    11: "machine deep learning",  # machin@0 deep@1 learn@2
}
MACHINE = [1, 2, 3, 4, 9, 10, 11]

CASES: list[tuple[str, list[int]]] = [
    # text_match: any token of the query, after the analyzer
    ("text_match(text, 'machine')", MACHINE),
    ("TEXT_MATCH(text, 'MACHINES')", MACHINE),  # case, stemming, any case of the name
    ("text_match(text, 'run')", [5]),  # "Running" -> run; "runners" -> runner
    ("text_match(text, 'runners')", [5]),
    ("text_match(text, 'ran')", []),
    ("text_match(text, 'dogs efficiency')", [1, 6]),  # several tokens: OR
    ("text_match(text, 'cat or quickly')", [5, 6]),
    ("text_match(text, 'the and of')", []),  # only stop words: no token, no match
    ("text_match(text, '')", []),
    # phrase_match: tokens in order, at most `slop` position moves
    ("phrase_match(text, 'machine learning')", [1, 9, 10]),
    ("phrase_match(text, 'machine learning', 0)", [1, 9, 10]),
    ("Phrase_Match(text, 'machine learning', 1)", [1, 9, 10, 11]),  # one word between
    ("phrase_match(text, 'machine learning', 2)", [1, 2, 9, 10, 11]),  # swapped neighbours
    ("phrase_match(text, 'machine learning', 3)", MACHINE),
    ("phrase_match(text, 'learning machine')", [2]),  # reverse order is another phrase
    ("phrase_match(text, 'learning the machine')", [3]),  # the stop word keeps its gap
    ("phrase_match(text, 'machine machine')", [9]),  # repeated words
    ("phrase_match(text, 'machines')", MACHINE),  # one token: a term match
    ("phrase_match(text, 'the of')", []),
    # with other predicates; NULL text is NULL, so `not` leaves row 7 out as well
    ("not text_match(text, 'machine')", [5, 6, 8]),
    ("text_match(text, 'machine') and id > 3", [4, 9, 10, 11]),
    ("phrase_match(text, 'machine learning') or text_match(text, 'dog')", [1, 6, 9, 10]),
    ("text_match(text, 'learns') and not phrase_match(text, 'machine learning')", [2, 3, 4, 11]),
    ("text_match(text, 'deep') and text_match(title, 'two')", [11]),
    # templates: {q} = 'quick' gives [5]; {p} = 'machine learning', {s} = 1 give [1, 9, 10, 11]
    ("text_match(text, {q}) or phrase_match(text, {p}, {s})", [1, 5, 9, 10, 11]),
]
PARAMS = {"q": "quick", "p": "machine learning", "s": 1}


def schema() -> Schema:
    s = Schema().add_field("id", DataType.INT64, is_primary=True)
    s.add_field(
        "text",
        DataType.VARCHAR,
        max_length=200,
        nullable=True,
        enable_analyzer=True,
        enable_match=True,
        analyzer_params={"type": "english"},
    )
    s.add_field("title", DataType.VARCHAR, max_length=50, enable_analyzer=True, enable_match=True)
    s.add_field("plain", DataType.VARCHAR, max_length=50)
    s.add_field("meta", DataType.JSON)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    return s


def table(ids: list[int] | None = None) -> pa.Table:
    ids = ids or list(CORPUS)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": pa.array([CORPUS.get(i) for i in ids], pa.string()),
            "title": pa.array([f"row {'two' if i == 11 else i}" for i in ids], pa.string()),
            "plain": pa.array(["x"] * len(ids), pa.string()),
        }
    )


def ids_of(expr: str, t: pa.Table, indexes: TextIndexes | None = None) -> list[int]:
    params = PARAMS if "{" in expr else None
    mask = parse(expr, schema(), params).evaluate(t, text_indexes=indexes)
    return sorted(t.column("id").filter(mask).to_pylist())


@pytest.mark.parametrize(("expr", "want"), CASES)
def test_matches_worked_out_by_hand(expr: str, want: list[int]) -> None:
    assert ids_of(expr, table()) == want


def test_rows_in_any_order_and_chunks_give_the_same() -> None:
    order = [11, 3, 7, 1, 8, 5, 2, 10, 4, 6, 9]
    shuffled = table(order)
    chunked = pa.concat_tables([shuffled.slice(0, 4), shuffled.slice(4)])
    for expr, want in CASES:
        assert ids_of(expr, chunked) == want, expr


def test_no_sql_pushdown() -> None:
    expr = parse("id > 1 and text_match(text, 'machine')", schema())
    assert expr.to_sql() is None
    assert expr.fields == {"id", "text"}
    assert parse("phrase_match(text, 'a b', 1) or id == 1", schema()).to_sql() is None


def test_a_given_provider_is_used_and_keeps_its_index() -> None:
    t = table()
    indexes = TextIndexes()
    assert ids_of("text_match(text, 'dog')", t, indexes) == [6]
    built = indexes.get(schema().field("text"), t.column("text").combine_chunks())
    assert ids_of("phrase_match(text, 'machine learning')", t, indexes) == [1, 9, 10]
    assert indexes.get(schema().field("text"), t.column("text").combine_chunks()) is built


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("text_match(plain, 'x')", "field 'plain' does not enable match"),
        ("text_match(id, 'x')", "needs a VarChar field as its first argument, got Int64"),
        ("text_match(meta, 'x')", "needs a VarChar field as its first argument, got JSON"),
        ("text_match(text)", "text_match() takes 2 arguments, got 1"),
        ("text_match(text, 'a', 1)", "text_match() takes 2 arguments, got 3"),
        ("phrase_match(text, 'a', 1, 2)", "phrase_match() takes 2 or 3 arguments, got 4"),
        ("text_match(text, 5)", "needs a string as its second argument, got number 5"),
        ("text_match(text, title)", "needs a string as its second argument, got VarChar"),
        ("phrase_match(text, 'a b', -1)", "slop must be between 0 and 4294967295, got -1"),
        ("phrase_match(text, 'a b', 4294967296)", "got 4294967296"),
        ("phrase_match(text, 'a b', 1.5)", "slop must be an integer, got number 1.5"),
        ("phrase_match(text, 'a b', '1')", "slop must be an integer, got string"),
        ("phrase_match(text, 'a b', true)", "slop must be an integer, got boolean"),
        ("text_match(text, 'a') + 1 > 0", "'+' needs numeric operands"),
        ("texts_match(text, 'a')", "known: array_contains"),
    ],
)
def test_bad_calls_are_refused_with_clear_errors(expr: str, words: str) -> None:
    with pytest.raises(ElanusError) as err:
        parse(expr, schema())
    assert err.value.code == ErrorCode.BAD_EXPRESSION
    assert words in str(err.value)


def test_template_query_must_be_a_string() -> None:
    with pytest.raises(ElanusError, match="needs a string as its second argument"):
        parse("text_match(text, {q})", schema(), {"q": 3})
    with pytest.raises(ElanusError, match="slop must be an integer"):
        parse("phrase_match(text, 'a b', {s})", schema(), {"s": "2"})


def segment_rows(ids: list[int]) -> pa.Table:
    """Rows as a segment holds them (every column, ``_ts`` = 1)."""
    t = table(ids)
    n = len(ids)
    cols = {name: t.column(name) for name in t.column_names}
    cols["meta"] = pa.array(["{}"] * n)
    cols["vector"] = pa.array([[0.0, 0.0]] * n)
    cols["_ts"] = pa.array([1] * n)
    return pa.table(cols).cast(schema().to_arrow(with_ts=True))


def test_memsegment_caches_and_refreshes_its_index() -> None:
    s = schema()
    expr = parse("text_match(text, 'machine')", s)
    growing = MemSegment(1, 1, s)
    growing.append(segment_rows([1, 2, 6]))
    assert np.nonzero(growing.visible(5, expr))[0].tolist() == [0, 1]
    first = growing._text
    assert np.nonzero(growing.visible(5, expr))[0].tolist() == [0, 1]
    assert growing._text is first  # no rows appended since: the same indexes
    growing.append(segment_rows([9, 5]))
    assert np.nonzero(growing.visible(5, expr))[0].tolist() == [0, 1, 3]
    assert growing._text is not first  # the appended rows are in the new index

    sealed = MemSegment(2, 1, s, segment_rows(list(CORPUS)))
    assert np.nonzero(sealed.visible(5, expr))[0].tolist() == [i - 1 for i in MACHINE]


# -- end to end ---------------------------------------------------------------------------------
STRONG = "Strong"


def insert_rows(ids: list[int]) -> dict[str, Any]:
    t = table(ids)
    return {
        **{name: t.column(name).to_pylist() for name in t.column_names},
        "meta": [{"n": i} for i in ids],
        "vector": np.array([[float(i), 1.0] for i in ids], dtype=np.float32),
    }


def served_ids(client: Any, expr: str, **kw: Any) -> list[int]:
    params = PARAMS if "{" in expr else None
    rows = client.query("docs", expr, ["id"], filter_params=params, consistency_level=STRONG, **kw)
    return sorted(r["id"] for r in rows)


def count(client: Any, expr: str) -> int:
    params = PARAMS if "{" in expr else None
    (row,) = client.query(
        "docs", expr, ["count(*)"], filter_params=params, consistency_level=STRONG
    )
    return int(row["count(*)"])


def flushed_and_served(stack: Stack, client: Any) -> bool:
    flushed = {s["segment_id"] for s in client.get_segment_info("docs") if s["state"] == "Flushed"}
    served: set[int] = set()
    for qn in stack.querynodes:
        for d in list(qn.delegators.values()):
            served |= set(d.distribution.sealed)
    return bool(flushed) and flushed <= served


def test_filters_through_the_stack_growing_flushed_and_deletes(stack: Stack) -> None:
    assert stack.coord is not None
    wait_for(lambda: stack.coord.sessions.of_role("querynode"), what="a query node")  # type: ignore[union-attr]
    client = stack.client()
    client.create_collection("docs", schema=schema(), properties={"metric_type": "L2"})
    client.load_collection("docs")

    client.insert("docs", insert_rows([1, 2, 3, 4, 5, 6]))
    assert served_ids(client, "text_match(text, 'machine')") == [1, 2, 3, 4]
    client.insert("docs", insert_rows([7, 8, 9, 10, 11]))  # the growing index refreshes
    assert served_ids(client, "text_match(text, 'machine')") == MACHINE
    growing = {expr: served_ids(client, expr) for expr, _ in CASES}
    assert growing == dict(CASES)

    client.flush("docs", timeout=30)
    wait_for(lambda: flushed_and_served(stack, client), what="the flushed segment served")
    for expr, want in CASES:
        assert served_ids(client, expr) == want, expr
        assert count(client, expr) == len(want), expr
    assert served_ids(client, "phrase_match(text, 'machine learning')", limit=2) == [1, 9]

    # a filtered search: rows outside the filter never come back, however close
    (hits,) = client.search(
        "docs",
        [[10.4, 1.0]],
        filter="phrase_match(text, 'machine learning', 1) and id != 10",
        limit=3,
        consistency_level=STRONG,
    )
    assert [h["id"] for h in hits] == [11, 9, 1]

    client.delete("docs", filter="phrase_match(text, 'machine learning')")
    assert served_ids(client, "text_match(text, 'machines')") == [2, 3, 4, 11]
    assert count(client, "id >= 0") == len(CORPUS) - 3
    client.insert("docs", insert_rows([12]))  # a new growing segment beside the sealed one
    assert served_ids(client, "id == 12 or text_match(text, 'cats')") == [6, 12]

    with pytest.raises(ElanusError, match="field 'plain' does not enable match"):
        client.query("docs", "text_match(plain, 'x')", ["id"])
    with pytest.raises(ElanusError, match="slop must be between 0"):
        client.query("docs", "phrase_match(text, 'a b', -2)", ["id"])
