"""DoAction entries of bulk import and staged writes: import, get_import_state,
list_import_jobs, commit_write, abort_write; executed by ``ImportService``. All but
``import`` are declared by their records (``elanus/ops/imports.py``).

File paths are checked by name here (``elanus.filereaders.group_files``, which is why
``import`` keeps its dict checker: no shared module, ``elanus/ops`` included, may import
the file readers); the proxy then confines them to the import roots
(``elanus.importroots``) and the data node checks again when it opens them. Both writing
actions are refused where the database denies writing (``database.force.deny.writing``).
"""

from __future__ import annotations

from typing import Any

from elanus.api.base import as_body
from elanus.api.imports import ImportState, ListImports
from elanus.errors import invalid
from elanus.filereaders import group_files
from elanus.flight.actions import action, check_db, check_named
from elanus.flight.executors import Call, OpCall
from elanus.flight.limits import Kind
from elanus.flight.registry import operation
from elanus.ops import imports as ops
from elanus.privileges import OPEN
from elanus.requests import Body
from elanus.schema import check_name

MAX_FILES = 1024
IMPORT_OPTIONS = ("sep",)


def _run_import(c: Call) -> dict[str, Any]:
    c.proxy.dbgate.check_writable(c.request["db"])  # database.force.deny.writing
    return c.proxy.imports.start(c.request)


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
    run=_run_import,
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


def _run_import_state(c: OpCall[ops.GetImportState]) -> dict[str, Any]:
    return as_body(c.proxy.run(c.proxy.importcoord.state(ImportState(job_id=c.request.job_id))))


operation(
    ops.GetImportState,
    "State of an import job. Body: job_id. Result: state (Pending, Importing, Completed, "
    "Failed), progress (0..1), rows, total_rows, segment_ids, reason, reason_code, stage.",
    privilege=OPEN,
    run=_run_import_state,
)


def _run_list_jobs(c: OpCall[ops.ListImportJobs]) -> dict[str, Any]:
    which = ListImports()
    if c.request.collection:
        info = c.proxy.dml.collection(c.request.db, c.request.collection)
        which = ListImports(collection_id=info.collection_id)
    return as_body(c.proxy.run(c.proxy.importcoord.list(which)))


operation(
    ops.ListImportJobs,
    "Import jobs, oldest first, of one collection or all. Body: collection. Result: jobs.",
    privilege="Import",
    run=_run_list_jobs,
)


def _run_commit(c: OpCall[ops.CommitWrite]) -> dict[str, Any]:
    r = c.request
    c.proxy.dbgate.check_writable(r.db)  # database.force.deny.writing
    return c.proxy.imports.commit_write(
        r.db, r.collection, r.write_id, upsert=r.upsert, parts=r.parts,
        expected_rows=r.expected_rows, wait_s=r.waits(),
    )  # fmt: skip


operation(
    ops.CommitWrite,
    "Make the rows staged under a write id (DoPut with 'stage') visible, all at one "
    "timestamp; with upsert, earlier rows with the same keys disappear at that timestamp. "
    "Repeating a commit is harmless. Body: collection, write_id, upsert, parts, "
    "expected_rows, wait_s. Result: job_id, state, rows, ts.",
    privilege="Insert",  # Upsert for an upsert: flight/auth.py need_for
    rate=Kind.DML,
    run=_run_commit,
)
operation(
    ops.AbortWrite,
    "Discard the rows staged under a write id (refused once a commit of it started). "
    "Body: write_id. Result: removed.",
    privilege=OPEN,
    run=lambda c: c.proxy.imports.abort(c.request.write_id),
)
