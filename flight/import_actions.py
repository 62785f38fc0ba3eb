"""DoAction entries of bulk import and staged writes: import, get_import_state,
list_import_jobs, commit_write, abort_write; executed by ``ImportService``.

File paths are checked by name here; the proxy then confines them to the import roots
(``elanus.importroots``) and the data node checks again when it opens them.
"""

from __future__ import annotations

from typing import Any

from elanus import layout
from elanus.api.base import as_body
from elanus.api.imports import ImportState, ListImports
from elanus.errors import invalid
from elanus.filereaders import group_files
from elanus.flight.actions import action, check_db, check_named
from elanus.flight.executors import Call, Executor
from elanus.flight.limits import Kind
from elanus.privileges import OPEN
from elanus.requests import Body
from elanus.schema import check_name

MAX_FILES = 1024
IMPORT_OPTIONS = ("sep",)
MAX_COMMIT_WAIT_S = 110.0


def _writing(run: Executor) -> Executor:
    """``run``, unless the database denies writing (``database.force.deny.writing``)."""

    def gated(c: Call) -> Any:
        c.proxy.dbgate.check_writable(c.request["db"])
        return run(c)

    return gated


def _paths(entries: list[Any]) -> list[str]:
    return [p for e in entries for p in (e if isinstance(e, list) else [e])]


@action(
    "import",
    "Bulk import files into segments (Milvus's bulk insert): Parquet, JSON Lines or CSV "
    "files, or sets of .npy files (one per field), inside the server's import roots "
    "(relative paths: under the first root; DoPut op 'upload' puts a file there). Body: "
    "collection, files, partition, options (sep). Result: job_id; poll get_import_state.",
    ("collection", "files", "partition", "options"),
    privilege="Import",
    rate=Kind.DML,
    run=_writing(lambda c: c.proxy.imports.start(c.request)),
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
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "partition": check_name(partition, "partition") if partition else None,
        "units": units,
        "options": {"sep": sep} if "sep" in options else {},
    }


@action(
    "get_import_state",
    "State of an import job. Body: job_id. Result: state (Pending, Importing, Completed, "
    "Failed), progress (0..1), rows, total_rows, segment_ids, reason, reason_code, stage.",
    ("job_id",),
    privilege=OPEN,
    run=lambda c: as_body(
        c.proxy.run(c.proxy.importcoord.state(ImportState(job_id=c.request["job_id"])))
    ),
)
def _import_state(b: Body) -> dict[str, Any]:
    check_db(b)
    return {"job_id": b.int("job_id", lo=1)}


def _run_list_jobs(c: Call) -> dict[str, Any]:
    which = ListImports()
    if c.request["collection"]:
        info = c.proxy.dml.collection(c.request["db"], c.request["collection"])
        which = ListImports(collection_id=info.collection_id)
    return as_body(c.proxy.run(c.proxy.importcoord.list(which)))


@action(
    "list_import_jobs",
    "Import jobs, oldest first, of one collection or all. Body: collection. Result: jobs.",
    ("collection",),
    privilege="Import",
    run=_run_list_jobs,
)
def _list_import_jobs(b: Body) -> dict[str, Any]:
    collection = b.str("collection", None)
    return {
        "db": check_db(b),
        "collection": check_name(collection, "collection") if collection else None,
    }


@action(
    "commit_write",
    "Make the rows staged under a write id (DoPut with 'stage') visible, all at one "
    "timestamp; with upsert, earlier rows with the same keys disappear at that timestamp. "
    "Repeating a commit is harmless. Body: collection, write_id, upsert, parts, "
    "expected_rows, wait_s. Result: job_id, state, rows, ts.",
    ("collection", "write_id", "upsert", "parts", "expected_rows", "wait_s"),
    privilege="Insert",  # Upsert for an upsert: flight/auth.py need_for
    rate=Kind.DML,
    run=_writing(lambda c: c.proxy.imports.commit(c.request)),
)
def _commit_write(b: Body) -> dict[str, Any]:
    parts = b.list("parts", None)
    if parts is not None:
        parts = [layout.check_write_id(p, "part") for p in parts]
    wait_s = b.float("wait_s", 60.0)
    if not 0 <= wait_s <= MAX_COMMIT_WAIT_S:
        raise invalid(f"commit_write: 'wait_s' must be within [0, {MAX_COMMIT_WAIT_S}]")
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "write_id": layout.check_write_id(b.str("write_id")),
        "upsert": b.bool("upsert", False),
        "parts": parts,
        "expected_rows": b.int("expected_rows", None, lo=0),
        "wait_s": wait_s,
    }


@action(
    "abort_write",
    "Discard the rows staged under a write id (refused once a commit of it started). "
    "Body: write_id. Result: removed.",
    ("write_id",),
    privilege=OPEN,
    run=lambda c: c.proxy.imports.abort(c.request["write_id"]),
)
def _abort_write(b: Body) -> dict[str, Any]:
    check_db(b)
    return {"write_id": layout.check_write_id(b.str("write_id"))}
