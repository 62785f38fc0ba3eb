"""Import, GetImportState and ListImportTasks (pymilvus's ``do_bulk_insert`` family): an
Elanus import job is Milvus's import task, its files read from the server's import roots
as the ``import`` action reads them (Parquet, JSON Lines, CSV, sets of .npy files)."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from elanus.flight.limits import Kind
from elanus.milvus.schemas import kv_dict, kv_pairs
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import imports as ops
from elanus.tsutil import physical_ms

_STATES = {
    "Pending": common_pb2.ImportPending,
    "Importing": common_pb2.ImportStarted,
    "Completed": common_pb2.ImportCompleted,
    "Failed": common_pb2.ImportFailed,
}
MAX_LISTED = 1000


def task_state(job: ops.ImportJob, partition: str = "") -> Any:
    """An Elanus import job's view as Milvus's ``GetImportStateResponse``."""
    infos = {
        "collection": str(job.get("collection") or ""),
        "partition": partition,
        "files": ",".join(job.get("files") or []),
        "failed_reason": str(job.get("reason") or ""),
        "progress_percent": str(int(round(100 * float(job.get("progress") or 0)))),
    }
    return milvus_pb2.GetImportStateResponse(
        status=ok(),
        state=_STATES.get(str(job.get("state")), common_pb2.ImportPending),
        row_count=int(job.get("rows") or 0),
        infos=kv_pairs(infos),
        id=int(job["job_id"]),
        segment_ids=[int(s) for s in job.get("segment_ids") or []],
        create_ts=physical_ms(int(job.get("created_ts") or 0)) // 1000,
    )


class ImportRpcs(Servicer):
    @served(Kind.DML)
    def Import(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        options = kv_dict(request.options)  # sep only (honoured.py refuses the others)
        op = ops.Import(
            db=ctx.db,
            collection=request.collection_name,
            files=[list(request.files)] if _numpy_set(request.files) else list(request.files),
            partition=request.partition_name or None,
            options=options or None,
        )
        doc: ops.ImportStarted = self.run_op(ctx, op)
        return milvus_pb2.ImportResponse(status=ok(), tasks=[int(doc["job_id"])])

    @served()
    def GetImportState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return task_state(self.run_op(ctx, ops.GetImportState(db=ctx.db, job_id=int(request.task))))

    @served()
    def ListImportTasks(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.ListImportJobs(db=ctx.db, collection=request.collection_name or None)
        doc: ops.ImportJobList = self.run_op(ctx, op)
        jobs = list(doc.get("jobs") or [])
        limit = int(request.limit) if request.limit > 0 else MAX_LISTED
        return milvus_pb2.ListImportTasksResponse(
            status=ok(), tasks=[task_state(j) for j in jobs[-limit:]]
        )


def _numpy_set(files: Any) -> bool:
    """Milvus reads several ``.npy`` files of one request as one set (a file per field)."""
    return len(files) > 1 and all(str(f).endswith(".npy") for f in files)
