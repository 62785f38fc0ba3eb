"""The coord role: root, data, query and index coordination over one DuckDB file.

Like Milvus's coordinators folded into one process, it answers request/reply on
``elanus.coord.<method>``; each coordination area is a small service contributing
handlers (``RootCoord`` for TSO, IDs and DDL; later ones for segments, loading, indexes).
It is the sole owner of the DuckDB file, and watches sessions to learn which nodes live.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from elanus.api.coord import CoordHealth, GetHealth, ListSessions, Sessions
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.dml import ensure_streams
from elanus.channels.runtime import metrics
from elanus.channels.runtime.loop import Periodic
from elanus.channels.runtime.role import Role, RoleHandler
from elanus.channels.runtime.sessions import Session, SessionInfo, SessionWatcher
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.auth import AuthCoord
from elanus.meta.backup import BackupService
from elanus.meta.catalog import Catalog
from elanus.meta.catalogstore import CatalogStore
from elanus.meta.channelmanager import ChannelManager
from elanus.meta.collections import CatalogLookup, ProxyNotifier
from elanus.meta.compaction import CompactionManager
from elanus.meta.context import CoordContext
from elanus.meta.coordmetrics import CoordMetrics
from elanus.meta.datacoord import DataCoord
from elanus.meta.db import Database
from elanus.meta.gc import GarbageCollector
from elanus.meta.housekeeping import Housekeeper
from elanus.meta.idalloc import IDAllocator
from elanus.meta.importjobs import ImportManager
from elanus.meta.indexcoord import IndexCoord
from elanus.meta.lease import CoordLease
from elanus.meta.querycoord import QueryCoord
from elanus.meta.rootcoord import RootCoord
from elanus.meta.scheduler import TaskScheduler
from elanus.meta.snapshots import SnapshotService
from elanus.meta.timetick import TimeTickSync
from elanus.meta.truncate import Truncation
from elanus.meta.tso import TimestampOracle
from elanus.settings import Settings

log = logging.getLogger(__name__)

ADOPT_WAIT_S = 3.0
"""How long a starting coord waits for the recorded loads to be placed before it serves."""


class Coordinator(Role):
    role_name = "coord"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        ctx = self.ctx = CoordContext(settings, bus, self.supervisor)
        # Built in dependency order: each service gets the interfaces it uses
        # (meta/interfaces.py); the two cycles go through events subscribed below.
        lookup, proxies = CatalogLookup(ctx), ProxyNotifier(ctx)
        self.timeticks = TimeTickSync(ctx)
        self.data = DataCoord(ctx, lookup)
        self.channels = ChannelManager(ctx, lookup, self.data, self.timeticks)
        self.data.owners = self.channels
        self.index = IndexCoord(ctx, lookup, proxies, self.data)
        self.query = QueryCoord(ctx, lookup, self.data, self.index)
        self.compaction = CompactionManager(ctx, self.data, self.index, self.query)
        self.imports = ImportManager(ctx, lookup, self.data, self.timeticks, self.index, self.query)
        self.root = RootCoord(
            ctx, lookup, proxies,
            data=self.data, index=self.index, query=self.query, channels=self.channels,
        )  # fmt: skip
        self.truncation = Truncation(lookup, self.data, self.query, self.compaction)
        self.gc = GarbageCollector(ctx, self.compaction, self.imports, self.index)
        self.housekeeping = Housekeeper(ctx, lookup, self.channels)
        self.auth = AuthCoord(ctx, proxies)
        self.backup = BackupService(ctx, lookup, self.data, self.gc)
        self.snapshots = SnapshotService(ctx)
        self.data.on_flushed(self.index.on_new_segment)  # indexed first, then handed off
        self.data.on_flushed(self.query.segment_flushed)
        self.data.take_plans_from(self.compaction)
        self.index.subscribe(self.query)
        self.scheduler = TaskScheduler([self.index, self.imports, self.compaction])
        self._background: list[Periodic] = []
        self.catalog = CatalogStore(settings, bus, self.supervisor, on_fenced=self._lease_lost)
        self.lease = CoordLease(
            bus, self.node_id, settings.coord_lease_ttl_s, self._lease_lost,
            on_retaken=self.catalog.still_ours,
        )  # fmt: skip
        self.on_lease_lost: Callable[[], None] = lambda: None
        """What the host does when the lease is lost (``elanus run`` stops the process)."""
        self._started_at = time.time()
        self.gauges = CoordMetrics(self.data, self.index, self.query)

    @property
    def address(self) -> str:
        return subjects.COORD

    def handlers(self) -> dict[str, RoleHandler]:
        handlers: dict[str, RoleHandler] = {
            "health": self.health,
            "session.list": self.list_sessions,
        }
        services = (
            self.root, self.data, self.channels, self.timeticks, self.compaction, self.query,
            self.index, self.imports, self.auth, self.backup, self.truncation, self.snapshots,
        )  # fmt: skip
        for service in services:
            handlers.update(service.handlers())
        return handlers

    @property
    def pchannels(self) -> list[str]:
        return self.ctx.pchannels

    # The started-only infrastructure, kept where tests and tools look for it.
    @property
    def db(self) -> Database:
        return self.ctx.db

    @property
    def tso(self) -> TimestampOracle:
        return self.ctx.tso

    @property
    def ids(self) -> IDAllocator:
        return self.ctx.ids

    @property
    def sessions(self) -> SessionWatcher:
        return self.ctx.sessions

    async def wait_turn(self, stop: threading.Event | None = None) -> None:
        """Hold the coordinator lease; as a standby, wait until the active coord is gone,
        meanwhile in a session of its own (``standby: true``) so that ``elanus status``
        lists it. The session is the only thing a standby does: the active coord's
        services look only at the sessions of other roles."""
        if self.lease.revision != 0:
            return
        standby: list[Session] = []

        async def waiting() -> None:
            meta: dict[str, object] = {"standby": True, "health": self.supervisor.health()}
            if self.restarts:
                meta["restarts"] = self.restarts
            info = SessionInfo(self.role_name, self.node_id, meta=meta)
            session = Session(self.bus, info, self.settings.session_ttl_s, self.live_meta)
            try:
                standby.append(await session.start())
            except Exception as exc:  # noqa: BLE001 - only ``status`` misses the standby
                log.info("the standby's session could not be registered: %r", exc)

        try:
            await self.lease.acquire(stop, on_waiting=waiting)
        finally:
            for session in standby:
                await session.stop()

    def _lease_lost(self) -> None:
        self.supervisor.failed("coordinator lease", ElanusError(ErrorCode.UNAVAILABLE, "lost"))
        self.on_lease_lost()

    async def start(self) -> None:
        await self.wait_turn()
        self.ctx.db = await self.catalog.open()
        self.ctx.tso = self.catalog.tso()
        self.ctx.tso.guard = self.lease.check
        self.timeticks.serving_since = self.lease.serving_since
        self.ctx.ids = self.catalog.ids()
        first_ts = self.tso.alloc()
        await self.db.run(
            lambda con: Catalog(
                con, self.ctx.ids.alloc, self.settings.num_pchannels
            ).ensure_default_database(first_ts)
        )
        await self.auth.start()
        await ensure_streams(self.bus.js, self.pchannels, replicas=self.settings.stream_replicas)
        await self.data.start()
        await self.query.start()
        await self.index.start()
        await self.imports.start()
        self.ctx.sessions = await SessionWatcher(
            self.bus, self._on_session, ttl_s=self.settings.session_ttl_s
        ).start()
        await self._adopt_loads()
        await self.serve(subjects.COORD, queue="coord")
        await self.channels.start()
        await self.timeticks.start()
        background = [
            *self.data.background(),
            *self.compaction.background(),
            *self.gc.background(),
            *self.housekeeping.background(),
            *self.query.background(),
            *self.index.background(),
            *self.scheduler.background(),
        ]
        self._background = [p.start() for p in background]
        await self.register()
        metrics.report(self.gauges)
        await self.channels.balance()
        self.housekeeping.start()

    async def _adopt_loads(self) -> None:
        """Before answering, place the recorded loads again: a restarted coord finds their
        delegators still serving and keeps them (``QueryNode.watch``), so no read finds a
        loaded collection unplaced. Bounded: a replica that needs a new node (its own died
        meanwhile) is placed on in the background."""
        adopting = asyncio.ensure_future(self.query.keep_loaded())
        adopting.add_done_callback(_log_failure)
        await asyncio.wait([adopting], timeout=ADOPT_WAIT_S)

    async def _on_session(self, event: str, info: SessionInfo) -> None:
        log.info("session %s: %s %s", event, info.role, info.node_id)
        if info.role == "proxy" and event == "leave":
            self.timeticks.forget_proxy(info.node_id)
        if info.role == "datanode":
            self.supervisor.spawn("channel assignment", self.channels.balance)
        if info.role == "querynode" and event == "leave":
            self.query.groups.forget(info.node_id)  # a member gone holds no copy any more
            # its share placed again now, not in 1 s
            self.supervisor.spawn("place lost replicas", self.query.keep_loaded)
        if event == "leave":
            self.housekeeping.node_left(info)

    async def stop(self) -> None:
        metrics.unreport(self.gauges)
        await super().stop()
        for periodic in self._background:
            await periodic.stop()
        self._background.clear()
        await self.query.stop()
        await self.imports.stop()
        if hasattr(self, "sessions"):
            await self.timeticks.stop()
            await self.channels.stop()
        if hasattr(self, "sessions"):
            await self.sessions.stop()
        await self.catalog.close()
        await self.lease.release()

    # -- handlers ---------------------------------------------------------------------------
    async def health(self, req: GetHealth) -> CoordHealth:
        """``degraded`` when a role (this coord included) reports a failed vital task;
        ``unhealthy`` names each such role and its failures."""
        unhealthy = [
            {"role": s.role, "node_id": s.node_id, **s.meta["health"]}
            for s in self.sessions.live.values()
            if s.meta.get("health", {}).get("status", "ok") != "ok" and s.node_id != self.node_id
        ]
        if not self.supervisor.healthy:
            unhealthy.append({"role": self.role_name, "node_id": self.node_id})
            unhealthy[-1].update(self.supervisor.health())
        return CoordHealth(
            status="degraded" if unhealthy else "ok",
            unhealthy=unhealthy,
            node_id=self.node_id,
            ts=self.tso.alloc(),
            uptime_s=round(time.time() - self._started_at, 3),
            live_sessions=len(self.sessions.live),
        )

    async def list_sessions(self, req: ListSessions) -> Sessions:
        await self.sessions.poll()
        return Sessions(sessions=[s.to_dict() for s in self.sessions.live.values()])


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("placing the recorded loads failed: %s", task.exception())
