"""The proxy's catalog service: DDL through the DdQueue, reads through the MetaCache.

The executors of ``flight/ddl_actions.py``. Runs on the proxy's asyncio loop and reaches
the coord only by NATS request/reply. The coord re-checks everything dynamically (exists /
does not exist) and its ElanusErrors pass through unchanged.
"""

from __future__ import annotations

import time
from typing import Any

import elanus
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.supervisor import Supervisor
from elanus.errors import ElanusError
from elanus.flight.ddqueue import DdQueue
from elanus.flight.metacache import CollectionInfo, MetaCache

COORD_TIMEOUT_S = 30.0
HEALTH_TIMEOUT_S = 3.0


class DdlService:
    def __init__(self, bus: Bus, cache: MetaCache, node_id: str) -> None:
        self.bus = bus
        self.cache = cache
        self.node_id = node_id
        self.started_at = time.time()
        self.queue = DdQueue(self.alloc_ts)
        self.supervisor: Supervisor | None = None

    async def start(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        await self.queue.start(supervisor)

    async def stop(self) -> None:
        await self.queue.stop()

    # -- coord access -----------------------------------------------------------------------
    async def coord(
        self, method: str, body: dict[str, Any], timeout: float = COORD_TIMEOUT_S
    ) -> Any:
        return await self.bus.request(subjects.coord(method), body, timeout=timeout)

    async def alloc_ts(self) -> int:
        return int((await self.coord("tso.alloc", {"count": 1}))["ts"])

    async def collection(self, db: str, name: str) -> CollectionInfo:
        """Name -> collection meta, from the cache or the coord (raises COLLECTION_NOT_FOUND)."""
        return await self.cache.fetch(
            db, name, lambda: self.coord("collection.describe", {"db": db, "name": name})
        )

    # -- executors --------------------------------------------------------------------------
    async def passthrough(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.coord(method, request) or {})

    async def apply(self, method: str, request: dict[str, Any], ts: int) -> dict[str, Any]:
        """A DDL the coord executes as is, at the DdQueue task's timestamp; the proxy then
        drops what it cached about the target."""
        try:
            return dict(await self.coord(method, {**request, "ts": ts}) or {})
        finally:
            self._forget(request)

    def _forget(self, request: dict[str, Any]) -> None:
        """Drop what this proxy cached about a DDL's target without waiting for the broadcast."""
        named = [request[k] for k in ("alias", "collection") if k in request]
        if named:  # alias or partition DDL: the alias's key, the collection's entries
            for name in named:
                self.cache.invalidate(request["db"], name)
        elif "db" not in request:  # database DDL: everything cached in that database
            self.cache.invalidate(request["name"])
        else:
            self.cache.invalidate(request["db"], request["name"])
            if "new_name" in request:
                self.cache.invalidate(request["new_db"], request["new_name"])

    async def create_collection(self, request: dict[str, Any], ts: int) -> dict[str, Any]:
        generation = self.cache.generation
        described = await self.coord("collection.create", {**request, "ts": ts})
        self.cache.put(CollectionInfo.from_describe(described), generation)
        return dict(described)

    async def describe_collection(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["name"])
        return dict(info.described)

    async def has_collection(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.cache.get(request["db"], request["name"]) is not None:
            return {"value": True}
        return dict(await self.coord("collection.has", request))

    async def has_partition(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["collection"])
        return {"value": request["name"] in info.partitions}

    async def list_partitions(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["collection"])
        partitions = list(info.described.get("partitions", []))
        return {"names": [p["name"] for p in partitions], "partitions": partitions}

    async def health(self) -> dict[str, Any]:
        proxy = {
            "node_id": self.node_id,
            "uptime_s": round(time.time() - self.started_at, 3),
            "ddl_pending": self.queue.pending(),
            "ddl_executed": self.queue.executed,
            "cached_collections": len(self.cache),
            "version": elanus.__version__,
        }
        if self.supervisor is not None:
            proxy["health"] = self.supervisor.health()
        healthy = self.supervisor is None or self.supervisor.healthy
        try:
            coord = await self.coord("health", {}, timeout=HEALTH_TIMEOUT_S)
        except ElanusError as exc:
            return {
                "status": "degraded",
                "proxy": proxy,
                "coord": {"status": "unavailable", "error": exc.to_dict()},
            }
        status = "ok" if healthy and (coord or {}).get("status") == "ok" else "degraded"
        return {"status": status, "proxy": proxy, "coord": coord}
