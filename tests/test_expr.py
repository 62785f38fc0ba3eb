"""Filter expressions: parse + type-check against a schema, evaluate with Arrow compute.

Every expression is checked against a plain per-row Python reference (SQL three-valued
logic: NULL makes a comparison NULL, and NULL counts as false at the end; a predicate on a
JSON path answers as Milvus does, see ``settled`` and tests/test_json_null_semantics.py).
The suite runs on two generated tables: one whose JSON columns Arrow's JSON reader can type
(the fast decode path) and one with mixed-type JSON values (the per-distinct-value
fallback), each whole, chunked and sliced.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr, parse
from elanus.expr.values import ArrowJson, PyJson, decode_json
from elanus.schema import DataType, Field, Schema

N = 1000
TITLES = ["alpha", "beta", "gamma", "comma", "delta", "it's"]
NAMES = ["ann", "bob", "eve", "amy", "al"]
COLORS = ["red", "green", "blue"]
F32_CHOICES = [0.1, 0.3, 0.5, 1.7, 2.25]


def make_schema(dynamic: bool = True) -> Schema:
    return Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("i8", DataType.INT8, nullable=True),
            Field("i32", DataType.INT32, nullable=True),
            Field("f", DataType.FLOAT),
            Field("d", DataType.DOUBLE, nullable=True),
            Field("flag", DataType.BOOL, nullable=True),
            Field("title", DataType.VARCHAR, max_length=32, nullable=True),
            Field("meta", DataType.JSON, nullable=True),
            Field(
                "tags",
                DataType.ARRAY,
                element_type=DataType.INT64,
                max_capacity=8,
                nullable=True,
            ),
            Field(
                "names", DataType.ARRAY, element_type=DataType.VARCHAR, max_length=8, max_capacity=8
            ),
            Field("vec", DataType.FLOAT_VECTOR, dim=4),
        ],
        enable_dynamic_field=dynamic,
    )


SCHEMA = make_schema()
STATIC = make_schema(dynamic=False)


def _nulls(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    return rng.random(n) < p


def make_table(n: int, *, mixed: bool, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    i8 = pa.array(rng.integers(-100, 100, n), pa.int8(), mask=_nulls(rng, n, 0.1))
    i32 = pa.array(rng.integers(0, 100, n), pa.int32(), mask=_nulls(rng, n, 0.1))
    f = pa.array(rng.choice(F32_CHOICES, n).astype(np.float32), pa.float32())
    d = pa.array(rng.random(n), pa.float64(), mask=_nulls(rng, n, 0.1))
    flag = pa.array(rng.random(n) < 0.5, pa.bool_(), mask=_nulls(rng, n, 0.1))
    title = pa.array(rng.choice(TITLES, n), pa.string(), mask=_nulls(rng, n, 0.1))
    metas: list[str | None] = []
    dyn: list[str | None] = []
    tags: list[list[int] | None] = []
    names: list[list[str]] = []
    for _ in range(n):
        if rng.random() < 0.1:
            metas.append(None)
        else:
            m: dict[str, Any] = {}
            if rng.random() < 0.9:
                k = int(rng.integers(0, 10))
                m["k"] = str(k) if mixed and rng.random() < 0.2 else k
            if rng.random() < 0.8:
                m["s"] = str(rng.choice(["x", "y", "abc", "az"]))
            if rng.random() < 0.7:
                m["price"] = round(float(rng.random()) * 20, 2)
            arr: list[Any] = [int(x) for x in rng.integers(0, 5, int(rng.integers(0, 4)))]
            if mixed and arr and rng.random() < 0.2:
                arr.append("3")
            m["arr"] = arr
            m["strs"] = [str(x) for x in rng.choice(["a", "b", "z"], int(rng.integers(0, 3)))]
            if rng.random() < 0.6:
                m["nested"] = {"a": {"b": int(rng.integers(0, 4))}}
            if rng.random() < 0.7:
                m["flag"] = bool(rng.random() < 0.5)
            if mixed:
                m["mixarr"] = [1, "a", True][: int(rng.integers(0, 4))]
                m["k2"] = [1, "1", True, None][int(rng.integers(0, 4))] if rng.random() < 0.5 else 1
            metas.append(json.dumps(m))
        if rng.random() < 0.05:
            dyn.append(None)
        else:
            dm: dict[str, Any] = {"size": int(rng.integers(0, 10))}
            if rng.random() < 0.8:
                dm["color"] = str(rng.choice(COLORS))
            if rng.random() < 0.5:
                dm["nested"] = {"x": int(rng.integers(0, 3))}
            dyn.append(json.dumps(dm))
        tags.append(
            None
            if rng.random() < 0.1
            else [int(x) for x in rng.integers(0, 10, rng.integers(0, 6))]
        )
        names.append([str(x) for x in rng.choice(NAMES, int(rng.integers(0, 4)))])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4)
    return pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "i8": i8,
            "i32": i32,
            "f": f,
            "d": d,
            "flag": flag,
            "title": title,
            "meta": pa.array(metas, pa.string()),
            "tags": pa.array(tags, pa.list_(pa.int64())),
            "names": pa.array(names, pa.list_(pa.string())),
            "vec": vec,
            "$meta": pa.array(dyn, pa.string()),
        }
    )


# ---- the per-row reference --------------------------------------------------------------------
_MISSING = object()


class Row(dict[str, Any]):
    """A row dict with its JSON columns decoded."""

    def j(self, col: str, *path: str | int) -> Any:
        v = self[col]
        for step in path:
            if isinstance(step, str) and isinstance(v, dict):
                v = v.get(step)
            elif isinstance(step, int) and isinstance(v, list) and 0 <= step < len(v):
                v = v[step]
            else:
                return None
        return v

    def dyn(self, *path: str | int) -> Any:
        return self.j("$meta", *path)


def num(v: Any) -> Any:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def text(v: Any) -> Any:
    return v if isinstance(v, str) else None


def boolean(v: Any) -> Any:
    return v if isinstance(v, bool) else None


def c(a: Any, op: Callable[[Any, Any], Any], b: Any) -> Any:
    return None if a is None or b is None else op(a, b)


def and3(*xs: Any) -> Any:
    if any(x is False for x in xs):
        return False
    return None if any(x is None for x in xs) else True


def or3(*xs: Any) -> Any:
    if any(x is True for x in xs):
        return True
    return None if any(x is None for x in xs) else False


def not3(x: Any) -> Any:
    return None if x is None else not x


def isin(a: Any, values: list[Any]) -> Any:
    return None if a is None else a in values


def like(a: Any, pattern: str) -> Any:
    if a is None:
        return None
    rx = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(rx, a, re.S) is not None


def at(arr: Any, i: int) -> Any:
    return arr[i] if arr is not None and 0 <= i < len(arr) else None


def contains(arr: Any, v: Any) -> Any:
    if not isinstance(arr, list):
        return None
    return any(
        type(x) is type(v) or (num(x) is not None and num(v) is not None) for x in arr if x == v
    )


def contains_all(arr: Any, vs: list[Any]) -> Any:
    if not isinstance(arr, list):
        return None
    return all(contains(arr, v) for v in vs)


def contains_any(arr: Any, vs: list[Any]) -> Any:
    if not isinstance(arr, list):
        return None
    return any(contains(arr, v) for v in vs)


def alen(arr: Any) -> Any:
    return len(arr) if isinstance(arr, list) else None


def idiv(a: Any, b: Any) -> Any:
    if a is None or b is None or b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def imod(a: Any, b: Any) -> Any:
    q = idiv(a, b)
    return None if q is None else a - b * q


def add(*xs: Any) -> Any:
    return None if any(x is None for x in xs) else sum(xs)


def mul(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a * b


def jcmp(a: Any, op: Callable[[Any, Any], Any], b: Any) -> Any:
    """JSON vs JSON: defined when both are numbers or both strings (or, for == and !=,
    both booleans); NULL otherwise."""
    views = (num, text, boolean) if op in (operator.eq, operator.ne) else (num, text)
    for view in views:
        if view(a) is not None and view(b) is not None:
            return op(view(a), view(b))
    return None


def settled(r: Row, col: str, result: Any, fill: bool = False) -> Any:
    """A predicate on a JSON path as Milvus answers it (``elanus/expr/jsonsem.py``): a
    missing key or a value of another type gives ``fill`` (true only for ``!=`` and
    ``not in``); only a null JSON field gives NULL (``$meta`` is never null)."""
    if col != "$meta" and r[col] is None:
        return None
    return fill if result is None else result


def jeq(a: Any, b: Any) -> Any:
    return jcmp(a, operator.eq, b)


def f32(x: float) -> float:
    return float(np.float32(x))


EQ, NE, LT, LE, GT, GE = (
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
)
PARAMS = {"lo": 40, "titles": ["alpha", "beta"], "v": 2, "colors": ("red", "blue")}

Ref = Callable[[Row], Any]
CASES: list[tuple[str, Ref]] = [
    # comparisons on every scalar type
    ("i32 > 50", lambda r: c(r["i32"], GT, 50)),
    ("i32 >= 50 and i32 <= 60", lambda r: and3(c(r["i32"], GE, 50), c(r["i32"], LE, 60))),
    ("id == 17", lambda r: r["id"] == 17),
    ("id != 17", lambda r: r["id"] != 17),
    ("d < 0.25", lambda r: c(r["d"], LT, 0.25)),
    ("f == 0.3", lambda r: r["f"] == f32(0.3)),
    ("f > 1", lambda r: r["f"] > 1),
    ("f <= 0.5", lambda r: r["f"] <= f32(0.5)),
    ("i32 < 30.5", lambda r: c(r["i32"], LT, 30.5)),
    ("i8 < -50", lambda r: c(r["i8"], LT, -50)),
    ("i8 == 0x10 or i8 == 0b11 or i8 == 010", lambda r: isin(r["i8"], [16, 3, 8])),
    ('title == "alpha"', lambda r: c(r["title"], EQ, "alpha")),
    ("title == 'it\\'s'", lambda r: c(r["title"], EQ, "it's")),
    ('title > "c"', lambda r: c(r["title"], GT, "c")),
    ("i32 > i8", lambda r: c(r["i32"], GT, r["i8"])),
    # chained ranges
    ("10 < i32 <= 20", lambda r: and3(c(r["i32"], GT, 10), c(r["i32"], LE, 20))),
    ("0.2 <= d < 0.4", lambda r: and3(c(r["d"], GE, 0.2), c(r["d"], LT, 0.4))),
    ("i32 > 5 > i8", lambda r: and3(c(r["i32"], GT, 5), c(r["i8"], LT, 5))),
    ("1 <= i32 < 50 <= id", lambda r: and3(c(r["i32"], GE, 1), c(r["i32"], LT, 50), r["id"] >= 50)),
    # booleans
    ("flag", lambda r: r["flag"]),
    ("flag == true", lambda r: c(r["flag"], EQ, True)),
    ("flag != False", lambda r: c(r["flag"], NE, False)),
    ("not flag", lambda r: not3(r["flag"])),
    ("true", lambda r: True),
    ("FALSE or id < 3", lambda r: r["id"] < 3),
    # like
    ('title like "al%"', lambda r: like(r["title"], "al%")),
    ('title LIKE "%ta"', lambda r: like(r["title"], "%ta")),
    ('title like "%mm%"', lambda r: like(r["title"], "%mm%")),
    ('title like "b_ta"', lambda r: like(r["title"], "b_ta")),
    # in / not in
    ('title in ["alpha", "gamma"]', lambda r: isin(r["title"], ["alpha", "gamma"])),
    ('title not in ["alpha", "gamma",]', lambda r: not3(isin(r["title"], ["alpha", "gamma"]))),
    ("i8 in [1, 2, 3, -5]", lambda r: isin(r["i8"], [1, 2, 3, -5])),
    ("i8 NOT IN [1, 2, 3]", lambda r: not3(isin(r["i8"], [1, 2, 3]))),
    ("i32 in []", lambda r: None if r["i32"] is None else False),
    ("d in [0.5, 1]", lambda r: isin(r["d"], [0.5, 1])),
    ("f in [0.1, 2.25]", lambda r: r["f"] in [f32(0.1), 2.25]),
    # precedence and logic
    (
        "i32 > 50 or i8 < 0 and flag",
        lambda r: or3(c(r["i32"], GT, 50), and3(c(r["i8"], LT, 0), r["flag"])),
    ),
    (
        "(i32 > 50 or i8 < 0) and flag",
        lambda r: and3(or3(c(r["i32"], GT, 50), c(r["i8"], LT, 0)), r["flag"]),
    ),
    ("not i32 == 1", lambda r: not3(c(r["i32"], EQ, 1))),
    (
        '!(i32 > 50) && title == "beta"',
        lambda r: and3(not3(c(r["i32"], GT, 50)), c(r["title"], EQ, "beta")),
    ),
    (
        "i32 > 90 || i8 == 0 OR id == 5",
        lambda r: or3(c(r["i32"], GT, 90), c(r["i8"], EQ, 0), r["id"] == 5),
    ),
    ("not not flag", lambda r: r["flag"]),
    ("i32 is null or i32 > 95", lambda r: or3(r["i32"] is None, c(r["i32"], GT, 95))),
    # arithmetic
    ("i32 * 2 + i8 > 100", lambda r: c(add(mul(r["i32"], 2), r["i8"]), GT, 100)),
    ("i32 % 3 == 0", lambda r: c(imod(r["i32"], 3), EQ, 0)),
    ("i8 % 7 == -3", lambda r: c(imod(r["i8"], 7), EQ, -3)),
    ("i32 % i8 == 1", lambda r: c(imod(r["i32"], r["i8"]), EQ, 1)),
    ("i32 / 7 == 3", lambda r: c(idiv(r["i32"], 7), EQ, 3)),
    ("i8 / -8 == 2", lambda r: c(idiv(r["i8"], -8), EQ, 2)),
    ("i32 - i8 < 0", lambda r: c(add(r["i32"], mul(r["i8"], -1)), LT, 0)),
    ("d * 10 >= 5", lambda r: c(mul(r["d"], 10), GE, 5)),
    ("-i8 > 3", lambda r: c(mul(r["i8"], -1), GT, 3)),
    ("i8 ** 2 > 2 * 50", lambda r: c(mul(r["i8"], r["i8"]), GT, 100)),
    ("i32 + 1 * 2 == 12", lambda r: c(r["i32"], EQ, 10)),
    ("(i32 + 1) * 2 == 12", lambda r: c(r["i32"], EQ, 5)),
    ("-2 ** 2 < i8", lambda r: c(r["i8"], GT, -4)),
    # null checks
    ("i32 is null", lambda r: r["i32"] is None),
    ("i32 IS NOT NULL", lambda r: r["i32"] is not None),
    ("title is null", lambda r: r["title"] is None),
    ("meta is null", lambda r: r["meta"] is None),
    ("tags is not null", lambda r: r["tags"] is not None),
    ('meta["missing"] is null', lambda r: True),
    ('meta["price"] is not null', lambda r: r.j("meta", "price") is not None),
    ("tags[4] is null", lambda r: at(r["tags"], 4) is None),
    # JSON paths
    ('meta["k"] == 3', lambda r: c(num(r.j("meta", "k")), EQ, 3)),
    ('meta["k"] > 5', lambda r: c(num(r.j("meta", "k")), GT, 5)),
    ('meta["k"] == "3"', lambda r: c(text(r.j("meta", "k")), EQ, "3")),
    ('meta["k"] != 3', lambda r: settled(r, "meta", c(num(r.j("meta", "k")), NE, 3), True)),
    ("meta['s'] == \"x\"", lambda r: c(text(r.j("meta", "s")), EQ, "x")),
    ('meta["s"] like "a%"', lambda r: like(text(r.j("meta", "s")), "a%")),
    ('meta["price"] < 10.5', lambda r: c(num(r.j("meta", "price")), LT, 10.5)),
    ('meta["price"] * 2 > 30', lambda r: c(mul(num(r.j("meta", "price")), 2), GT, 30)),
    ('meta["nested"]["a"]["b"] >= 2', lambda r: c(num(r.j("meta", "nested", "a", "b")), GE, 2)),
    ('meta["arr"][0] == 1', lambda r: c(num(r.j("meta", "arr", 0)), EQ, 1)),
    (
        'meta["arr"][1] > meta["k"]',
        lambda r: jcmp(r.j("meta", "arr", 1), GT, r.j("meta", "k")),
    ),
    ('meta["flag"]', lambda r: boolean(r.j("meta", "flag"))),
    (
        'meta["flag"] == true and not flag',
        lambda r: and3(c(boolean(r.j("meta", "flag")), EQ, True), not3(r["flag"])),
    ),
    ('meta["k"] in [1, 2, 3]', lambda r: isin(num(r.j("meta", "k")), [1, 2, 3])),
    (
        'meta["k"] not in [1, "2"]',
        lambda r: settled(
            r,
            "meta",
            not3(
                isin(num(r.j("meta", "k")), [1])
                if num(r.j("meta", "k")) is not None
                else isin(text(r.j("meta", "k")), ["2"])
            ),
            True,
        ),
    ),
    ('meta["k"] < i32', lambda r: c(num(r.j("meta", "k")), LT, r["i32"])),
    ('meta["k2"] == meta["k"]', lambda r: jeq(r.j("meta", "k2"), r.j("meta", "k"))),
    ('exists meta["price"]', lambda r: r.j("meta", "price") is not None),
    (
        'not exists meta["nested"]["a"]',
        lambda r: r["meta"] is not None and r.j("meta", "nested", "a") is None,
    ),
    ('json_contains(meta["arr"], 3)', lambda r: contains(r.j("meta", "arr"), 3)),
    ('json_contains(meta["arr"], "3")', lambda r: contains(r.j("meta", "arr"), "3")),
    ('JSON_CONTAINS(meta["strs"], "z")', lambda r: contains(r.j("meta", "strs"), "z")),
    ('json_contains_all(meta["arr"], [1, 2])', lambda r: contains_all(r.j("meta", "arr"), [1, 2])),
    ('json_contains_all(meta["arr"], [])', lambda r: contains_all(r.j("meta", "arr"), [])),
    (
        'json_contains_any(meta["strs"], ["a", "q"])',
        lambda r: contains_any(r.j("meta", "strs"), ["a", "q"]),
    ),
    (
        'json_contains_any(meta["mixarr"], ["a", true])',
        lambda r: contains_any(r.j("meta", "mixarr"), ["a", True]),
    ),
    ('json_contains(meta["mixarr"], 1)', lambda r: contains(r.j("meta", "mixarr"), 1)),
    ('array_length(meta["arr"]) == 2', lambda r: c(alen(r.j("meta", "arr")), EQ, 2)),
    ('array_length(meta["k"]) == 2', lambda r: None),
    # dynamic fields
    ('color == "red"', lambda r: c(text(r.dyn("color")), EQ, "red")),
    ('color in ["red", "blue"]', lambda r: isin(text(r.dyn("color")), ["red", "blue"])),
    (
        'size > 5 and color != "green"',
        lambda r: and3(
            c(num(r.dyn("size")), GT, 5),
            settled(r, "$meta", c(text(r.dyn("color")), NE, "green"), True),
        ),
    ),
    ('nested["x"] == 1', lambda r: c(num(r.dyn("nested", "x")), EQ, 1)),
    ('$meta["color"] == "blue"', lambda r: c(text(r.dyn("color")), EQ, "blue")),
    ("color is null", lambda r: r.dyn("color") is None),
    (
        "size % 2 == 1 and i32 > 50",
        lambda r: and3(c(imod(num(r.dyn("size")), 2), EQ, 1), c(r["i32"], GT, 50)),
    ),
    ('size == meta["k"]', lambda r: jeq(r.dyn("size"), r.j("meta", "k"))),
    # arrays
    ("array_contains(tags, 3)", lambda r: contains(r["tags"], 3)),
    ("array_contains_all(tags, [1, 2])", lambda r: contains_all(r["tags"], [1, 2])),
    ("array_contains_all(tags, [1, 1, 2.0])", lambda r: contains_all(r["tags"], [1, 2])),
    ("array_contains_any(tags, [7, 8])", lambda r: contains_any(r["tags"], [7, 8])),
    ("not array_contains_any(tags, [7, 8])", lambda r: not3(contains_any(r["tags"], [7, 8]))),
    ("array_length(tags) >= 3", lambda r: c(alen(r["tags"]), GE, 3)),
    ("tags[0] == 1", lambda r: c(at(r["tags"], 0), EQ, 1)),
    ("tags[2] > 5", lambda r: c(at(r["tags"], 2), GT, 5)),
    ("tags[0] + tags[1] == 9", lambda r: c(add(at(r["tags"], 0), at(r["tags"], 1)), EQ, 9)),
    ('array_contains(names, "bob")', lambda r: contains(r["names"], "bob")),
    (
        'ARRAY_CONTAINS_ANY(names, ["bob", "eve"])',
        lambda r: contains_any(r["names"], ["bob", "eve"]),
    ),
    ('names[1] like "a%"', lambda r: like(at(r["names"], 1), "a%")),
    (
        "ARRAY_CONTAINS(tags, 1) AND NOT flag",
        lambda r: and3(contains(r["tags"], 1), not3(r["flag"])),
    ),
    # templates
    (
        "i32 > {lo} and title in {titles}",
        lambda r: and3(c(r["i32"], GT, 40), isin(r["title"], ["alpha", "beta"])),
    ),
    ('json_contains(meta["arr"], {v})', lambda r: contains(r.j("meta", "arr"), 2)),
    (
        "color in {colors} or tags[0] == {v}",
        lambda r: or3(isin(text(r.dyn("color")), ["red", "blue"]), c(at(r["tags"], 0), EQ, 2)),
    ),
    ("i32 > {lo}\n  and\n  i8 < -{v}", lambda r: and3(c(r["i32"], GT, 40), c(r["i8"], LT, -2))),
]


def _rows(table: pa.Table) -> list[Row]:
    rows = []
    for d in table.to_pylist():
        for col in ("meta", "$meta"):
            d[col] = None if d[col] is None else json.loads(d[col])
        rows.append(Row(d))
    return rows


def _tables(mixed: bool) -> list[pa.Table]:
    table = make_table(N, mixed=mixed, seed=11 if mixed else 7)
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=300))
    return [table, chunked, table.slice(137, 611)]


@pytest.fixture(scope="module", params=["arrow-json", "python-json"])
def dataset(request: pytest.FixtureRequest) -> tuple[list[pa.Table], list[list[Row]]]:
    tables = _tables(mixed=request.param == "python-json")
    return tables, [_rows(t) for t in tables]


def test_suite_is_big_enough() -> None:
    assert len(CASES) >= 40
    assert len({e for e, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("text", "ref"), CASES, ids=[e for e, _ in CASES])
def test_evaluate_matches_reference(
    dataset: tuple[list[pa.Table], list[list[Row]]], text: str, ref: Ref
) -> None:
    expr = parse(text, SCHEMA, PARAMS)
    for table, rows in zip(*dataset, strict=True):
        got = expr.evaluate(table)
        assert isinstance(got, pa.BooleanArray)
        assert got.null_count == 0
        want = [ref(r) is True for r in rows]
        assert got.to_pylist() == want, f"{text!r}: rows differ at " + str(
            [i for i, (g, w) in enumerate(zip(got.to_pylist(), want, strict=True)) if g != w][:10]
        )


def test_json_decode_paths() -> None:
    homogeneous = make_table(200, mixed=False, seed=7)
    mixed = make_table(200, mixed=True, seed=11)
    assert isinstance(decode_json(homogeneous.column("meta")), ArrowJson)
    assert isinstance(decode_json(homogeneous.column("$meta")), ArrowJson)
    assert isinstance(decode_json(mixed.column("meta")), PyJson)
    # Both decoders agree on every view of the same data.
    col = homogeneous.column("meta").combine_chunks()
    fast, slow = decode_json(col), decode_json(col, use_arrow=False)
    assert isinstance(slow, PyJson)
    for path in (("k",), ("s",), ("price",), ("arr", 1), ("nested", "a", "b"), ("flag",), ("zz",)):
        a, b = fast, slow
        for step in path:
            a = a.index(step) if isinstance(step, int) else a.get(step)
            b = b.index(step) if isinstance(step, int) else b.get(step)
        for v in ("number", "string", "boolean", "is_null", "array_length"):
            assert getattr(a, v)().to_pylist() == getattr(b, v)().to_pylist(), (path, v)
    ea, pa_, va = fast.get("arr").array_parts()
    eb, pb, vb = slow.get("arr").array_parts()
    assert ea.number().to_pylist() == eb.number().to_pylist()
    assert pa_.tolist() == pb.tolist() and va.tolist() == vb.tolist()


def test_json_odd_values() -> None:
    schema = Schema(
        [Field("id", DataType.INT64, is_primary=True), Field("j", DataType.JSON, nullable=True)]
    )
    texts = ['{"a": 1}', "not json", "", "[1, 2]", '"str"', "null", None, '{"a":\n 2}', "7"]
    t = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "j": pa.array(texts)})
    assert parse('j["a"] >= 1', schema).evaluate(t).to_pylist() == [
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
        False,
    ]
    assert parse("j[1] == 2", schema).evaluate(t).to_pylist()[3] is True
    assert parse('j == "str"', schema).evaluate(t).to_pylist()[4] is True
    assert parse("j == 7", schema).evaluate(t).to_pylist()[8] is True
    assert parse("j is null", schema).evaluate(t).to_pylist() == [
        False,
        True,
        True,
        False,
        False,
        True,
        True,
        False,
        False,
    ]
    # ISO dates stay strings (Arrow's reader would make them timestamps: fallback path).
    t2 = pa.table({"id": pa.array([1, 2], pa.int64()), "j": ['{"d": "2024-01-01"}', '{"d": "x"}']})
    assert parse('j["d"] == "2024-01-01"', schema).evaluate(t2).to_pylist() == [True, False]
    assert parse('j["d"] like "2024%"', schema).evaluate(t2).to_pylist() == [True, False]


def test_fields_text_and_repr() -> None:
    e = parse('i32 > 1 and color == "red" or json_contains(meta["a"], 1) or tags[0] == 2', SCHEMA)
    assert e.fields == {"i32", "$meta", "meta", "tags"}
    assert e.text.startswith("i32 > 1")
    assert "i32" in repr(e)
    assert parse("true", SCHEMA).fields == set()
    assert isinstance(parse("id > 1", SCHEMA), Expr)


def test_to_sql() -> None:
    assert parse("i32 > 5 and i8 in [1, 2, 3]", SCHEMA).to_sql() == (
        '(("i32" > 5) AND ("i8" IN (1, 2, 3)))'
    )
    assert parse("10 < i32 <= 20", SCHEMA).to_sql() == '((10 < "i32") AND ("i32" <= 20))'
    assert parse('not title like "a%" or title is null', SCHEMA).to_sql() == (
        """((NOT ("title" LIKE 'a%')) OR ("title" IS NULL))"""
    )
    assert parse('title == "it\'s"', SCHEMA).to_sql() == """("title" = 'it''s')"""
    assert parse("f == 0.3", SCHEMA).to_sql() == '("f" = CAST(0.3 AS FLOAT))'
    assert parse("i32 != 1", SCHEMA).to_sql(dialect="lance") == "(`i32` <> 1)"
    assert parse("i32 * 2 + 1 > 5", SCHEMA).to_sql() == '((("i32" * 2) + 1) > 5)'
    for text in (
        'meta["a"] == 1',
        "array_contains(tags, 1)",
        "i32 % 2 == 0",
        "color == 'red'",
        "i32 in []",
        'title like "a\\\\%"',
    ):
        assert parse(text, SCHEMA).to_sql() is None, text


def test_to_sql_agrees_with_duckdb() -> None:
    duckdb = pytest.importorskip("duckdb")
    table = make_table(N, mixed=False, seed=7).drop_columns(["vec"])
    con = duckdb.connect()
    con.register("t", table)
    checked = 0
    for text, _ in CASES:
        expr = parse(text, SCHEMA, PARAMS)
        sql = expr.to_sql()
        if sql is None:
            continue
        ids = {row[0] for row in con.execute(f"SELECT id FROM t WHERE {sql}").fetchall()}
        mask = expr.evaluate(table).to_numpy(zero_copy_only=False)
        assert ids == set(np.flatnonzero(mask).tolist()), (text, sql)
        checked += 1
    assert checked >= 30


# ---- errors ----------------------------------------------------------------------------
BAD: list[tuple[str, str, str | None]] = [
    # (expression, text the message must name, expected position or None)
    ("(i32 > 1", "')'", "column 9"),
    ("i32 > 1)", "')'", "column 8"),
    ("i32 >", "'>'", "column 6"),
    ("i32 > 1 and", "'and'", "column 12"),
    ("i32 > 1 and or i8 < 2", "'or'", "column 13"),
    ("i32 > 1 i8 < 2", "'i8'", "column 9"),
    ("colour == 1", "'colour'", "column 1"),
    ('$meta["x"] == 1', "'$meta'", "column 1"),
    ("vec == 1", "'vec'", "column 1"),
    ("title == 3", "'title'", "column 7"),
    ("3 != title", "number 3", "column 3"),
    ('i32 like "a%"', "'i32'", "column 5"),
    ("title like 5", "number 5", "column 12"),
    ("i32 in 3", "number 3", "column 8"),
    ('i32 not in "abc"', "'abc'", "column 12"),
    ("frobnicate(i32)", "'frobnicate'", "column 1"),
    ("array_length(tags, 1)", "array_length", "column 1"),
    ('json_contains(meta["a"])', "json_contains", "column 1"),
    ("i32 > {missing}", "{missing}", "column 7"),
    ("array_contains(i32, 1)", "'i32'", "column 16"),
    ('i32["k"] == 1', "'i32'", "column 4"),
    ('title[0] == "a"', "'title'", "column 6"),
    ("", "empty", "column 1"),
    ("   ", "empty", "column 1"),
    ("12abc > i32", "'12abc'", "column 1"),
    ("1.2.3 < d", "'1.2.3'", "column 1"),
    ("08 < i32", "'08'", "column 1"),
    ("99999999999999999999 > i32", "99999999999999999999", "column 1"),
    ("i32 == ", "'=='", "column 7"),
    ("== 1", "'=='", "column 1"),
    ("i32 = 1", "'='", "column 5"),
    ('title == "abc', "unterminated", "column 10"),
    ("a.b == 1", "'.'", "column 2"),
    ('i32 + "x" > 1', "'x'", "column 5"),
    ("flag < true", "'<'", "column 6"),
    ("i32", "'i32'", "column 1"),
    ("i32 + 1", "'i32 + 1'", "column 1"),
    ("not i32", "'i32'", "column 5"),
    ("i32 > 1 and title", "'title'", "column 13"),
    ("tags == [1]", "'tags'", "column 6"),
    ("tags in [1]", "'tags'", "column 1"),
    ('tags["x"] == 1', "'x'", "column 6"),
    ("tags[-1] == 1", "-1", "column 6"),
    ("array_contains(names, 1)", "'names'", "column 23"),
    ("array_contains_all(tags, 1)", "number 1", "column 26"),
    ("array_contains(tags, [1])", "list", "column 22"),
    ("i32 in [1, 'x']", "'x'", "column 8"),
    ("i32 in [i8]", "'i8'", "column 9"),
    ("i32 in [[1]]", "nested", "column 9"),
    ("i32 / 0 > 1", "'i32 / 0'", "column 5"),
    ("exists i32", "'i32'", "column 8"),
    ("i32 > 1 and\n   title == 5", "'title'", "line 2, column 10"),
    ("i32 > 1 &&\n", "'&&'", "column 11"),
]


@pytest.mark.parametrize(("text", "names", "where"), BAD, ids=[repr(b[0]) for b in BAD])
def test_bad_expressions(text: str, names: str, where: str | None) -> None:
    with pytest.raises(ElanusError) as info:
        parse(text, STATIC, {"p": 1})
    err = info.value
    assert err.code == ErrorCode.BAD_EXPRESSION
    assert names in err.message, err.message
    assert re.search(r"column \d+", err.message), err.message
    if where is not None:
        assert f"at {where}" in err.message, err.message


def test_bad_template_values() -> None:
    for value, word in (
        ({"a": 1}, "dict"),
        (None, "NoneType"),
        ([[1]], "nested"),
        (math.nan, "float"),
        ([1, 2**63], "out of range"),
    ):
        with pytest.raises(ElanusError) as info:
            parse("i32 in {p}" if isinstance(value, list) else "i32 > {p}", STATIC, {"p": value})
        assert info.value.code == ErrorCode.BAD_EXPRESSION
        assert "{p}" in info.value.message and word in info.value.message
    assert parse("i32 > {p}", STATIC, {"p": np.int64(3)}).text == "i32 > {p}"
    with pytest.raises(ElanusError, match="string"):
        parse(123, STATIC)  # type: ignore[arg-type]


def test_integers_beyond_2_53_beside_floats() -> None:
    """An Int64 value above 2**53 meeting a float is compared as a double (as Milvus does),
    not refused by Arrow's checked cast as an INTERNAL error; int with int stays exact."""
    big = 2**53 + 1
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("d", DataType.DOUBLE),
            Field("j", DataType.JSON),
        ]
    )
    t = pa.table(
        {
            "id": pa.array([big, 3], pa.int64()),
            "d": [0.5, 2.5],
            "j": [json.dumps({"n": big}), json.dumps({"n": 0.5})],
        }
    )
    for text, want in (
        ("id > 0.5", [True, True]),
        ("id > d", [True, True]),
        ("id * 1.5 > 1", [True, True]),
        ("id in [2.5, 3]", [False, True]),
        ("d < 9007199254740993", [True, True]),
        (f"id == {big}", [True, False]),
        (f'j["n"] >= {big}', [True, False]),
        ('j["n"] ** 2 > 1', [True, False]),
        (f"id + 0.0 == {big}.0", [True, False]),
    ):
        assert parse(text, schema).evaluate(t).to_pylist() == want, text


def test_dynamic_names_need_dynamic_schema() -> None:
    assert parse('color == "red"', SCHEMA).fields == {"$meta"}
    with pytest.raises(ElanusError, match="unknown field 'color' at column 1"):
        parse('color == "red"', STATIC)


def test_keywords_are_whole_words() -> None:
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("order", DataType.INT64),
            Field("in_stock", DataType.BOOL),
            Field("notes", DataType.VARCHAR, max_length=8),
        ]
    )
    t = pa.table({"id": [1, 2], "order": [5, 6], "in_stock": [True, False], "notes": ["a", "b"]})
    assert parse("order > 5 OR in_stock", schema).evaluate(t).to_pylist() == [True, True]
    assert parse('notes == "b" and not in_stock', schema).evaluate(t).to_pylist() == [False, True]


def test_missing_columns() -> None:
    t = pa.table({"id": pa.array([1, 2], pa.int64())})
    # nullable field absent (e.g. added later): all NULL; dynamic column absent: no keys
    assert parse("i32 is null", SCHEMA).evaluate(t).to_pylist() == [True, True]
    assert parse('color == "red"', SCHEMA).evaluate(t).to_pylist() == [False, False]
    with pytest.raises(ElanusError) as info:
        parse("f > 1", SCHEMA).evaluate(t)
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH and "'f'" in info.value.message


def test_empty_table_and_long_chains() -> None:
    empty = make_table(0, mixed=False, seed=1)
    for text, _ in CASES:
        assert len(parse(text, SCHEMA, PARAMS).evaluate(empty)) == 0
    # thousands of or-terms (generated filters) neither recurse nor slow down
    text = " or ".join(f"id == {i}" for i in range(3000))
    t = make_table(50, mixed=False, seed=3)
    assert parse(text, SCHEMA).evaluate(t).to_pylist() == [True] * 50


def test_million_rows_vectorised() -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    a = rng.integers(0, 10, n)
    b = rng.integers(0, 10, n)
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("a", DataType.INT64),
            Field("b", DataType.INT32),
        ]
    )
    table = pa.table({"id": np.arange(n), "a": a, "b": b.astype(np.int32)})
    expr = parse("a > 5 and b in [1,2,3]", schema)
    mask = expr.evaluate(table)
    want = (a > 5) & np.isin(b, [1, 2, 3])
    assert np.array_equal(mask.to_numpy(zero_copy_only=False), want)


def test_long_literal_lists() -> None:
    """Long lists are lifted out before parsing; results and error positions are unchanged."""
    table = make_table(N, mixed=False, seed=7)
    rows = _rows(table)
    keys = list(range(0, 3000, 7))
    expr = parse(f"id in {keys} and i32 > 5", SCHEMA)
    want = [r["id"] in keys and c(r["i32"], GT, 5) is True for r in rows]
    assert expr.evaluate(table).to_pylist() == want
    negs = [-i for i in range(40)]
    titles = ", ".join(f"'t{i}'" for i in range(30))
    text = f'i8 not in [{", ".join(map(str, negs))}] or title in [{titles}, "alpha"]'
    want = [or3(not3(isin(r["i8"], negs)), isin(r["title"], ["alpha"])) is True for r in rows]
    assert parse(text, SCHEMA).evaluate(table).to_pylist() == want
    assert parse(f"json_contains_any(meta['arr'], {list(range(3, 40))})", SCHEMA).evaluate(
        table
    ).to_pylist() == [contains_any(r.j("meta", "arr"), list(range(3, 40))) is True for r in rows]
    # a list inside a string stays a string
    quoted = '"[' + ",".join(["1"] * 20) + ']"'
    assert parse(f"title == {quoted}", SCHEMA).evaluate(table).true_count == 0
    ones = ",".join(["1"] * 20)
    for text, message in (
        (f"id in [{ones}, 08] and i32 > 1", "invalid number literal '08' at column 49"),
        (f'id in [{ones}, "x"]', "cannot compare Int64 field 'id' with string 'x' at column 7"),
        (f"id in [{ones}] and\n  colour > 1", "unknown field 'colour' at line 2, column 3"),
        (f"tags in [{ones}]", "'in' cannot test Array<Int64> field 'tags'"),
        (f"meta[{ones}] > 1", "unexpected token ','"),
    ):
        with pytest.raises(ElanusError) as info:
            parse(text, STATIC)
        assert message in info.value.message, info.value.message
    big = parse("id in [" + ",".join(map(str, range(50_000))) + "]", SCHEMA)
    assert big.evaluate(table).true_count == N


def test_string_escapes_follow_go_as_milvus_unquotes() -> None:
    """Milvus unquotes literals with Go's rules: ``\\_`` is refused, ``\\\\_`` is a literal
    backslash (so a like pattern matches ``_`` itself), ``\\u0041`` is a letter."""
    with pytest.raises(ElanusError, match=r"unknown escape sequence \\_ at column"):
        parse(r"title like 'a\_b%'", SCHEMA)
    like = parse(r"title like 'a\\_b%'", SCHEMA)
    assert like.to_sql() is None  # an escaped wildcard is not pushed down
    table = pa.table({"title": ["a_b1", "axb2", "a_"]})
    assert like.evaluate(table).to_pylist() == [True, False, False]
    assert parse(r'title == "\u0061_"', SCHEMA).evaluate(table).to_pylist() == [False, False, True]


def test_random_sample_is_drawn_by_key_whatever_the_segment() -> None:
    """``RANDOM_SAMPLE`` keeps each row by its primary key's hash (VarChar keys too): the
    same rows however the table is cut into segments, about ``p`` of them."""
    schema = Schema(
        [
            Field("pk", DataType.VARCHAR, is_primary=True, max_length=16),
            Field("n", DataType.INT64),
            Field("vec", DataType.FLOAT_VECTOR, dim=2),
        ]
    )
    keys = [f"k{i}" for i in range(4000)]
    table = pa.table({"pk": keys, "n": pa.array([i % 2 for i in range(4000)], pa.int64())})
    expr = parse("n == 0 and RANDOM_SAMPLE(0.25)", schema)
    whole = np.asarray(expr.evaluate(table))
    halves = [np.asarray(expr.evaluate(table.slice(s, 2000))) for s in (0, 2000)]
    assert (np.concatenate(halves) == whole).all()
    assert 400 < whole.sum() < 600 and not whole[1::2].any()  # a quarter of the n == 0 rows
    assert expr.fields == {"pk", "n"}
    assert expr.to_sql() is None  # evaluated, never pushed down
