"""The state machines' tables (``elanus/states.py``): every legal move is applied, every
other one is refused with an error naming the object and both states."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pytest

from elanus.errors import ElanusError, ErrorCode
from elanus.states import (
    TRANSITIONS,
    CompactionState,
    ImportJobState,
    IndexTaskState,
    LoadState,
    SegmentState,
    transition,
)


@dataclass
class Thing:
    state: Any
    label: str = "thing 7"


ENUMS = [SegmentState, IndexTaskState, ImportJobState, CompactionState, LoadState]


def test_every_enum_has_a_complete_table() -> None:
    assert set(TRANSITIONS) == set(ENUMS)
    for kind, table in TRANSITIONS.items():
        assert set(table) == set(kind), kind  # every state has a row, even a final one
        for targets in table.values():
            assert targets <= set(kind)


@pytest.mark.parametrize("kind", ENUMS, ids=lambda k: k.__name__)
def test_every_legal_transition_is_applied(kind: type[enum.StrEnum]) -> None:
    moves = [(a, b) for a, targets in TRANSITIONS[kind].items() for b in targets]
    assert moves
    for old, new in moves:
        thing = Thing(old)
        transition(thing, new)
        assert thing.state is new


@pytest.mark.parametrize("kind", ENUMS, ids=lambda k: k.__name__)
def test_every_illegal_transition_is_refused(kind: type[enum.StrEnum]) -> None:
    table = TRANSITIONS[kind]
    illegal = [(a, b) for a in kind for b in kind if b not in table[a]]
    assert illegal  # self-moves at least
    for old, new in illegal:
        thing = Thing(old)
        with pytest.raises(ElanusError) as err:
            transition(thing, new)
        assert thing.state is old
        assert err.value.code == ErrorCode.INTERNAL
        assert f"thing 7: {old} -> {new}" in err.value.message


def test_the_error_says_what_is_allowed() -> None:
    with pytest.raises(ElanusError, match=r"Dropped may only become nothing"):
        transition(Thing(SegmentState.DROPPED), SegmentState.FLUSHED)
    with pytest.raises(ElanusError, match=r"Growing may only become Dropped, Sealed"):
        transition(Thing(SegmentState.GROWING), SegmentState.FLUSHED)


def test_final_states_stay_final() -> None:
    assert not TRANSITIONS[ImportJobState][ImportJobState.COMPLETED]
    assert not TRANSITIONS[ImportJobState][ImportJobState.FAILED]
    assert not TRANSITIONS[CompactionState][CompactionState.COMPLETED]
    assert not TRANSITIONS[SegmentState][SegmentState.DROPPED]


def test_persisted_words_are_unchanged() -> None:
    """DuckDB rows and replies keep the words they had before the tables."""
    assert [s.value for s in SegmentState] == [
        "Growing", "Sealed", "Flushing", "Flushed", "Dropped", "Importing",
    ]  # fmt: skip
    assert [s.value for s in IndexTaskState] == ["Unissued", "InProgress", "Finished", "Failed"]
    assert [s.value for s in ImportJobState] == ["Pending", "Importing", "Completed", "Failed"]
    assert [s.value for s in LoadState] == ["NotLoad", "Loading", "Loaded"]
