"""Opening the coord's catalog: the DuckDB file, rebuilt from the journal when there is
one (``meta/journal.py``), its counters (TSO bound, ID high-water) and the snapshots.

A catalog rebuilt from the journal may lack the latest counter write (those are queued,
not waited for: the TSO and the ID allocator persist from the event loop), so both start a
margin above what it holds: one TSO window (a bound is at most one window above the one
before it) and ``ID_MARGIN`` IDs (a block plus the largest single allocation, a bulk
insert's auto IDs, with room to spare).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from elanus.channels.bus import Bus
from elanus.channels.runtime.supervisor import Supervisor
from elanus.meta.counters import ID_HIGH_WATER, TSO_BOUND, CounterStore
from elanus.meta.db import Database
from elanus.meta.idalloc import IDAllocator
from elanus.meta.journal import CatalogJournal
from elanus.meta.tso import TimestampOracle
from elanus.settings import Settings

log = logging.getLogger(__name__)

TSO_WINDOW_MS = 3000
ID_BLOCK = 100_000
ID_MARGIN = 1 << 24


class CatalogStore:
    def __init__(
        self,
        settings: Settings,
        bus: Bus,
        supervisor: Supervisor,
        on_fenced: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings, self.bus, self.supervisor = settings, bus, supervisor
        self.on_fenced = on_fenced
        """What the coord does when another coord wrote the journal (it stops)."""
        self.journal: CatalogJournal | None = None
        self.db: Database | None = None
        self.counters: CounterStore | None = None
        self.rebuilt = False

    async def open(self) -> Database:
        s = self.settings
        fresh = not s.catalog_path.exists()
        if s.catalog_journal:
            journal = self.journal = CatalogJournal(
                self.bus, s.storage_uri, s.stream_replicas, s.log_retry_window_s
            )
            journal.on_fenced = self.on_fenced
            await journal.open()
            self.rebuilt = await journal.rebuild(s.catalog_path)
        db = await asyncio.to_thread(Database, s.catalog_path, self.journal)
        self.db = db
        self.counters = await db.run(CounterStore)
        if self.journal is not None:
            self.journal.snapshot_due = lambda: self.supervisor.spawn(
                "catalog snapshot", self.snapshot
            )
            if not self.rebuilt and not fresh:
                # a catalog from before the journal (or a lost stream): a snapshot holds it
                # all, and the journal goes on from there; a fresh catalog needs none (a
                # rebuild replays every entry onto an empty one)
                await self.snapshot()
        return db

    def tso(self) -> TimestampOracle:
        assert self.counters is not None
        bound = self.counters.get(TSO_BOUND)
        if self.rebuilt and bound is not None:
            bound += TSO_WINDOW_MS
        return TimestampOracle(bound, self.counters.setter(TSO_BOUND), window_ms=TSO_WINDOW_MS)

    def ids(self) -> IDAllocator:
        assert self.counters is not None
        high = self.counters.get(ID_HIGH_WATER)
        if self.rebuilt and high is not None:
            high += ID_MARGIN
        return IDAllocator(high, self.counters.setter(ID_HIGH_WATER), block=ID_BLOCK)

    async def snapshot(self) -> None:
        journal, db = self.journal, self.db
        if journal is None or db is None:
            return
        workdir = self.settings.catalog_path.parent
        where = await asyncio.to_thread(db.raw, journal.snapshot, workdir)
        log.info("catalog snapshot at journal entry %d: %s", journal.last_seq, where)
        await journal.prune()

    async def still_ours(self) -> bool:
        """After the coord's lease lapsed and was taken again: no other coord wrote the
        catalog meanwhile (True without a journal: nothing to compare)."""
        return self.journal is None or await self.journal.still_ours()

    async def close(self) -> None:
        if self.counters is not None and self.db is not None:
            counters, self.counters = self.counters, None
            await self.db.run(lambda con: counters.close())
        if self.journal is not None:
            await self.journal.close()
        if self.db is not None:
            await asyncio.to_thread(self.db.close)
