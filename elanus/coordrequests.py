"""Request types of the coordinator's data handlers (``elanus.coord.*``); the catalog's,
the query coord's and auth's are in ``elanus/api/`` with their replies and stubs.

Each class is the schema of one subject's body (``elanus.requests.request``); the coord
decodes bodies into them at its edge, and callers in any package may build them instead of
dicts. The key names are the wire format: renaming a field changes the protocol.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.requests import Range, request

# -- segments and flush (data coord) ----------------------------------------------------------


@request("segment.assign")
class AssignSegment:
    collection_id: int
    partition_id: int
    vchannel: str
    rows: Annotated[int, Range(1, 100_000_000)]
    proxy_id: str = ""


@request("flush")
class Flush:
    collection_id: int


@request("flush.state")
class FlushState:
    segment_ids: list[int]
    collection_id: int | None = None
    flush_ts: int | None = None


@request("segment.info")
class SegmentInfo:
    """The given segments, or those of a collection (Dropped ones only if asked)."""

    segment_ids: list[int] | None = None
    collection_id: int | None = None
    include_dropped: bool = False


# -- datanode reports ----------------------------------------------------------------------


@request("datanode.channel_failed")
class ChannelFailed:
    vchannel: str
    reason: str
    node_id: str | None = None


@request("datanode.tt")
class DatanodeTick:
    vchannel: str
    ts: int
    checkpoint: dict[str, Any] | None = None
    """``{"seq", "ts"}``: where a restarted datanode resumes the channel."""
    data_seq: int | None = None
    node_id: str | None = None


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


# -- compaction -------------------------------------------------------------------------------


@request("compaction.trigger")
class TriggerCompaction:
    collection_id: int


@request("compaction.state")
class GetCompactionState:
    compaction_id: int


@request("compaction.fail")
class CompactionFailed:
    plan_id: int
    reason: str
    node_id: str | None = None


@request("compaction.done")
class CompactionDone:
    plan_id: int
    num_rows: Annotated[int, Range(0)]
    path: str | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    node_id: str | None = None
    vchannel: str | None = None
    target_segment_id: int | None = None


# -- time ticks -------------------------------------------------------------------------------


@request("timetick.now")
class TickNow:
    pass


@request("timetick.report")
class TickReport:
    proxy_id: str
    default_ts: int
    pchannels: dict[str, Any] = field(default_factory=dict)
    """pchannel → the proxy's timestamp there, where it differs from ``default_ts``."""


# -- a datanode's channels --------------------------------------------------------------------


@request("datanode.watch")
class WatchChannel:
    vchannel: str
    pchannel: str
    collection_id: int
    schema: dict[str, Any]
    checkpoint: dict[str, Any] | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    """The channel's unflushed segments, as the coord knows them."""


@request("datanode.unwatch")
class UnwatchChannel:
    vchannel: str
