"""Milvus Lite and Elanus answer the same requests on the same seeded data alike.

ids exactly, distances within 1e-4, output values exactly (floats within 1e-5). Where Milvus
Lite departs from Milvus's documentation the case says why and carries the documented
answer; Elanus is held to that answer and Lite is checked to still depart.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from conformance_cases import (
    COUNTS,
    FILTERS,
    ROWS_CASES,
    SEARCHES,
    FilterCase,
    RowsCase,
    SearchCase,
)
from conformance_data import COLLECTION, query_vectors, rows
from conformance_fixtures import ela_fixture, lite_fixture  # noqa: F401  (fixtures)

from elanus.errors import ElanusError

pytestmark = [pytest.mark.conformance, pytest.mark.slow]  # Milvus Lite in a child Python

ROWS = rows()


def same(a: Any, b: Any, tol: float = 1e-5) -> bool:
    """Equal values, floats within ``tol`` (relative or absolute), containers recursively."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) is type(b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], tol) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def plain(value: Any) -> Any:
    """pymilvus wraps rows and hits in its own types; compare plain dicts and lists."""
    if isinstance(value, dict) or hasattr(value, "keys"):
        return {k: plain(value[k]) for k in value.keys()}  # noqa: SIM118
    if isinstance(value, list | tuple) or type(value).__name__ in ("RepeatedScalarContainer",):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _filter_ids(client: Any, case: FilterCase) -> list[int]:
    kwargs: dict[str, Any] = {"filter": case.expr, "output_fields": ["id"]}
    if case.params is not None:
        kwargs["filter_params"] = case.params
    got = client.query(COLLECTION, **kwargs)
    return sorted(int(r["id"]) for r in got)


def _lite_outcome(lite: Any, case: FilterCase) -> list[int] | str:
    try:
        return _filter_ids(lite, case)
    except Exception as exc:  # pymilvus raises MilvusException and its own ParamError
        return f"error: {exc}"


@pytest.mark.parametrize("case", FILTERS, ids=[c.expr for c in FILTERS])
def test_filter(lite: Any, ela: Any, case: FilterCase) -> None:
    lite_answer = _lite_outcome(lite, case)
    if case.error:
        assert isinstance(lite_answer, str), f"Milvus Lite accepted {case.expr!r}"
        with pytest.raises(ElanusError):
            _filter_ids(ela, case)
        return
    ela_answer = _filter_ids(ela, case)
    if case.lite_departs:
        assert case.expect is not None
        documented = sorted(r["id"] for r in ROWS if case.expect(r))
        assert lite_answer != documented, f"Milvus Lite no longer departs here: {case.lite_departs}"
        assert ela_answer == documented
        return
    assert not isinstance(lite_answer, str), lite_answer
    assert ela_answer == lite_answer


@pytest.mark.parametrize("expr", COUNTS)
def test_count(lite: Any, ela: Any, expr: str) -> None:
    def count(client: Any) -> int:
        [row] = client.query(COLLECTION, filter=expr, output_fields=["count(*)"])
        return int(row["count(*)"])

    assert count(ela) == count(lite)


def _search(client: Any, case: SearchCase) -> list[list[dict[str, Any]]]:
    kwargs: dict[str, Any] = dict(case.extra)
    if case.filter:
        kwargs["filter"] = case.filter
    if case.search_params:
        kwargs["search_params"] = case.search_params
    if case.output_fields is not None:
        kwargs["output_fields"] = case.output_fields
    got = client.search(
        COLLECTION,
        data=query_vectors(case.nq),
        anns_field=case.anns_field,
        limit=case.limit,
        **kwargs,
    )
    return [[plain(dict(h)) for h in hits] for hits in got]


@pytest.mark.parametrize("case", SEARCHES, ids=[c.name for c in SEARCHES])
def test_search(lite: Any, ela: Any, case: SearchCase) -> None:
    expected = _search(lite, case)
    got = _search(ela, case)
    assert len(got) == len(expected)
    for want_hits, got_hits in zip(expected, got, strict=True):
        assert [h["id"] for h in got_hits] == [h["id"] for h in want_hits]
        for w, g in zip(want_hits, got_hits, strict=True):
            assert math.isclose(g["distance"], w["distance"], rel_tol=1e-4, abs_tol=1e-4)
            if case.output_fields is not None:
                assert same(g.get("entity", {}), w.get("entity", {})), (g, w)


def _rows(client: Any, case: RowsCase) -> list[dict[str, Any]]:
    kwargs: dict[str, Any] = {}
    if case.output_fields is not None:
        kwargs["output_fields"] = case.output_fields
    if case.ids is not None:
        got = client.get(COLLECTION, ids=case.ids, **kwargs)
    else:
        if case.limit is not None:
            kwargs["limit"] = case.limit
        if case.offset is not None:
            kwargs["offset"] = case.offset
        got = client.query(COLLECTION, filter=case.filter, **kwargs)
    return sorted((plain(dict(r)) for r in got), key=lambda r: r["id"])


@pytest.mark.parametrize("case", ROWS_CASES, ids=[c.name for c in ROWS_CASES])
def test_rows(lite: Any, ela: Any, case: RowsCase) -> None:
    expected = _rows(lite, case)
    got = _rows(ela, case)
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    for g, w in zip(got, expected, strict=True):
        assert same(g, w), (g, w)
