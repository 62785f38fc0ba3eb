"""An import's commit as the log carries it: at the import timestamp ``T``, into each vchannel,
the deletes of an upsert (the keys it replaces, read from the file the executor wrote) and one
IMPORT message per segment. Consumers meet them in timestamp order with the rest of the log.

The message ids are the job's and the segment's, the same each time a commit is published,
so a commit published again (after a restart, or a failure half-way) is stored once.
``meta/importjobs.py`` decides when (under the time-tick lock) and records that it was done.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout, objstore
from elanus.channels.dml import DmlMessage, IpcPayload, MsgType
from elanus.channels.publisher import DmlPublisher, Piece
from elanus.meta.importmeta import ImportJob
from elanus.meta.segmentmeta import Segment
from elanus.schema import PK_COLUMN

if TYPE_CHECKING:
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import CollectionLookup


def upsert_keys(path: str) -> list[tuple[int, pa.Array]]:
    """The distinct keys an upsert replaces in each partition (file columns ``pk``,
    ``partition_id``), to be deleted at its commit."""
    keys = objstore.read_ipc(path).combine_chunks()
    parts = keys.column("partition_id").to_numpy()
    pks = keys.column(PK_COLUMN).combine_chunks()
    return [(int(pid), pc.unique(pks.filter(pa.array(parts == pid)))) for pid in np.unique(parts)]


class ImportCommitPublisher:
    """Publishes the commits of one coord's import jobs."""

    def __init__(self, ctx: CoordContext, lookup: CollectionLookup) -> None:
        self.ctx, self.lookup = ctx, lookup

    async def upsert_deletes(self, job: ImportJob) -> list[tuple[int, Piece]]:
        """The delete messages of an upsert commit: (partition, piece); none for an insert.
        Read before the time-tick lock is taken (a file read)."""
        if not job.upsert:
            return []
        info = await self.lookup.describe_by_id(job.collection_id)
        path = layout.upsert_keys_path(self.ctx.settings.storage_uri, job.job_id)
        vchannels = list(info["vchannels"])
        publisher = self._publisher()

        def pieces() -> list[tuple[int, Piece]]:
            return [
                (pid, piece)
                for pid, pks in upsert_keys(path)
                for piece in publisher.pieces(MsgType.DELETE, vchannels, pks)
            ]

        return await asyncio.to_thread(pieces)

    async def publish(
        self, job: ImportJob, segs: list[Segment], deletes: list[tuple[int, Piece]], ts: int
    ) -> None:
        """Upsert deletes, then one IMPORT message per segment, all at ``ts``. A failure
        raises and leaves ``job.published`` False: the next commit call publishes again."""

        def message(kind: MsgType, vchannel: str, pid: int, seg: int, tag: str) -> DmlMessage:
            msg_id = f"import-{job.job_id}-{tag}"
            return DmlMessage(
                kind, ts, vchannel, job.collection_id, pid, seg, "coord", None, msg_id
            )

        sends: list[tuple[DmlMessage, bytes | IpcPayload]] = [
            (message(MsgType.DELETE, p.vchannel, pid, 0, f"d{i}"), p.payload)
            for i, (pid, p) in enumerate(deletes)
        ]
        sends += [
            (
                message(
                    MsgType.IMPORT, s.vchannel, s.partition_id, s.segment_id, f"s{s.segment_id}"
                ),
                b"",
            )
            for s in segs
        ]
        await self._publisher().publish(sends, f"import job {job.job_id}")
        job.published = True

    def _publisher(self) -> DmlPublisher:
        return DmlPublisher(
            self.ctx.bus.nc, self.ctx.bus.js, retry_window_s=self.ctx.settings.log_retry_window_s
        )
