"""The differential cases through pymilvus on both sides: the same pymilvus code against
Milvus Lite and against Elanus's Milvus port (``milvus/``), compared as
``test_differential`` compares Lite with the Elanus SDK. A representative set: every
filter and count case, the searches and the row reads."""

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
from conformance_data import COLLECTION, rows
from conformance_fixtures import face_fixture, lite_fixture  # noqa: F401  (fixtures)
from test_differential import _lite_outcome, _rows, _search, same

pytestmark = [pytest.mark.conformance, pytest.mark.slow]  # Milvus Lite in a child Python

ROWS = rows()


@pytest.mark.parametrize("case", FILTERS, ids=[c.expr for c in FILTERS])
def test_filter_through_pymilvus(lite: Any, face: Any, case: FilterCase) -> None:
    lite_answer = _lite_outcome(lite, case)
    face_answer = _lite_outcome(face, case)
    if case.error:
        assert isinstance(lite_answer, str), f"Milvus Lite accepted {case.expr!r}"
        assert isinstance(face_answer, str), f"Elanus's Milvus port accepted {case.expr!r}"
        return
    assert not isinstance(face_answer, str), face_answer
    if case.lite_departs:
        assert case.expect is not None
        assert face_answer == sorted(r["id"] for r in ROWS if case.expect(r))
        return
    assert face_answer == lite_answer


@pytest.mark.parametrize("expr", COUNTS)
def test_count_through_pymilvus(lite: Any, face: Any, expr: str) -> None:
    def count(client: Any) -> int:
        [row] = client.query(COLLECTION, filter=expr, output_fields=["count(*)"])
        return int(row["count(*)"])

    assert count(face) == count(lite)


@pytest.mark.parametrize("case", SEARCHES, ids=[c.name for c in SEARCHES])
def test_search_through_pymilvus(lite: Any, face: Any, case: SearchCase) -> None:
    expected = _search(lite, case)
    got = _search(face, case)
    assert len(got) == len(expected)
    for want_hits, got_hits in zip(expected, got, strict=True):
        assert [h["id"] for h in got_hits] == [h["id"] for h in want_hits]
        for w, g in zip(want_hits, got_hits, strict=True):
            assert math.isclose(g["distance"], w["distance"], rel_tol=1e-4, abs_tol=1e-4)
            if case.output_fields is not None:
                assert same(g.get("entity", {}), w.get("entity", {})), (g, w)


@pytest.mark.parametrize("case", ROWS_CASES, ids=[c.name for c in ROWS_CASES])
def test_rows_through_pymilvus(lite: Any, face: Any, case: RowsCase) -> None:
    expected = _rows(lite, case)
    got = _rows(face, case)
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    for g, w in zip(got, expected, strict=True):
        assert same(g, w), (g, w)
