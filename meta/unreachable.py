"""Query nodes a proxy could not reach, until they answer again or their sessions end.

A query node killed outright keeps its session for up to a TTL (6 s by default), and the
coord would place its replicas again only then. The proxy knows at once: its read found
nobody serving the node's subjects. It says so (``query.node_unreachable``); the coord
probes the node itself, and a node that does not answer is left out of placement from
then on, so its replicas go to live nodes now. A suspect that answers a later probe (it
was only cut off for a moment) is placed on again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from elanus.api.querynode import QueryNodeAPI

if TYPE_CHECKING:
    from elanus.meta.context import CoordContext

log = logging.getLogger(__name__)


class UnreachableNodes:
    def __init__(self, ctx: CoordContext) -> None:
        self.ctx = ctx
        self.suspects: set[str] = set()

    def _with_session(self) -> set[str]:
        return {s.node_id for s in self.ctx.sessions.of_role("querynode")}

    def live(self) -> set[str]:
        """The query nodes to place on: with a session, and not found gone."""
        return self._with_session() - self.suspects

    async def _gone(self, nodes: Iterable[str]) -> set[str]:
        probed = sorted(nodes)
        bus = self.ctx.bus
        answers = await asyncio.gather(*(QueryNodeAPI(bus, n).alive() for n in probed))
        return {n for n, up in zip(probed, answers, strict=True) if not up}

    async def confirm(self, nodes: Iterable[str]) -> set[str]:
        """Probe the reported ``nodes`` (with a session, not suspected yet); the newly
        suspected ones."""
        reported = (set(nodes) & self._with_session()) - self.suspects
        gone = await self._gone(reported) if reported else set()
        for node in sorted(gone):
            log.warning("query node %s does not answer: its replicas are placed again", node)
        self.suspects |= gone
        return gone

    async def recheck(self) -> None:
        """Forget the suspects whose sessions ended, and those that answer again."""
        self.suspects &= self._with_session()
        if self.suspects:
            back = self.suspects - await self._gone(self.suspects)
            for node in sorted(back):
                log.info("query node %s answers again", node)
            self.suspects -= back
