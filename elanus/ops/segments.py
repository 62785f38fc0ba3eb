"""Segments: a collection's row count, flush, segment listings and compaction.

``get_flush_state`` and ``get_compaction_state`` name no collection, nor does
``get_segment_info`` by ids: their ``db`` is optional (checked as every action's), so the
SDK sends it only where it always did; ``get_segment_info`` by collection reads it (absent:
the default database).
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, InCollection, operation, reply
from elanus.requests import Range
from elanus.schema import check_name


@operation("get_collection_stats")
class GetCollectionStats(InCollection):
    pass


@reply
class CollectionStats:
    """``get_collection_stats``'s reply: the rows of the flushed segments, as Milvus counts
    num_entities."""

    row_count: int


@operation("flush")
class Flush(InCollection):
    pass


@operation("get_flush_state")
class GetFlushState:
    db: DbName | None = None
    segment_ids: list[Any]
    """Integers, checked in ``check`` (one error for the list, as the dict checker's)."""

    def check(self) -> None:
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in self.segment_ids):
            raise invalid("get_flush_state: 'segment_ids' must be a list of integers")


@operation("get_segment_info")
class GetSegmentInfo:
    db: DbName | None = None
    segment_ids: list[Any] | None = None
    """The segments to show (their ids are checked by the data coord's request)."""
    collection: str | None = None
    """Else the collection whose segments to show (named in ``check``, after the rule
    that exactly one of the two is given)."""

    def check(self) -> None:
        if (self.segment_ids is None) == (self.collection is None):
            raise invalid("get_segment_info: give exactly one of 'collection' and 'segment_ids'")
        if self.collection is not None:
            check_name(self.collection, "collection")


@operation("compact")
class Compact:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    target_size_mb: Annotated[int, Range(1)] | None = None
    """Milvus's force merge: targets of up to this size; absent: the row limit's."""
    clustering: bool | None = None
    """Milvus's ``is_clustering`` (``majorCompaction``): order the rows by the collection's
    clustering key into L2 segments of contiguous key ranges (absent: a mix compaction)."""


@operation("get_compaction_state")
class GetCompactionState:
    db: DbName | None = None
    compaction_id: Annotated[int, Range(1)]
