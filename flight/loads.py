"""Load, release, load state and replicas of a collection: the proxy's side of QueryCoord's
load calls (the ``load_collection`` family of ``query_actions``).

The proxy names the collection and its partitions by id, takes the replica number the
database sets when the request names none, and drops its cached route of the collection
before a load or release, so the next read asks the coord where the collection now is.
Given what it uses (``flight/ports.py``), never the proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elanus.api.base import as_body
from elanus.api.querycoord import GetReplicas, LoadCollection, LoadState, ReleaseCollection

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

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        """A checked ``load_collection`` body: the load's state once the coord took it."""
        info = self.collections.collection(request["db"], request["collection"])
        self.routes.forget_route(info.collection_id)
        names = request["partition_names"]
        partitions = (
            [self.collections.partition_id(info, n, "a load") for n in names] if names else None
        )
        req = LoadCollection(
            collection_id=info.collection_id,
            partition_ids=partitions,
            replica_number=self.gate.replica_number(info.db, request["replica_number"]),
        )
        return self.loop.run(self.coord.query.load(req)).to_body()

    def release(self, request: dict[str, Any]) -> dict[str, Any]:
        info = self.collections.collection(request["db"], request["collection"])
        self.routes.forget_route(info.collection_id)
        req = ReleaseCollection(collection_id=info.collection_id)
        return as_body(self.loop.run(self.coord.query.release(req)))

    def state(self, request: dict[str, Any]) -> dict[str, Any]:
        info = self.collections.collection(request["db"], request["collection"])
        req = LoadState(collection_id=info.collection_id)
        return self.loop.run(self.coord.query.state(req)).to_body()

    def replicas(self, request: dict[str, Any]) -> dict[str, Any]:
        info = self.collections.collection(request["db"], request["collection"])
        req = GetReplicas(collection_id=info.collection_id)
        return as_body(self.loop.run(self.coord.query.replicas(req)))
