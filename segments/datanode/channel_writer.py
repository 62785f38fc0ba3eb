"""One vchannel on a datanode: the write path of ``segments/flushcommon`` assembled.

The pipeline consumes the channel into the write buffer; the sync manager writes segments
and delta logs off the consumption path; the checkpoint the pipeline reports never
passes what is not synced (see ``flushcommon/pipeline``).
"""

from __future__ import annotations

import asyncio

from elanus import layout, objstore
from elanus.api.datanode import WatchChannel
from elanus.channels.consumer import ChannelConsumer
from elanus.schema import Schema
from elanus.segments import storage
from elanus.segments.flushcommon.coordreport import CoordReports
from elanus.segments.flushcommon.host import DataNodeHost
from elanus.segments.flushcommon.pipeline import Pipeline
from elanus.segments.flushcommon.syncmgr import SyncManager
from elanus.segments.flushcommon.writebuffer import SegmentBuffer, WriteBuffer

STOP_SYNCS_S = 30.0
"""How long a stopping writer lets its syncs finish (files stay whole) before cancelling."""


class ChannelWriter:
    def __init__(self, node: DataNodeHost, spec: WatchChannel) -> None:
        self.vchannel = spec.vchannel
        self.collection_id = spec.collection_id
        self.storage = node.settings.storage_uri
        self.buffer = WriteBuffer(Schema.from_dict(spec.schema), self._seg_dir)
        for seg in spec.segments:
            self.buffer.learn(seg)
        self.reports = CoordReports(node, self.vchannel)
        self.syncs = SyncManager(node.supervisor, self.vchannel, node.settings.max_parallel_syncs)
        self.pipeline = Pipeline(node, spec, self.buffer, self.syncs, self.reports)

    def _seg_dir(self, partition_id: int, segment_id: int) -> str:
        return layout.segment_dir(self.storage, self.collection_id, partition_id, segment_id)

    @property
    def consumer(self) -> ChannelConsumer:
        return self.pipeline.consumer

    @property
    def tick_ts(self) -> int:
        return self.consumer.tick_ts

    @property
    def growing(self) -> dict[int, SegmentBuffer]:
        return self.buffer.growing

    def checkpoint(self) -> dict[str, int]:
        return self.pipeline.checkpoint()

    def adopt(self, schema: Schema) -> list[asyncio.Task[None]]:
        """Take a newer schema; a function added since (``add_function_field``) has its
        output written into every flushed segment of the channel, as Milvus backfills it:
        one sync per segment, after that segment's other syncs. Returns those syncs."""
        before = set(_outputs(self.buffer.schema))
        self.buffer.adopt(schema)
        if not set(_outputs(schema)) - before:
            return []
        syncs = []
        for sid, seg in list(self.buffer.flushed.items()):
            path = layout.data_path(self._seg_dir(seg.partition_id, sid))

            def backfill(attempt: int, path: str = path) -> None:
                if objstore.exists(path):
                    storage.widen_to(path, schema)

            syncs.append(
                self.syncs.submit(f"backfill segment {sid}", [sid], backfill, position=None)
            )
        return syncs

    async def start(self) -> None:
        await self.consumer.start()

    async def stop(self) -> None:
        self.reports.stopping = True
        await self.consumer.stop()
        await self.syncs.drain(STOP_SYNCS_S)


def _outputs(schema: Schema) -> list[str]:
    return [name for fn in schema.functions for name in fn.output_field_names]
