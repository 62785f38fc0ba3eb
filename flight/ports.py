"""What the proxy's services are given instead of the proxy: narrow interfaces, wired once
in ``ProxyServer.__init__`` (``flight/proxy.py``), as ``meta/interfaces.py`` does for the coord.

A converted service takes, in its constructor, only the few things it uses: the loop
bridge (Flight threads reach the asyncio side through it), the coord's typed client
(``elanus.api.coord.CoordAPI``, passed as is), the bus, the settings and the protocols
below, each named after what it is. It never holds the proxy, and its module never imports
``elanus.flight.proxy`` (``tests/test_layout_rules.py`` checks the converted ones), so the
proxy's module depends on its services and never the other way round.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from elanus.api.datacoord import Flushing
    from elanus.flight.auth import Caller
    from elanus.flight.metacache import CollectionInfo

T = TypeVar("T")


class LoopBridge(Protocol):
    """The proxy's asyncio loop, seen from a Flight (or Milvus handler) thread."""

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = ...) -> T:
        """Run ``coro`` on the loop and wait for its result (its error raised here)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` on the loop without waiting for it."""
        ...


class CollectionLookup(Protocol):
    """A collection's description by name, from the meta cache or the coord, and its
    partitions' ids (``DmlService``)."""

    def collection(self, db: str, name: str) -> CollectionInfo: ...

    def partition_id(
        self, info: CollectionInfo, partition: str | None, doing: str = ...
    ) -> int: ...


class CollectionLoader(Protocol):
    """A collection's description by name, on the loop: from the cache, else the coord
    (``DdlService``)."""

    async def collection(self, db: str, name: str) -> CollectionInfo: ...


class ActionRunner(Protocol):
    """DoAction as a caller would send it: checked, authorised, executed
    (``actions.perform``); for a service that composes actions (a snapshot's restore)."""

    def perform_op(self, op: Any, caller: Caller) -> Any:
        """The action of operation record ``op`` (``actions.perform_op``)."""


class ReadGate(Protocol):
    """A database's gates on reads and loads (``DatabaseGate``)."""

    def read_collection(self, db: str, name: str) -> CollectionInfo:
        """The collection, unless its database denies reading."""
        ...

    def replica_number(self, db: str, given: int | None) -> int: ...


class TsoClock(Protocol):
    """The coord's timestamp oracle, through the proxy's DDL client (``DdlService``)."""

    async def alloc_ts(self) -> int: ...


class IdSource(Protocol):
    """The proxy's cache of primary-key ids from the coord (``dml.IdCache``)."""

    async def take(self, n: int) -> int:
        """The first of ``n`` consecutive fresh ids."""
        ...


class Flusher(Protocol):
    """A collection's flush, queued with the DDL (``DmlService``)."""

    async def flush(self, info: CollectionInfo) -> Flushing: ...


class RouteCache(Protocol):
    """The read side's cached routes (``QueryService``): a load or release drops its
    collection's, so the next read asks the coord again."""

    def forget_route(self, collection_id: int) -> None: ...


class CacheGeneration(Protocol):
    """How many times the meta cache was invalidated (``MetaCache``): a result computed
    from a description is kept only while this is unchanged."""

    @property
    def generation(self) -> int: ...
