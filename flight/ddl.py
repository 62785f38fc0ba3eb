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
    CollectionDescription,
    CreateCollection,
    DescribeCollection,
    Flag,
    HasCollection,
    PartitionInfo,
    RootCoordAPI,
    TsoAlloc,
)
from elanus.channels.bus import Bus
from elanus.channels.runtime.supervisor import Supervisor
from elanus.errors import ElanusError
from elanus.flight.ddqueue import DdQueue
from elanus.flight.metacache import CollectionInfo, MetaCache
from elanus.ops import collections as ops
from elanus.ops import reply
from elanus.ops.replies import CoordUnavailable, Health, ProxyHealth

COORD_TIMEOUT_S = 30.0
HEALTH_TIMEOUT_S = 3.0
R = TypeVar("R")
P = TypeVar("P")
RootCall = Callable[[RootCoordAPI, R], Awaitable[Any]]
"""One of the root coord stub's methods, unbound: ``RootCoordAPI.drop_collection``."""


@reply
class PartitionList:
    """``list_partitions``'s reply: the names, and each partition as the catalog holds it."""

    names: list[str]
    partitions: list[PartitionInfo]


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
    async def send(self, call: Callable[[RootCoordAPI, R], Awaitable[P]], req: R) -> P:
        """A typed request to the root coord; its reply record, the action's reply."""
        return await call(self.api.root, req)

    async def apply_to(
        self, call: Callable[[RootCoordAPI, R], Awaitable[P]], req: R, db: str, *names: str
    ) -> P:
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

    async def create_collection(
        self, request: ops.CreateCollection, ts: int
    ) -> CollectionDescription:
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
        return described

    async def describe_collection(self, db: str, name: str) -> CollectionDescription:
        info = await self.collection(db, name)
        return info.described

    async def has_collection(self, db: str, name: str) -> Flag:
        if self.cache.get(db, name) is not None:
            return Flag(value=True)
        return await self.api.root.has_collection(HasCollection(db=db, name=name))

    async def has_partition(self, db: str, collection: str, partition: str) -> Flag:
        info = await self.collection(db, collection)
        return Flag(value=partition in info.partitions)

    async def list_partitions(self, db: str, collection: str) -> PartitionList:
        partitions = (await self.collection(db, collection)).described.partitions
        return PartitionList(names=[p.name for p in partitions], partitions=list(partitions))

    async def health(self) -> Health:
        proxy: ProxyHealth = {
            "node_id": self.node_id,
            "uptime_s": round(time.time() - self.started_at, 3),
            "ddl_pending": self.queue.pending(),
            "ddl_executed": self.queue.executed,
            "cached_collections": len(self.cache),
            "version": elanus.__version__,
        }
        if self.supervisor is not None:
            report = self.supervisor.health()  # its keys, as SupervisorHealth types them
            proxy["health"] = {
                "status": report["status"],
                "failures": report["failures"],
                "restarts": report["restarts"],
            }
        healthy = self.supervisor is None or self.supervisor.healthy
        try:
            coord = await self.api.health(GetHealth(), timeout=HEALTH_TIMEOUT_S)
        except ElanusError as exc:
            unavailable: CoordUnavailable = {"status": "unavailable", "error": exc.to_dict()}
            return {"status": "degraded", "proxy": proxy, "coord": unavailable}
        status = "ok" if healthy and coord.status == "ok" else "degraded"
        return {"status": status, "proxy": proxy, "coord": as_body(coord)}
