"""Housekeeping of the log: the JetStream consumers that nobody reads any more.

A query node's delegator reads its vchannel through a durable consumer named after the
node (``channels/consumer.py``, ``qn_<node>_<vchannel>``). When the node dies, the query
coord places its channels on other nodes, under their own names, and the dead node's
consumers would stay on the streams for ever, their backlog growing. The housekeeper
deletes them: a session TTL after the node's session ended, at coord start (for nodes
that died while the coord was away) and every ``housekeeping_interval_s``. A datanode
consumer (``dn_<vchannel>``) names no node: the datanode that takes the vchannel over
replaces it at the checkpoint; it goes only once no live collection has the vchannel and
no datanode watches it (a dropped collection).

Nothing goes on one look: a node (or vchannel) must be seen gone for a whole session TTL,
so a sessions bucket lost with a NATS restart (live nodes put their sessions back within a
third of a TTL) costs no live node its consumers; and the live sessions are read again
just before deleting. Sessions expire by themselves (the bucket's max age) and a node's
core NATS subscriptions end with its connection: consumers are all a dead node leaves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from nats.js.errors import NotFoundError

from elanus.channels.consumer import durable_owner
from elanus.channels.dml import stream_name
from elanus.channels.runtime.loop import Periodic
from elanus.channels.runtime.sessions import SessionInfo, list_sessions

if TYPE_CHECKING:
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import ChannelWatchers, CollectionLookup

log = logging.getLogger(__name__)


class Housekeeper:
    def __init__(
        self, ctx: CoordContext, lookup: CollectionLookup, channels: ChannelWatchers
    ) -> None:
        self.ctx, self.lookup, self.channels = ctx, lookup, channels
        self.deleted: list[str] = []
        """Every consumer deleted, as ``<stream>/<name>``."""
        self._gone: dict[str, float] = {}
        """Node ids (and names of ``dn_`` consumers) seen gone, since when (monotonic)."""

    @property
    def grace_s(self) -> float:
        return self.ctx.settings.session_ttl_s

    def background(self) -> list[Periodic]:
        interval = self.ctx.settings.housekeeping_interval_s
        return [Periodic(self.sweep, interval, "consumer housekeeping")] if interval else []

    def start(self) -> None:
        self._sweep_soon("consumer housekeeping at start")

    def node_left(self, info: SessionInfo) -> None:
        """A session ended: its consumers go a TTL later, unless the node is back."""
        if info.role == "querynode":
            self._gone.setdefault(info.node_id, time.monotonic())
            self._sweep_soon(f"consumers of querynode {info.node_id}")

    def _sweep_soon(self, name: str) -> None:
        async def look_twice() -> None:
            await self.sweep()  # notes what is gone
            if self.ctx.supervisor.stopping:
                return  # the coord stopped during the sweep: no grace to wait out
            await asyncio.sleep(self.grace_s)
            await self.sweep()  # deletes what stayed gone

        self.ctx.supervisor.spawn(name, look_twice)

    async def sweep(self) -> list[str]:
        """One round; returns the consumers deleted (``<stream>/<name>``)."""
        now = time.monotonic()
        live = await self._live_nodes()
        vchannels = set(await self.lookup.live_vchannels())
        suspects: dict[str, float] = {}
        due: list[tuple[str, str, str | None, str]] = []
        for pchannel in self.ctx.pchannels:
            stream = stream_name(pchannel)
            for name in await self._consumers(stream):
                owner = durable_owner(name, pchannel)
                if owner is None:
                    continue  # not one a role makes
                _, node, vchannel = owner
                if node is not None and node in live:
                    continue
                if node is None and (vchannel in vchannels or self._watched(vchannel)):
                    continue
                key = node or name
                since = suspects[key] = self._gone.get(key, now)
                if now - since >= self.grace_s:
                    due.append((stream, name, node, vchannel))
        self._gone = suspects  # back, or nothing of theirs left: forgotten
        if not due:
            return []
        live = await self._live_nodes()  # once more: never a live node's consumer
        removed = []
        for stream, name, node, vchannel in due:
            if (node is not None and node in live) or (node is None and self._watched(vchannel)):
                continue
            try:
                await self.ctx.bus.js.delete_consumer(stream, name)
            except NotFoundError:
                continue
            log.info("deleted consumer %s of %s (%s)", name, stream, node or "no datanode")
            removed.append(f"{stream}/{name}")
        self.deleted.extend(removed)
        return removed

    async def _live_nodes(self) -> set[str]:
        """Node ids with a session: in the bucket now, or as the watcher last saw them (the
        coord places work only on those)."""
        fresh = await list_sessions(self.ctx.bus, self.ctx.settings.session_ttl_s)
        watched = self.ctx.sessions.live.values()
        return {s.node_id for s in fresh} | {s.node_id for s in watched}

    def _watched(self, vchannel: str) -> bool:
        return vchannel in self.channels.assignments()

    async def _consumers(self, stream: str) -> list[str]:
        """Names of the stream's consumers (JetStream lists them a page at a time)."""
        names: dict[str, None] = {}
        while True:
            try:
                page: list[Any] = await self.ctx.bus.js.consumers_info(stream, offset=len(names))
            except NotFoundError:
                break
            fresh = [c.name for c in page if c.name not in names]
            if not fresh:  # the end (or a server that pages no further)
                break
            names.update(dict.fromkeys(fresh))
        return list(names)
