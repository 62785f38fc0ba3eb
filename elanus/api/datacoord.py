"""The data coord's API (``meta/datacoord.py``, ``meta/timetick.py``): segment quotas,
flush, segment records, and what datanodes and proxies report (channel ticks, flushed
segments, failed channels, proxy time ticks).

The key names are the wire format: renaming a field changes the protocol (and, for the
replies a Flight action passes on, docs/protocol.md).
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.api.base import Ack, Stub, reply
from elanus.api.compaction import CompactionPlan, Recorded
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import Range, request

# -- segments and flush -----------------------------------------------------------------------


@request("segment.assign")
class AssignSegment:
    collection_id: int
    partition_id: int
    vchannel: str
    rows: Annotated[int, Range(1, 100_000_000)]
    proxy_id: str = ""


@reply
class SegmentGrant:
    """Rows a proxy may place in a growing segment, at timestamps below ``expire_ts``."""

    segment_id: int
    rows: int
    expire_ts: int


@reply
class Assigned:
    assignments: list[SegmentGrant]


@request("flush")
class Flush:
    collection_id: int


@reply
class Flushing:
    """The segments to wait for; every write acknowledged before the flush is in them."""

    segment_ids: list[int]
    flush_ts: int


@request("flush.state")
class FlushState:
    segment_ids: list[int]
    collection_id: int | None = None
    flush_ts: int | None = None


@reply
class FlushProgress:
    flushed: bool
    done: int
    total: int


@request("deletes.persist")
class PersistDeletes:
    """Have every delete stamped <= ``ts`` on these vchannels written to delta logs; asked
    again until ``done`` (a files-only read plan, ``flight/search/fileplan.py``)."""

    vchannels: list[str]
    ts: int


@reply
class DeletesPersisted:
    done: bool
    waiting: list[str]
    """The vchannels whose datanode has not said so yet."""


@request("segment.info")
class SegmentInfo:
    """The given segments, or those of a collection (Dropped ones only if asked)."""

    segment_ids: list[int] | None = None
    collection_id: int | None = None
    include_dropped: bool = False


@reply
class SegmentRecord:
    """A segment as the catalog holds it (``get_segment_info`` shows it as is)."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    state: str
    """A ``SegmentState`` value."""
    max_rows: int
    allocated_rows: int
    num_rows: int
    created_ts: int
    last_expire_ts: int
    seal_ts: int | None
    flushed_ts: int | None
    dropped_ts: int | None
    start_seq: int | None
    checkpoint_seq: int | None
    checkpoint_ts: int | None
    min_ts: int | None
    max_ts: int | None
    path: str | None
    level: int
    """A ``SegmentLevel`` value (Milvus's numbers: 2 is L1)."""
    compacted_from: list[int]
    last_alloc_at: float
    is_sorted: bool = False
    """Its rows are in primary-key order."""
    key_range: list[Any] | None = None
    """An L2 segment's lowest and highest clustering key."""


@reply
class Segments:
    segments: list[SegmentRecord]


# -- datanode reports -------------------------------------------------------------------------


@request("datanode.channel_failed")
class ChannelFailed:
    vchannel: str
    reason: str
    node_id: str | None = None


@request("datanode.channel_held")
class ChannelHeld:
    """A datanode that lost NATS held its writer of ``vchannel`` (another datanode may
    have been given the channel meanwhile); back, it asks whether it still owns it."""

    vchannel: str
    node_id: str


@reply
class Held:
    kept: bool
    """The channel is still the asking node's: it consumes on; else it drops its writer."""


@request("datanode.tt")
class DatanodeTick:
    vchannel: str
    ts: int
    checkpoint: dict[str, Any] | None = None
    """``{"seq", "ts"}``: where a restarted datanode resumes the channel."""
    data_seq: int | None = None
    node_id: str | None = None
    persisted_ts: int | None = None
    """Every delete and row stamped <= this is in the channel's segment files."""


@reply
class TickReply:
    """What the datanode of the channel is to do next: write these sealed segments, and
    run these compaction plans (between two packs)."""

    flush: list[int]
    compact: list[CompactionPlan] = field(default_factory=list)
    persist_ts: int | None = None
    """Write every pending delete stamped <= this to delta logs, then say so
    (``DatanodeTick.persisted_ts``): a files-only read plan waits for it."""


@request("segment.flushed")
class SegmentFlushed:
    segment_id: int
    num_rows: Annotated[int, Range(0)]
    path: str | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    start_seq: int | None = None
    checkpoint: dict[str, Any] | None = None
    node_id: str | None = None
    vchannel: str | None = None
    is_sorted: bool = False
    """Its rows are in primary-key order (the flush sorted them)."""


# -- proxy time ticks -------------------------------------------------------------------------


@request("timetick.now")
class TickNow:
    pass


@reply
class TicksPublished:
    ticks: dict[str, int]
    """pchannel → the tick published there now (unchanged pchannels left out)."""


@request("timetick.report")
class TickReport:
    proxy_id: str
    default_ts: int
    pchannels: dict[str, Any] = field(default_factory=dict)
    """pchannel → the proxy's timestamp there, where it differs from ``default_ts``."""


@reply
class LastTicks:
    last_tick: dict[str, int]


class DataCoordAPI(Stub):
    """The data coord's calls (``elanus.coord.<call>``)."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def assign(self, req: AssignSegment) -> Assigned:
        return await self._ask("segment.assign", req, Assigned)

    async def flush(self, req: Flush) -> Flushing:
        return await self._ask("flush", req, Flushing)

    async def flush_state(self, req: FlushState) -> FlushProgress:
        return await self._ask("flush.state", req, FlushProgress)

    async def persist_deletes(self, req: PersistDeletes) -> DeletesPersisted:
        return await self._ask("deletes.persist", req, DeletesPersisted)

    async def segment_info(self, req: SegmentInfo, timeout: float | None = None) -> Segments:
        return await self._ask("segment.info", req, Segments, timeout)

    async def channel_failed(self, req: ChannelFailed) -> Ack:
        return await self._ask("datanode.channel_failed", req, Ack)

    async def channel_held(self, req: ChannelHeld) -> Held:
        return await self._ask("datanode.channel_held", req, Held)

    async def datanode_tt(self, req: DatanodeTick, timeout: float | None = None) -> TickReply:
        return await self._ask("datanode.tt", req, TickReply, timeout)

    async def segment_flushed(self, req: SegmentFlushed, timeout: float | None = None) -> Recorded:
        return await self._ask("segment.flushed", req, Recorded, timeout)


class TimeTickAPI(Stub):
    """The coord's time-tick synchronisation (``meta/timetick.py``)."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def now(self, req: TickNow | None = None) -> TicksPublished:
        return await self._ask("timetick.now", req or TickNow(), TicksPublished)

    async def report(self, req: TickReport) -> LastTicks:
        return await self._ask("timetick.report", req, LastTicks)
