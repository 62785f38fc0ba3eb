"""The coord role: root, data, query and index coordination over one DuckDB file.

Like Milvus's coordinators folded into one process, it answers request/reply on
``elanus.coord.<method>``; each coordination area is a small service contributing
handlers (``RootCoord`` for TSO, IDs and DDL; later ones for segments, loading, indexes).
It is the sole owner of the DuckDB file, and watches sessions to learn which nodes live.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from elanus.channels import metrics, subjects
from elanus.channels.bus import Bus
from elanus.channels.dml import ensure_streams, pchannel_name
from elanus.channels.loop import Periodic
from elanus.channels.role import Role, RoleHandler
from elanus.channels.sessions import SessionInfo, SessionWatcher
from elanus.meta.auth import AuthCoord
from elanus.meta.catalog import Catalog
from elanus.meta.channelmanager import ChannelManager
from elanus.meta.compaction import CompactionManager
from elanus.meta.coordmetrics import CoordMetrics
from elanus.meta.counters import ID_HIGH_WATER, TSO_BOUND, CounterStore
from elanus.meta.datacoord import DataCoord
from elanus.meta.db import Database
from elanus.meta.gc import GarbageCollector
from elanus.meta.idalloc import IDAllocator
from elanus.meta.importjobs import ImportManager
from elanus.meta.indexcoord import IndexCoord
from elanus.meta.querycoord import QueryCoord
from elanus.meta.rootcoord import RootCoord
from elanus.meta.scheduler import TaskScheduler
from elanus.meta.timetick import TimeTickSync
from elanus.meta.tso import TimestampOracle
from elanus.settings import Settings

log = logging.getLogger(__name__)


class Coordinator(Role):
    role_name = "coord"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.db: Database
        self.tso: TimestampOracle
        self.ids: IDAllocator
        self.sessions: SessionWatcher
        self.root = RootCoord(self)
        self.data = DataCoord(self)
        self.timeticks = TimeTickSync(self)
        self.channels = ChannelManager(self)
        self.compaction = CompactionManager(self)
        self.gc = GarbageCollector(self)
        self.query = QueryCoord(self)
        self.index = IndexCoord(self)
        self.imports = ImportManager(self)
        self.auth = AuthCoord(self)
        self.scheduler = TaskScheduler([self.index, self.imports, self.compaction])
        self._background: list[Periodic] = []
        self._counters: CounterStore | None = None
        self._started_at = time.time()
        self.gauges = CoordMetrics(self)

    @property
    def address(self) -> str:
        return subjects.COORD

    def handlers(self) -> dict[str, RoleHandler]:
        handlers: dict[str, RoleHandler] = {
            "health": self.health,
            "session.list": self.list_sessions,
        }
        services = (
            self.root, self.data, self.timeticks, self.compaction, self.query, self.index,
            self.imports, self.auth,
        )  # fmt: skip
        for service in services:
            handlers.update(service.handlers())
        return handlers

    @property
    def pchannels(self) -> list[str]:
        return [pchannel_name(i) for i in range(self.settings.num_pchannels)]

    async def start(self) -> None:
        self.db = await asyncio.to_thread(Database, self.settings.catalog_path)
        counters = self._counters = await self.db.run(CounterStore)
        self.tso = TimestampOracle(counters.get(TSO_BOUND), counters.setter(TSO_BOUND))
        self.ids = IDAllocator(counters.get(ID_HIGH_WATER), counters.setter(ID_HIGH_WATER))
        first_ts = self.tso.alloc()
        await self.db.run(
            lambda con: Catalog(
                con, self.ids.alloc, self.settings.num_pchannels
            ).ensure_default_database(first_ts)
        )
        await self.auth.start()
        await ensure_streams(self.bus.js, self.pchannels)
        await self.data.start()
        await self.query.start()
        await self.index.start()
        await self.imports.start()
        self.sessions = await SessionWatcher(
            self.bus, self._on_session, ttl_s=self.settings.session_ttl_s
        ).start()
        await self.serve(subjects.COORD, queue="coord")
        await self.channels.start()
        await self.timeticks.start()
        background = [
            *self.data.background(),
            *self.compaction.background(),
            *self.gc.background(),
            *self.query.background(),
            *self.index.background(),
            *self.scheduler.background(),
        ]
        self._background = [p.start() for p in background]
        await self.register()
        metrics.report(self.gauges)
        await self.channels.balance()

    async def _on_session(self, event: str, info: SessionInfo) -> None:
        log.info("session %s: %s %s", event, info.role, info.node_id)
        if info.role == "proxy" and event == "leave":
            self.timeticks.forget_proxy(info.node_id)
        if info.role == "datanode":
            self.supervisor.spawn("channel assignment", self.channels.balance)

    async def on_collections_changed(self) -> None:
        """Called after create/drop: (re)assign vchannels and the set of ticked pchannels."""
        await self.channels.balance()

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
        if self._counters is not None:
            counters, self._counters = self._counters, None
            await self.db.run(lambda con: counters.close())
        if hasattr(self, "db"):
            await asyncio.to_thread(self.db.close)

    # -- handlers ---------------------------------------------------------------------------
    async def health(self, body: dict[str, Any]) -> dict[str, Any]:
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
        return {
            "status": "degraded" if unhealthy else "ok",
            "unhealthy": unhealthy,
            "node_id": self.node_id,
            "ts": self.tso.alloc(),
            "uptime_s": round(time.time() - self._started_at, 3),
            "live_sessions": len(self.sessions.live),
        }

    async def list_sessions(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.sessions.poll()
        return {"sessions": [s.to_dict() for s in self.sessions.live.values()]}
