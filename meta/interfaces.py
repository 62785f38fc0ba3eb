"""What the coord's services offer each other: narrow interfaces, wired once in meta/coord.py.

A service holds only the interfaces it uses (given to its constructor), never the coord.
Where two services need each other, one side is an event it offers and the other
subscribes to: a segment flushed (DataCoord, to IndexCoord and QueryCoord), an index
built or dropped (IndexCoord, to QueryCoord). The construction order in meta/coord.py
is the dependency order; docs/design-notes.md has the table.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from elanus.api.compaction import CompactionPlan
    from elanus.api.datacoord import FlushProgress, FlushState
    from elanus.meta.indexmeta import IndexTask
    from elanus.meta.segmentmeta import Segment
    from elanus.schema import Schema


# -- the root's catalog reads and proxy notices (meta/collections.py) ----------------------
class CollectionLookup(Protocol):
    async def describe_by_id(self, collection_id: int) -> dict[str, Any]: ...
    async def collection_label(self, collection_id: int) -> str: ...
    async def live_vchannels(self) -> dict[str, int]: ...


class ProxyNotices(Protocol):
    async def broadcast(self, payload: dict[str, Any]) -> None: ...
    async def invalidate(
        self, kind: str, db: str, name: str, collection_id: int, ts: int
    ) -> None: ...


# -- DataCoord ------------------------------------------------------------------------------
class SegmentTable(Protocol):
    """The live segments and each vchannel's last checkpoint, read-only."""

    @property
    def segments(self) -> Mapping[int, Segment]: ...
    @property
    def checkpoints(self) -> Mapping[str, tuple[int, int]]: ...


class SegmentStore(SegmentTable, Protocol):
    """Writers of segments the datanodes did not flush: compaction and import."""

    async def save_segments(
        self, segs: list[Segment], also: Callable[[Any], None] | None = None
    ) -> None: ...
    async def replace(self, sources: list[Segment], targets: list[Segment]) -> None: ...
    async def row_bytes(self, collection_id: int) -> int: ...
    async def schema(self, collection_id: int) -> Schema: ...


class BackupFlush(SegmentTable, Protocol):
    """What a backup asks of DataCoord: one seal of everything, the flush's progress, and
    how far each vchannel's datanode has consumed."""

    @property
    def channel_ticks(self) -> Mapping[str, int]: ...

    async def seal_all(self) -> tuple[int, list[int]]: ...
    async def flush_state(self, req: FlushState) -> FlushProgress: ...


class SegmentEvents(Protocol):
    def on_flushed(self, callback: Callable[[Segment], Awaitable[None]]) -> None: ...


class ChannelSegments(SegmentTable, Protocol):
    """What the channel manager changes in DataCoord when a vchannel moves or fails."""

    @property
    def channel_failures(self) -> dict[str, str]: ...
    @property
    def datanode_heard(self) -> dict[str, float]: ...
    def reset_flushing(self, vchannel: str) -> None: ...
    def channel_segments(self, vchannel: str) -> list[dict[str, Any]]: ...


class CollectionSegments(Protocol):
    """The root's DDL on DataCoord."""

    async def drop_collection(self, collection_id: int, ts: int) -> None: ...
    def forget_schema(self, collection_id: int) -> None: ...
    def of_collection(self, collection_id: int) -> list[Segment]: ...
    async def drop_segments(self, which: Callable[[Segment], bool], ts: int) -> list[Segment]: ...


# -- IndexCoord -----------------------------------------------------------------------------
class SegmentIndexer(Protocol):
    held: set[int]
    """Segments whose index builds wait (not dispatched while listed)."""

    async def on_new_segment(self, seg: Segment) -> None: ...


class ServedIndexes(Protocol):
    def served(self, segment_id: int) -> list[dict[str, Any]]: ...


class IndexListener(Protocol):
    def index_built(self, collection_id: int, segment_id: int, index: dict[str, Any]) -> None: ...
    def index_dropped(self, collection_id: int, index_id: int) -> None: ...


class IndexEvents(Protocol):
    def subscribe(self, listener: IndexListener) -> None: ...


class CollectionIndexes(Protocol):
    async def drop_collection(self, collection_id: int) -> None: ...
    async def drop_field(self, collection_id: int, field_name: str) -> None: ...


class IndexTasks(Protocol):
    @property
    def tasks(self) -> Mapping[int, IndexTask]: ...


# -- QueryCoord -----------------------------------------------------------------------------
class LoadedCollections(Protocol):
    @property
    def loaded(self) -> Mapping[int, Any]: ...
    def serves(self, collection_id: int, partition_id: int) -> bool: ...
    def progress(self, cid: int) -> tuple[int, int, int]: ...
    async def release_collection(self, cid: int) -> None: ...


class Handoff(Protocol):
    """Compacted and imported segments, handed to the query nodes."""

    def schedule(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None: ...
    async def on_compacted(self, targets: list[Any], sources: list[int]) -> None: ...
    async def on_segments_imported(self, segs: list[Any]) -> None: ...


# -- the rest -------------------------------------------------------------------------------
class ChannelBalance(Protocol):
    async def balance(self) -> None: ...


class ChannelWatchers(Protocol):
    def assignments(self) -> dict[str, Any]: ...


class ChannelOwners(Protocol):
    """Whose reports on a vchannel DataCoord takes."""

    def owner(self, vchannel: str) -> str | None: ...


class TickLock(Protocol):
    @property
    def publish_lock(self) -> asyncio.Lock: ...


class TickedChannels(Protocol):
    active_pchannels: set[str]


class CompactionPlans(Protocol):
    def take_for(self, vchannel: str, tick_ts: int) -> list[CompactionPlan]: ...
    def open_targets(self) -> set[int]: ...


class ImportGarbage(Protocol):
    def collect_garbage(self, delay_s: float) -> list[str]: ...


# -- GarbageCollector -------------------------------------------------------------------------
class GcHold(Protocol):
    """Garbage collection paused while a backup reads the files."""

    def hold(self) -> contextlib.AbstractAsyncContextManager[None]: ...
