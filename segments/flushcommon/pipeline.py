"""Consuming one vchannel (Milvus's ``flushcommon/pipeline``): packs into the write buffer,
syncs handed on, ticks reported.

Per pack (the messages before a tick, in timestamp order): apply it to the write buffer,
hand what the policies pick to the sync manager, report the tick and the checkpoint to
the coord, and start the flushes and compactions it answers with. Nothing here waits for a
write: a slow spill or flush only holds the checkpoint back, never the consumption.

The checkpoint is the stream position of the oldest message whose effect is not yet on
disk (and, for a flush, reported): the least of the write buffer's ``oldest``, the sync
manager's ``oldest`` and the next position to consume. After a restart the channel is
consumed again from there, skipping inserts into segments that are already flushed, so
nothing acknowledged is lost and no row is written twice.
"""

from __future__ import annotations

import logging

from elanus.api.datacoord import ChannelFailed, DatanodeTick, TickReply
from elanus.api.datanode import WatchChannel
from elanus.channels.consumer import ChannelConsumer, datanode_durable
from elanus.channels.dml import DmlMessage
from elanus.channels.runtime.supervisor import describe
from elanus.segments.flushcommon.compaction import Compactions
from elanus.segments.flushcommon.coordreport import CoordReports
from elanus.segments.flushcommon.flusher import Flusher
from elanus.segments.flushcommon.host import DataNodeHost
from elanus.segments.flushcommon.syncmgr import SyncManager
from elanus.segments.flushcommon.writebuffer import WriteBuffer

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(
        self,
        node: DataNodeHost,
        spec: WatchChannel,
        buffer: WriteBuffer,
        syncs: SyncManager,
        reports: CoordReports,
    ) -> None:
        self.node = node
        self.vchannel = spec.vchannel
        self.buffer = buffer
        self.syncs = syncs
        self.reports = reports
        limits = (node.settings.segment_max_rows, node.settings.segment_max_bytes)
        self.flusher = Flusher(
            node.node_id, self.vchannel, buffer, syncs, reports, self.checkpoint, limits
        )
        self.compactions = Compactions(self.flusher)
        self._persisting = 0
        """The largest ``persist_ts`` asked for and being (or already) written."""
        self.persisted_ts = 0
        """Every delete stamped <= this is in delta logs (reported with each tick)."""
        checkpoint = spec.checkpoint
        assert node.data_bus is not None
        self.consumer = ChannelConsumer(
            node.data_bus,
            spec.pchannel,
            self.vchannel,
            datanode_durable(self.vchannel),
            self._on_pack,
            supervisor=node.supervisor,
            on_failure=self._channel_failed,
            start_seq=checkpoint.seq if checkpoint else None,
            start_ts=checkpoint.ts if checkpoint else 0,
        )

    def checkpoint(self) -> dict[str, int]:
        seqs = [self.buffer.oldest(), self.syncs.oldest(), self.consumer.next_seq]
        return {"seq": min(s for s in seqs if s is not None), "ts": self.consumer.tick_ts}

    async def _on_pack(self, pack: list[DmlMessage], ts: int, seq: int) -> None:
        if self.syncs.failure is not None:
            # A sync failed for good: this channel's task fails with it (the coord watches
            # the channel again from the checkpoint, before everything not synced).
            raise self.syncs.failure
        self.buffer.apply(pack)
        self.flusher.sync_due()
        await self._report(ts, self.checkpoint())

    async def _report(self, ts: int, checkpoint: dict[str, int] | None) -> None:
        """Report the channel consumed up to ``ts`` and do what the coord answers."""
        report = DatanodeTick(
            node_id=self.node.node_id,
            vchannel=self.vchannel,
            ts=ts,
            checkpoint=checkpoint,
            data_seq=self.buffer.data_seq,
            persisted_ts=self.persisted_ts or None,
        )
        await self._answer(await self.reports.tick(report))

    async def _answer(self, reply: TickReply | None) -> None:
        """Do what the coord's reply to a tick report asks: flush, compact, persist."""
        if reply is None:  # the coord is away; the next tick reports again
            return
        if reply.flush:
            self.flusher.flush(reply.flush)
        for plan in reply.compact:
            self.compactions.start(plan)
        if reply.persist_ts is not None and reply.persist_ts > self._persisting:
            self._persist(reply.persist_ts)

    def _persist(self, ts: int) -> None:
        """Write the pending deletes (all stamped <= ``ts``: this pack's tick passed it),
        then report ``ts`` as persisted at once (a files-only read plan waits for it; the
        next tick is a tick interval away); a failure lets it be asked again."""
        self._persisting = ts

        async def run() -> None:
            await self.flusher.persist()
            self.persisted_ts = max(self.persisted_ts, ts)
            # no checkpoint: only a pack's end knows a position that loses nothing
            await self._report(self.consumer.tick_ts, None)

        def failed(exc: BaseException) -> None:
            self._persisting = self.persisted_ts

        self.node.supervisor.spawn(f"{self.vchannel}: persist deletes", run, on_failure=failed)

    def _channel_failed(self, exc: BaseException) -> None:
        """The consuming task died (logged with its traceback already): tell the coord,
        which fails the flushes waiting on this channel and has it watched again."""
        failed = ChannelFailed(
            node_id=self.node.node_id,
            vchannel=self.vchannel,
            reason=self.consumer.failure or describe(exc),
        )
        self.node.supervisor.spawn(
            f"report {self.vchannel} failure", lambda: self.reports.channel_failed(failed)
        )
