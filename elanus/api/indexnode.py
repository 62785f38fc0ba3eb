"""The index node's API: the coord pushes build tasks (``build``); the node builds them one
at a time and reports each to the coord (``index.report``)."""

from __future__ import annotations

from typing import Any

from elanus.api.base import Stub, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import request

BUILD_TIMEOUT_S = 10.0


@request("build")
class BuildIndex:
    """One build task pushed to an index node (``IndexCoord.task_spec``)."""

    build_id: int
    version: int
    segment_id: int
    partition_id: int
    collection_id: int
    field: str
    data_path: str
    out_dir: str
    spec: dict[str, Any]
    num_rows: int | None = None


@reply
class BuildQueued:
    """The task waits in the node's queue (``queued`` tasks, this one included)."""

    accepted: bool
    queued: int


class IndexNodeAPI(Stub):
    def __init__(self, bus: Bus, node_id: str) -> None:
        super().__init__(bus, subjects.node_prefix("indexnode", node_id))

    async def build(self, req: BuildIndex, timeout: float = BUILD_TIMEOUT_S) -> BuildQueued:
        return await self._ask("build", req, BuildQueued, timeout)
