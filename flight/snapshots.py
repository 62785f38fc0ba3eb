"""Snapshots in the proxy: taking one (a flush, then the coord records it) and restoring
one into a new collection. The coord keeps them (``meta/snapshots.py``).

Taking a snapshot at ``T`` makes the collection's files complete up to ``T`` first, as a
files-only read plan does (``fileplan.make_files_complete``: a flush, every delete up to
``T`` written), so the snapshot holds exactly what a Strong read at ``T`` saw, growing
rows included. Milvus's ``CreateSnapshot`` takes only what is sealed and advises a flush
first; here the flush is part of it.

A restore recreates the collection (its schema, properties, partitions and indexes, as
described when the snapshot was taken) under the new name, reads each listed segment's
rows at ``T`` from its files (a query node reads them page by page, as for a files-only
read plan: ``fileplan.segment_page``) and stages them as a
staged write does (``ImportService.stage_rows``), keys kept; committing the write starts
an import job, whose id is the restore's job id: the rows appear at once when it ends,
and its indexes are built as for any import. The restore answers once the rows are
staged; a failure before that drops the new collection and names the cause.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import pyarrow as pa

from elanus.api.base import as_body
from elanus.api.imports import ImportState
from elanus.api.indexcoord import DescribeIndex
from elanus.api.rootcoord import TsoAlloc
from elanus.api.snapshot import (
    CreateSnapshot,
    GetSnapshot,
    ListRestores,
    RecordRestore,
    RestoreJob,
    SnapshotDetail,
    SnapshotView,
)
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.search import fileplan
from elanus.ops import collections as colls
from elanus.ops import decode_op
from elanus.ops.indexes import CreateIndex
from elanus.ops.partitions import CreatePartition
from elanus.ops.snapshots import RestoreJobState, RestoreStarted, SnapshotIndex
from elanus.schema import Schema
from elanus.states import ImportJobState
from elanus.tsutil import physical_ms

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.flight.auth import Caller
    from elanus.flight.imports import ImportService
    from elanus.flight.metacache import CollectionInfo, MetaCache
    from elanus.flight.ports import ActionRunner, CollectionLoader, CollectionLookup, LoopBridge
    from elanus.flight.search import ReadService

PART = "restore"
RESTORE_STATES = {
    ImportJobState.PENDING: "RestoreSnapshotPending",
    ImportJobState.IMPORTING: "RestoreSnapshotExecuting",
    ImportJobState.COMPLETED: "RestoreSnapshotCompleted",
    ImportJobState.FAILED: "RestoreSnapshotFailed",
}
"""An import job's state as Milvus's ``RestoreSnapshotState``."""


class SnapshotService:
    """Given what it uses (``flight/ports.py``), never the proxy."""

    def __init__(
        self,
        *,
        loop: LoopBridge,
        coord: CoordAPI,
        cache: MetaCache,
        collections: CollectionLookup,
        loader: CollectionLoader,
        reads: ReadService,
        imports: ImportService,
        act: ActionRunner,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.cache = cache
        self.collections = collections
        self.loader = loader
        """The restored collection, described by the coord once it is created."""
        self.reads = reads
        self.imports = imports
        self.act = act
        """A restore recreates the collection through the DDL actions, as the caller."""

    def collection(self, db: str, name: str) -> CollectionInfo:
        return self.collections.collection(db, name)

    def create(self, db: str, collection: str, name: str, description: str) -> SnapshotView:
        """Snapshot ``name`` of ``collection`` now; the snapshot as listed."""
        loop, coord = self.loop, self.coord
        info = self.collection(db, collection)
        ts = loop.run(coord.root.alloc_ts(TsoAlloc())).ts
        fileplan.make_files_complete(self.reads, info, ts)
        indexes = loop.run(coord.index.describe(DescribeIndex(collection_id=info.collection_id)))
        recorded = [
            SnapshotIndex(
                field_name=i.field,
                index_name=i.index_name,
                index_type=i.index_type,
                metric_type=i.metric_type,
                params=i.params,
            )
            for i in indexes.indexes
        ]
        shape = {"collection": as_body(info.described), "indexes": recorded}
        return loop.run(
            coord.snapshots.create(
                CreateSnapshot(
                    name=name,
                    db=info.db,
                    collection=info.name,
                    collection_id=info.collection_id,
                    ts=ts,
                    description=description,
                    shape=shape,
                )  # fmt: skip
            )
        )

    def detail(self, db: str, collection: str, name: str) -> SnapshotDetail:
        info = self.collection(db, collection)
        return self.loop.run(
            self.coord.snapshots.get(GetSnapshot(collection_id=info.collection_id, name=name))
        )

    # -- restore ------------------------------------------------------------------------------
    def restore(
        self, source_db: str, source: str, snapshot: str, db: str, target: str, caller: Caller
    ) -> RestoreStarted:
        """Snapshot ``snapshot`` of collection ``source`` restored into the new collection
        ``target`` of ``db``, as ``caller``; the restore's job id."""
        detail = self.detail(source_db, source, snapshot)
        if self.cache.get(db, target) is not None or self._exists(db, target, caller):
            raise ElanusError(
                ErrorCode.COLLECTION_ALREADY_EXISTS,
                f"restore_snapshot: collection {target!r} already exists in database {db!r}; "
                "a snapshot is restored into a new collection",
            )
        self._recreate(detail, db, target, caller)
        try:
            job_id = self._stage_and_commit(detail, db, target)
        except BaseException as exc:
            self._roll_back(db, target, caller, exc)
            raise
        self.loop.run(
            self.coord.snapshots.record_restore(
                RecordRestore(
                    job_id=job_id,
                    snapshot=detail.snapshot.name,
                    source_db=detail.snapshot.db,
                    source_collection=detail.snapshot.collection,
                    db=db,
                    collection=target,
                )  # fmt: skip
            )
        )
        return RestoreStarted(job_id=job_id)

    def _exists(self, db: str, name: str, caller: Caller) -> bool:
        has = colls.HasCollection(db=db, name=name)
        return bool(self.act.perform_op(has, caller)["value"])

    def _recreate(self, detail: SnapshotDetail, db: str, name: str, caller: Caller) -> None:
        """The collection as described at the snapshot, its partitions and indexes."""
        described = detail.shape["collection"]
        schema = Schema.from_dict(described["schema"])
        partitions = [str(p["name"]) for p in described.get("partitions") or []]
        keyed = schema.partition_key is not None
        create = colls.CreateCollection(
            db=db,
            name=name,
            schema=described["schema"],
            num_shards=described["num_shards"],
            consistency_level=described["consistency_level"],
            properties=described.get("properties") or {},
            description=described.get("description") or "",
            num_partitions=len(partitions) if keyed else None,
        )
        self.act.perform_op(create, caller)
        try:
            if not keyed:
                for p in partitions:
                    if p != "_default":
                        partition = CreatePartition(db=db, collection=name, partition=p)
                        self.act.perform_op(partition, caller)
            for index in detail.shape.get("indexes") or []:
                wanted = {k: v for k, v in index.items() if v not in (None, "")}
                index_op = decode_op(CreateIndex, {"db": db, "collection": name, **wanted})
                self.act.perform_op(index_op, caller)
        except BaseException as exc:
            self._roll_back(db, name, caller, exc)
            raise

    def _stage_and_commit(self, detail: SnapshotDetail, db: str, name: str) -> int:
        """Every row of the snapshot staged under a new write, committed as one import."""
        info = self.loop.run(self.loader.collection(db, name))
        old = {
            int(p["partition_id"]): str(p["name"]) for p in detail.shape["collection"]["partitions"]
        }
        write_id = f"restore-{uuid.uuid4().hex}"
        source = detail.shape["collection"]["schema"]
        staged = 0
        for seg in detail.files:
            pid = info.partitions.get(old.get(seg.partition_id, ""))
            if pid is None:
                raise ElanusError(
                    ErrorCode.INTERNAL,
                    f"restore_snapshot: segment {seg.segment_id}'s partition is not in the "
                    "snapshot's description",
                )
            page = fileplan.segment_page(
                self.reads, seg.segment_id, seg.path, detail.snapshot.ts, source
            )
            for batch in self.reads.every_row(info, page):
                rows = pa.Table.from_batches([batch])
                list(self.imports.stage_rows(info, write_id, PART, pid, rows))
                staged += rows.num_rows
        # A staged file gone before the commit fails the restore, never shortens it.
        done = self.imports.commit_write(
            db, name, write_id, upsert=False, parts=None, expected_rows=staged, wait_s=0.0
        )
        return int(done["job_id"])

    def _roll_back(self, db: str, name: str, caller: Caller, cause: BaseException) -> None:
        """Drop the half-made collection; a failure to do so is added to the error."""
        try:
            self.act.perform_op(colls.DropCollection(db=db, name=name), caller)
        except ElanusError as exc:
            if isinstance(cause, ElanusError):
                cause.message += (
                    f" (and dropping the half-restored collection {name!r} failed: "
                    f"{exc.message}; drop it by hand)"
                )

    # -- restore jobs --------------------------------------------------------------------------
    def restore_jobs(self, which: ListRestores) -> list[RestoreJobState]:
        jobs = self.loop.run(self.coord.snapshots.restores(which)).jobs
        return [self._job_view(j) for j in jobs]

    def restore_state(self, job_id: int) -> RestoreJobState:
        jobs = self.restore_jobs(ListRestores(job_id=job_id))
        if not jobs:
            raise ElanusError(
                ErrorCode.IMPORT_JOB_NOT_FOUND, f"restore job {job_id} does not exist"
            )
        return jobs[0]

    def _job_view(self, job: RestoreJob) -> RestoreJobState:
        state = self.loop.run(self.coord.imports.state(ImportState(job_id=job.job_id)))
        started_ms = int(1000 * job.started_at)
        ended_ms = physical_ms(state.ts) if state.ts else int(1000 * time.time())
        return RestoreJobState(
            job_id=job.job_id,
            snapshot=job.snapshot,
            source_db=job.source_db,
            source_collection=job.source_collection,
            db=job.db,
            collection=job.collection,
            started_at=job.started_at,
            state=RESTORE_STATES.get(ImportJobState(state.state), "RestoreSnapshotNone"),
            progress=int(round(100 * state.progress)),
            rows=state.total_rows,
            reason=state.reason,
            start_time_ms=started_ms,
            time_cost_ms=max(0, ended_ms - started_ms),
        )
