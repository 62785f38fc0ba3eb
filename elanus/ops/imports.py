"""Import jobs, staged writes and the change stream: the operations that move rows in and
out besides DoPut and the reads.

``get_import_state`` and ``abort_write`` name no collection: their ``db`` is optional
(checked as every action's), so the SDK sends it only where it always did. A write id and
its parts name directories (``elanus.layout.check_write_id``), checked in ``check`` with
the dict checkers' words. An ``import``'s files are grouped into units by name
(``elanus.filenames``); the proxy then confines them to the import roots.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, NotRequired, TypedDict

from elanus import layout
from elanus.errors import invalid
from elanus.filenames import group_files
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation
from elanus.requests import Range
from elanus.schema import check_name

MAX_COMMIT_WAIT_S = 110.0
COMMIT_WAIT_S = 60.0
"""How long a commit waits for its job when the body does not say."""


MAX_FILES = 1024
IMPORT_OPTIONS = ("sep",)


class ImportUnit(TypedDict):
    """What one reader of an import job reads: one row-based file, or one set of ``.npy``
    files (a file per field); a staged write's units name their partition."""

    format: str
    paths: list[str]
    partition_id: NotRequired[int]


@operation("import")
class Import:
    """Bulk import of files (Milvus's bulk insert): each entry of ``files`` a path, or a list
    of paths (one row-based file, or the ``.npy`` files of one set)."""

    db: DbName = DEFAULT_DB
    collection: CollectionName
    files: list[Any]
    partition: str | None = None
    """Absent or empty: the default partition (or the partition key's)."""
    options: dict[str, Any] | None = None
    """Only ``sep``, a CSV file's one-character separator."""

    def check(self) -> None:
        if not self.files:
            raise invalid("import: 'files' is empty")
        if sum(len(e) if isinstance(e, list) else 1 for e in self.files) > MAX_FILES:
            raise invalid(f"import: at most {MAX_FILES} files per job")
        self.units  # noqa: B018 - grouped once, kept for the executor
        options = self.options or {}
        unknown = sorted(set(options) - set(IMPORT_OPTIONS))
        if unknown:
            raise invalid(f"import: unknown option(s) {', '.join(map(repr, unknown))}")
        sep = options.get("sep", ",")
        if not isinstance(sep, str) or len(sep) != 1 or sep in '\n\r"':
            raise invalid(f"import: option 'sep' must be one character (not a quote), got {sep!r}")
        if self.partition:
            check_name(self.partition, "partition")

    @cached_property
    def units(self) -> list[ImportUnit]:
        """The files as import units (``group_files``)."""
        return [ImportUnit(format=u["format"], paths=u["paths"]) for u in group_files(self.files)]

    @property
    def sep(self) -> str | None:
        """A CSV file's separator, if the body names one (``check``: one character)."""
        return (self.options or {}).get("sep")


class ImportStarted(TypedDict):
    """The reply of ``import``: the job to poll."""

    job_id: int


class ImportJob(TypedDict):
    """An import job as ``get_import_state`` answers: the body of the coord's
    ``ImportJobView`` (``elanus/api/imports.py``), as the SDK returns it."""

    job_id: int
    collection: str
    db: str
    state: str
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


class ImportJobList(TypedDict):
    """The reply of ``list_import_jobs``, oldest first."""

    jobs: list[ImportJob]


@operation("get_import_state")
class GetImportState:
    db: DbName | None = None
    job_id: Annotated[int, Range(1)]


@operation("list_import_jobs")
class ListImportJobs:
    db: DbName = DEFAULT_DB
    collection: str | None = None
    """Absent or empty: every collection's jobs; else named in ``check``."""

    def check(self) -> None:
        if self.collection:
            check_name(self.collection, "collection")


@operation("commit_write")
class CommitWrite:
    """The fields in the order the dict checker read them (so a body with two mistakes is
    refused for the same one): ``db`` (every action's, checked first), then ``parts`` and
    ``wait_s`` before the collection."""

    db: DbName = DEFAULT_DB
    parts: list[Any] | None = None
    """Absent: every part of the write; else each a write id (``check``)."""
    wait_s: float | None = None
    """Absent: ``COMMIT_WAIT_S`` (the SDK never sends it)."""
    collection: CollectionName
    write_id: str
    upsert: bool = False
    expected_rows: Annotated[int, Range(0)] | None = None

    def check(self) -> None:
        for part in self.parts or ():
            layout.check_write_id(part, "part")
        if self.wait_s is not None and not 0 <= self.wait_s <= MAX_COMMIT_WAIT_S:
            raise invalid(f"commit_write: 'wait_s' must be within [0, {MAX_COMMIT_WAIT_S}]")
        layout.check_write_id(self.write_id)

    def waits(self) -> float:
        """How long the commit waits for its import job to end."""
        return COMMIT_WAIT_S if self.wait_s is None else self.wait_s


class WriteCommitted(TypedDict):
    """The reply of ``commit_write``: its import job where it stood when the wait ended."""

    job_id: int
    state: str
    rows: int
    ts: int
    segment_ids: list[int]


@operation("abort_write")
class AbortWrite:
    db: DbName | None = None
    write_id: str

    def check(self) -> None:
        layout.check_write_id(self.write_id)


class WriteDiscarded(TypedDict):
    """The reply of ``abort_write``: False if nothing was staged under the write id."""

    removed: bool


@operation("watch_collection")
class WatchCollection:
    db: DbName = DEFAULT_DB
    collection: CollectionName
