"""The coord's bulk import API (``meta/importjobs.py``): the proxy's calls (create a job,
follow it, abort a staged write) and the executing datanode's (progress, prepare, commit,
finish, fail).

The key names are the wire format; ``get_import_state`` and ``list_import_jobs`` show a
job's state to Flight clients as docs/protocol.md does.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.api.base import Ack, Stub, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.errors import ErrorCode
from elanus.requests import Range, request

# -- the client's side (through the proxy) ----------------------------------------------------


@request("import.create")
class CreateImport:
    collection_id: int
    db: str = ""
    collection: str = ""
    partition_id: int
    units: list[Any]
    """``{"format", "paths", "partition_id"?}`` each (checked one by one)."""
    options: dict[str, Any] = field(default_factory=dict)
    write_id: str | None = None
    """A staged write's id: its units are the staged files, and a repeat finds its job."""


@reply
class ImportCreated:
    job_id: int
    existing: bool
    """True: a commit of the same write id found its job."""


@request("import.state")
class ImportState:
    job_id: int


@reply
class ImportJobView:
    """An import job as ``get_import_state`` shows it."""

    job_id: int
    collection: str
    db: str
    state: str
    """An ``ImportJobState`` value (Completed only once the segments serve)."""
    progress: float
    rows: int
    total_rows: int
    segment_ids: list[int]
    reason: str
    reason_code: str
    stage: str
    write_id: str | None
    ts: int
    created_ts: int
    files: list[str]


@request("import.list")
class ListImports:
    collection_id: int | None = None


@reply
class ImportJobs:
    jobs: list[ImportJobView]


@request("import.abort_write")
class AbortWrite:
    write_id: str


@reply
class WriteAborted:
    removed: bool
    """False: nothing was staged under the write id."""


# -- the executor's callbacks -----------------------------------------------------------------


@request("import.executing")
class ExecutorCall:
    """A call from the datanode running a job; it names itself."""

    job_id: int
    node_id: str


@request("import.progress")
class ImportProgress(ExecutorCall):
    progress: float
    stage: str = ""


@request("import.prepare")
class PrepareImport(ExecutorCall):
    segments: list[dict[str, Any]]
    """``{"vchannel", "partition_id", "rows"}`` per segment to allocate."""
    max_rows: Annotated[int, Range(1)]


@reply
class ImportSegments:
    segment_ids: list[int]
    """In the order of the request's ``segments``."""


@request("import.commit")
class CommitImport(ExecutorCall):
    pass


@reply
class ImportCommitted:
    ts: int
    """The import timestamp: every row's ``_ts``."""


@request("import.finish")
class FinishImport:
    job_id: int
    node_id: str | None = None


@request("import.fail")
class FailImport:
    job_id: int
    node_id: str
    reason: str
    code: str = ErrorCode.INTERNAL.value


@reply
class FailHeard:
    """``ignored``: the job had ended, or another node runs it; ``resumed``: it was past
    its commit, so it is finished elsewhere instead."""

    ignored: bool = False
    resumed: bool = False


class ImportAPI(Stub):
    """The coord's import calls (``elanus.coord.import.<call>``)."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, subjects.COORD, timeout)

    async def create(self, req: CreateImport) -> ImportCreated:
        return await self._ask("import.create", req, ImportCreated)

    async def state(self, req: ImportState) -> ImportJobView:
        return await self._ask("import.state", req, ImportJobView)

    async def list(self, req: ListImports) -> ImportJobs:
        return await self._ask("import.list", req, ImportJobs)

    async def abort_write(self, req: AbortWrite) -> WriteAborted:
        return await self._ask("import.abort_write", req, WriteAborted)

    async def progress(self, req: ImportProgress, timeout: float | None = None) -> Ack:
        return await self._ask("import.progress", req, Ack, timeout)

    async def prepare(self, req: PrepareImport) -> ImportSegments:
        return await self._ask("import.prepare", req, ImportSegments)

    async def commit(self, req: CommitImport) -> ImportCommitted:
        return await self._ask("import.commit", req, ImportCommitted)

    async def finish(self, req: FinishImport) -> Ack:
        return await self._ask("import.finish", req, Ack)

    async def fail(self, req: FailImport) -> FailHeard:
        return await self._ask("import.fail", req, FailHeard)
