"""The differential cases through pymilvus on both sides: the same pymilvus code against
Milvus Lite and against Elanus's Milvus port (``milvus/``), compared as
``test_differential`` compares Lite with the Elanus SDK. A representative set: every
filter and count case, the searches and the row reads."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_cases import FILTERS, FilterCase
from conformance_data import rows
from conformance_fixtures import face_fixture, lite_fixture  # noqa: F401  (fixtures)
from test_differential import _lite_outcome, test_count, test_rows, test_search  # noqa: F401  (collected here)

pytestmark = [pytest.mark.conformance, pytest.mark.slow]  # Milvus Lite in a child Python

ROWS = rows()


@pytest.fixture(scope="module")
def ela(face: Any) -> Any:
    """The Elanus side of ``test_differential``'s counts, searches and row reads: its
    Milvus port through pymilvus, in place of the Elanus SDK."""
    return face


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
