"""An import job's record and its table (the DuckDB ``import_jobs`` table, so jobs outlive
restarts), and the check of the units a job is created with: what Milvus keeps in
``datacoord/import_meta.go``, as ``meta/segmentmeta.py`` is to segments. The job's steps are
``meta/importjobs.py``'s."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.filenames import FORMATS
from elanus.requests import Body
from elanus.states import IMPORT_FINAL, ImportJobState

COLUMNS = (
    "job_id", "collection_id", "db", "collection", "partition_id", "write_id", "units",
    "options", "state", "progress", "rows", "segment_ids", "reason", "reason_code", "node_id",
    "commit_ts", "created_ts", "finished_ts",
)  # fmt: skip


@dataclass
class ImportJob:
    job_id: int
    collection_id: int
    db: str
    collection: str
    partition_id: int
    write_id: str | None
    units: list[dict[str, Any]]
    options: dict[str, Any]
    state: ImportJobState = ImportJobState.PENDING
    progress: float = 0.0
    rows: int = 0
    segment_ids: list[int] = field(default_factory=list)
    reason: str | None = None
    reason_code: str | None = None
    node_id: str | None = None
    commit_ts: int | None = None
    created_ts: int = 0
    finished_ts: int | None = None
    # -- in memory only ---------------------------------------------------------------------
    stage: str = ""
    published: bool = False
    """The commit's messages are in the log (False after a restart: publish again)."""
    serving: bool = True
    """False between the Completed commit and the loaded collections' handoff."""
    attempts: int = 0
    """Times it was handed to a data node (to run it, or to finish its commit)."""

    def row(self) -> list[Any]:
        values = {c: getattr(self, c) for c in COLUMNS}
        for c in ("units", "options", "segment_ids"):
            values[c] = json.dumps(values[c])
        return [values[c] for c in COLUMNS]

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> ImportJob:
        d = dict(zip(COLUMNS, row, strict=True))
        for c in ("units", "options", "segment_ids"):
            d[c] = json.loads(d[c])
        d["state"] = ImportJobState(d["state"])
        return cls(**d)

    @property
    def label(self) -> str:
        return f"import job {self.job_id}"

    @property
    def holder(self) -> str | None:
        return self.node_id

    @property
    def lease_expires(self) -> float:
        return math.inf  # held while its data node's session lives

    @property
    def upsert(self) -> bool:
        return bool(self.options.get("upsert"))

    def view(self) -> dict[str, Any]:
        """What ``get_import_state`` answers."""
        state, progress = self.state, self.progress
        if state == ImportJobState.COMPLETED and not self.serving:
            state, progress = ImportJobState.IMPORTING, min(progress, 0.99)
        return {
            "job_id": self.job_id,
            "collection": self.collection,
            "db": self.db,
            "state": state,
            "progress": round(progress, 4),
            "rows": self.rows if state == ImportJobState.COMPLETED else 0,
            "total_rows": self.rows,
            "segment_ids": list(self.segment_ids),
            "reason": self.reason or "",
            "reason_code": self.reason_code or "",
            "stage": self.stage if state not in IMPORT_FINAL else state.lower(),
            "write_id": self.write_id,
            "ts": self.commit_ts or 0,
            "created_ts": self.created_ts,
            "files": [p for u in self.units for p in u["paths"]] if not self.write_id else [],
        }


def load_jobs(con: Any) -> list[ImportJob]:
    """Every job of the table, oldest first (the coord's start)."""
    rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM import_jobs ORDER BY job_id").fetchall()
    return [ImportJob.from_row(row) for row in rows]


def save_job(job: ImportJob) -> Any:
    def write(con: Any) -> None:
        placeholders = ", ".join("?" * len(COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "job_id")
        con.execute(
            f"INSERT INTO import_jobs ({', '.join(COLUMNS)}) VALUES ({placeholders}) "
            f"ON CONFLICT (job_id) DO UPDATE SET {updates}",
            job.row(),
        )

    return write


def check_unit(unit: Any, default_partition: int, partitions: set[int]) -> dict[str, Any]:
    b = Body(unit, "import unit")
    fmt = b.str("format")
    paths = b.list("paths")
    pid = b.int("partition_id", default_partition)
    b.done()
    if fmt not in FORMATS:
        raise invalid(f"import: unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise invalid("import: every unit needs a non-empty list of paths")
    if pid not in partitions:
        raise ElanusError(ErrorCode.PARTITION_NOT_FOUND, f"partition {pid} does not exist")
    return {"format": fmt, "paths": list(paths), "partition_id": pid}
