"""DoAction entries of bulk import and staged writes: import, get_import_state,
list_import_jobs, commit_write, abort_write; declared by their records
(``elanus/ops/imports.py``), executed by ``ImportService``.

File paths are checked by name in the record (``elanus.filenames.group_files``); the proxy
then confines them to the import roots
(``elanus.importroots``) and the data node checks again when it opens them. Both writing
actions are refused where the database denies writing (``database.force.deny.writing``).
Each executor answers with its typed reply: the coord's record, or one of the replies
declared with the requests; the registry writes it as the JSON body.
"""

from __future__ import annotations

from elanus.api.imports import ImportJobs, ImportJobView, ImportState, ListImports
from elanus.flight.executors import OpCall
from elanus.flight.limits import Kind
from elanus.flight.registry import operation
from elanus.ops import imports as ops
from elanus.privileges import OPEN


def _run_import(c: OpCall[ops.Import]) -> ops.ImportStarted:
    r = c.request
    c.proxy.dbgate.check_writable(r.db)  # database.force.deny.writing
    return c.proxy.imports.start(r.db, r.collection, r.partition or None, r.units, r.sep)


operation(
    ops.Import,
    "Bulk import files into segments (Milvus's bulk insert): Parquet, JSON Lines or CSV "
    "files, or sets of .npy files (one per field), inside the server's import roots "
    "(relative paths: under the first root; DoPut op 'upload' puts a file there). Body: "
    "collection, files, partition, options (sep). Result: job_id; poll get_import_state.",
    privilege="Import",
    rate=Kind.DML,
    run=_run_import,
)


def _run_import_state(c: OpCall[ops.GetImportState]) -> ImportJobView:
    return c.proxy.run(c.proxy.importcoord.state(ImportState(job_id=c.request.job_id)))


operation(
    ops.GetImportState,
    "State of an import job. Body: job_id. Result: state (Pending, Importing, Completed, "
    "Failed), progress (0..1), rows, total_rows, segment_ids, reason, reason_code, stage.",
    privilege=OPEN,
    run=_run_import_state,
)


def _run_list_jobs(c: OpCall[ops.ListImportJobs]) -> ImportJobs:
    which = ListImports()
    if c.request.collection:
        info = c.proxy.dml.collection(c.request.db, c.request.collection)
        which = ListImports(collection_id=info.collection_id)
    return c.proxy.run(c.proxy.importcoord.list(which))


operation(
    ops.ListImportJobs,
    "Import jobs, oldest first, of one collection or all. Body: collection. Result: jobs.",
    privilege="Import",
    run=_run_list_jobs,
)


def _run_commit(c: OpCall[ops.CommitWrite]) -> ops.WriteCommitted:
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
