"""The datanode role: the coord assigns it vchannels; it turns them into Lance segments."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from elanus import layout
from elanus.api.base import ACK, Ack
from elanus.api.datacoord import ChannelReleased, DataCoordAPI
from elanus.api.datanode import (
    FinalizeImport,
    ImportTaken,
    RunImport,
    UnwatchChannel,
    WatchChannel,
    Watching,
)
from elanus.api.rootcoord import SchemaTaken, UpdateSchema
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.loop import cancel_and_wait
from elanus.channels.role import Role, RoleHandler
from elanus.errors import ElanusError
from elanus.schema import Schema
from elanus.segments.channel_writer import ChannelWriter
from elanus.segments.importer import ImportTask, finalize, report_failure
from elanus.settings import Settings

log = logging.getLogger(__name__)


class DataNode(Role):
    role_name = "datanode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.channels: dict[str, ChannelWriter] = {}
        self.imports: dict[int, asyncio.Task[None]] = {}
        """Bulk import jobs this node runs (or finishes), by job id."""
        self.released: set[str] = set()
        """Channels dropped when a NATS connection was lost, not yet reported to the coord."""
        self._channels_lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{subjects.PREFIX}.datanode.{self.node_id}"

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "watch": self.watch,
            "unwatch": self.unwatch,
            "schema": self.update_schema,
            "import.run": self.import_run,
            "import.finalize": self.import_finalize,
        }

    async def start(self) -> None:
        data_bus = await self.open_data_bus()
        await self.serve()
        await self.register()
        for bus in (self.bus, data_bus):
            bus.connection_listeners.append(self._connection_changed)

    async def stop(self) -> None:
        for bus in (self.bus, self.data_bus):
            if bus is not None and self._connection_changed in bus.connection_listeners:
                bus.connection_listeners.remove(self._connection_changed)
        for task in list(self.imports.values()):
            await cancel_and_wait(task)
        self.imports.clear()
        for writer in list(self.channels.values()):
            await writer.stop()
        self.channels.clear()
        await super().stop()

    async def watch(self, req: WatchChannel) -> Watching:
        vchannel = req.vchannel
        async with self._channels_lock:
            self.released.discard(vchannel)
            old = self.channels.pop(vchannel, None)
            if old is not None:
                await old.stop()
            writer = ChannelWriter(self, req)
            await writer.start()
            self.channels[vchannel] = writer
        self._publish_channels()
        return Watching(vchannel=vchannel)

    async def unwatch(self, req: UnwatchChannel) -> Ack:
        async with self._channels_lock:
            self.released.discard(req.vchannel)
            writer = self.channels.pop(req.vchannel, None)
            if writer is not None:
                await writer.stop()
        self._publish_channels()
        return ACK

    def _publish_channels(self) -> None:
        """Show the channels in the session now, not at the next keepalive (``elanus
        status`` and the chaos harness read them there)."""
        self.supervisor.spawn("session update", self.meta_changed)

    def _connection_changed(self, connected: bool) -> None:
        """A lost NATS connection ends this node's claim on its channels: the coord may
        have found it gone (no subscriber answers its probe) and given them to another
        datanode, so writing on would put a second writer in the same segment files.
        The writers stop at once; back, the node asks the coord to place them again."""
        if connected:
            self.supervisor.spawn("report released channels", self._report_released)
        elif self.channels:
            self.supervisor.spawn("release channels", self._release_channels)

    async def _release_channels(self) -> None:
        async with self._channels_lock:
            writers, self.channels = self.channels, {}
            self.released.update(writers)
            log.warning("NATS connection lost: released channels %s", sorted(writers))
            for writer in writers.values():
                await writer.stop()

    async def _report_released(self) -> None:
        """Tell the coord each released channel, retrying while it is away."""
        delay = 0.1
        api = DataCoordAPI(self.bus, timeout=5.0)
        while self.released and self.bus.connected and self.data_bus and self.data_bus.connected:
            async with self._channels_lock:
                pending = sorted(self.released)
            try:
                for vchannel in pending:
                    await api.channel_released(
                        ChannelReleased(vchannel=vchannel, node_id=self.node_id)
                    )
                    self.released.discard(vchannel)
            except ElanusError as exc:
                log.warning("could not report released channels, retrying: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def update_schema(self, req: UpdateSchema) -> SchemaTaken:
        """A field was added: the writers of the collection's channels take the schema."""
        schema = Schema.from_dict(req.schema)
        for writer in self.channels.values():
            if writer.collection_id == req.collection_id:
                writer.adopt(schema)
        return SchemaTaken(version=schema.version)

    def _start_import(self, job_id: int, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = self.supervisor.spawn(f"import job {job_id}", make)
        self.imports[job_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self.imports.get(job_id) is done:
                del self.imports[job_id]

        task.add_done_callback(forget)

    async def import_run(self, req: RunImport) -> ImportTaken:
        """Run a bulk import job in the background (the coord follows its reports)."""
        job_id = req.job_id
        if job_id not in self.imports:
            self._start_import(job_id, ImportTask(self, req).run)
        return ImportTaken(job_id=job_id)

    async def import_finalize(self, req: FinalizeImport) -> ImportTaken:
        """Finish a committed job whose executor went away: stamp ``_ts``, tell the coord."""
        job_id, ts = req.job_id, req.ts
        dirs = [layout.parent(s.path) for s in req.segments]
        after = self.imports.get(job_id)
        self._start_import(job_id, lambda: self._finalize(job_id, ts, dirs, after))
        return ImportTaken(job_id=job_id)

    async def _finalize(
        self, job_id: int, ts: int, dirs: list[str], after: asyncio.Task[None] | None
    ) -> None:
        if after is not None:  # the job's own run, still reporting its failure
            await asyncio.wait([after])
        try:
            await finalize(self, job_id, ts, dirs)
        except Exception as exc:  # noqa: BLE001 - the coord asks again (another node)
            log.warning("could not finish import job %s: %s", job_id, exc)
            try:
                await report_failure(self, job_id, str(exc), "INTERNAL")
            except ElanusError:
                pass
