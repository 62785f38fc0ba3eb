"""The index coord's API (``meta/indexcoord.py``): indexes (create, drop, describe), their
build tasks, and the pull protocol of external builders (claim, heartbeat, report), plus
what index and query nodes report.

The key names are the wire format; the Flight index actions pass these replies on to
clients as docs/protocol.md shows them.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.api.base import Stub, reply
from elanus.api.indexnode import BuildIndex
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import Range, request

# -- indexes ----------------------------------------------------------------------------------


@request("index.create")
class CreateIndex:
    collection_id: int
    field: str
    index_name: str | None = None
    """Defaults to the field's name."""
    index_type: str = "AUTOINDEX"
    metric_type: str | None = None
    params: dict[str, Any] | None = None


@reply
class IndexCreated:
    index_id: int
    created: bool
    """False: the same index was there already."""


@request("index.drop")
class DropIndex:
    collection_id: int
    index_name: str | None = None
    field: str | None = None


@reply
class IndexDropped:
    index_id: int


@request("index.describe")
class DescribeIndex:
    collection_id: int
    index_name: str | None = None
    field: str | None = None


@reply
class FailedBuild:
    segment_id: int
    build_id: int
    reason: str | None


@reply
class IndexDescription:
    """An index and its build progress over the collection's flushed segments."""

    index_name: str
    index_id: int
    field: str
    index_type: str
    metric_type: str
    """``""`` for a scalar index."""
    params: dict[str, Any]
    state: str
    """An ``IndexTaskState`` value: the least advanced of its tasks'."""
    indexed_rows: int
    total_rows: int
    pending_tasks: int
    finished_tasks: int
    failed_tasks: list[FailedBuild]


@reply
class IndexDescriptions:
    indexes: list[IndexDescription]


@request("index.tasks")
class ListIndexTasks:
    collection_id: int | None = None


@reply
class IndexTaskRecord:
    """A build task as the catalog holds it."""

    build_id: int
    index_id: int
    collection_id: int
    partition_id: int
    segment_id: int
    num_rows: int
    data_path: str
    state: str
    version: int
    node_id: str | None
    fail_reason: str | None
    file_paths: list[str]
    mark_deleted: bool
    recycled: bool


@reply
class IndexTasks:
    tasks: list[IndexTaskRecord]


# -- external builders (Spark index runs) -----------------------------------------------------


@request("index.claim")
class ClaimIndexTasks:
    """A pulling builder (a Spark run) takes pending tasks under a lease."""

    node_id: str
    collection_id: int | None = None
    limit: Annotated[int | None, Range(1)] = None
    retry_failed: bool = False


@reply
class Claimed:
    tasks: list[BuildIndex]
    """The tasks, as an index node's ``build`` takes them."""
    lease_s: float


@request("index.heartbeat")
class IndexHeartbeat:
    node_id: str


@reply
class Lease:
    alive: bool
    """False: the lease had lapsed (its tasks are issued again)."""
    tasks: list[int]
    """Build ids the coord still counts as in progress on this builder."""


@request("index.report")
class IndexReport:
    build_id: int
    version: int
    ok: bool
    files: list[str] = field(default_factory=list)
    fail_reason: str | None = None
    node_id: str | None = None
    seconds: float | None = None


@reply
class Verdict:
    """Whether a build report counts; ``reason`` says why not (absent from the body when
    it was accepted)."""

    accepted: bool
    reason: str | None = None

    def to_body(self) -> dict[str, Any]:
        if self.reason is None:
            return {"accepted": self.accepted}
        return {"accepted": self.accepted, "reason": self.reason}


@request("index.load_failed")
class IndexLoadFailed:
    build_id: int
    version: int
    node_id: str = "a query node"
    segment_id: int | None = None


@reply
class Reissued:
    reissued: bool


class IndexCoordAPI(Stub):
    """The index coord's calls (``elanus.coord.index.<call>``)."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def create(self, req: CreateIndex) -> IndexCreated:
        return await self._ask("index.create", req, IndexCreated)

    async def drop(self, req: DropIndex) -> IndexDropped:
        return await self._ask("index.drop", req, IndexDropped)

    async def describe(self, req: DescribeIndex) -> IndexDescriptions:
        return await self._ask("index.describe", req, IndexDescriptions)

    async def tasks(self, req: ListIndexTasks) -> IndexTasks:
        return await self._ask("index.tasks", req, IndexTasks)

    async def claim(self, req: ClaimIndexTasks) -> Claimed:
        return await self._ask("index.claim", req, Claimed)

    async def heartbeat(self, req: IndexHeartbeat) -> Lease:
        return await self._ask("index.heartbeat", req, Lease)

    async def report(self, req: IndexReport, timeout: float | None = None) -> Verdict:
        return await self._ask("index.report", req, Verdict, timeout)

    async def load_failed(self, req: IndexLoadFailed, timeout: float | None = None) -> Reissued:
        return await self._ask("index.load_failed", req, Reissued, timeout)
