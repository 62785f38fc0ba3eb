"""What the write path's parts use of the data node that assembles them (``DataNode``):
its identity, its buses, settings and supervisor. Named here, so that ``flushcommon`` and
the data node's channel writers and import tasks never import the node they serve."""

from __future__ import annotations

from typing import Protocol

from elanus.channels.bus import Bus
from elanus.channels.runtime.supervisor import Supervisor
from elanus.settings import Settings


class DataNodeHost(Protocol):
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
