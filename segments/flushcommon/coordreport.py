"""What a vchannel's writer tells the coord: its ticks (answered with flushes and
compaction plans to run), flushed segments, compaction outcomes, a dead channel."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from elanus.api.compaction import CompactionAPI, CompactionDone, CompactionFailed
from elanus.api.datacoord import (
    ChannelFailed,
    DataCoordAPI,
    DatanodeTick,
    SegmentFlushed,
    TickReply,
)
from elanus.errors import ElanusError
from elanus.segments.flushcommon.host import DataNodeHost

log = logging.getLogger(__name__)
REPORT_TIMEOUT_S = 10.0


class CoordReports:
    def __init__(self, node: DataNodeHost, vchannel: str) -> None:
        self.datacoord = DataCoordAPI(node.bus, REPORT_TIMEOUT_S)
        self.compaction = CompactionAPI(node.bus, REPORT_TIMEOUT_S)
        self.vchannel = vchannel
        self.stopping = False

    async def tick(self, report: DatanodeTick) -> TickReply | None:
        """Report a consumed tick; None when the coord is away (the next tick says it
        again)."""
        try:
            return await self.datacoord.datanode_tt(report)
        except ElanusError as exc:
            log.warning("%s: tick report failed: %s", self.vchannel, exc)
            return None

    async def flushed(self, report: SegmentFlushed) -> None:
        await self._tell("segment.flushed", lambda: self.datacoord.segment_flushed(report))

    async def compaction_done(self, report: CompactionDone) -> None:
        await self._tell("compaction.done", lambda: self.compaction.done(report))

    async def compaction_failed(self, report: CompactionFailed) -> None:
        await self._tell("compaction.fail", lambda: self.compaction.fail(report))

    async def channel_failed(self, report: ChannelFailed) -> None:
        await self._tell("channel failure", lambda: self.datacoord.channel_failed(report))

    async def _tell(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Report, retrying while the coord is away: the files are on disk either way."""
        delay = 0.1
        while not self.stopping:
            try:
                await call()
                return
            except ElanusError as exc:
                log.warning("%s: %s report failed, retrying: %s", self.vchannel, what, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
