"""The datanode role: the coord assigns it vchannels; it turns them into Lance segments."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from elanus import layout
from elanus.api.base import ACK, Ack
from elanus.api.datacoord import ChannelHeld, DataCoordAPI
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
from elanus.channels.runtime.loop import cancel_and_wait
from elanus.channels.runtime.role import Role, RoleHandler
from elanus.errors import ElanusError
from elanus.schema import Schema
from elanus.segments.datanode.channel_writer import ChannelWriter
from elanus.segments.datanode.importer import ImportTask, finalize, report_failure
from elanus.settings import Settings

log = logging.getLogger(__name__)

BACKFILL_WAIT_S = 8.0
"""How long ``update_schema`` waits for a new function's backfill before it answers (under
the coord's ``NODE_WAIT_S``)."""


class DataNode(Role):
    role_name = "datanode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.channels: dict[str, ChannelWriter] = {}
        self.imports: dict[int, asyncio.Task[None]] = {}
        """Bulk import jobs this node runs (or finishes), by job id."""
        self.in_doubt: dict[str, ChannelWriter] = {}
        """Writers held since a NATS connection was lost, until the coord says whether
        their channels are still this node's."""
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
            self.in_doubt.pop(vchannel, None)
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
            self.in_doubt.pop(req.vchannel, None)
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
        """A lost NATS connection puts this node's claim on its channels in doubt: the coord
        may find it gone (no subscriber answers its probe) and give them to another
        datanode, so consuming on would put a second writer in the same segment files.
        The writers are held at once (they fetch nothing); back, the node asks the coord
        which channels are still its own, resumes those and drops the others. A blip
        costs no new consumer (creating one right after a NATS server died can take
        seconds) and no replay from the checkpoint."""
        if connected:
            self.supervisor.spawn("confirm held channels", self._confirm_held)
        elif self.channels:
            self.supervisor.spawn("hold channels", self._hold_channels)

    async def _hold_channels(self) -> None:
        async with self._channels_lock:
            for vchannel, writer in self.channels.items():
                writer.consumer.hold()
                self.in_doubt[vchannel] = writer
            log.warning(
                "NATS connection lost: channels %s held until the coord confirms them",
                sorted(self.in_doubt),
            )

    async def _confirm_held(self) -> None:
        """Ask the coord about each held channel, retrying while it is away."""
        delay = 0.1
        api = DataCoordAPI(self.bus, timeout=5.0)
        while self.bus.connected and self.data_bus and self.data_bus.connected:
            async with self._channels_lock:  # after a hold spawned before this
                pending = dict(self.in_doubt)
            if not pending:
                return
            try:
                for vchannel, writer in pending.items():
                    held = await api.channel_held(
                        ChannelHeld(vchannel=vchannel, node_id=self.node_id)
                    )
                    await self._settle_doubt(vchannel, writer, held.kept)
            except ElanusError as exc:
                log.warning("could not confirm held channels, retrying: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _settle_doubt(self, vchannel: str, writer: ChannelWriter, kept: bool) -> None:
        async with self._channels_lock:
            if self.in_doubt.get(vchannel) is not writer:  # watched or unwatched meanwhile
                return
            del self.in_doubt[vchannel]
            if kept:
                writer.consumer.resume()
                return
            if self.channels.get(vchannel) is writer:
                del self.channels[vchannel]
            log.warning("channel %s was given to another datanode meanwhile: dropped", vchannel)
            await writer.stop()
        self._publish_channels()

    async def update_schema(self, req: UpdateSchema) -> SchemaTaken:
        """A field was added: the writers of the collection's channels take the schema. A
        function's backfill of flushed segments is waited for a while (a small collection's
        is done when the DDL returns); a longer one goes on in its syncs."""
        schema = Schema.from_dict(req.schema)
        syncs = []
        for writer in self.channels.values():
            if writer.collection_id == req.collection_id:
                syncs += writer.adopt(schema)
        if syncs:
            await asyncio.wait(syncs, timeout=BACKFILL_WAIT_S)
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
