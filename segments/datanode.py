"""The datanode role: the coord assigns it vchannels; it turns them into Lance segments."""

from __future__ import annotations

import logging
from typing import Any

from elanus.channels import subjects
from elanus.channels.bus import Bus, Handler
from elanus.channels.role import Role
from elanus.requests import Body
from elanus.segments.channel_writer import ChannelWriter
from elanus.settings import Settings

log = logging.getLogger(__name__)


class DataNode(Role):
    role_name = "datanode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.channels: dict[str, ChannelWriter] = {}

    @property
    def address(self) -> str:
        return f"{subjects.PREFIX}.datanode.{self.node_id}"

    def handlers(self) -> dict[str, Handler]:
        return {"watch": self.watch, "unwatch": self.unwatch, "status": self.status}

    async def start(self) -> None:
        await self.open_data_bus()
        await self.serve()
        await self.register()

    async def stop(self) -> None:
        for writer in list(self.channels.values()):
            await writer.stop()
        self.channels.clear()
        await super().stop()

    async def watch(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "datanode.watch")
        vchannel = b.str("vchannel")
        b.allow(["pchannel", "collection_id", "schema", "checkpoint", "segments"]).done()
        old = self.channels.pop(vchannel, None)
        if old is not None:
            await old.stop()
        writer = ChannelWriter(self, raw)
        await writer.start()
        self.channels[vchannel] = writer
        return {"vchannel": vchannel}

    async def unwatch(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "datanode.unwatch")
        vchannel = b.str("vchannel")
        b.done()
        writer = self.channels.pop(vchannel, None)
        if writer is not None:
            await writer.stop()
        return {}

    async def status(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {
            "channels": {
                v: {
                    "tick_ts": w.tick_ts,
                    "growing": {s: b.rows for s, b in w.growing.items()},
                    "checkpoint": w.checkpoint(),
                }
                for v, w in self.channels.items()
            }
        }
