"""Load, release, load state and replicas of a collection: the proxy's side of QueryCoord's
load calls (the ``load_collection`` family of ``query_actions``).

The proxy names the collection and its partitions by id, takes the replica number the
database sets when the request names none, and drops its cached route of the collection
before a load or release, so the next read asks the coord where the collection now is.
Given what it uses (``flight/ports.py``), never the proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elanus.api.base import Ack
from elanus.api.querycoord import (
    GetReplicas,
    LoadCollection,
    LoadProgress,
    LoadState,
    ReleaseCollection,
    Replicas,
)

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.flight.ports import CollectionLookup, LoopBridge, ReadGate, RouteCache


class LoadService:
    def __init__(
        self,
        *,
        loop: LoopBridge,
        coord: CoordAPI,
        collections: CollectionLookup,
        gate: ReadGate,
        routes: RouteCache,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.collections = collections
        self.gate = gate
        self.routes = routes

    def load(
        self, db: str, collection: str, partition_names: list[str] | None, replica: int | None
    ) -> LoadProgress:
        """A checked ``load_collection``: the load's state once the coord took it. No
        partition names (``None`` or none): the whole collection; no replica number: the
        database's."""
        info = self.collections.collection(db, collection)
        self.routes.forget_route(info.collection_id)
        partitions = (
            [self.collections.partition_id(info, n, "a load") for n in partition_names]
            if partition_names
            else None
        )
        req = LoadCollection(
            collection_id=info.collection_id,
            partition_ids=partitions,
            replica_number=self.gate.replica_number(info.db, replica),
        )
        return self.loop.run(self.coord.query.load(req))

    def release(self, db: str, collection: str) -> Ack:
        info = self.collections.collection(db, collection)
        self.routes.forget_route(info.collection_id)
        req = ReleaseCollection(collection_id=info.collection_id)
        return self.loop.run(self.coord.query.release(req))

    def state(self, db: str, collection: str) -> LoadProgress:
        info = self.collections.collection(db, collection)
        req = LoadState(collection_id=info.collection_id)
        return self.loop.run(self.coord.query.state(req))

    def replicas(self, db: str, collection: str) -> Replicas:
        info = self.collections.collection(db, collection)
        req = GetReplicas(collection_id=info.collection_id)
        return self.loop.run(self.coord.query.replicas(req))
