"""Milvus 2.6's snapshot RPCs (pymilvus's ``create_snapshot`` family) over the snapshot
actions (``flight/snapshot_actions.py``). A snapshot lives in the coord's catalog, not as
manifests on S3: ``s3_location`` is empty. ``RestoreExternalSnapshot``,
``ExportSnapshot`` and ``GetExportSnapshotState`` are not served."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import snapshots as ops
from elanus.tsutil import physical_ms


def restore_info(job: ops.RestoreJobState) -> Any:
    return milvus_pb2.RestoreSnapshotInfo(
        job_id=int(job["job_id"]),
        snapshot_name=str(job["snapshot"]),
        db_name=str(job["db"]),
        collection_name=str(job["collection"]),
        state=milvus_pb2.RestoreSnapshotState.Value(str(job["state"])),
        progress=int(job["progress"]),
        reason=str(job.get("reason") or ""),
        start_time=int(job["start_time_ms"]),
        time_cost=int(job["time_cost_ms"]),
    )


class SnapshotRpcs(Servicer):
    @served()
    def CreateSnapshot(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.CreateSnapshot(
            db=ctx.db,
            collection=request.collection_name,
            name=request.name,
            description=request.description,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def DropSnapshot(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.DropSnapshot(db=ctx.db, collection=request.collection_name, name=request.name)
        self.run_op(ctx, op)
        return ok()

    @served()
    def ListSnapshots(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.ListSnapshots(db=ctx.db, collection=request.collection_name or None)
        doc: ops.SnapshotList = self.run_op(ctx, op)
        return milvus_pb2.ListSnapshotsResponse(
            status=ok(), snapshots=[s["name"] for s in doc["snapshots"]]
        )

    @served()
    def DescribeSnapshot(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.DescribeSnapshot(db=ctx.db, collection=request.collection_name, name=request.name)
        doc: ops.SnapshotDescription = self.run_op(ctx, op)
        return milvus_pb2.DescribeSnapshotResponse(
            status=ok(),
            name=doc["name"],
            description=doc["description"],
            collection_name=doc["collection"],
            partition_names=list(doc["partitions"]),
            create_ts=physical_ms(int(doc["ts"])),
            s3_location="",
        )

    @served()
    def RestoreSnapshot(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.RestoreSnapshot(
            db=ctx.db,
            collection=request.collection_name,
            name=request.name,
            target_collection=request.target_collection_name,
            target_db=request.target_db_name or None,
        )
        doc: ops.RestoreStarted = self.run_op(ctx, op)
        return milvus_pb2.RestoreSnapshotResponse(status=ok(), job_id=int(doc["job_id"]))

    @served()
    def GetRestoreSnapshotState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.GetRestoreSnapshotState(db=ctx.db, job_id=int(request.job_id))
        job: ops.RestoreJobState = self.run_op(ctx, op)
        return milvus_pb2.GetRestoreSnapshotStateResponse(status=ok(), info=restore_info(job))

    @served()
    def ListRestoreSnapshotJobs(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.ListRestoreSnapshotJobs(db=ctx.db, collection=request.collection_name or None)
        doc: ops.RestoreJobList = self.run_op(ctx, op)
        return milvus_pb2.ListRestoreSnapshotJobsResponse(
            status=ok(), jobs=[restore_info(j) for j in doc["jobs"]]
        )

    @served()
    def PinSnapshotData(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.PinSnapshotData(
            db=ctx.db,
            collection=request.collection_name,
            name=request.name,
            ttl_seconds=int(request.ttl_seconds),
        )
        doc: ops.SnapshotPin = self.run_op(ctx, op)
        return milvus_pb2.PinSnapshotDataResponse(status=ok(), pin_id=int(doc["pin_id"]))

    @served()
    def UnpinSnapshotData(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.UnpinSnapshotData(db=ctx.db, pin_id=int(request.pin_id)))
        return ok()
