"""Segment listings and partition statistics in the SDK (mixed into ``Client``), as
pymilvus's ``list_persistent_segments``, ``list_loaded_segments`` and
``get_partition_stats``, all read from the ``get_segment_info`` action."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.client.replies import PartitionStats
from elanus.client.results import SegmentInfo
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import loads as load_ops
from elanus.ops import segments as segment_ops
from elanus.ops.collections import DescribeCollection
from elanus.ops.replies import CollectionDescription, LoadProgress, SegmentRecord, Segments
from elanus.states import SegmentState

PERSISTENT = frozenset({SegmentState.SEALED, SegmentState.FLUSHING, SegmentState.FLUSHED})
"""The states Milvus's GetPersistentSegmentInfo lists when asked for none in particular."""


class SegmentAPI(ClientBase):
    def _segments(
        self, collection: str, db: str | None, timeout: float | None
    ) -> list[SegmentRecord]:
        op = segment_ops.GetSegmentInfo(db=self._db_or_own(db), collection=collection)
        return self._reply(op, Segments, timeout=timeout)["segments"]

    def list_persistent_segments(
        self,
        collection_name: str,
        timeout: float | None = None,
        states: Sequence[Any] | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> list[SegmentInfo]:
        """Sealed, flushing and flushed segments (or those in ``states``, by name)."""
        reject_unknown("list_persistent_segments", kwargs)
        wanted = {_state_name(s) for s in states or PERSISTENT}
        return [
            SegmentInfo.of(s, collection_name)
            for s in self._segments(collection_name, db, timeout)
            if str(s.get("state")).lower() in wanted
        ]

    def list_loaded_segments(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> list[SegmentInfo]:
        """The segments the query nodes serve: none while the collection is not loaded,
        else the live segments of its loaded partitions (growing ones included)."""
        reject_unknown("list_loaded_segments", kwargs)
        op = load_ops.GetLoadState(db=self._db_or_own(db), collection=collection_name)
        load = self._reply(op, LoadProgress, timeout=timeout)
        if load.get("state") == "NotLoad":
            return []
        parts = load.get("partition_ids")
        return [
            SegmentInfo.of(s, collection_name)
            for s in self._segments(collection_name, db, timeout)
            if s.get("state") != SegmentState.DROPPED
            and (parts is None or s.get("partition_id") in parts)
        ]

    def get_partition_stats(
        self,
        collection_name: str,
        partition_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> PartitionStats:
        """``{"row_count"}``: the partition's rows in flushed segments, counted as
        ``get_collection_stats`` counts the collection's."""
        reject_unknown("get_partition_stats", kwargs)
        pid = self._partition_id(collection_name, partition_name, db, timeout)
        rows = sum(
            int(s.get("num_rows") or 0)
            for s in self._segments(collection_name, db, timeout)
            if s.get("partition_id") == pid and s.get("state") == SegmentState.FLUSHED
        )
        return PartitionStats(row_count=rows)

    def _partition_id(
        self, collection: str, partition: str, db: str | None, timeout: float | None
    ) -> int:
        op = DescribeCollection(db=self._db_or_own(db), name=collection)
        desc = self._reply(op, CollectionDescription, timeout=timeout)
        for p in desc.get("partitions") or []:
            if p.get("name") == partition:
                return int(p["partition_id"])
        raise ElanusError(
            ErrorCode.PARTITION_NOT_FOUND,
            f"collection {collection!r} has no partition {partition!r}",
        )


def _state_name(state: Any) -> str:
    """A state given by name, or as a ``SegmentState`` member of Elanus or pymilvus."""
    return str(state if isinstance(state, str) else getattr(state, "name", state)).lower()
