"""The proxy's catalog service: DDL through the DdQueue, reads through the MetaCache.

The executors of ``flight/ddl_actions.py``. Runs on the proxy's asyncio loop and reaches
the coord only through its typed stubs (``elanus/api/coord.py``). The coord re-checks
everything dynamically (exists / does not exist) and its ElanusErrors pass through unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import elanus
from elanus.api.base import as_body
from elanus.api.coord import CoordAPI, GetHealth
from elanus.api.rootcoord import (
    CreateCollection,
    DescribeCollection,
    HasCollection,
    RootCoordAPI,
    TsoAlloc,
)
from elanus.channels.bus import Bus
from elanus.channels.runtime.supervisor import Supervisor
from elanus.errors import ElanusError
from elanus.flight.ddqueue import DdQueue
from elanus.flight.metacache import CollectionInfo, MetaCache
from elanus.ops import collections as ops

COORD_TIMEOUT_S = 30.0
HEALTH_TIMEOUT_S = 3.0
R = TypeVar("R")
RootCall = Callable[[RootCoordAPI, R], Awaitable[Any]]
"""One of the root coord stub's methods, unbound: ``RootCoordAPI.drop_collection``."""


class DdlService:
    def __init__(self, bus: Bus, cache: MetaCache, node_id: str) -> None:
        self.api = CoordAPI(bus, COORD_TIMEOUT_S)
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
    async def alloc_ts(self) -> int:
        return (await self.api.root.alloc_ts(TsoAlloc())).ts

    async def collection(self, db: str, name: str) -> CollectionInfo:
        """Name -> collection meta, from the cache or the coord (raises COLLECTION_NOT_FOUND)."""
        return await self.cache.fetch(
            db,
            name,
            lambda: self.api.root.describe_collection(DescribeCollection(db=db, name=name)),
        )

    # -- executors --------------------------------------------------------------------------
    async def send(self, call: RootCall[R], req: R) -> Any:
        """A typed request to the root coord; the reply's JSON."""
        return as_body(await call(self.api.root, req))

    async def apply_to(self, call: RootCall[R], req: R, db: str, *names: str) -> Any:
        """A DDL the coord executes as is (``req`` carries the DdQueue task's timestamp);
        the proxy then drops what it cached under ``names`` in ``db``."""
        try:
            return await self.send(call, req)
        finally:
            self.forget(db, *names)

    def forget(self, db: str, *names: str) -> None:
        """Drop what this proxy cached under ``names`` in ``db`` without waiting for the
        coord's broadcast."""
        for name in names:
            self.cache.invalidate(db, name)

    async def create_collection(self, request: ops.CreateCollection, ts: int) -> dict[str, Any]:
        generation = self.cache.generation
        created = request.created
        req = CreateCollection(
            db=request.db,
            name=request.name,
            schema=created.schema.to_dict(),
            num_shards=request.num_shards,
            consistency_level=created.consistency_level,
            properties=created.properties,
            description=request.description,
            num_partitions=created.num_partitions,
            ts=ts,
        )
        described = await self.api.root.create_collection(req)
        self.cache.put(CollectionInfo.from_describe(described), generation)
        return dict(as_body(described))

    async def describe_collection(self, db: str, name: str) -> dict[str, Any]:
        info = await self.collection(db, name)
        return dict(as_body(info.described))

    async def has_collection(self, db: str, name: str) -> dict[str, Any]:
        if self.cache.get(db, name) is not None:
            return {"value": True}
        flag = await self.api.root.has_collection(HasCollection(db=db, name=name))
        return dict(as_body(flag))

    async def has_partition(self, db: str, collection: str, partition: str) -> dict[str, Any]:
        info = await self.collection(db, collection)
        return {"value": partition in info.partitions}

    async def list_partitions(self, db: str, collection: str) -> dict[str, Any]:
        info = await self.collection(db, collection)
        partitions = as_body(info.described.partitions)
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
            coord = await self.api.health(GetHealth(), timeout=HEALTH_TIMEOUT_S)
        except ElanusError as exc:
            return {
                "status": "degraded",
                "proxy": proxy,
                "coord": {"status": "unavailable", "error": exc.to_dict()},
            }
        status = "ok" if healthy and coord.status == "ok" else "degraded"
        return {"status": status, "proxy": proxy, "coord": as_body(coord)}
