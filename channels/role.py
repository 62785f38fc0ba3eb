"""The shape every Elanus role shares: a class with ``start()``/``stop()`` that talks to
the others only through the bus (NATS) or Arrow Flight, and keeps a session while alive."""

from __future__ import annotations

import uuid
from typing import ClassVar

from elanus.channels.bus import Bus
from elanus.channels.sessions import Session, SessionInfo
from elanus.settings import Settings


class Role:
    role_name: ClassVar[str] = "role"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        self.settings = settings
        self.bus = bus
        self.node_id = node_id or uuid.uuid4().hex[:10]
        self._session: Session | None = None

    @property
    def address(self) -> str:
        """Where this role can be reached, shown by ``elanus status``."""
        return ""

    def session_meta(self) -> dict[str, object]:
        return {}

    async def start(self) -> None:
        await self.register()

    async def register(self) -> None:
        info = SessionInfo(self.role_name, self.node_id, self.address, meta=self.session_meta())
        self._session = await Session(self.bus, info, self.settings.session_ttl_s).start()

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.stop()
            self._session = None
