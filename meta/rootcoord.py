"""Root coordination: TSO, IDs and DDL (seed 000 §6.1, seed 003).

DDL runs one request at a time (an asyncio lock in front of the single database thread),
each stamped with a TSO timestamp, and every change is broadcast so proxies drop their
cached meta before the next request sees it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from elanus.channels import subjects
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, invalid
from elanus.meta.catalog import DEFAULT_DB, Catalog
from elanus.requests import Body
from elanus.schema import MAX_SHARDS, Schema, check_name

if TYPE_CHECKING:
    from elanus.channels.bus import Handler
    from elanus.meta.coord import Coordinator


log = logging.getLogger(__name__)
INVALIDATE_WAIT_S = 2.0


class RootCoord:
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self._ddl_lock = asyncio.Lock()

    def handlers(self) -> dict[str, Handler]:
        return {
            "tso.alloc": self.tso_alloc,
            "id.alloc": self.id_alloc,
            "database.create": self.create_database,
            "database.drop": self.drop_database,
            "database.list": self.list_databases,
            "collection.create": self.create_collection,
            "collection.drop": self.drop_collection,
            "collection.has": self.has_collection,
            "collection.describe": self.describe_collection,
            "collection.list": self.list_collections,
            "collection.rename": self.rename_collection,
            "partition.create": self.create_partition,
            "partition.drop": self.drop_partition,
            "partition.has": self.has_partition,
            "partition.list": self.list_partitions,
        }

    # -- helpers ----------------------------------------------------------------------------
    async def _read(self, fn: Any, *args: Any) -> Any:
        return await self.coord.db.run(lambda con: fn(self._catalog(con), *args))

    async def _ddl(self, body: Body, fn: Any, *args: Any) -> tuple[Any, int]:
        """Run one DDL change under the DDL lock, stamped with the request's timestamp."""
        ts = body.int("ts", 0) or self.coord.tso.alloc()
        body.done()
        async with self._ddl_lock:
            result = await self.coord.db.run(lambda con: fn(self._catalog(con), *args, ts))
        return result, ts

    def _catalog(self, con: Any) -> Catalog:
        return Catalog(con, self.coord.ids.alloc, self.coord.settings.num_pchannels)

    async def _invalidate(self, kind: str, db: str, name: str, collection_id: int, ts: int) -> None:
        """Tell every proxy to drop its cached meta, and wait (briefly) until each live one
        said it did, as Milvus's root coord expires proxy caches before a DDL returns: a
        client that goes to another proxy next never sees the old meta."""
        payload = {"kind": kind, "db": db, "name": name, "collection_id": collection_id, "ts": ts}
        await self.broadcast(payload)

    async def broadcast(self, payload: dict[str, Any]) -> None:
        """Publish a meta invalidation and wait (briefly) for every live proxy's ack."""
        await self.coord.sessions.poll()
        expected = len(self.coord.sessions.of_role("proxy"))
        bus = self.coord.bus
        acks = await bus.scatter(subjects.META_INVALIDATE, payload, expected, INVALIDATE_WAIT_S)
        if len(acks) < expected:
            log.warning("not every proxy acknowledged the %s invalidation", payload.get("kind"))

    async def invalidate_proxies(
        self, kind: str, db: str, name: str, collection_id: int, ts: int
    ) -> None:
        """Drop every proxy's cached meta of a collection (index changes call it too)."""
        await self._invalidate(kind, db, name, collection_id, ts)

    async def describe_by_id(self, collection_id: int) -> dict[str, Any]:
        return await self._read(Catalog.describe_by_id, collection_id)

    async def collection_label(self, collection_id: int) -> str:
        """How an error names a collection to users: by its name (they never see ids);
        by id only if it is gone from the catalog."""
        try:
            return repr((await self.describe_by_id(collection_id))["name"])
        except ElanusError:
            return f"id {collection_id}"

    # -- TSO and IDs ------------------------------------------------------------------------
    async def tso_alloc(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "tso.alloc")
        count = b.int("count", 1, lo=1, hi=1 << 18)
        b.done()
        return {"ts": self.coord.tso.alloc(count), "count": count}

    async def id_alloc(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "id.alloc")
        count = b.int("count", 1, lo=1, hi=10_000_000)
        b.done()
        return {"start": self.coord.ids.alloc(count), "count": count}

    # -- databases --------------------------------------------------------------------------
    async def create_database(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "database.create")
        name = check_name(b.str("name"), "database")
        db_id, _ = await self._ddl(b, Catalog.create_database, name)
        return {"db_id": db_id}

    async def drop_database(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "database.drop")
        name = b.str("name")
        await self._ddl(b, Catalog.drop_database, name)
        return {}

    async def list_databases(self, raw: dict[str, Any]) -> dict[str, Any]:
        Body(raw, "database.list").done()
        return {"names": await self._read(Catalog.list_databases)}

    # -- collections ------------------------------------------------------------------------
    async def create_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.create")
        db = b.str("db", DEFAULT_DB)
        name = check_name(b.str("name"), "collection")
        schema = Schema.from_dict(b.dict("schema"))
        schema.validate()
        num_shards = b.int("num_shards", 1, lo=1, hi=MAX_SHARDS)
        try:
            level = ConsistencyLevel.parse(b.str("consistency_level", "Bounded"))
        except ValueError as exc:
            raise invalid(str(exc)) from None
        properties = b.dict("properties", {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
            raise invalid("collection.create: 'properties' must map strings to strings")
        description = b.str("description", "")

        def create(cat: Catalog, ts: int) -> dict[str, Any]:
            return cat.create_collection(
                db,
                name,
                schema,
                num_shards=num_shards,
                consistency_level=level.value,
                properties=properties,
                description=description,
                ts=ts,
            )

        info, ts = await self._ddl(b, create)
        await self._invalidate("collection.create", db, name, info["collection_id"], ts)
        await self.coord.on_collections_changed()
        return info

    async def drop_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.drop")
        db, name = b.str("db", DEFAULT_DB), b.str("name")
        cid, ts = await self._ddl(b, Catalog.drop_collection, db, name)
        await self._invalidate("collection.drop", db, name, cid, ts)
        await self.coord.query.release_collection(cid)
        await self.coord.data.drop_collection(cid, ts)
        await self.coord.index.drop_collection(cid)
        await self.coord.on_collections_changed()
        return {"collection_id": cid}

    async def has_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.has")
        db, name = b.str("db", DEFAULT_DB), b.str("name")
        b.done()
        return {"value": await self._read(Catalog.has_collection, db, name)}

    async def describe_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.describe")
        db = b.str("db", DEFAULT_DB)
        cid = b.int("collection_id", None)
        name = b.str("name", None)
        b.done()
        if cid is not None:
            return await self._read(Catalog.describe_by_id, cid)
        if name is None:
            raise invalid("collection.describe needs 'name' or 'collection_id'")
        return await self._read(Catalog.describe, db, name)

    async def list_collections(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.list")
        db = b.str("db", DEFAULT_DB)
        b.done()
        return {"names": await self._read(Catalog.list_collections, db)}

    async def rename_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "collection.rename")
        db, name = b.str("db", DEFAULT_DB), b.str("name")
        new_name = check_name(b.str("new_name"), "collection")
        new_db = b.str("new_db", None)

        def rename(cat: Catalog, ts: int) -> int:
            return cat.rename_collection(db, name, new_name, new_db)

        cid, ts = await self._ddl(b, rename)
        await self._invalidate("collection.rename", db, name, cid, ts)
        return {"collection_id": cid}

    # -- partitions -------------------------------------------------------------------------
    async def create_partition(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "partition.create")
        db, coll = b.str("db", DEFAULT_DB), b.str("collection")
        name = check_name(b.str("name"), "partition")
        pid, ts = await self._ddl(b, Catalog.create_partition, db, coll, name)
        cid = await self._read(Catalog.require_collection, db, coll)
        await self._invalidate("partition.create", db, coll, cid, ts)
        return {"partition_id": pid}

    async def drop_partition(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "partition.drop")
        db, coll, name = b.str("db", DEFAULT_DB), b.str("collection"), b.str("name")
        parts = {
            p["name"]: p["partition_id"]
            for p in await self._read(Catalog.list_partitions, db, coll)
        }
        if name in parts and self.coord.query.serves(
            await self._read(Catalog.require_collection, db, coll), parts[name]
        ):
            raise invalid(
                f"partition {name!r} of {coll!r} is loaded: release the collection before "
                "dropping it"
            )
        (cid, pid), ts = await self._ddl(b, Catalog.drop_partition, db, coll, name)
        await self._invalidate("partition.drop", db, coll, cid, ts)
        await self.coord.data.drop_segments(
            lambda s: s.collection_id == cid and s.partition_id == pid, ts
        )
        return {"partition_id": pid}

    async def has_partition(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "partition.has")
        db, coll, name = b.str("db", DEFAULT_DB), b.str("collection"), b.str("name")
        b.done()
        return {"value": await self._read(Catalog.has_partition, db, coll, name)}

    async def list_partitions(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "partition.list")
        db, coll = b.str("db", DEFAULT_DB), b.str("collection")
        b.done()
        return {"partitions": await self._read(Catalog.list_partitions, db, coll)}
