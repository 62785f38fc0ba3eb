"""The proxy's gates of a database's properties (``elanus.dbproperties``): a write in a
database with ``database.force.deny.writing`` and a read in one with
``database.force.deny.reading`` are refused before anything is done, as Milvus's quota
center denies them (its code 9); a load that names no replica number takes the database's
``database.replica.number``. The properties come from the coord once and stay in the
MetaCache until a database change drops them (every proxy, before the change answers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elanus.api.rootcoord import DescribeDatabase
from elanus.dbproperties import DENY_READING, DENY_WRITING, denies, force_denied, replica_number
from elanus.flight.metacache import CollectionInfo

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.flight.flowcontrol import FlowControl
    from elanus.flight.metacache import MetaCache
    from elanus.flight.ports import CollectionLookup, LoopBridge


class DatabaseGate:
    """Given what it uses (``flight/ports.py``), never the proxy."""

    def __init__(
        self,
        *,
        loop: LoopBridge,
        coord: CoordAPI,
        cache: MetaCache,
        flow: FlowControl,
        collections: CollectionLookup,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.cache = cache
        self.flow = flow
        self.collections = collections

    async def properties_async(self, db: str) -> dict[str, str]:
        """``db``'s properties, on the loop (DATABASE_NOT_FOUND for none such)."""

        async def load() -> dict[str, str]:
            described = await self.coord.root.describe_database(DescribeDatabase(name=db))
            return dict(described.properties)

        return await self.cache.database_properties(db, load)

    def properties(self, db: str) -> dict[str, str]:
        """``db``'s properties, from a Flight or Milvus handler thread."""
        cached = self.cache.cached_database_properties(db)
        if cached is not None:  # no hop to the loop when it is cached
            return cached
        return self.loop.run(self.properties_async(db))

    def admit_write(self, info: CollectionInfo, what: str) -> None:
        """A write's gates, before a byte of it is written: the database's deny flag, then
        flow control (``FlowControl.admit``)."""
        self.check_writable(info.db)
        self.flow.admit(info.vchannels, what)

    def check_writable(self, db: str) -> None:
        if denies(self.properties(db), DENY_WRITING):
            raise force_denied(db, DENY_WRITING)

    def read_collection(self, db: str, name: str) -> CollectionInfo:
        """The collection a search or query reads, unless its database denies reading."""
        info = self.collections.collection(db, name)
        if denies(self.properties(info.db), DENY_READING):
            raise force_denied(info.db, DENY_READING)
        return info

    def replica_number(self, db: str, given: int | None) -> int:
        """A load's replica number: the one it names, else the database's, else 1."""
        if given is not None:
            return given
        return replica_number(self.properties(db)) or 1
