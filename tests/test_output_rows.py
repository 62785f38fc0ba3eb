"""Rows of query, get and search as Milvus returns them (issue "Answer as Milvus answers",
defects 5 and 6), checked on a real stack and, where cheap, against Milvus Lite on the same
rows.

Milvus's proxy (``translateOutputFields``) and pymilvus decide the shape: the primary key is
always in a query/get row; ``*`` means every field and every dynamic key, flattened into the
row; ``$meta`` means every dynamic key; JSON fields are JSON values; a search hit is
``{"id", "distance", "entity"}`` with only the requested fields in ``entity``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import Stack, own_stack
from lite_oracle import SAMPLE_FIELDS, SAMPLE_ROWS, lite_answers, sample_schema

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.client.client import Client

STRONG = {"consistency_level": "Strong"}
ROWS = SAMPLE_ROWS
FIELDS = ("pk", "v", "j", "n")


def make_collection(client: Client) -> None:
    client.create_collection("c", schema=sample_schema(), properties={"metric_type": "L2"})
    client.insert("c", ROWS)
    client.load_collection("c")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the file: every test but one only reads ``c``; that one makes its own
    collection."""
    with own_stack(tmp_path_factory.mktemp("output-rows"), "output-rows") as stack:
        yield stack


@pytest.fixture(scope="module")
def client(shared: Stack) -> Client:
    c = shared.client()
    make_collection(c)
    return c


LITE_FIELDS = SAMPLE_FIELDS
QUERY_OUTPUTS: list[list[str] | None] = [["n"], ["j"], ["*"], ["$meta"], ["d"], ["d", "zz"], None]
SEARCH_OUTPUTS: list[list[str]] = [["j"], ["*"], ["$meta"], ["pk"], ["d"]]


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Milvus Lite's answers for the same rows, keyed like the parametrised tests below."""
    reads = [("query", o) for o in QUERY_OUTPUTS] + [("search", o) for o in SEARCH_OUTPUTS]
    answers = lite_answers(
        tmp_path_factory.mktemp("lite"), LITE_FIELDS, ROWS, reads, query_vector=[0.1, 0.2]
    )
    return {f"{kind}:{arg}": a for (kind, arg), a in zip(reads, answers, strict=True)}


def expected(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """``row`` as inserted, restricted to ``names`` (absent dynamic keys stay absent)."""
    return {k: row[k] for k in names if k in row}


def same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Equal rows (vectors as float32 lists compared approximately), in the same order."""
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want, strict=True):
        for k, v in w.items():
            if k == "v":
                assert np.allclose(g[k], v, atol=1e-6), (k, g[k], v)
            else:
                assert g[k] == v, (k, g[k], v)


BY_PK = sorted(ROWS, key=lambda r: r["pk"])
EVERYTHING = (*FIELDS, "d", "s")


def test_query_rows_always_carry_the_primary_key_first(client: Client) -> None:
    rows = client.query("c", "pk > 0", ["n"], **STRONG)
    assert [list(r) for r in rows] == [["pk", "n"]] * 4
    assert rows == [{"pk": r["pk"], "n": r["n"]} for r in BY_PK if r["pk"] > 0]
    got = client.get("c", [5, 1], ["d"], **STRONG)
    assert got == [{"pk": 1, "d": "x"}, {"pk": 5, "d": [1, 2]}]


def test_json_fields_come_back_as_json_values(client: Client) -> None:
    rows = client.query("c", "pk in [0, 2, 3, 5]", ["j"], **STRONG)
    assert [r["j"] for r in rows] == [r["j"] for r in BY_PK if r["pk"] != 1]
    (hit,) = client.search("c", [[0.1, 0.2]], limit=1, output_fields=["j"], **STRONG)[0]
    assert hit["entity"] == {"j": {"x": 1, "tags": [1, 2]}}


def test_star_and_meta_flatten_the_dynamic_fields(client: Client) -> None:
    star = client.query("c", "pk >= 0", ["*"], **STRONG)
    same_rows(star, [expected(r, EVERYTHING) for r in BY_PK])
    meta = client.query("c", "pk >= 0", ["$meta"], **STRONG)
    assert meta == [expected(r, ("pk", "d", "s")) for r in BY_PK]
    # a dynamic key as an output: rows without it just lack it, an unknown key is no error
    keyed = client.query("c", "pk >= 0", ["d", "nowhere"], **STRONG)
    assert keyed == [expected(r, ("pk", "d")) for r in BY_PK]


def test_query_and_get_without_output_fields_return_every_field(client: Client) -> None:
    # pymilvus's MilvusClient asks for ["*"] when output_fields is left out (milvus_client.py
    # query/get), so a MilvusClient user gets every field, vectors and dynamic keys included;
    # Milvus Lite answers the same.
    same_rows(client.query("c", "pk >= 0", **STRONG), [expected(r, EVERYTHING) for r in BY_PK])
    same_rows(
        client.get("c", [3, 1], **STRONG),
        [expected(r, EVERYTHING) for r in BY_PK if r["pk"] in (1, 3)],
    )


def test_wire_query_without_output_fields_returns_the_primary_key(client: Client) -> None:
    # The Flight action itself answers as Milvus's proxy does for an empty output list
    # (translateOutputFields adds only the primary key).
    reply = client._action("query", {"collection": "c", "filter": "pk < 2", **STRONG})
    assert reply["rows"] == [{"pk": 0}, {"pk": 1}]


def test_search_hits_are_id_distance_entity(client: Client) -> None:
    hits = client.search("c", [[0.1, 0.2]], limit=2, **STRONG)[0]
    assert [sorted(h) for h in hits] == [["distance", "entity", "id"]] * 2
    assert [h["id"] for h in hits] == [3, 1] and all(h["entity"] == {} for h in hits)
    star = client.search("c", [[0.1, 0.2]], limit=1, output_fields=["*"], **STRONG)[0]
    same_rows([star[0]["entity"]], [expected(ROWS[0], EVERYTHING)])
    meta = client.search("c", [[0.1, 0.2]], limit=1, output_fields=["$meta"], **STRONG)[0]
    assert meta[0]["entity"] == {"d": 1, "s": "a"}
    vec = client.search("c", [[0.1, 0.2]], limit=1, output_fields=["v"], **STRONG)[0]
    assert isinstance(vec[0]["entity"]["v"], list)
    assert np.allclose(vec[0]["entity"]["v"], [0.1, 0.2], atol=1e-6)


def test_meta_is_refused_without_dynamic_fields(shared: Stack) -> None:
    c = shared.client()
    schema = Schema(enable_dynamic_field=False).add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    c.create_collection("static", schema=schema)
    c.insert("static", [{"id": 1, "v": [0.0, 1.0]}])
    c.load_collection("static")
    for names in (["$meta"], ["nowhere"]):
        with pytest.raises(ElanusError) as info:
            c.query("static", "id > 0", names, **STRONG)
        assert info.value.code is ErrorCode.INVALID_ARGUMENT
        assert repr(names[0]) in info.value.message


def test_empty_filter_takes_a_limit(client: Client) -> None:
    with pytest.raises(ElanusError) as info:
        client.query("c", "", ["pk"], **STRONG)
    assert info.value.code is ErrorCode.INVALID_ARGUMENT and "limit" in info.value.message
    # Milvus merges query results by primary key; Milvus Lite returns insertion order here.
    assert client.query("c", "", ["pk"], limit=3, **STRONG) == [{"pk": 0}, {"pk": 1}, {"pk": 2}]
    paged = client.query("c", "", ["n"], limit=2, offset=3, **STRONG)
    assert paged == [{"pk": 3, "n": 5}, {"pk": 5, "n": 1}]
    assert client.query("c", "", ["count(*)"], **STRONG) == [{"count(*)": 5}]


@pytest.mark.slow
@pytest.mark.parametrize("names", QUERY_OUTPUTS, ids=str)
def test_query_rows_match_milvus_lite(
    client: Client, lite: dict[str, Any], names: list[str] | None
) -> None:
    same_rows(client.query("c", "pk >= 0", names, **STRONG), lite[f"query:{names}"])


@pytest.mark.slow
@pytest.mark.parametrize("names", SEARCH_OUTPUTS, ids=str)
def test_search_entities_match_milvus_lite(
    client: Client, lite: dict[str, Any], names: list[str]
) -> None:
    # (Milvus Lite 3.2.2 also fills ``entity`` when no output_fields are given; pymilvus's
    # documentation says a search without them returns only keys and distances, which is
    # what Elanus does: see test_search_hits_are_id_distance_entity.)
    mine = client.search("c", [[0.1, 0.2]], limit=3, output_fields=names, **STRONG)[0]
    theirs = lite[f"search:{names}"]
    assert [h["id"] for h in mine] == [pk for pk, _ in theirs]
    same_rows([h["entity"] for h in mine], [entity for _, entity in theirs])
