"""The states of what the coord tracks: segments, index build tasks, import jobs and
compaction plans.

Every package that reads a state (the coord that sets it, the nodes that act on it, the
proxy and the SDK that report it) names it through these enums instead of spelling the
word. They are ``str`` enums: a member equals its string, so DuckDB rows, JSON replies and
clients see exactly the words they saw before.
"""

from __future__ import annotations

import enum


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
