"""The states of what the coord tracks: segments, index build tasks, import jobs and
compaction plans.

Every package that reads a state (the coord that sets it, the nodes that act on it, the
proxy and the SDK that report it) names it through these enums instead of spelling the
word. They are ``str`` enums: a member equals its string, so DuckDB rows, JSON replies and
clients see exactly the words they saw before.

Each enum has one transition table (``TRANSITIONS``), and every state change goes through
``transition``, which refuses a move the table does not list: a state machine that is
written down once instead of being implied by assignments scattered over the coord.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from elanus.errors import ElanusError, ErrorCode


class SegmentState(enum.StrEnum):
    """Growing → Sealed → Flushing → Flushed (→ Dropped after compaction or a collection
    drop). A bulk import's segments are Importing (invisible) until its job commits them:
    Flushed."""

    GROWING = "Growing"
    SEALED = "Sealed"
    FLUSHING = "Flushing"
    FLUSHED = "Flushed"
    DROPPED = "Dropped"
    IMPORTING = "Importing"


class SegmentLevel(enum.IntEnum):
    """A segment's level, numbered as Milvus's ``common.SegmentLevel`` (what the catalog
    stores and every listing reports). A flush, a bulk import and a mix compaction make L1
    segments; a clustering compaction makes L2 ones (each a range of the clustering key).
    L0 (delete-only segments: Elanus keeps its deletes in each segment's delta logs) it
    never makes, and Legacy is for segments of Milvus versions before levels."""

    LEGACY = 0
    L0 = 1
    L1 = 2
    L2 = 3


class IndexTaskState(enum.StrEnum):
    """Unissued → InProgress → Finished | Failed (seed 002); an index's state is the
    state of its tasks taken together, in the same words."""

    UNISSUED = "Unissued"
    IN_PROGRESS = "InProgress"
    FINISHED = "Finished"
    FAILED = "Failed"


class ImportJobState(enum.StrEnum):
    """Pending (no data node yet) → Importing → Completed | Failed."""

    PENDING = "Pending"
    IMPORTING = "Importing"
    COMPLETED = "Completed"
    FAILED = "Failed"


IMPORT_FINAL = frozenset({ImportJobState.COMPLETED, ImportJobState.FAILED})
"""Import job states that never change again."""


class CompactionState(enum.StrEnum):
    """A compaction plan's state: pending → executing → completed | failed. The SDK shows
    it capitalised, as pymilvus spells it."""

    PENDING = "pending"
    EXECUTING = "executing"
    COMPLETED = "completed"
    FAILED = "failed"


COMPACTION_OPEN = frozenset({CompactionState.PENDING, CompactionState.EXECUTING})
"""Compaction plan states whose target segment may still appear."""


class LoadState(enum.StrEnum):
    """A collection's load: NotLoad (no record) → Loading → Loaded, back to Loading when
    a query node holding part of it is lost, and NotLoad again on release."""

    NOT_LOAD = "NotLoad"
    LOADING = "Loading"
    LOADED = "Loaded"


S = TypeVar("S", bound=enum.StrEnum)

_G, _SE, _FI = SegmentState.GROWING, SegmentState.SEALED, SegmentState.FLUSHING
_FD, _DR, _IM = SegmentState.FLUSHED, SegmentState.DROPPED, SegmentState.IMPORTING
SEGMENT_TRANSITIONS: Mapping[SegmentState, frozenset[SegmentState]] = {
    _G: frozenset({_SE, _DR}),
    # a seal whose flush was re-issued (restart, channel moved) may still be reported
    _SE: frozenset({_FI, _FD, _DR}),
    _FI: frozenset({_SE, _FD, _DR}),
    _FD: frozenset({_DR}),  # compacted away, or its collection dropped
    _IM: frozenset({_FD, _DR}),  # the job finished, or failed before its commit
    _DR: frozenset(),
}

_U, _P = IndexTaskState.UNISSUED, IndexTaskState.IN_PROGRESS
_F, _X = IndexTaskState.FINISHED, IndexTaskState.FAILED
INDEX_TASK_TRANSITIONS: Mapping[IndexTaskState, frozenset[IndexTaskState]] = {
    _U: frozenset({_P}),
    # builder lost or its report rejected (back to Unissued), or its result
    _P: frozenset({_U, _F, _X}),
    _F: frozenset({_U}),  # a query node could not load it and the files do not hold
    _X: frozenset({_P}),  # a pulling builder claims failed tasks again
}

IMPORT_JOB_TRANSITIONS: Mapping[ImportJobState, frozenset[ImportJobState]] = {
    ImportJobState.PENDING: frozenset({ImportJobState.IMPORTING, ImportJobState.FAILED}),
    ImportJobState.IMPORTING: frozenset(
        # back to Pending when the chosen data node turned out to be gone
        {ImportJobState.PENDING, ImportJobState.COMPLETED, ImportJobState.FAILED}
    ),
    ImportJobState.COMPLETED: frozenset(),
    ImportJobState.FAILED: frozenset(),
}

COMPACTION_TRANSITIONS: Mapping[CompactionState, frozenset[CompactionState]] = {
    # a pending plan fails when a source went; a result is taken while the plan is open
    CompactionState.PENDING: frozenset(
        {CompactionState.EXECUTING, CompactionState.COMPLETED, CompactionState.FAILED}
    ),
    CompactionState.EXECUTING: frozenset({CompactionState.COMPLETED, CompactionState.FAILED}),
    CompactionState.COMPLETED: frozenset(),
    CompactionState.FAILED: frozenset(),
}

LOAD_TRANSITIONS: Mapping[LoadState, frozenset[LoadState]] = {
    LoadState.NOT_LOAD: frozenset({LoadState.LOADING}),
    LoadState.LOADING: frozenset({LoadState.LOADED, LoadState.NOT_LOAD}),
    LoadState.LOADED: frozenset({LoadState.LOADING, LoadState.NOT_LOAD}),
}

TRANSITIONS: Mapping[type[enum.StrEnum], Mapping[Any, frozenset[Any]]] = {
    SegmentState: SEGMENT_TRANSITIONS,
    IndexTaskState: INDEX_TASK_TRANSITIONS,
    ImportJobState: IMPORT_JOB_TRANSITIONS,
    CompactionState: COMPACTION_TRANSITIONS,
    LoadState: LOAD_TRANSITIONS,
}
"""Every state enum's table: state → the states it may move to."""


class Stateful(Protocol[S]):
    """What ``transition`` moves: an object with a state and a name for error messages."""

    state: S

    @property
    def label(self) -> str: ...


def check_transition(label: str, old: S, new: S) -> None:
    """Refuse a move the table of ``old``'s enum does not list."""
    allowed = TRANSITIONS[type(old)][old]
    if new not in allowed:
        raise ElanusError(
            ErrorCode.INTERNAL,
            f"illegal state change of {label}: {old} -> {new} "
            f"({old} may only become {', '.join(sorted(allowed)) or 'nothing'})",
        )


def transition(obj: Stateful[S], new: S) -> None:
    """Move ``obj`` to ``new``, or raise ElanusError naming it and both states."""
    check_transition(obj.label, obj.state, new)
    obj.state = new
