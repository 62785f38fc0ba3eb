"""The coord's shared infrastructure, handed to every service: infrastructure, not a service.

The DuckDB file, the TSO, the ID allocator and the session watcher exist only once the
coord has started; services read them from here when they run, never at construction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elanus.channels.dml import pchannel_name

if TYPE_CHECKING:
    from elanus.channels.bus import Bus
    from elanus.channels.runtime.sessions import SessionWatcher
    from elanus.channels.runtime.supervisor import Supervisor
    from elanus.meta.db import Database
    from elanus.meta.idalloc import IDAllocator
    from elanus.meta.tso import TimestampOracle
    from elanus.settings import Settings


class CoordContext:
    """What every coord service may use. The started-only parts are plain attributes the
    coordinator sets in ``start``: reading one earlier raises ``AttributeError``."""

    db: Database
    tso: TimestampOracle
    ids: IDAllocator
    sessions: SessionWatcher

    def __init__(self, settings: Settings, bus: Bus, supervisor: Supervisor) -> None:
        self.settings = settings
        self.bus = bus
        self.supervisor = supervisor

    @property
    def pchannels(self) -> list[str]:
        return [pchannel_name(i) for i in range(self.settings.num_pchannels)]
