"""Execution of the checked DoActions: DDL through the DdQueue, reads through the MetaCache.

Runs on the proxy's asyncio loop and reaches the coord only by NATS request/reply. The
coord re-checks everything dynamically (exists / does not exist) and its ElanusErrors pass
through unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.supervisor import Supervisor
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.ddqueue import DdQueue
from elanus.flight.metacache import CollectionInfo, MetaCache

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

COORD_TIMEOUT_S = 30.0
HEALTH_TIMEOUT_S = 3.0

_DDL_METHODS = {
    "drop_collection": "collection.drop",
    "rename_collection": "collection.rename",
    "create_partition": "partition.create",
    "drop_partition": "partition.drop",
    "create_database": "database.create",
    "drop_database": "database.drop",
}
"""DDL that the coord executes as is; the proxy then drops what it cached about the target."""


class DdlService:
    def __init__(self, bus: Bus, cache: MetaCache, node_id: str) -> None:
        self.bus = bus
        self.cache = cache
        self.node_id = node_id
        self.started_at = time.time()
        self.queue = DdQueue(self.alloc_ts)
        self.supervisor: Supervisor | None = None
        self._handlers: dict[str, Handler] = {
            "create_collection": self._create_collection,
            "has_collection": self._has_collection,
            "describe_collection": self._describe_collection,
            "list_collections": self._passthrough("collection.list"),
            "has_partition": self._has_partition,
            "list_partitions": self._list_partitions,
            "list_databases": self._passthrough("database.list"),
            "list_sessions": self._passthrough("session.list"),
            "health": self._health,
            "get_timestamp": self._passthrough("tso.alloc"),
        }
        for action, method in _DDL_METHODS.items():
            self._handlers[action] = self._queued(action, method)

    async def start(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        await self.queue.start(supervisor)

    async def stop(self) -> None:
        await self.queue.stop()

    async def execute(self, action: str, request: dict[str, Any]) -> dict[str, Any]:
        """Run one statically checked action (see ``actions.check_request``)."""
        handler = self._handlers.get(action)
        if handler is None:
            raise ElanusError(ErrorCode.UNKNOWN_ACTION, f"action {action!r} has no handler")
        return await handler(request)

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

    # -- handlers ---------------------------------------------------------------------------
    def _passthrough(self, method: str) -> Handler:
        async def run(request: dict[str, Any]) -> dict[str, Any]:
            return dict(await self.coord(method, request) or {})

        return run

    def _queued(self, action: str, method: str) -> Handler:
        async def run(request: dict[str, Any]) -> dict[str, Any]:
            async def task(ts: int) -> Any:
                try:
                    return await self.coord(method, {**request, "ts": ts})
                finally:
                    self._forget(request)

            return dict(await self.queue.submit(action, task) or {})

        return run

    def _forget(self, request: dict[str, Any]) -> None:
        """Drop what this proxy cached about a DDL's target without waiting for the broadcast."""
        if "collection" in request:  # partition DDL
            self.cache.invalidate(request["db"], request["collection"])
        elif "db" not in request:  # database DDL: everything cached in that database
            self.cache.invalidate(request["name"])
        else:
            self.cache.invalidate(request["db"], request["name"])
            if "new_name" in request:
                self.cache.invalidate(request["new_db"], request["new_name"])

    async def _create_collection(self, request: dict[str, Any]) -> dict[str, Any]:
        async def task(ts: int) -> dict[str, Any]:
            generation = self.cache.generation
            described = await self.coord("collection.create", {**request, "ts": ts})
            self.cache.put(CollectionInfo.from_describe(described), generation)
            return dict(described)

        return await self.queue.submit("create_collection", task)

    async def _describe_collection(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["name"])
        return dict(info.described)

    async def _has_collection(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.cache.get(request["db"], request["name"]) is not None:
            return {"value": True}
        return dict(await self.coord("collection.has", request))

    async def _has_partition(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["collection"])
        return {"value": request["name"] in info.partitions}

    async def _list_partitions(self, request: dict[str, Any]) -> dict[str, Any]:
        info = await self.collection(request["db"], request["collection"])
        partitions = list(info.described.get("partitions", []))
        return {"names": [p["name"] for p in partitions], "partitions": partitions}

    async def _health(self, request: dict[str, Any]) -> dict[str, Any]:
        proxy = {
            "node_id": self.node_id,
            "uptime_s": round(time.time() - self.started_at, 3),
            "ddl_pending": self.queue.pending(),
            "ddl_executed": self.queue.executed,
            "cached_collections": len(self.cache),
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
