"""The root's side that other coord services use: catalog reads and proxy notices.

Split from ``RootCoord`` (which does DDL and so needs the data, index and query
services) so that those services can read collections and tell proxies without a
reference back to the root: ``CollectionLookup`` and ``ProxyNotices`` in
meta/interfaces.py.
"""

from __future__ import annotations

import logging
from typing import Any

from elanus.channels import subjects
from elanus.errors import ElanusError
from elanus.meta.catalog import Catalog
from elanus.meta.context import CoordContext

log = logging.getLogger(__name__)
INVALIDATE_WAIT_S = 2.0


class CatalogLookup:
    """Reads of the collections in the catalog (``CollectionLookup``)."""

    def __init__(self, ctx: CoordContext) -> None:
        self.ctx = ctx

    def catalog(self, con: Any) -> Catalog:
        return Catalog(con, self.ctx.ids.alloc, self.ctx.settings.num_pchannels)

    async def read(self, fn: Any, *args: Any) -> Any:
        return await self.ctx.db.run(lambda con: fn(self.catalog(con), *args))

    async def describe_by_id(self, collection_id: int) -> dict[str, Any]:
        return await self.read(Catalog.describe_by_id, collection_id)

    async def collection_label(self, collection_id: int) -> str:
        """How an error names a collection to users: by its name (they never see ids);
        by id only if it is gone from the catalog."""
        try:
            return repr((await self.describe_by_id(collection_id))["name"])
        except ElanusError:
            return f"id {collection_id}"

    async def live_vchannels(self) -> dict[str, int]:
        """vchannel -> collection id, of every collection not dropped."""
        rows = await self.ctx.db.run(
            lambda con: con.execute(
                "SELECT v.vchannel, v.collection_id FROM vchannels v JOIN collections c "
                "USING (collection_id) WHERE c.dropped_ts IS NULL"
            ).fetchall()
        )
        return {r[0]: int(r[1]) for r in rows}


class ProxyNotifier:
    """Meta invalidations to every live proxy (``ProxyNotices``)."""

    def __init__(self, ctx: CoordContext) -> None:
        self.ctx = ctx

    async def invalidate(self, kind: str, db: str, name: str, collection_id: int, ts: int) -> None:
        """Tell every proxy to drop its cached meta of a collection, and wait (briefly)
        until each live one said it did, as Milvus's root coord expires proxy caches
        before a DDL returns: a client that goes to another proxy next never sees the
        old meta."""
        payload = {"kind": kind, "db": db, "name": name, "collection_id": collection_id, "ts": ts}
        await self.broadcast(payload)

    async def broadcast(self, payload: dict[str, Any]) -> None:
        """Publish a meta invalidation and wait (briefly) for every live proxy's ack."""
        await self.ctx.sessions.poll()
        expected = len(self.ctx.sessions.of_role("proxy"))
        bus = self.ctx.bus
        acks = await bus.scatter(subjects.META_INVALIDATE, payload, expected, INVALIDATE_WAIT_S)
        if len(acks) < expected:
            log.warning("not every proxy acknowledged the %s invalidation", payload.get("kind"))
