"""What a vchannel's writer tells the coord: its ticks (answered with flushes and
compaction plans to run), flushed segments, compaction outcomes, a dead channel."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from elanus.channels import subjects
from elanus.errors import ElanusError

if TYPE_CHECKING:
    from elanus.segments.datanode import DataNode

log = logging.getLogger(__name__)


class CoordReports:
    def __init__(self, node: DataNode, vchannel: str) -> None:
        self.node = node
        self.vchannel = vchannel
        self.stopping = False

    async def tick(self, report: dict[str, Any]) -> dict[str, Any] | None:
        """Report a consumed tick; None when the coord is away (the next tick says it
        again)."""
        try:
            reply = await self.node.bus.request(subjects.coord("datanode.tt"), report, timeout=10)
        except ElanusError as exc:
            log.warning("%s: tick report failed: %s", self.vchannel, exc)
            return None
        return dict(reply)

    async def tell(self, method: str, report: dict[str, Any]) -> None:
        """Report, retrying while the coord is away: the files are on disk either way."""
        delay = 0.1
        while not self.stopping:
            try:
                await self.node.bus.request(subjects.coord(method), report, timeout=10)
                return
            except ElanusError as exc:
                log.warning("%s: %s report failed, retrying: %s", self.vchannel, method, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
