"""The coord as callers see it: one stub per coordination service, over one bus, and the
coord's own calls (health, sessions).

``CoordAPI(bus).root.describe_collection(DescribeCollection(...))``: each service's
requests, replies and stub live in its own module (``elanus/api/<service>.py``); this one
only bundles them, so a caller holds one object for the whole coord.
"""

from __future__ import annotations

from typing import Any

from elanus.api.auth import AuthAPI
from elanus.api.backup import BackupAPI
from elanus.api.base import Stub, reply
from elanus.api.compaction import CompactionAPI
from elanus.api.datacoord import DataCoordAPI, TimeTickAPI
from elanus.api.imports import ImportAPI
from elanus.api.indexcoord import IndexCoordAPI
from elanus.api.querycoord import QueryCoordAPI
from elanus.api.rootcoord import RootCoordAPI
from elanus.api.snapshot import SnapshotAPI
from elanus.channels.bus import Bus
from elanus.channels.subjects import COORD
from elanus.requests import request


@request("health")
class GetHealth:
    pass


@reply
class CoordHealth:
    """``degraded`` when a role (the coord included) reports a failed vital task;
    ``unhealthy`` names each such role (``role``, ``node_id``) and its failures."""

    status: str
    unhealthy: list[dict[str, Any]]
    node_id: str
    ts: int
    uptime_s: float
    live_sessions: int


@request("session.list")
class ListSessions:
    pass


@reply
class Sessions:
    sessions: list[dict[str, Any]]
    """Each live session as registered (``SessionInfo.to_dict``)."""


class CoordAPI(Stub):
    """Every coord service's stub (``root``, ``auth``, ``query``, ``data``, ``timeticks``,
    ``compaction``, ``index``, ``imports``, ``backup``, ``snapshots``) and the coord's own calls."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, COORD, timeout)
        self.root = RootCoordAPI(bus, timeout)
        self.auth = AuthAPI(bus, timeout)
        self.query = QueryCoordAPI(bus, timeout)
        self.data = DataCoordAPI(bus, timeout)
        self.timeticks = TimeTickAPI(bus, timeout)
        self.compaction = CompactionAPI(bus, timeout)
        self.index = IndexCoordAPI(bus, timeout)
        self.imports = ImportAPI(bus, timeout)
        self.backup = BackupAPI(bus, timeout)
        self.snapshots = SnapshotAPI(bus, timeout)

    async def health(self, req: GetHealth, timeout: float | None = None) -> CoordHealth:
        return await self._ask("health", req, CoordHealth, timeout)

    async def list_sessions(self, req: ListSessions) -> Sessions:
        return await self._ask("session.list", req, Sessions)
