"""DoAction entries of bulk import and staged writes: import, get_import_state,
list_import_jobs, commit_write, abort_write.

Registered in the shared catalogue (``actions.ACTIONS``) so ListActions, the unknown-key
check and the protocol doc cover them; the proxy runs them through ``ImportService``.
Pure: no I/O. File paths are checked by name here; the proxy then confines them to the
import roots (``elanus.importroots``) and the data node checks again when it opens them.
"""

from __future__ import annotations

from typing import Any

from elanus import layout
from elanus.errors import invalid
from elanus.filereaders import group_files
from elanus.flight.actions import _action, _db, _name
from elanus.requests import Body
from elanus.schema import check_name

MAX_FILES = 1024
IMPORT_OPTIONS = ("sep",)
MAX_COMMIT_WAIT_S = 110.0
IMPORT_ACTIONS = ("import", "get_import_state", "list_import_jobs", "commit_write", "abort_write")


def _paths(entries: list[Any]) -> list[str]:
    return [p for e in entries for p in (e if isinstance(e, list) else [e])]


@_action(
    "import",
    "Bulk import files into segments (Milvus's bulk insert): Parquet, JSON Lines or CSV "
    "files, or sets of .npy files (one per field), inside the server's import roots "
    "(relative paths: under the first root; DoPut op 'upload' puts a file there). Body: "
    "collection, files, partition, options (sep). Result: job_id; poll get_import_state.",
    ("collection", "files", "partition", "options"),
)
def _import(b: Body) -> dict[str, Any]:
    files = b.list("files")
    if not files:
        raise invalid("import: 'files' is empty")
    if len(_paths(files)) > MAX_FILES:
        raise invalid(f"import: at most {MAX_FILES} files per job")
    units = group_files(files)
    options = b.dict("options", {})
    unknown = sorted(set(options) - set(IMPORT_OPTIONS))
    if unknown:
        raise invalid(f"import: unknown option(s) {', '.join(map(repr, unknown))}")
    sep = options.get("sep", ",")
    if not isinstance(sep, str) or len(sep) != 1 or sep in '\n\r"':
        raise invalid(f"import: option 'sep' must be one character (not a quote), got {sep!r}")
    partition = b.str("partition", None)
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "partition": check_name(partition, "partition") if partition else None,
        "units": units,
        "options": {"sep": sep} if "sep" in options else {},
    }


@_action(
    "get_import_state",
    "State of an import job. Body: job_id. Result: state (Pending, Importing, Completed, "
    "Failed), progress (0..1), rows, total_rows, segment_ids, reason, reason_code, stage.",
    ("job_id",),
)
def _import_state(b: Body) -> dict[str, Any]:
    _db(b)
    return {"job_id": b.int("job_id", lo=1)}


@_action(
    "list_import_jobs",
    "Import jobs, oldest first, of one collection or all. Body: collection. Result: jobs.",
    ("collection",),
)
def _list_import_jobs(b: Body) -> dict[str, Any]:
    collection = b.str("collection", None)
    return {
        "db": _db(b),
        "collection": check_name(collection, "collection") if collection else None,
    }


@_action(
    "commit_write",
    "Make the rows staged under a write id (DoPut with 'stage') visible, all at one "
    "timestamp; with upsert, earlier rows with the same keys disappear at that timestamp. "
    "Repeating a commit is harmless. Body: collection, write_id, upsert, parts, "
    "expected_rows, wait_s. Result: job_id, state, rows, ts.",
    ("collection", "write_id", "upsert", "parts", "expected_rows", "wait_s"),
)
def _commit_write(b: Body) -> dict[str, Any]:
    parts = b.list("parts", None)
    if parts is not None:
        parts = [layout.check_write_id(p, "part") for p in parts]
    wait_s = b.float("wait_s", 60.0)
    if not 0 <= wait_s <= MAX_COMMIT_WAIT_S:
        raise invalid(f"commit_write: 'wait_s' must be within [0, {MAX_COMMIT_WAIT_S}]")
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "write_id": layout.check_write_id(b.str("write_id")),
        "upsert": b.bool("upsert", False),
        "parts": parts,
        "expected_rows": b.int("expected_rows", None, lo=0),
        "wait_s": wait_s,
    }


@_action(
    "abort_write",
    "Discard the rows staged under a write id (refused once a commit of it started). "
    "Body: write_id. Result: removed.",
    ("write_id",),
)
def _abort_write(b: Body) -> dict[str, Any]:
    _db(b)
    return {"write_id": layout.check_write_id(b.str("write_id"))}
