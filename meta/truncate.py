"""Truncating a collection (Milvus 2.6's ``TruncateCollection``): every entity goes, the
schema, indexes, partitions and load state stay, and later writes are read as before.

As Milvus does it with a truncate timestamp: the collection's growing segments are sealed
at a timestamp ``T`` (every row written before ``T`` is in a segment sealed by then). The
truncate waits until those segments are written, the deletes up to ``T`` too, and each
vchannel's datanode checkpoint moved past them (so no datanode or query node replays them
from the log after a restart); then it drops every segment holding rows from before ``T``:
sealed at or before it, or made before it (imported; compaction targets carry their
sources' seal time). Open compaction plans of the collection fail (their targets would
hold those rows); loaded replicas drop the segments, their growing copies with them
(``QueryCoord.truncated``). Rows written after ``T`` are in segments made after it and stay.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from elanus.api.datacoord import Flush, PersistDeletes
from elanus.api.rootcoord import TRUNCATE_WAIT_S, TruncateCollection, Truncated
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.catalog import Catalog
from elanus.meta.segmentmeta import Segment
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.collections import CatalogLookup
    from elanus.meta.compaction import CompactionManager
    from elanus.meta.datacoord import DataCoord
    from elanus.meta.querycoord import QueryCoord

log = logging.getLogger(__name__)
POLL_S = 0.05


class Truncation:
    def __init__(
        self,
        lookup: CatalogLookup,
        data: DataCoord,
        query: QueryCoord,
        compaction: CompactionManager,
    ) -> None:
        self.lookup, self.data, self.query, self.compaction = lookup, data, query, compaction
        self._lock = asyncio.Lock()

    def handlers(self) -> dict[str, RoleHandler]:
        return {"collection.truncate": self.truncate}

    async def truncate(self, req: TruncateCollection) -> Truncated:
        described = await self.lookup.read(Catalog.describe, req.db, req.name)
        cid, vchannels = int(described["collection_id"]), list(described["vchannels"])
        async with self._lock:  # one truncate at a time: each waits for its own seal
            ts = (await self.data.flush(Flush(collection_id=cid))).flush_ts
            await self._written(cid, vchannels, ts, req.name)
            self.compaction.cancel(cid, "its collection was truncated")
            gone = await self.data.drop_segments(lambda s: _before(s, cid, ts), ts)
            ids = sorted(s.segment_id for s in gone)
            await self.query.truncated(cid, vchannels, ids)
        log.info("collection %s truncated at %s: dropped segments %s", cid, ts, ids)
        return Truncated(collection_id=cid, ts=ts, segment_ids=ids)

    async def _written(self, cid: int, vchannels: list[str], ts: int, name: str) -> None:
        """Until the rows and deletes written before ``ts`` are on disk and the datanodes'
        checkpoints moved past them: the segments sealed by then are Flushed, the deletes
        up to ``ts`` persisted, then two checkpoint reports later than that (a checkpoint
        is the oldest log position whose effect is still only in a datanode's memory)."""
        deadline = time.monotonic() + TRUNCATE_WAIT_S
        while not await self._persisted(cid, vchannels, ts):
            await self._pause(deadline, name)
        for _ in range(2):
            mark = self.data.ctx.tso.alloc()
            while any(self.data.checkpoints.get(v, (0, 0))[1] < mark for v in vchannels):
                await self._pause(deadline, name)

    async def _persisted(self, cid: int, vchannels: list[str], ts: int) -> bool:
        deletes = await self.data.persist_deletes(PersistDeletes(vchannels=vchannels, ts=ts))
        unwritten = (SegmentState.SEALED, SegmentState.FLUSHING)
        return deletes.done and not any(
            s.collection_id == cid and s.state in unwritten and (s.seal_ts or 0) <= ts
            for s in self.data.segments.values()
        )

    @staticmethod
    async def _pause(deadline: float, name: str) -> None:
        if time.monotonic() > deadline:
            raise ElanusError(
                ErrorCode.TIMEOUT,
                f"truncating {name!r}: its rows were not written within "
                f"{TRUNCATE_WAIT_S:.0f} s (is a datanode running?); nothing was removed",
            )
        await asyncio.sleep(POLL_S)


def _before(s: Segment, collection_id: int, ts: int) -> bool:
    """A segment of the collection holding rows written before ``ts``."""
    if s.collection_id != collection_id or s.state is SegmentState.GROWING:
        return False
    return (s.seal_ts or s.created_ts) <= ts
