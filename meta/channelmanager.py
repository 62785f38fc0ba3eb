"""Which datanode consumes which vchannel.

Every vchannel of a live collection is watched by exactly one live datanode, the least
loaded when it was assigned. When a datanode's session ends, its vchannels go to others
(their unfinished flushes start over there); the datanode resumes from the checkpoint.

A killed datanode is found sooner than its session expires: a datanode whose channels
have not reported a tick for two tick intervals is probed, and one that nobody answers
for (its subscriptions went with its connection) is taken for gone at once. A datanode
that was only cut off from NATS holds its writers (they consume nothing) until it hears
here whether its channels are still its own (``channel_held``), and its reports are
refused once its channels are another's (``owner``), so taking it for gone wrongly costs a
replay from the checkpoint, never a second writer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from elanus.api.base import ACK, Ack
from elanus.api.datacoord import ChannelFailed, ChannelHeld, Held
from elanus.api.datanode import Checkpoint, DataNodeAPI, UnwatchChannel, WatchChannel
from elanus.channels.dml import pchannel_of
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import ChannelSegments, CollectionLookup, TickedChannels

log = logging.getLogger(__name__)

RESTART_FIRST_S = 0.5
RESTART_MAX_S = 30.0
RESTART_FORGET_S = 300.0
"""A failure this long after the previous restart starts the backoff over."""
PROBE_INTERVAL_S = 0.25
"""How often the datanodes' last reports are looked at (a probe goes only to late ones)."""


class ChannelManager:
    def __init__(
        self,
        ctx: CoordContext,
        lookup: CollectionLookup,
        data: ChannelSegments,
        ticks: TickedChannels,
    ) -> None:
        self.ctx, self.lookup, self.data, self.ticks = ctx, lookup, data, ticks
        self.watchers: dict[str, str] = {}  # vchannel -> datanode id
        self._started = False
        """Whether ``watchers`` holds the recorded assignments: a session event before that
        must not balance (it would take every recorded channel for unassigned)."""
        self._lock = asyncio.Lock()
        self._periodic = Periodic(self.balance, 1.0, "channel assignment")
        self._restarts: dict[str, tuple[int, float]] = {}
        """vchannel -> (failures in a row, not watched again before this monotonic time)."""
        self._seen: set[str] = set()
        """Datanodes live at the last balance. One not seen before (just started, back from
        an outage in which its session expired and its channels moved, or every one after a
        coord restart) is told to drop each channel this coord does not give it."""
        self._unsure: dict[str, str] = {}
        """vchannel -> a live datanode that may still consume it: its watch or unwatch
        failed on the way (the reply lost while NATS elected, say), so it may have done
        it. The channel goes to no other datanode until that one confirms an unwatch (or
        its session ends): two datanodes on one channel split its messages between them."""
        self.suspects: set[str] = set()
        """Datanodes with a session that did not answer a probe: given no channels (and
        theirs taken back) until one answers again."""
        self._probes = Periodic(self.probe_late, PROBE_INTERVAL_S, "datanode liveness")

    async def start(self) -> None:
        rows = await self.ctx.db.run(
            lambda con: con.execute("SELECT vchannel, node_id FROM channel_watch").fetchall()
        )
        self.watchers = {r[0]: r[1] for r in rows}
        now = time.monotonic()
        for node in self.watchers.values():  # late from now on, not from their last report
            self.data.datanode_heard.setdefault(node, now)
        self._started = True
        self._periodic.start()
        self._probes.start()

    async def stop(self) -> None:
        await self._probes.stop()
        await self._periodic.stop()

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "datanode.channel_failed": self.channel_failed,
            "datanode.channel_held": self.channel_held,
        }

    def owner(self, vchannel: str) -> str | None:
        """The datanode that watches ``vchannel``; None when none does or the recorded
        assignments are not read yet."""
        return self.watchers.get(vchannel) if self._started else None

    def _live_nodes(self) -> set[str]:
        return {s.node_id for s in self.ctx.sessions.of_role("datanode")} - self.suspects

    async def probe_late(self) -> None:
        """Probe the datanodes late with their reports (and the suspects); one gone has
        its channels placed elsewhere now."""
        late_after = max(2 * self.ctx.settings.timetick_interval_ms / 1000, 0.5)
        now = time.monotonic()
        heard = self.data.datanode_heard
        owners = set(self.watchers.values()) - self.suspects
        late = {n for n in owners if now - heard.get(n, now) > late_after}
        self.suspects &= {s.node_id for s in self.ctx.sessions.of_role("datanode")}
        probed = sorted(late | self.suspects)
        if not probed:
            return
        answers = await asyncio.gather(*(DataNodeAPI(self.ctx.bus, n).alive() for n in probed))
        gone = {n for n, up in zip(probed, answers, strict=True) if not up}
        for node in sorted(gone - self.suspects):
            log.warning("datanode %s does not answer: its channels move", node)
        for node in sorted(self.suspects - gone):
            log.info("datanode %s answers again", node)
            heard[node] = now
        changed, self.suspects = gone != self.suspects, gone
        if changed:
            await self.balance()

    async def channel_held(self, req: ChannelHeld) -> Held:
        """A datanode back on NATS asks whether a channel it held is still its own: yes
        unless it was taken for gone meanwhile (and told to unwatch, which it missed)."""
        async with self._lock:
            kept = self.watchers.get(req.vchannel) == req.node_id
        if kept:
            self.data.datanode_heard[req.node_id] = time.monotonic()
        else:
            log.info("datanode %s held %s, since given elsewhere", req.node_id, req.vchannel)
        return Held(kept=kept)

    async def channel_failed(self, req: ChannelFailed) -> Ack:
        """A datanode's task of a vchannel died: flushes waiting on it fail, and the
        channel is watched again from its checkpoint (after a backoff). A report from a
        datanode the channel has moved from is late news: ignored."""
        vchannel, reason = req.vchannel, req.reason
        if req.node_id is not None and self.watchers.get(vchannel) not in (None, req.node_id):
            return ACK
        log.error("datanode %s: channel %s failed: %s", req.node_id, vchannel, reason)
        self.data.channel_failures[vchannel] = reason
        await self.restart(vchannel)
        return ACK

    async def balance(self) -> None:
        """Give every unwatched vchannel of a live collection to the least-loaded datanode."""
        if not self._started:
            return
        async with self._lock:
            live_nodes = self._live_nodes()
            vchannels = await self.lookup.live_vchannels()
            self.ticks.active_pchannels = {pchannel_of(v) for v in vchannels}
            self._seen &= live_nodes
            for node in sorted(live_nodes - self._seen):  # new, back, or this coord is
                dropped = [
                    await self._unwatch(node, v) for v in vchannels if self.watchers.get(v) != node
                ]
                if all(dropped):  # else asked again at the next balance
                    self._seen.add(node)
            for v, node in list(self.watchers.items()):
                if node not in live_nodes or v not in vchannels:
                    await self._unassign(v)
            for v, node in list(self._unsure.items()):
                if node not in live_nodes or await self._unwatch(node, v):
                    del self._unsure[v]
            if not live_nodes:
                return
            now = time.monotonic()
            for v, cid in sorted(vchannels.items()):
                if v in self.watchers or v in self._unsure:
                    continue
                if self._restarts.get(v, (0, 0.0))[1] > now:
                    continue
                load = {n: 0 for n in live_nodes}
                for n in self.watchers.values():
                    if n in load:
                        load[n] += 1
                node = min(sorted(load), key=lambda n: load[n])
                await self._assign(v, cid, node)

    async def _assign(self, vchannel: str, collection_id: int, node: str) -> None:
        self.data.reset_flushing(vchannel)
        info = await self.lookup.describe_by_id(collection_id)
        checkpoint = self.data.checkpoints.get(vchannel)
        req = WatchChannel(
            vchannel=vchannel,
            pchannel=pchannel_of(vchannel),
            collection_id=collection_id,
            schema=info["schema"],
            checkpoint=Checkpoint(seq=checkpoint[0], ts=checkpoint[1]) if checkpoint else None,
            segments=self.data.channel_segments(vchannel),
        )
        try:
            await DataNodeAPI(self.ctx.bus, node).watch(req)
        except ElanusError as exc:
            log.warning("datanode %s could not watch %s: %s", node, vchannel, exc)
            self._unsure[vchannel] = node  # it may have: unwatched before any other watch
            return
        ts = self.ctx.tso.alloc()
        await self.ctx.db.run(
            lambda con: con.execute(
                "INSERT INTO channel_watch VALUES (?, ?, ?, ?) ON CONFLICT (vchannel) "
                "DO UPDATE SET node_id = excluded.node_id, assigned_ts = excluded.assigned_ts",
                [vchannel, collection_id, node, ts],
            )
        )
        self.watchers[vchannel] = node
        self.data.datanode_heard[node] = time.monotonic()
        self.data.channel_failures.pop(vchannel, None)
        log.info("vchannel %s -> datanode %s", vchannel, node)

    async def restart(self, vchannel: str) -> None:
        """Its datanode's task died: unwatch it now and watch it again (from the checkpoint)
        on the next balance after a backoff that doubles with each failure in a row."""
        failures, last = self._restarts.get(vchannel, (0, 0.0))
        now = time.monotonic()
        failures = 1 if now - last > RESTART_FORGET_S else failures + 1
        delay = min(RESTART_FIRST_S * 2 ** (failures - 1), RESTART_MAX_S)
        self._restarts[vchannel] = (failures, now + delay)
        log.warning("restarting vchannel %s in %.1f s (failure %d)", vchannel, delay, failures)
        async with self._lock:
            await self._unassign(vchannel)

    async def _unassign(self, vchannel: str) -> None:
        node = self.watchers.pop(vchannel, None)
        await self.ctx.db.run(
            lambda con: con.execute("DELETE FROM channel_watch WHERE vchannel = ?", [vchannel])
        )
        if node is None or node not in self._live_nodes():
            return
        if not await self._unwatch(node, vchannel):
            self._unsure[vchannel] = node

    async def _unwatch(self, node: str, vchannel: str) -> bool:
        """Whether ``node`` confirmed it no longer consumes ``vchannel``."""
        try:
            await DataNodeAPI(self.ctx.bus, node).unwatch(UnwatchChannel(vchannel=vchannel))
        except ElanusError as exc:
            log.warning("datanode %s could not unwatch %s: %s", node, vchannel, exc)
            return False
        return True

    def assignments(self) -> dict[str, Any]:
        return dict(self.watchers)
