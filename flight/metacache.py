"""The proxy's globalMetaCache (seed 000 §6.6.4): collection name -> id, schema, partitions.

Filled from the coord on a miss; entries are dropped when the coord broadcasts a meta
invalidation (``elanus.meta.invalidate``) so the next request sees the new meta. Thread-safe:
asyncio handlers and Flight handler threads both read it.

An alias is cached as a second key of its collection's entry: ``get(db, alias)`` answers
with the collection's meta (whose ``name`` is the collection's own), so every data call
that looks a collection up here accepts an alias. The coord's invalidation of an alias
change names the alias and the collection it named, which drops both.

A load that races with an invalidation must not put stale meta back: every invalidation
bumps a generation counter, and a load only stores its result if the generation it started
under is still current.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from elanus.api.metanotice import MetaInvalidation
from elanus.api.rootcoord import CollectionDescription
from elanus.properties import ttl_ms
from elanus.schema import Schema
from elanus.wire.codec import DEFAULT_DB


@dataclass(frozen=True)
class CollectionInfo:
    """What the proxy needs to translate a collection name into ids and channels."""

    db: str
    name: str
    collection_id: int
    schema: Schema
    partitions: dict[str, int]
    vchannels: tuple[str, ...]
    pchannels: tuple[str, ...]
    consistency_level: str
    created_ts: int
    described: CollectionDescription = field(repr=False, compare=False)
    """The coord's ``collection.describe`` answer, returned as is by describe_collection."""

    @classmethod
    def from_describe(cls, d: CollectionDescription) -> CollectionInfo:
        return cls(
            db=d.db,
            name=d.name,
            collection_id=d.collection_id,
            schema=Schema.from_dict(d.schema),
            partitions={p.name: p.partition_id for p in d.partitions},
            vchannels=tuple(d.vchannels),
            pchannels=tuple(d.pchannels),
            consistency_level=d.consistency_level,
            created_ts=d.created_ts,
            described=d,
        )

    def partition_id(self, name: str) -> int | None:
        return self.partitions.get(name)

    @property
    def ttl(self) -> int:
        """The collection's TTL in ms (0: none), which every read carries to the segments
        (``collection.ttl.seconds``; an alter invalidates this entry, so the next read
        sees the new one)."""
        return ttl_ms(self.described.properties)


Loader = Callable[[], Awaitable[CollectionDescription]]
DbLoader = Callable[[], Awaitable[dict[str, str]]]


class MetaCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[tuple[str, str], CollectionInfo] = {}
        self._db_props: dict[str, dict[str, str]] = {}
        """A database's properties (``elanus.dbproperties``), dropped with its entries."""
        self._generation = 0
        self.hits = 0
        self.misses = 0

    @property
    def generation(self) -> int:
        return self._generation  # one attribute read: atomic, no lock needed

    def __len__(self) -> int:
        """Collections cached (an alias's second key is not one more)."""
        with self._lock:
            return len({i.collection_id for i in self._by_name.values()})

    def get(self, db: str, name: str) -> CollectionInfo | None:
        with self._lock:
            info = self._by_name.get((db, name))
            if info is None:
                self.misses += 1
            else:
                self.hits += 1
            return info

    def get_by_id(self, collection_id: int) -> CollectionInfo | None:
        with self._lock:
            return next(
                (i for i in self._by_name.values() if i.collection_id == collection_id), None
            )

    def put(
        self, info: CollectionInfo, generation: int | None = None, alias: str | None = None
    ) -> bool:
        """Store ``info`` (also under ``alias``, the name it was asked for by) unless an
        invalidation happened since ``generation`` was read."""
        with self._lock:
            if generation is not None and generation != self._generation:
                return False
            self._by_name[(info.db, info.name)] = info
            if alias is not None and alias != info.name:
                self._by_name[(info.db, alias)] = info
            return True

    async def fetch(self, db: str, name: str, loader: Loader) -> CollectionInfo:
        """The cached entry, or ``loader()``'s describe answer (cached if still current)."""
        info = self.get(db, name)
        if info is not None:
            return info
        generation = self.generation
        info = CollectionInfo.from_describe(await loader())
        self.put(info, generation, alias=name)
        return info

    def cached_database_properties(self, db: str) -> dict[str, str] | None:
        with self._lock:
            return self._db_props.get(db)

    async def database_properties(self, db: str, loader: DbLoader) -> dict[str, str]:
        """The cached properties of ``db``, or ``loader()``'s (cached if still current)."""
        with self._lock:
            cached = self._db_props.get(db)
        if cached is not None:
            return cached
        generation = self.generation
        props = await loader()
        with self._lock:
            if generation == self._generation:
                self._db_props[db] = props
        return props

    def invalidate(
        self, db: str | None = None, name: str | None = None, collection_id: int | None = None
    ) -> int:
        """Drop entries by name and/or id; with neither, every entry of ``db`` (or all),
        and its properties."""
        with self._lock:
            self._generation += 1
            if name is None and collection_id is None:
                for stale in [k for k in self._db_props if db is None or k == db]:
                    del self._db_props[stale]
                doomed = [k for k in self._by_name if db is None or k[0] == db]
            else:
                doomed = [
                    k
                    for k, i in self._by_name.items()
                    if (name is not None and k == (db or DEFAULT_DB, name))
                    or (collection_id is not None and i.collection_id == collection_id)
                ]
            for key in doomed:
                del self._by_name[key]
            return len(doomed)

    def on_invalidate(self, msg: MetaInvalidation) -> int:
        """Apply one ``elanus.meta.invalidate`` broadcast from the coord."""
        db = msg.get("db") or None
        if str(msg.get("kind", "")).startswith("database"):
            return self.invalidate(db=db)
        name = msg.get("name") or None
        cid = msg.get("collection_id")
        return self.invalidate(
            db=db, name=name, collection_id=int(cid) if cid is not None else None
        )

    def clear(self) -> None:
        self.invalidate()
