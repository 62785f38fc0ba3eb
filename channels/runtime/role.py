"""The shape every Elanus role shares: a class with ``start()``/``stop()`` that talks to
the others only through the bus (NATS) or Arrow Flight, and keeps a session while alive."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import elanus
from elanus import objstore
from elanus.channels import subjects
from elanus.channels.bus import Bus, Handler, Served
from elanus.channels.consumer import ChannelConsumer
from elanus.channels.coordwatch import INTERVAL_S, CoordWatch
from elanus.channels.flow import FlowReport, total_memory
from elanus.channels.runtime import metrics
from elanus.channels.runtime.loop import Periodic
from elanus.channels.runtime.sessions import Session, SessionInfo
from elanus.channels.runtime.supervisor import Supervisor
from elanus.channels.transport import blocking, is_blocking
from elanus.requests import decode, request_type
from elanus.settings import Settings

RoleHandler = Callable[[Any], Any]
"""A coroutine function, or a plain function marked ``@blocking``."""
"""A handler as a role declares it: of a raw body (a dict), or of a request type (its first
parameter annotated with a ``@request`` dataclass), which ``Role.serve`` decodes."""


class RoleHost(Protocol):
    """What a role's parts (a delegator, a channel writer, an import task) use of the role
    that holds them: its identity, buses, settings and supervisor. They take this rather
    than the role's class, which imports them."""

    @property
    def node_id(self) -> str: ...
    @property
    def bus(self) -> Bus: ...
    @property
    def data_bus(self) -> Bus | None: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def supervisor(self) -> Supervisor: ...


class Role:
    role_name: ClassVar[str] = "role"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        self.settings = settings
        self.storage = objstore.configure(settings)
        """The storage root this role reads and writes (``elanus/objstore.py``)."""
        self.bus = bus
        self.node_id = node_id or uuid.uuid4().hex[:10]
        self.data_bus: Bus | None = None
        """A second NATS connection for bulk data, if the role opened one."""
        self._session: Session | None = None
        self._flow_reports: Periodic | None = None
        self._coord_watch: Periodic | None = None
        self._served: list[Served] = []
        self.supervisor = Supervisor(f"{self.role_name} {self.node_id}", self._health_changed)
        """Every background task of the role runs through it (``runtime/supervisor``)."""
        self.restarts = 0
        """How often the role was started again after it stopped or its process died (set
        by its host, ``cli/host.py``): its session carries it, ``elanus status`` shows it."""

    @property
    def address(self) -> str:
        """Where this role can be reached, shown by ``elanus status``."""
        return ""

    def session_meta(self) -> dict[str, object]:
        return {}

    def live_meta(self) -> dict[str, object]:
        """What ``elanus status`` shows of this role beside its health, refreshed at each
        session keepalive: the process's memory and, per channel it consumes, the tick lag
        and the messages not yet fetched (and the lag flow control counts, and the rows
        consumed so far, ``flow.py``)."""
        channels = {
            c.vchannel: {
                "tick_lag_s": c.tick_lag_s,
                "flow_lag_s": c.flow_lag_s,
                "pending": c.pending,
                "consumed": c.consumed,
            }
            for c in metrics.reporters()
            if isinstance(c, ChannelConsumer) and c.supervisor is self.supervisor
        }
        return {"rss_bytes": metrics.rss_bytes(), "channels": channels}

    def handlers(self) -> Mapping[str, RoleHandler]:
        """Request handlers served at ``address`` by ``serve``."""
        return {}

    async def start(self) -> None:
        await self.register()

    async def register(self) -> None:
        if self.storage.remote:  # wrong credentials or a missing bucket: one clear error now
            await asyncio.to_thread(self.storage.probe)
        meta = {
            **self.session_meta(),
            "version": elanus.__version__,
            "health": self.supervisor.health(),
        }
        if self.restarts:
            meta["restarts"] = self.restarts
        info = SessionInfo(self.role_name, self.node_id, self.address, meta=meta)
        session = Session(self.bus, info, self.settings.session_ttl_s, refresh=self.live_meta)
        self._session = await session.start()
        interval = self.settings.timetick_interval_ms / 1000
        self._flow_reports = Periodic(self._report_flow, interval, f"{self.reporter} flow report")
        self._flow_reports.start()
        coord_here = self.bus.serves_here(f"{subjects.COORD}.lease")  # no NATS between
        if self.role_name != "coord" and not coord_here:
            watch = CoordWatch(self.bus)
            self._coord_watch = Periodic(watch.check, INTERVAL_S, "coordinator lease watch")
            self._coord_watch.start()

    @property
    def reporter(self) -> str:
        return f"{self.role_name} {self.node_id}"

    async def _report_flow(self, gone: bool = False) -> None:
        """Publish this role's flow-control figures (``channels/flow.py``) to the proxies."""
        report = (
            FlowReport(self.reporter, gone=True)
            if gone
            else FlowReport.of(self.reporter, self.live_meta(), total_memory())
        )
        await self.bus.publish(subjects.FLOW_REPORT, report.to_doc())

    async def meta_changed(self) -> None:
        """Publish ``session_meta`` again (a port bound after registering)."""
        if self._session is not None:
            self._session.info.meta.update(self.session_meta())
            await self._session.publish()

    def _health_changed(self) -> None:
        """Carry the role's health in its session: the next keepalive publishes it, so the
        coord's ``health`` and ``elanus status`` name a role whose vital task failed."""
        if self._session is not None:
            self._session.info.meta["health"] = self.supervisor.health()

    async def serve(
        self,
        prefix: str | None = None,
        handlers: Mapping[str, RoleHandler] | None = None,
        queue: str | None = None,
        here_only: bool = False,
    ) -> None:
        """Answer requests on ``<prefix>.<method>`` until ``stop``; a typed handler gets its
        request checked and decoded here, once, whichever way it arrived. ``here_only``:
        from this process only (``Bus.serve_here``)."""
        table = {name: at_edge(fn) for name, fn in (handlers or self.handlers()).items()}
        if here_only:
            self._served.append(self.bus.serve_here(prefix or self.address, table))
            return
        served = await self.bus.serve(prefix or self.address, table, queue)
        self._served.append(served)

    async def open_data_bus(self) -> Bus:
        self.data_bus = await self.bus.fork(f"{self.role_name}-{self.node_id}-data")
        return self.data_bus

    async def stop(self) -> None:
        """Leave the session, stop answering, close the data connection."""
        if self._coord_watch is not None:
            await self._coord_watch.stop()
            self._coord_watch = None
        if self._flow_reports is not None:
            await self._flow_reports.stop()
            self._flow_reports = None
            await _quietly(self._report_flow(gone=True))
        if self._session is not None:
            await self._session.stop()
            self._session = None
        for served in self._served:
            await _quietly(served.unsubscribe())
        self._served.clear()
        await self.supervisor.stop()
        if self.data_bus is not None:
            await self.data_bus.close()
            self.data_bus = None


def at_edge(fn: RoleHandler) -> Handler:
    """``fn`` itself for a raw handler; for a typed one, a handler of raw bodies that decodes
    them (an instance of the request type passes as is) before calling it."""
    cls = request_type(fn)
    if cls is None:
        return fn
    if is_blocking(fn):

        @blocking
        def typed_blocking(raw: Any) -> Any:
            return fn(decode(cls, raw))

        return typed_blocking

    async def typed(raw: Any) -> Any:
        return await fn(decode(cls, raw))

    typed.__qualname__ = getattr(fn, "__qualname__", typed.__qualname__)
    typed.__wrapped__ = fn  # type: ignore[attr-defined]
    return typed


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:  # noqa: BLE001 - NATS may be gone already at shutdown
        pass
