"""Scalar indexes end to end (issue 15, "Must have" 5): INVERTED, BITMAP, STL_SORT, TRIE and
AUTOINDEX on scalar fields and INVERTED on JSON paths with a cast type, built by the index
service on a real stack (nats-server, coord, datanode, query node, index node, proxy).

For every index a table of filters at several selectivities (none, ~0.1%, ~1%, ~50%, all)
gives the same query rows, counts and filtered-search hits before the indexes exist, while
they are served (and the workers' segments count the predicates the indexes answered), and
after they are dropped. Bad requests get errors naming the rule they break.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import Stack, own_stack
from test_read_path import wait_for

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client
from elanus.client.compat import IndexParams
from elanus.expr import parse
from elanus.expr.indexed import ValueIndex
from elanus.index.scalar import load_scalar_index, write_scalar_index
from elanus.index.verify import verify_report
from elanus.scalarindex import ScalarSpec
from elanus.schema import DataType, Schema

N = 4000
DIM = 4
SCHEMA: dict[str, Any] = {
    "fields": [
        {"name": "id", "type": "Int64", "is_primary": True},
        {"name": "i", "type": "Int64", "nullable": True},
        {"name": "small", "type": "Int32"},
        {"name": "f", "type": "Float", "nullable": True},
        {"name": "d", "type": "Double"},
        {"name": "s", "type": "VarChar", "max_length": 16, "nullable": True},
        {"name": "tag", "type": "VarChar", "max_length": 16},
        {"name": "b", "type": "Bool"},
        {"name": "j", "type": "JSON", "nullable": True},
        {"name": "vector", "type": "FloatVector", "dim": DIM},
    ]
}
INDEXES = [  # (field, index type, index name, params)
    ("i", "STL_SORT", "i_sorted", {}),
    ("small", "BITMAP", "small_bitmap", {}),
    ("f", "INVERTED", "f_inverted", {}),
    ("d", "STL_SORT", "d_sorted", {}),
    ("s", "TRIE", "s_trie", {}),
    ("tag", "INVERTED", "tag_inverted", {}),
    ("b", "AUTOINDEX", "b_auto", {}),
    ("j", "INVERTED", "j_a", {"json_path": 'j["a"]', "json_cast_type": "double"}),
    ("j", "INVERTED", "j_t", {"json_path": 'j["t"]', "json_cast_type": "varchar"}),
]
FILTERS = [  # each with the share of rows it selects, roughly
    "i < 0",  # none
    "i < 4",  # ~0.1%
    "i < 40",  # 1%
    "i >= 2000",  # ~50%
    "i >= 0 or i is null",  # all
    "i in [7, 70, 700, 7000]",
    "i not in [1, 2, 3]",
    "i != 10",
    "i is null",
    "i is not null and 100 > i",
    "small == 3",
    "small in [1, 2]",
    "small != 0",
    "f > 1.5",
    "f <= 0.25",
    "f == 0.1",
    "f != 0.5",
    "f in [0.5, 1, 0]",
    "f == 0",
    "d >= 3999",
    "d < 1999.5",
    "s like 'k0000%'",
    "s like 'k00%'",
    "s like '%'",
    "s == 'k00042'",
    "s > 'k039'",
    "s in ['k00001', 'k03000', 'nope']",
    "tag == 't3'",
    "tag like 't1%'",
    "tag != 't0' and i < 400",
    "b == true",
    "b != true and small == 1",
    'j["a"] > 8',
    'j["a"] == 2',
    'j["a"] != 2',
    'j["a"] in [1, 2.5]',
    'j["a"] not in [1, 2.5]',
    'not (j["a"] < 5)',
    'j["t"] == "x1"',
    'j["t"] like "x%"',
    'j["a"] == "x1"',  # another type than the index's: the plain path
    'j["a"] > 2 and s like "k01%" or tag == "t2"',
]


def _j(k: int) -> str | None:
    if k % 17 == 0:
        return None
    if k % 5 == 0:
        return json.dumps({"t": f"x{k % 3}"})
    if k % 7 == 0:
        return json.dumps({"a": "text", "t": 3})
    return json.dumps({"a": (k % 20) / 2 if k % 2 else k % 10})


def rows(ids: np.ndarray) -> pa.Table:
    rng = np.random.default_rng(int(ids[0]))
    f = [None if k % 11 == 0 else (-0.0 if k % 13 == 0 else (k % 8) / 4) for k in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i": pa.array([None if k % 23 == 0 else int(k) for k in ids], pa.int64()),
            "small": pa.array(ids % 5, pa.int32()),
            "f": pa.array(f, pa.float32()),
            "d": pa.array(ids.astype(np.float64), pa.float64()),
            "s": pa.array([None if k % 19 == 0 else f"k{k:05d}" for k in ids]),
            "tag": pa.array([f"t{k % 4}" for k in ids]),
            "b": pa.array(ids % 2 == 0),
            "j": pa.array([_j(int(k)) for k in ids], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=len(ids) * DIM).astype(np.float32)), DIM
            ),
        }
    )


def make_collection(client: Client, name: str) -> None:
    client.create_collection(name, schema=SCHEMA, properties={"metric_type": "L2"})
    for lo, hi in ((0, N // 2), (N // 2, N)):
        client.insert(name, rows(np.arange(lo, hi)))
        client.flush(name, timeout=60)
    client.load_collection(name)


def answers(
    client: Client, name: str, queries: np.ndarray, filters: list[str] = FILTERS
) -> dict[str, Any]:
    """Every filter's query ids, count and filtered-search hits (ids and distances)."""
    out: dict[str, Any] = {}
    for flt in filters:
        got = client.query(name, flt, output_fields=["id"], limit=N, consistency_level="Strong")
        (count,) = client.query(name, flt, output_fields=["count(*)"])
        hits = client.search(name, queries, limit=5, filter=flt, consistency_level="Strong")
        out[flt] = (
            sorted(r["id"] for r in got),
            count["count(*)"],
            [[(h["id"], round(h["distance"], 4)) for h in q] for q in hits],
        )
    return out


def scalar_uses(stack: Stack) -> int:
    return sum(seg.scalar_uses for qn in stack.querynodes for seg in qn.worker.segments.values())


def served(stack: Stack, fields: set[str]) -> bool:
    segments = [seg for qn in stack.querynodes for seg in qn.worker.segments.values()]
    return len(segments) == 2 and all(seg.has_scalar(f) for seg in segments for f in fields)


@pytest.mark.slow
def test_filters_answer_the_same_with_and_without_scalar_indexes(stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "sc")
    queries = np.random.default_rng(3).normal(size=(3, DIM)).astype(np.float32)
    plain = answers(client, "sc", queries)
    counts = {flt: plain[flt][1] for flt in FILTERS}
    assert counts["i < 0"] == 0 and counts["i >= 0 or i is null"] == N
    assert 0 < counts["i < 4"] <= 4 and 30 < counts["i < 40"] <= 40
    assert counts['j["a"] > 8'] > 0 and counts['j["t"] like "x%"'] > 0
    assert counts["s like 'k0000%'"] == 9  # k00001..k00009 (k00000 is NULL)
    assert scalar_uses(stack) == 0

    params = IndexParams()
    for field, itype, name, extra in INDEXES:
        params.add_index(field, itype, name, params=extra)
    client.create_index("sc", params)
    stack.add_indexnode()
    for _, _, name, _ in INDEXES:
        client.wait_for_index("sc", name, timeout=120)
    wait_for(lambda: served(stack, {f for f, *_ in INDEXES}), what="scalar indexes served")

    described = {i["index_name"]: i for i in client.describe_index("sc")}
    assert described["b_auto"]["index_type"] == "BITMAP"  # AUTOINDEX on Bool
    assert described["j_a"]["params"] == {"json_path": 'j["a"]', "json_cast_type": "double"}
    assert described["j_a"]["field_name"] == "j" and described["j_a"]["state"] == "Finished"
    assert set(client.list_indexes("sc")) == {name for _, _, name, _ in INDEXES}

    before = scalar_uses(stack)
    indexed = answers(client, "sc", queries)
    for flt in FILTERS:
        assert indexed[flt] == plain[flt], flt
    assert scalar_uses(stack) - before >= 3 * len(FILTERS) - 6  # all but the mixed-type one

    # One filter alone shows the index answering it (query, count and search paths).
    before = scalar_uses(stack)
    client.query("sc", "s like 'k01%'", output_fields=["id"], consistency_level="Strong")
    assert scalar_uses(stack) > before

    # A reload reads the finished indexes from their files with the segments.
    client.release_collection("sc")
    client.load_collection("sc")
    wait_for(lambda: served(stack, {f for f, *_ in INDEXES}), what="indexes loaded again")
    before = scalar_uses(stack)
    assert answers(client, "sc", queries) == plain
    assert scalar_uses(stack) > before

    for _, _, name, _ in INDEXES:
        client.drop_index("sc", name)
    wait_for(lambda: not any(served(stack, {f}) for f, *_ in INDEXES), what="indexes gone")
    before = scalar_uses(stack)
    assert answers(client, "sc", queries) == plain
    assert scalar_uses(stack) == before


def test_dropping_one_json_path_index_keeps_the_others_served(stack: Stack) -> None:
    """Two path indexes on one JSON field: dropping one detaches only it on the workers
    (the drop names the index, not the field); the other keeps answering its filters."""
    client = stack.client()
    make_collection(client, "jd")
    queries = np.random.default_rng(5).normal(size=(2, DIM)).astype(np.float32)
    on_a, on_t = ['j["a"] > 8', 'j["a"] in [2, 4.5]'], ['j["t"] == "x1"', 'j["t"] like "x%"']
    plain = answers(client, "jd", queries, on_a + on_t)
    assert all(plain[f][1] > 0 for f in on_a + on_t)
    params = IndexParams()
    for field, itype, name, extra in INDEXES:
        if name in ("j_a", "j_t"):
            params.add_index(field, itype, name, params=extra)
    client.create_index("jd", params)
    stack.add_indexnode()
    for name in ("j_a", "j_t"):
        client.wait_for_index("jd", name, timeout=120)
    segments = [seg for qn in stack.querynodes for seg in qn.worker.segments.values()]
    assert len(segments) == 2

    def serving(path: tuple[str, ...]) -> bool:
        return all(seg.has_scalar("j", path) for seg in segments)

    wait_for(lambda: serving(("a",)) and serving(("t",)), what="both path indexes served")
    client.drop_index("jd", "j_a")
    wait_for(lambda: not any(seg.has_scalar("j", ("a",)) for seg in segments), what="j_a gone")
    assert serving(("t",)), "dropping j_a detached j_t as well"

    before = scalar_uses(stack)
    assert answers(client, "jd", queries, on_a) == {f: plain[f] for f in on_a}
    assert scalar_uses(stack) == before  # j["a"] filters are evaluated row by row again
    assert answers(client, "jd", queries, on_t) == {f: plain[f] for f in on_t}
    assert scalar_uses(stack) - before >= 3 * len(on_t)  # query, count, search per filter


def test_json_path_index_and_plain_index_side_by_side(stack: Stack) -> None:
    """Two path indexes on one JSON field; the same path twice, or a name reused, is refused."""
    client = stack.client()
    client.create_collection("jj", schema=SCHEMA)
    client.create_index(
        "jj", field_name="j", index_type="INVERTED", index_name="ja",
        params={"json_path": 'j["a"]', "json_cast_type": "DOUBLE"},
    )  # fmt: skip
    again = client.create_index(
        "jj", field_name="j", index_type="INVERTED", index_name="ja",
        params={"json_path": 'j["a"]', "json_cast_type": "double"},
    )  # fmt: skip
    assert again == client.describe_index("jj", "ja")["index_id"]
    with pytest.raises(ElanusError) as exc:
        client.create_index(
            "jj", field_name="j", index_type="INVERTED", index_name="ja2",
            params={"json_path": 'j["a"]', "json_cast_type": "varchar"},
        )  # fmt: skip
    assert exc.value.code == ErrorCode.INDEX_ALREADY_EXISTS
    with pytest.raises(ElanusError) as exc:
        client.create_index(
            "jj", field_name="j", index_type="INVERTED", index_name="ja",
            params={"json_path": 'j["b"]', "json_cast_type": "varchar"},
        )  # fmt: skip
    assert exc.value.code == ErrorCode.INDEX_ALREADY_EXISTS and "another index_name" in str(
        exc.value
    )
    client.create_index(
        "jj", field_name="j", index_type="AUTOINDEX", index_name="jb",
        params={"json_path": 'j["b"][0]', "json_cast_type": "bool"},
    )  # fmt: skip
    client.create_index("jj", field_name="s", index_type="")  # AUTOINDEX on VarChar
    infos = {i["index_name"]: i for i in client.describe_index("jj")}
    assert infos["jb"]["index_type"] == "INVERTED" and infos["s"]["index_type"] == "INVERTED"
    assert infos["jb"]["params"]["json_cast_type"] == "bool"


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for every refused request: each asserts it left no index behind."""
    with own_stack(tmp_path_factory.mktemp("bad-index"), "scalar-index-refusals") as stack:
        yield stack


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "itype", "params", "words"),
    [
        ("i", "TRIE", {}, "TRIE index is not supported on the Int64 field"),
        ("f", "BITMAP", {}, "BITMAP index is not supported on the Float field"),
        ("d", "BITMAP", {}, "BITMAP applies to Bool"),
        ("j", "STL_SORT", {}, "STL_SORT index is not supported on the JSON field"),
        ("j", "INVERTED", {}, "needs params json_path"),
        ("j", "INVERTED", {"json_path": 'j["a"]', "json_cast_type": "int"}, "json_cast_type"),
        (
            "j",
            "INVERTED",
            {"json_path": 'j["a"]', "json_cast_type": "array_double"},
            "is not supported",
        ),
        ("s", "INVERTED", {"json_path": 's["a"]', "json_cast_type": "varchar"}, "JSON fields"),
        ("j", "INVERTED", {"json_path": 'meta["a"]', "json_cast_type": "double"}, "match"),
        ("j", "INVERTED", {"json_path": "j[a]", "json_cast_type": "double"}, "json_path"),
        ("id", "BITMAP", {}, "primary key"),
        ("s", "HNSW", {}, "only vector fields"),
        ("s", "NGRAMS", {}, "is unknown; the VarChar field 's' takes one of"),
        ("s", "TRIE", {"nlist": 4}, "unknown index param"),
    ],
)
def test_bad_scalar_index_requests(
    refusing: Stack, field: str, itype: str, params: dict[str, Any], words: str
) -> None:
    client = refusing.client()
    if "bad" not in client.list_collections():
        client.create_collection("bad", schema=SCHEMA)
    with pytest.raises(ElanusError) as exc:
        client.create_index("bad", field_name=field, index_type=itype, params=params)
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT
    assert words in str(exc.value)
    assert client.list_indexes("bad") == []


def test_value_index_matches_plain_evaluation_on_edge_values() -> None:
    """NaN, NULL, infinities, float32 rounding and 2**53 neighbours: the index's answers
    equal Arrow's evaluation on every row (no stack: the pure filter layer)."""
    schema = Schema.from_dict(
        {
            "fields": [
                {"name": "id", "type": "Int64", "is_primary": True},
                {"name": "x", "type": "Float", "nullable": True},
                {"name": "n", "type": "Int64", "nullable": True},
                {"name": "v", "type": "FloatVector", "dim": 2},
            ]
        }
    )
    big = 2**53
    x = [0.1, float("nan"), None, float("inf"), -float("inf"), 0.1000001, -0.0, 0.0, 1e30]
    n = [big, big + 1, big - 1, None, -big, 0, 1, -1, big + 2]
    table = pa.table({"id": pa.array(range(9), pa.int64()), "x": pa.array(x, pa.float32()), "n": n})
    indexes = {
        ("x", ()): (ValueIndex.from_array(table["x"]), DataType.FLOAT),
        ("n", ()): (ValueIndex.from_array(table["n"]), DataType.INT64),
    }
    for text in [
        "x == 0.1", "x != 0.1", "x < 0.1", "x >= 0", "x == 0", "x > 1e38", "x in [0.1, 0]",
        "x not in [0.1]", "x is null", "x is not null", "n == 9007199254740993",
        "n > 9007199254740992.0", "n in [9007199254740993, 1.5, -1]", "n != 0", "n < -1",
    ]:  # fmt: skip
        expr = parse(text, schema)
        got, used = expr.evaluate_indexed(table, indexes)
        assert used == 1, text
        assert got.equals(expr.evaluate(table)), text
        rows = expr.index_rows(indexes, 9)  # the row-set path count and query take
        assert rows is not None and rows.tolist() == np.flatnonzero(got).tolist(), text
    for text, whole in [
        ("x >= 0 and n > 0", True), ("x == 0.1 or n in [1, -1]", True),
        ("(x > 0 or n < 0) and n != 1", True), ("not (x > 0)", False),
        ("x > 0 and id > 2", False),
    ]:  # fmt: skip
        expr = parse(text, schema)
        want = np.flatnonzero(expr.evaluate(table)).tolist()
        rows = expr.index_rows(indexes, 9)
        assert (rows is not None) == whole, text
        assert rows is None or rows.tolist() == want, text
        assert np.flatnonzero(expr.evaluate_indexed(table, indexes)[0]).tolist() == want


@pytest.mark.parametrize("itype", ["INVERTED", "BITMAP", "STL_SORT", "TRIE"])
def test_scalar_index_files_round_trip_and_verify(tmp_path: Path, itype: str) -> None:
    """Each type's files load back to the same index; the coord's check accepts a real
    build and refuses one made for other parameters or another row count."""
    values = pa.array(["b", None, "a", "b", "", "ab", None, "a"])
    spec = ScalarSpec(itype, DataType.VARCHAR)
    storage = tmp_path / "storage"
    out = storage / "indexes" / "1" / "1" / "2" / "3"
    built = ValueIndex.from_array(values)
    files = [str(out / f) for f in write_scalar_index(built, spec, out)]
    loaded, again = load_scalar_index(out)
    assert again == spec and loaded.values.equals(built.values)
    assert loaded.offsets.tolist() == built.offsets.tolist()
    assert sorted(loaded.rows.tolist()) == sorted(built.rows.tolist())
    assert loaded.nulls.tolist() == [1, 6]
    assert verify_report(storage, out, files, spec.to_dict(), 8) is None
    assert "rows" in str(verify_report(storage, out, files, spec.to_dict(), 9))
    other = ScalarSpec("INVERTED" if itype != "INVERTED" else "TRIE", DataType.VARCHAR)
    assert "other parameters" in str(verify_report(storage, out, files, other.to_dict(), 8))
