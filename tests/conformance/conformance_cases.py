"""The differential cases: each runs through pymilvus on Milvus Lite and through the
Elanus SDK on the same seeded rows (``conformance_data``), and the answers must agree.

A case whose Milvus Lite answer departs from Milvus's documentation carries ``lite_departs``
(why) and ``expect`` (the documented answer, as a predicate over the seeded rows for a
filter); the suite then checks Elanus against ``expect`` and also checks that Milvus Lite
still departs, so a fixed Lite build shows up instead of hiding behind the note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class FilterCase:
    """A query by filter; answers compared as sorted primary keys (and counts)."""

    expr: str
    params: dict[str, Any] | None = None
    lite_departs: str | None = None
    expect: Callable[[Row], bool] | None = None
    error: bool = False
    """Both sides must refuse the expression."""


def _json(r: Row, *path: Any) -> Any:
    v: Any = r["j"]
    for p in path:
        found = (isinstance(v, dict) and p in v) or (
            isinstance(v, list) and isinstance(p, int) and 0 <= p < len(v)
        )
        if not found:
            return _MISSING
        v = v[p]
    return v


_MISSING = object()


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


CHAINED = "Milvus Lite's builds reject chained comparisons, which Milvus 2.5 documents"
MODULO = "Milvus Lite's builds lack '%', which Milvus 2.5's expression language has"
TEMPLATE = "Milvus Lite's builds lack filter templates (filter_params), documented since 2.5"
JSON_IN = "Milvus Lite's builds lack 'in' on JSON paths, which Milvus 2.5 documents"
MISSING_KEY = (
    "Milvus 2.5 evaluates '!=' on a JSON path or dynamic key as true where the key is missing "
    "or holds another type (segcore's UnaryRangeJSONCompareNotEqual), and NOT of a comparison "
    "on a missing key as true (only a null JSON field is unknown; $meta is never null); "
    "Milvus Lite treats a missing key as unknown and leaves those rows out"
)
INT_DIV = (
    "Milvus 2.5 divides integer fields by integers in integer arithmetic, truncating toward "
    "zero (segcore's ArithOpElementFunc on the field's integer type); Milvus Lite divides as floats"
)
NULL_NOT_IN = (
    "Milvus 2.5 evaluates 'not in' as NOT over the term, and NOT keeps null rows out "
    "(LogicalUnaryExpr ANDs the flipped bitmap with the valid bitmap); Milvus Lite keeps them"
)

FILTERS: list[FilterCase] = [
    # -- comparisons on every scalar type --------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "i8 > 0",
            "i8 >= -5",
            "i8 < -90",
            "i8 <= 10",
            "i8 == 7",
            "i8 != 7",
            "i16 > 500",
            "i16 <= -900",
            "i32 < 0",
            "i32 > 40000",
            "i64 >= 0",
            "i64 == -150000000",
            "i64 < -100000000",
            "f > 1.5",
            "f <= -2",
            "f == 0.5",
            "f != 0.5",
            "d < -39",
            "d >= 50.5",
            "b == true",
            "b == false",
            "b != True",
            "b == FALSE",
            "s == 'apple_0'",
            's != "banana_1"',
            "s > 'f'",
            "s < 'b'",
            "s >= 'grape'",
            "id == 1",
            "id > 850",
            "id <= 10",
            "5 < i8",
            "-50 >= i8",
        ]
    ),
    # -- in / not in -----------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "id in [1, 4, 7, 1000]",
            "id not in [1, 4]",
            "s in ['apple_0', 'fig_5', 'nothing']",
            "i8 in [-100, 0, 99]",
            "not (id in [1, 4])",
            "b in [true]",
            "f in [0.5, -3.0]",
            "i16 not in [-1000, 0]",
            "id in []",
        ]
    ),
    # -- like ------------------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "s like 'app%'",
            "s like '%_1'",
            "s like '%rr%'",
            "s like 'Apple%'",
            "s like '_pple%'",
            "s like 'date_3'",
            "s like 'a\\\\_b%'",
            "s like 'x\\\\%y%'",
            "s like 'a_b%'",
            "s like '%'",
            "s like 'b%a%'",
        ]
    ),
    # -- logic and precedence --------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "i8 > 0 and b == true",
            "i8 > 0 && b == true",
            "i8 > 90 or i8 < -95",
            "i8 > 90 || i8 < -95",
            "not (i8 > 0)",
            "!(i8 > 0)",
            "not (i8 > 0 and b == true)",
            "i8 > 0 or i8 < -50 and b == true",
            "(i8 > 0 or i8 < -50) and b == true",
            "id > 100 and id < 200 or id == 1",
            "i8 > 0 AND i16 < 0 OR b == false",
            "not (s like 'a%') and i8 > 80",
            "(((id < 50)))",
        ]
    ),
    # -- arithmetic ------------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "i8 + 1 == 5",
            "i16 - 10 > 900",
            "i32 * 2 < -99000",
            "f * 2 == 1.0",
            "d + 0.5 > 0",
        ]
    ),
    FilterCase(
        "i64 / 1000003 == 10", lite_departs=INT_DIV, expect=lambda r: _cdiv(r["i64"], 1000003) == 10
    ),
    FilterCase("i8 / 3 == 1", lite_departs=INT_DIV, expect=lambda r: _cdiv(r["i8"], 3) == 1),
    FilterCase("i8 / -7 == 2", lite_departs=INT_DIV, expect=lambda r: _cdiv(r["i8"], -7) == 2),
    FilterCase("i8 % 3 == 0", lite_departs=MODULO, expect=lambda r: r["i8"] % 3 == 0),
    FilterCase("i16 % 7 != 1", lite_departs=MODULO, expect=lambda r: _cmod(r["i16"], 7) != 1),
    # -- chained comparisons ---------------------------------------------------------------
    FilterCase("-5 < i8 < 5", lite_departs=CHAINED, expect=lambda r: -5 < r["i8"] < 5),
    FilterCase("0 <= i8 <= 10", lite_departs=CHAINED, expect=lambda r: 0 <= r["i8"] <= 10),
    FilterCase("1 < i16 <= 100", lite_departs=CHAINED, expect=lambda r: 1 < r["i16"] <= 100),
    FilterCase("10 > i8 >= 0", lite_departs=CHAINED, expect=lambda r: 10 > r["i8"] >= 0),
    # -- field against field ---------------------------------------------------------------
    *(FilterCase(e) for e in ["i8 < i16", "i8 == i16", "f > d"]),
    # -- JSON paths --------------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            'j["k"] == 3',
            'j["k"] > 10',
            'j["k"] <= 2',
            'j["name"] == "apple"',
            'j["name"] != "apple"',
            'j["name"] like "app%"',
            'j["nested"]["x"] == 4',
            'j["nested"]["x"] > 5',
            'j["nested"]["y"]["z"] == "cherry"',
            'j["tags"][0] == "red"',
            'j["nums"][1] > 5',
            'j["mixed"] == 1',
            'j["mixed"] == "1"',
            'j["mixed"] > 2',
            'j["flag"] == true',
            'j["f"] > 10',
            'j["missing"] == 1',
            'j["k"] + 1 == 5',
            'j["k"] > 3 and j["k"] < 6',
            'not (j["k"] > 3)',
        ]
    ),
    FilterCase(
        'j["name"] in ["apple", "fig"]',
        lite_departs=JSON_IN,
        expect=lambda r: r["j"]["name"] in ("apple", "fig"),
    ),
    FilterCase(
        'j["k"] in [1, 2, 3]', lite_departs=JSON_IN, expect=lambda r: r["j"]["k"] in (1, 2, 3)
    ),
    FilterCase(
        'j["nested"]["x"] not in [0, 1]',
        lite_departs=JSON_IN,
        expect=lambda r: not (_num(_json(r, "nested", "x")) and _json(r, "nested", "x") in (0, 1)),
    ),
    # -- a missing key or another type: != and NOT are true (Milvus 2.5's segcore) ----------
    FilterCase(
        'j["mixed"] != 1',
        lite_departs=MISSING_KEY,
        expect=lambda r: not (_num(_json(r, "mixed")) and _json(r, "mixed") == 1),
    ),
    FilterCase(
        'j["mixed"] != "1"', lite_departs=MISSING_KEY, expect=lambda r: _json(r, "mixed") != "1"
    ),
    FilterCase('j["missing"] != 1', lite_departs=MISSING_KEY, expect=lambda r: True),
    # -- JSON functions ----------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            'json_contains(j["tags"], "red")',
            'json_contains_all(j["tags"], ["red", "green"])',
            'json_contains_any(j["tags"], ["gold", "blue"])',
            'json_contains(j["nums"], 3)',
            'JSON_CONTAINS(j["tags"], "gold")',
            'not json_contains(j["tags"], "red")',
            'json_contains_any(j["nums"], [0, 9])',
            'json_contains_all(j["nums"], [])',
        ]
    ),
    # -- arrays ----------------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "array_contains(arr, 5)",
            "array_contains_all(arr, [1, 2])",
            "array_contains_any(arr, [0, 19])",
            "array_length(arr) == 0",
            "array_length(arr) > 3",
            "arr[0] == 5",
            "arr[1] > 10",
            'sarr[0] == "red"',
            'array_contains(sarr, "gold")',
            "not array_contains(arr, 5)",
            "ARRAY_CONTAINS(arr, 1)",
            'array_contains_any(sarr, ["blue", "nope"])',
            "array_length(sarr) == 2 and array_contains(arr, 3)",
        ]
    ),
    # -- nulls -----------------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "ni is null",
            "ni is not null",
            "ni IS NULL",
            "ni > 10",
            "ni != 5",
            "not (ni > 10)",
            "ns is null",
            'ns == "apple"',
            'ns != "apple"',
            "nj is null",
            "nj is not null",
            'nj["a"] == 3',
            'nj["a"] != 3',
            "ni in [1, 2, 3]",
            'ns like "b%"',
            "ni is null or ni > 20",
        ]
    ),
    FilterCase(
        "ni not in [1, 2, 3]",
        lite_departs=NULL_NOT_IN,
        expect=lambda r: r["ni"] is not None and r["ni"] not in (1, 2, 3),
    ),
    # -- dynamic fields ----------------------------------------------------------------------
    *(
        FilterCase(e)
        for e in [
            "dyn_i > 5",
            "dyn_i == 0",
            '$meta["dyn_i"] > 5',
            'dyn_s == "apple"',
            'dyn_s like "b%"',
            "dyn_i in [1, 2]",
            "nosuch == 1",
            "dyn_i > 2 and dyn_s == 'apple'",
        ]
    ),
    FilterCase("dyn_i != 3", lite_departs=MISSING_KEY, expect=lambda r: r.get("dyn_i") != 3),
    FilterCase(
        "not (dyn_i > 5)",
        lite_departs=MISSING_KEY,
        expect=lambda r: not ("dyn_i" in r and r["dyn_i"] > 5),
    ),
    # -- templates ---------------------------------------------------------------------------
    FilterCase("i8 > {x}", {"x": 10}, TEMPLATE, lambda r: r["i8"] > 10),
    FilterCase("id in {ids}", {"ids": [1, 4, 7]}, TEMPLATE, lambda r: r["id"] in (1, 4, 7)),
    FilterCase("s like {p}", {"p": "app%"}, TEMPLATE, lambda r: r["s"].startswith("app")),
    FilterCase('j["k"] == {k}', {"k": 3}, TEMPLATE, lambda r: r["j"]["k"] == 3),
    FilterCase("array_contains(arr, {v})", {"v": 5}, TEMPLATE, lambda r: 5 in r["arr"]),
    FilterCase(
        "{lo} < i16 and i16 < {hi}",
        {"lo": -10, "hi": 300},
        TEMPLATE,
        lambda r: -10 < r["i16"] < 300,
    ),
    # -- refused by both -------------------------------------------------------------------
    *(
        FilterCase(e, error=True)
        for e in [
            "id >",
            "i8 == 'text'",
            "array_contains(i8, 1)",
            "s like 5",
            "(id > 1",
            "id in [1, 'a'",
            "s like 'a\\_b%'",
        ]
    ),
]


def _cdiv(a: int, b: int) -> int:
    """C-style integer division (truncates toward zero), as Milvus computes ``/`` on ints."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _cmod(a: int, b: int) -> int:
    """C-style remainder (sign of the dividend), as Milvus computes ``%``."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@dataclass(frozen=True)
class SearchCase:
    """A search; answers compared per query as ids (exact) and distances (1e-4)."""

    name: str
    anns_field: str
    limit: int = 5
    filter: str = ""
    search_params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    output_fields: list[str] | None = None
    nq: int = 2
    lite_departs: str | None = None


SEARCHES: list[SearchCase] = [
    *(
        SearchCase(f"{metric}-{k}", vf, limit=k)
        for vf, metric in (("v_l2", "L2"), ("v_ip", "IP"), ("v_cos", "COSINE"))
        for k in (1, 5, 20)
    ),
    *(
        SearchCase(f"{vf}-filter-{i}", vf, filter=flt)
        for vf in ("v_l2", "v_ip", "v_cos")
        for i, flt in enumerate(
            ["i8 > 0", 'json_contains(j["tags"], "red")', "ni is null", "dyn_i in [1, 3]"]
        )
    ),
    SearchCase("l2-metric-given", "v_l2", search_params={"metric_type": "L2"}),
    SearchCase("ip-metric-given", "v_ip", search_params={"metric_type": "IP"}),
    SearchCase("cos-metric-given", "v_cos", search_params={"metric_type": "COSINE"}),
    SearchCase("l2-outputs", "v_l2", output_fields=["i8", "s", "j", "arr", "ni", "dyn_i"]),
    SearchCase("ip-outputs-star", "v_ip", output_fields=["*"]),
    SearchCase(
        "l2-range", "v_l2", limit=50, search_params={"params": {"radius": 6.0, "range_filter": 2.0}}
    ),
    SearchCase(
        "ip-range", "v_ip", limit=50, search_params={"params": {"radius": 1.0, "range_filter": 4.0}}
    ),
    SearchCase(
        "cos-range",
        "v_cos",
        limit=50,
        search_params={"params": {"radius": 0.3, "range_filter": 0.9}},
    ),
    SearchCase("l2-radius-only", "v_l2", limit=50, search_params={"params": {"radius": 4.0}}),
    SearchCase("l2-offset", "v_l2", limit=5, extra={"offset": 3}),
    SearchCase("cos-offset", "v_cos", limit=4, extra={"offset": 10}),
    SearchCase("l2-group", "v_l2", limit=4, extra={"group_by_field": "i8"}, output_fields=["i8"]),
    SearchCase(
        "ip-group-size",
        "v_ip",
        limit=3,
        extra={"group_by_field": "b", "group_size": 3, "strict_group_size": True},
        output_fields=["b"],
    ),
    SearchCase(
        "cos-group-str", "v_cos", limit=5, extra={"group_by_field": "ns"}, output_fields=["ns"]
    ),
    SearchCase("l2-many-queries", "v_l2", limit=3, nq=5),
    SearchCase("l2-filter-none-match", "v_l2", filter="id < 0"),
    SearchCase("ip-filter-one", "v_ip", filter="id == 4"),
]


@dataclass(frozen=True)
class RowsCase:
    """A query or get whose rows (all output values) must agree."""

    name: str
    filter: str = ""
    ids: list[int] | None = None
    output_fields: list[str] | None = None
    limit: int | None = None
    offset: int | None = None
    lite_departs: str | None = None


ROWS_CASES: list[RowsCase] = [
    RowsCase("scalars", "id < 40", output_fields=["i8", "i16", "i32", "i64", "f", "d", "b", "s"]),
    RowsCase("json", "id < 40", output_fields=["j", "nj"]),
    RowsCase("arrays", "id < 40", output_fields=["arr", "sarr"]),
    RowsCase("nullables", "id < 40", output_fields=["ni", "ns", "nj"]),
    RowsCase("dynamic-by-name", "id < 40", output_fields=["dyn_i", "dyn_s"]),
    RowsCase("meta", "id < 40", output_fields=["$meta"]),
    RowsCase("star", "id < 20", output_fields=["*"]),
    RowsCase("vector", "id < 10", output_fields=["v_l2"]),
    RowsCase("pk-only", "id < 40", output_fields=["id"]),
    RowsCase("pk-implied", "id < 40", output_fields=["s"]),
    RowsCase("get", ids=[1, 4, 7, 100000], output_fields=["s", "j"]),
    RowsCase("get-star", ids=[10, 13], output_fields=["*"]),
    RowsCase("limit-empty-filter", "", output_fields=["id"], limit=7),
    RowsCase("limit-offset", "id > 100", output_fields=["i8"], limit=5, offset=4),
    RowsCase("no-output-fields", "id < 20"),
]

COUNTS: list[str] = ["", "i8 > 0", 'json_contains(j["tags"], "red")', "ni is null", "dyn_i > 5"]
