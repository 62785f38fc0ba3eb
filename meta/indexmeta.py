"""Index records in DuckDB (seed 002's MetaTable): one row per index on a field, one per
build task (IndexBuildID) of a flushed segment. These functions run on the database thread.

Task states: Unissued → InProgress → Finished | Failed. ``version`` counts assignments: a
task given to a second builder (the first died) gets version + 1, and only a report for
the current version counts. ``mark_deleted`` hides a dropped index's tasks at once; the
recycling loop removes their files and rows, and the files of superseded versions
(``recycled`` notes that this was done for a finished task).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import duckdb

from elanus.errors import invalid
from elanus.indexparams import IndexSpec, make_index_spec
from elanus.scalarindex import is_scalar_spec, make_scalar_spec
from elanus.schema import DataType, Field
from elanus.states import IndexTaskState


@dataclass
class IndexRecord:
    index_id: int
    collection_id: int
    field_name: str
    index_name: str
    spec: dict[str, Any]
    created_ts: int
    deleted: bool = False

    def row(self) -> list[Any]:
        return [
            self.index_id,
            self.collection_id,
            self.field_name,
            self.index_name,
            json.dumps(self.spec),
            self.created_ts,
            self.deleted,
        ]


TASK_COLUMNS = (
    "build_id", "index_id", "collection_id", "partition_id", "segment_id", "num_rows",
    "data_path", "state", "version", "node_id", "fail_reason", "file_paths", "mark_deleted",
    "recycled",
)  # fmt: skip


@dataclass
class IndexTask:
    build_id: int
    index_id: int
    collection_id: int
    partition_id: int
    segment_id: int
    num_rows: int
    data_path: str
    state: IndexTaskState = IndexTaskState.UNISSUED
    version: int = 0
    node_id: str | None = None
    fail_reason: str | None = None
    file_paths: list[str] = field(default_factory=list)
    mark_deleted: bool = False
    recycled: bool = False

    def row(self) -> list[Any]:
        values = [getattr(self, c) for c in TASK_COLUMNS]
        values[TASK_COLUMNS.index("state")] = self.state.value
        values[TASK_COLUMNS.index("file_paths")] = json.dumps(self.file_paths)
        return values

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> IndexTask:
        d = dict(zip(TASK_COLUMNS, row, strict=True))
        d["state"] = IndexTaskState(d["state"])
        d["file_paths"] = json.loads(d["file_paths"] or "[]")
        return cls(**d)

    @property
    def label(self) -> str:
        return f"index task {self.build_id}"

    # -- the scheduler's view (meta/scheduler.py's Task) ------------------------------------
    @property
    def holder(self) -> str | None:
        return self.node_id

    @property
    def lease_expires(self) -> float:
        return math.inf  # a pulling builder's lease is its node's (IndexCoord.leases)

    @property
    def attempts(self) -> int:
        return self.version  # raised by every assignment

    @property
    def reason(self) -> str | None:
        return self.fail_reason

    def to_dict(self) -> dict[str, Any]:
        d = {c: getattr(self, c) for c in TASK_COLUMNS}
        d["state"] = self.state.value
        return d


def load(con: duckdb.DuckDBPyConnection) -> tuple[list[IndexRecord], list[IndexTask]]:
    indexes = [
        IndexRecord(int(r[0]), int(r[1]), r[2], r[3], json.loads(r[4]), int(r[5]), bool(r[6]))
        for r in con.execute(
            "SELECT index_id, collection_id, field_name, index_name, spec_json, created_ts,"
            " deleted FROM indexes"
        ).fetchall()
    ]
    cols = ", ".join(TASK_COLUMNS)
    tasks = [
        IndexTask.from_row(r) for r in con.execute(f"SELECT {cols} FROM index_tasks").fetchall()
    ]
    return indexes, tasks


def save(
    con: duckdb.DuckDBPyConnection, indexes: list[IndexRecord], tasks: list[IndexTask]
) -> None:
    """Upsert indexes and tasks in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        if indexes:
            con.executemany(
                "INSERT OR REPLACE INTO indexes VALUES (?, ?, ?, ?, ?, ?, ?)",
                [i.row() for i in indexes],
            )
        if tasks:
            marks = ", ".join("?" * len(TASK_COLUMNS))
            con.executemany(
                f"INSERT OR REPLACE INTO index_tasks VALUES ({marks})", [t.row() for t in tasks]
            )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def forget(con: duckdb.DuckDBPyConnection, build_ids: list[int], index_ids: list[int]) -> None:
    """Remove recycled tasks and indexes whose tasks are all gone."""
    con.execute("BEGIN TRANSACTION")
    if build_ids:
        con.executemany("DELETE FROM index_tasks WHERE build_id = ?", [[b] for b in build_ids])
    if index_ids:
        con.executemany("DELETE FROM indexes WHERE index_id = ?", [[i] for i in index_ids])
    con.execute("COMMIT")


def field_spec(field: Field, index_type: str, metric: str | None, params: Any) -> dict[str, Any]:
    """The stored spec of an index on ``field``: a vector index, or a scalar one."""
    if field.dtype.is_vector:
        vector: IndexSpec = make_index_spec(field.dtype, field.dim or 0, index_type, metric, params)
        return vector.to_dict()
    if field.dtype == DataType.ARRAY:
        raise invalid(f"indexes on Array fields ({field.name!r}) are not supported")
    return make_scalar_spec(field, index_type, params).to_dict()


def spec_slot(spec: dict[str, Any]) -> tuple[Any, ...]:
    """What one index of a field covers: the whole field, or one JSON path of it."""
    return tuple(spec.get("path") or ()) if is_scalar_spec(spec) else ()


def path_words(spec: dict[str, Any]) -> str:
    path = (spec.get("params") or {}).get("json_path") if is_scalar_spec(spec) else None
    return f" (json_path {path})" if path else ""
