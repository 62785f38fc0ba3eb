"""Time-tick synchronisation (seed 003, seed 000 §6.6.3).

Every proxy reports, per pchannel, a timestamp below which it has nothing left to publish.
Each interval the coord takes the minimum over the live proxies and publishes it as a tick
into every pchannel that carries a live collection. A proxy is live while it keeps
reporting and its session lasts; a dead one stops holding the ticks back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elanus.api.datacoord import LastTicks, TickNow, TickReport, TicksPublished
from elanus.api.proxy import ProxyAPI
from elanus.channels.dml import DmlMessage, MsgType
from elanus.channels.jsretry import publish_acked
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext

log = logging.getLogger(__name__)

TICK_RETRY_WINDOW_S = 1.0
"""How long one round tries to publish a pchannel's tick; the next round tries again."""


@dataclass
class ProxyReport:
    default_ts: int
    pchannels: dict[str, int] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)

    def tick_for(self, pchannel: str) -> int:
        return self.pchannels.get(pchannel, self.default_ts)


class TimeTickSync:
    def __init__(self, ctx: CoordContext) -> None:
        self.ctx = ctx
        self.reports: dict[str, ProxyReport] = {}
        self.last_tick: dict[str, int] = {}
        self.active_pchannels: set[str] = set()
        self._periodic = Periodic(
            self._round, ctx.settings.timetick_interval_ms / 1000, "time tick"
        )
        self._publish_lock = asyncio.Lock()
        self.serving_since: Callable[[], float] = lambda: 0.0
        """When the coord last began answering reports (its lease taken: ``CoordLease``)."""
        self.gone: set[str] = set()
        """Proxies found dead (nobody serves their subjects) whose sessions have not
        expired yet: they hold no tick back meanwhile."""

    def handlers(self) -> dict[str, RoleHandler]:
        return {"timetick.report": self.report, "timetick.now": self.tick_now}

    @property
    def publish_lock(self) -> asyncio.Lock:
        """Held while ticks are published. A message published under it with a timestamp
        taken under it comes before every tick that passes that timestamp."""
        return self._publish_lock

    async def tick_now(self, req: TickNow) -> TicksPublished:
        """Fresh reports from every live proxy, then a tick at once: a Strong read waits
        for one round trip instead of the rest of the tick interval. The proxies asked are
        those with a session and those reporting: a proxy just started reports before the
        session watch sees it (up to a second), and its last periodic report would hold
        the tick below the read's timestamp until the next round."""

        async def ask(node_id: str) -> None:
            try:
                await ProxyAPI(self.ctx.bus, node_id).report_now()
            except ElanusError as exc:
                log.debug("proxy %s did not report on demand: %s", node_id, exc)

        proxies = {p.node_id for p in self.ctx.sessions.of_role("proxy")} | set(self.reports)
        await asyncio.gather(*(ask(p) for p in sorted(proxies)))
        return TicksPublished(ticks=await self.publish_ticks())

    async def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def report(self, req: TickReport) -> LastTicks:
        pchannels = {k: int(v) for k, v in req.pchannels.items()}
        self.reports[req.proxy_id] = ProxyReport(req.default_ts, pchannels)
        self.gone.discard(req.proxy_id)
        return LastTicks(last_tick=dict(self.last_tick))

    def forget_proxy(self, proxy_id: str) -> None:
        self.reports.pop(proxy_id, None)

    async def _round(self) -> None:
        """The periodic round: late proxies probed (not on a Strong read's ``tick_now``),
        then the ticks."""
        await self.drop_dead_proxies()
        await self.publish_ticks()

    async def drop_dead_proxies(self) -> None:
        """A proxy two intervals late is probed; gone (killed), it stops holding the ticks
        back now rather than when its session expires (``session_ttl_s``)."""
        late_after = 2 * self.ctx.settings.timetick_interval_ms / 1000
        now = time.monotonic()
        late = [p for p, r in self.reports.items() if now - r.at > late_after]
        late += [
            s.node_id
            for s in self.ctx.sessions.of_role("proxy")
            if s.node_id not in self.reports and s.node_id not in self.gone
        ]
        if not late:
            return
        alive = await asyncio.gather(*(ProxyAPI(self.ctx.bus, p).alive() for p in late))
        for proxy_id, up in zip(late, alive, strict=True):
            if not up:
                log.info("proxy %s is gone; it no longer holds time ticks back", proxy_id)
                self.reports.pop(proxy_id, None)
                self.gone.add(proxy_id)
        self.gone &= {s.node_id for s in self.ctx.sessions.of_role("proxy")}

    def live_reports(self) -> list[ProxyReport] | None:
        """Reports of the live proxies, or None while a live proxy has not reported yet
        (after a coord restart): a tick then could overtake that proxy's writes."""
        ttl = self.ctx.settings.session_ttl_s
        now = time.monotonic()
        # reports refused while the lease lapsed (NATS electing) are the coord's silence,
        # not the proxy's: their clock starts when the lease is held again
        since = self.serving_since()
        stale = [p for p, r in self.reports.items() if now - max(r.at, since) > ttl]
        for p in stale:
            log.info("proxy %s stopped reporting; it no longer holds time ticks back", p)
            del self.reports[p]
        unheard = [
            s.node_id
            for s in self.ctx.sessions.of_role("proxy")
            if s.node_id not in self.reports and s.node_id not in self.gone
        ]
        if unheard:
            return None
        return list(self.reports.values())

    async def publish_ticks(self) -> dict[str, int]:
        """Publish one tick per active pchannel: the minimum over live proxies' reports."""
        async with self._publish_lock:
            reports = self.live_reports()
            if reports is None:
                return {}
            fresh = self.ctx.tso.alloc() if not reports else 0
            due: dict[str, int] = {}
            for p in sorted(self.active_pchannels):
                tick = min((r.tick_for(p) for r in reports), default=fresh)
                if tick > self.last_tick.get(p, 0):
                    due[p] = tick
            # each pchannel on its own: one whose stream is electing a leader (a NATS
            # server died) must not hold back the ticks, and so the reads, of the others
            outcomes = await asyncio.gather(
                *(self._publish_tick(p, tick) for p, tick in due.items())
            )
            published = {p: tick for (p, tick), ok in zip(due.items(), outcomes, strict=True) if ok}
            self.last_tick.update(published)
            return published

    async def _publish_tick(self, pchannel: str, tick: int) -> bool:
        subject, headers, payload = DmlMessage(MsgType.TICK, ts=tick, source="coord").encode(
            pchannel
        )
        try:
            await publish_acked(
                self.ctx.bus.js, subject, payload, headers, window=TICK_RETRY_WINDOW_S
            )
        except ElanusError as exc:  # the next round tries again
            log.warning("time tick of %s not published: %s", pchannel, exc)
            return False
        return True
