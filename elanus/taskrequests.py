"""Request types of the coordinator's index builds (``index.*``) and bulk import jobs
(``import.*``); what it pushes to an index node or a datanode is in ``elanus/api/``.

See ``elanus.coordrequests`` for how they are used; the key names are the wire format.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from elanus.errors import ErrorCode
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


@request("index.drop")
class DropIndex:
    collection_id: int
    index_name: str | None = None
    field: str | None = None


@request("index.describe")
class DescribeIndex:
    collection_id: int
    index_name: str | None = None
    field: str | None = None


@request("index.tasks")
class ListIndexTasks:
    collection_id: int | None = None


@request("index.claim")
class ClaimIndexTasks:
    """A pulling builder (a Spark run) takes pending tasks under a lease."""

    node_id: str
    collection_id: int | None = None
    limit: Annotated[int | None, Range(1)] = None
    retry_failed: bool = False


@request("index.heartbeat")
class IndexHeartbeat:
    node_id: str


@request("index.report")
class IndexReport:
    build_id: int
    version: int
    ok: bool
    files: list[str] = field(default_factory=list)
    fail_reason: str | None = None
    node_id: str | None = None
    seconds: float | None = None


@request("index.load_failed")
class IndexLoadFailed:
    build_id: int
    version: int
    node_id: str = "a query node"
    segment_id: int | None = None


# -- import jobs: the client's side -----------------------------------------------------------


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


@request("import.state")
class ImportState:
    job_id: int


@request("import.list")
class ListImports:
    collection_id: int | None = None


@request("import.abort_write")
class AbortWrite:
    write_id: str


# -- import jobs: the executor's callbacks ----------------------------------------------------


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


@request("import.commit")
class CommitImport(ExecutorCall):
    pass


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
