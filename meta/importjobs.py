"""Bulk import jobs (Milvus's bulk insert): files become segments directly, not via the log.

A job runs on a datanode, the executor, which reads every file and checks all of it before
anything is written. The coord owns the job table (DuckDB, so jobs outlive restarts) and
the steps that must be ordered with the rest of the cluster:

1. ``prepare``: the executor says how many rows go to each (partition, vchannel) segment;
   the coord allocates the segment ids and records them Importing (invisible to reads and
   compaction, known to garbage collection).
2. The executor writes the rows (no ``_ts`` yet) and the pk stats of every segment.
3. ``commit``: under the time-tick lock the coord takes the import timestamp ``T``, records
   it, and publishes into each vchannel, at ``T``, the deletes of an upsert (if any) and one
   IMPORT message per segment (``meta/importcommit.py``). Consumers meet them in timestamp
   order: the datanode starts tracking deletes of the new segments, a delegator holds its
   tsafe at ``T`` until the segment has been handed to it. From here on the job cannot
   fail; a coord restart or a dead executor resumes it.
4. The executor writes ``_ts = T`` into every segment and calls ``finish``: the segments
   become Flushed and the job Completed in one transaction; loaded collections get the
   segments through the flush handoff, and the job reports Completed once they serve.
   Their index builds wait for that (``IndexCoord.held``): on a small machine a build
   would take the CPUs from the loads the writer waits for.

The job's record and table are ``meta/importmeta.py``'s, the files the coord removes around
jobs ``meta/importfiles.py``'s.

A job that fails before its commit marks its segments Dropped (garbage collection removes
the files) and has imported nothing. Staged writes (``commit_write``) are jobs whose units
are the staged Arrow files, keyed by their write id so a repeated commit finds its job.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from elanus import layout
from elanus.api.base import ACK, Ack
from elanus.api.datanode import DataNodeAPI, FinalizeImport, ImportedSegment, RunImport
from elanus.api.imports import (
    AbortWrite,
    CommitImport,
    CreateImport,
    ExecutorCall,
    FailHeard,
    FailImport,
    FinishImport,
    ImportCommitted,
    ImportCreated,
    ImportJobs,
    ImportJobView,
    ImportProgress,
    ImportSegments,
    ImportState,
    ListImports,
    PrepareImport,
    WriteAborted,
)
from elanus.channels import subjects
from elanus.channels.runtime.loop import cancel_and_wait
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta import segmentmeta
from elanus.meta.datacoord import estimate_row_bytes
from elanus.meta.importcommit import ImportCommitPublisher
from elanus.meta.importfiles import collect_garbage, remove_tree, remove_uploads, uploads_of
from elanus.meta.importmeta import ImportJob, check_unit, load_jobs, save_job
from elanus.meta.scheduler import Lapsed
from elanus.meta.segmentmeta import Segment
from elanus.requests import Body
from elanus.schema import Schema
from elanus.states import IMPORT_FINAL, ImportJobState, SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import (
        CollectionLookup,
        Handoff,
        SegmentIndexer,
        SegmentStore,
        TickLock,
    )

log = logging.getLogger(__name__)


class ImportManager:
    def __init__(
        self,
        ctx: CoordContext,
        lookup: CollectionLookup,
        data: SegmentStore,
        ticks: TickLock,
        index: SegmentIndexer,
        query: Handoff,
    ) -> None:
        self.ctx, self.lookup, self.data, self.ticks = ctx, lookup, data, ticks
        self.index, self.query = index, query
        self.commits = ImportCommitPublisher(ctx, lookup)
        self.jobs: dict[int, ImportJob] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # job state changes one at a time

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "import.create": self.create,
            "import.state": self.state,
            "import.list": self.list_jobs,
            "import.abort_write": self.abort_write,
            "import.progress": self.progress,
            "import.prepare": self.prepare,
            "import.commit": self.commit,
            "import.finish": self.finish,
            "import.fail": self.fail,
        }

    async def start(self) -> None:
        for job in await self.ctx.db.run(load_jobs):
            self.jobs[job.job_id] = job
            if job.state == ImportJobState.IMPORTING and job.commit_ts is None:
                restarted = "the coord restarted while the job ran; nothing was imported"
                await self._fail(job, ElanusError(ErrorCode.UNAVAILABLE, restarted))
            elif job.state == ImportJobState.IMPORTING:
                job.node_id = None  # committed: publish again and finish on a live node

    async def stop(self) -> None:
        for task in list(self._tasks):
            await cancel_and_wait(task)

    def _spawn(self, coro: Any) -> None:
        task = self.ctx.supervisor.spawn("import job step", lambda: coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- client-facing handlers -------------------------------------------------------------
    async def create(self, req: CreateImport) -> ImportCreated:
        cid, pid, write_id, options = req.collection_id, req.partition_id, req.write_id, req.options
        info = await self.lookup.describe_by_id(cid)
        partitions = {int(p["partition_id"]) for p in info.get("partitions", [])}
        checked = [check_unit(u, pid, partitions) for u in req.units]
        if write_id is not None:
            layout.check_write_id(write_id)
            existing = self._by_write_id(write_id)
            if existing is not None and existing.state != ImportJobState.FAILED:
                if existing.collection_id != cid:
                    raise invalid(
                        f"write {write_id!r} was committed to another collection "
                        f"(job {existing.job_id})"
                    )
                return ImportCreated(job_id=existing.job_id, existing=True)
        elif not checked:
            raise invalid("import: 'files' is empty")
        if not checked and options.get("expected_rows"):
            raise invalid(
                f"nothing is staged under write {write_id!r}, but {options['expected_rows']} "
                "row(s) were expected (aborted, or removed as stale after gc_delay_s?)"
            )
        job_id, created_ts = self.ctx.ids.alloc(), self.ctx.tso.alloc()
        job = ImportJob(
            job_id=job_id,
            collection_id=cid,
            db=req.db,
            collection=req.collection or info.get("name", ""),
            partition_id=pid,
            write_id=write_id,
            units=checked,
            options=options,
            created_ts=created_ts,
            stage="queued",
            # a staged write with nothing staged is done at once: it is born Completed
            state=ImportJobState.COMPLETED if not checked else ImportJobState.PENDING,
            progress=0.0 if checked else 1.0,
            finished_ts=None if checked else created_ts,
        )
        self.jobs[job.job_id] = job  # before any await: a concurrent commit finds it
        try:
            await self.ctx.db.run(save_job(job))
        except BaseException:
            del self.jobs[job.job_id]
            raise
        if job.state == ImportJobState.PENDING:
            await self._dispatch(job)
        return ImportCreated(job_id=job.job_id, existing=False)

    def _by_write_id(self, write_id: str) -> ImportJob | None:
        found = [j for j in self.jobs.values() if j.write_id == write_id]
        live = [j for j in found if j.state != ImportJobState.FAILED]
        return (live or found)[-1] if found else None

    def _job(self, job_id: int) -> ImportJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise ElanusError(ErrorCode.IMPORT_JOB_NOT_FOUND, f"import job {job_id} does not exist")
        return job

    async def state(self, req: ImportState) -> ImportJobView:
        return ImportJobView(**self._job(req.job_id).view())

    async def list_jobs(self, req: ListImports) -> ImportJobs:
        cid = req.collection_id
        jobs = [j for j in self.jobs.values() if cid is None or j.collection_id == cid]
        return ImportJobs(
            jobs=[ImportJobView(**j.view()) for j in sorted(jobs, key=lambda j: j.job_id)]
        )

    async def abort_write(self, req: AbortWrite) -> WriteAborted:
        write_id = layout.check_write_id(req.write_id)
        job = self._by_write_id(write_id)
        if job is not None and job.state == ImportJobState.COMPLETED:
            raise invalid(f"write {write_id!r} is already committed (import job {job.job_id})")
        if job is not None and job.state != ImportJobState.FAILED:
            raise invalid(
                f"write {write_id!r} is being committed (import job {job.job_id}); "
                "it cannot be aborted now"
            )
        path = layout.staging_dir(self.ctx.settings.storage_uri, write_id)
        existed = await asyncio.to_thread(remove_tree, path)
        return WriteAborted(removed=existed)

    # -- dispatch and supervision -----------------------------------------------------------
    def _datanodes(self) -> list[str]:
        return sorted(s.node_id for s in self.ctx.sessions.of_role("datanode"))

    def _least_busy(self, nodes: list[str]) -> str:
        busy = Counter(j.node_id for j in self.jobs.values() if j.state == ImportJobState.IMPORTING)
        return min(nodes, key=lambda n: (busy[n], n))

    async def _dispatch(self, job: ImportJob) -> None:
        """Hand a pending job to a datanode; it stays Pending while there is none."""
        await self.ctx.sessions.poll()  # a node that just left must not be chosen
        async with self._lock:
            if job.state != ImportJobState.PENDING:
                return
            nodes = self._datanodes()
            if not nodes:
                job.stage = "waiting for a data node"
                return
            gone: ElanusError | None = None
            try:
                info = await self.lookup.describe_by_id(job.collection_id)
            except ElanusError as exc:
                gone = exc
        if gone is not None:  # the collection was dropped while the job waited
            await self._fail(job, gone)
            return
        async with self._lock:
            if job.state != ImportJobState.PENDING:
                return
            schema = Schema.from_dict(info["schema"])
            settings = self.ctx.settings
            max_rows = max(
                1,
                min(
                    settings.segment_max_rows,
                    settings.segment_max_bytes // estimate_row_bytes(schema),
                ),
            )
            node = self._least_busy(nodes)
            transition(job, ImportJobState.IMPORTING)
            job.node_id, job.stage = node, "starting"
            job.attempts += 1
            await self.ctx.db.run(save_job(job))  # before the node may start writing
            spec = RunImport(
                job_id=job.job_id,
                collection_id=job.collection_id,
                schema=info["schema"],
                vchannels=info["vchannels"],
                partitions=info["partitions"],  # a partition key routes rows by them
                units=job.units,
                options=job.options,
                max_rows=max_rows,
                staged=job.write_id is not None,
            )
        try:
            await DataNodeAPI(self.ctx.bus, node).run_import(spec)
        except ElanusError as exc:
            log.warning("datanode %s did not take import job %s: %s", node, job.job_id, exc)
            if exc.code == ErrorCode.UNAVAILABLE:  # gone meanwhile: another node, next round
                async with self._lock:
                    if job.state == ImportJobState.IMPORTING and job.node_id == node:
                        transition(job, ImportJobState.PENDING)
                        job.node_id = None
                        job.stage = "waiting for a data node"
                        await self.ctx.db.run(save_job(job))
                return
            await self._fail(job, exc, node)

    # -- the scheduler's queue of jobs (meta/scheduler.py) -----------------------------------
    name = "import jobs"

    def running(self) -> list[ImportJob]:
        return [j for j in self.jobs.values() if j.state == ImportJobState.IMPORTING]

    def live_holders(self) -> set[str]:
        return set(self._datanodes())

    def may_retry(self, job: ImportJob) -> bool:
        """Only past its commit: it cannot fail any more, so another node finishes it."""
        return job.commit_ts is not None

    async def retry(self, lapsed: Sequence[Lapsed[ImportJob]]) -> None:
        """Finish committed jobs (after a restart or a dead executor) on a live datanode."""
        live = self._datanodes()
        for x in lapsed:
            if live and x.current() and x.task.state == ImportJobState.IMPORTING:
                await self._resume(x.task, self._least_busy(live))

    async def give_up(self, lapsed: Sequence[Lapsed[ImportJob]]) -> None:
        """Fail jobs whose executor went away before the commit."""
        for x in lapsed:
            why = f"data node {x.holder} went away during the import; nothing was imported"
            await self._fail(x.task, ElanusError(ErrorCode.UNAVAILABLE, why), x.holder)

    async def dispatch(self) -> None:
        """Start pending jobs."""
        for job in list(self.jobs.values()):
            if job.state == ImportJobState.PENDING:
                await self._dispatch(job)

    async def _resume(self, job: ImportJob, node: str) -> None:
        """A committed job whose executor is gone: publish (again) and finalize elsewhere."""
        job.node_id, job.stage = node, "finishing"
        job.attempts += 1
        try:
            self._segments(job)
        except ElanusError as exc:  # dropped with its collection: nothing left to finish
            await self._fail(job, exc, force=True)
            return
        try:
            if not job.published:
                await self._publish_commit(job, self._segments(job))
            segs = self._segments(job)  # an import's segments have their paths (set at prepare)
            done = [ImportedSegment(segment_id=s.segment_id, path=cast(str, s.path)) for s in segs]
            assert job.commit_ts is not None  # committed
            await DataNodeAPI(self.ctx.bus, node).finalize_import(
                FinalizeImport(job_id=job.job_id, ts=job.commit_ts, segments=done)
            )
        except ElanusError as exc:
            log.warning("could not resume import job %s on %s: %s", job.job_id, node, exc)
            job.node_id = None  # the next round tries again

    # -- executor callbacks -----------------------------------------------------------------
    def _executing(self, req: ExecutorCall) -> ImportJob:
        job, node = self._job(req.job_id), req.node_id
        if job.state == ImportJobState.FAILED:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT, f"import job {job.job_id} failed: {job.reason}"
            )
        if job.state == ImportJobState.IMPORTING and job.node_id != node:
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"import job {job.job_id} is run by data node {job.node_id}, not {node}",
            )
        return job

    async def progress(self, req: ImportProgress) -> Ack:
        job = self._executing(req)
        if job.state == ImportJobState.IMPORTING:
            job.progress = max(job.progress, min(req.progress, 0.99))
            job.stage = req.stage or job.stage
        return ACK

    async def prepare(self, req: PrepareImport) -> ImportSegments:
        """Allocate the job's segments (Importing) for the executor's row plan."""
        job, max_rows = self._executing(req), req.max_rows
        if job.commit_ts is not None or job.segment_ids:
            raise invalid(f"import job {job.job_id} already has its segments")
        info = await self.lookup.describe_by_id(job.collection_id)
        vchannels = set(info["vchannels"])
        storage = self.ctx.settings.storage_uri
        segs = []
        for entry in req.segments:
            eb = Body(entry, "import.prepare segment")
            vchannel, pid = eb.str("vchannel"), eb.int("partition_id")
            rows = eb.int("rows", lo=1, hi=max_rows)
            eb.done()
            if vchannel not in vchannels:
                raise invalid(f"import.prepare: {vchannel!r} is not a vchannel of the collection")
            sid = self.ctx.ids.alloc()
            seg_dir = layout.segment_dir(storage, job.collection_id, pid, sid)
            segs.append(
                Segment(
                    segment_id=sid,
                    collection_id=job.collection_id,
                    partition_id=pid,
                    vchannel=vchannel,
                    state=SegmentState.IMPORTING,
                    max_rows=max_rows,
                    allocated_rows=rows,
                    num_rows=rows,
                    created_ts=self.ctx.tso.alloc(),
                    path=str(layout.data_path(seg_dir)),
                )
            )
        job.segment_ids = [s.segment_id for s in segs]
        job.rows = sum(s.num_rows for s in segs)
        job.stage = "writing"
        await self.data.save_segments(segs, save_job(job))
        return ImportSegments(segment_ids=list(job.segment_ids))

    def _segments(self, job: ImportJob) -> list[Segment]:
        segs = [self.data.segments.get(s) for s in job.segment_ids]
        if any(s is None for s in segs):
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_FOUND,
                f"the collection or partition of import job {job.job_id} was dropped",
            )
        return [s for s in segs if s is not None]

    async def commit(self, req: CommitImport) -> ImportCommitted:
        """The point of no return: the import timestamp, and the messages that carry it."""
        job = self._executing(req)
        if job.state != ImportJobState.IMPORTING:
            raise invalid(f"import job {job.job_id} is {job.state}, not Importing")
        try:
            segs = self._segments(job)
        except ElanusError as exc:
            if job.commit_ts is None:
                await self._fail(job, exc, job.node_id)
            raise
        if job.commit_ts is None:
            job.stage = "committing"
            deletes = await self.commits.upsert_deletes(job)
            async with self.ticks.publish_lock:
                ts = self.ctx.tso.alloc()
                for s in segs:
                    s.min_ts = s.max_ts = s.seal_ts = ts
                job.commit_ts = ts
                try:  # the segments are live already: no need for the datacoord's lock
                    await self.ctx.db.run(segmentmeta.save, segs, save_job(job))
                except BaseException:
                    job.commit_ts = None
                    for s in segs:
                        s.min_ts = s.max_ts = s.seal_ts = None
                    raise
                await self.commits.publish(job, segs, deletes, ts)
        elif not job.published:
            await self._publish_commit(job, segs)
        job.progress = max(job.progress, 0.95)
        job.stage = "finishing"
        assert job.commit_ts is not None
        return ImportCommitted(ts=job.commit_ts)

    async def _publish_commit(self, job: ImportJob, segs: list[Segment]) -> None:
        """Publish a recorded commit again (its first publication may be incomplete)."""
        assert job.commit_ts is not None
        deletes = await self.commits.upsert_deletes(job)
        async with self.ticks.publish_lock:
            await self.commits.publish(job, segs, deletes, job.commit_ts)

    async def finish(self, req: FinishImport) -> Ack:
        """The segments have their ``_ts``: Flushed, and the job Completed, in one write."""
        job = self._job(req.job_id)
        if job.state == ImportJobState.COMPLETED:
            return ACK
        if job.commit_ts is None or job.state != ImportJobState.IMPORTING:
            raise invalid(f"import job {job.job_id} is not committed")
        try:
            segs = self._segments(job)
        except ElanusError as exc:
            await self._fail(job, exc, force=True)
            raise
        now = self.ctx.tso.alloc()
        for s in segs:
            transition(s, SegmentState.FLUSHED)
            s.flushed_ts = now
            s.is_sorted = True  # the import's write pass sorts each segment (ImportTask._write)
        transition(job, ImportJobState.COMPLETED)
        job.progress, job.finished_ts = 1.0, now
        job.serving = False
        job.stage = "handing over"
        await self.data.save_segments(segs, save_job(job))
        self.index.held.update(s.segment_id for s in segs)  # the handoff's load goes first
        for seg in segs:  # imported segments are indexed like flushed ones
            await self.index.on_new_segment(seg)
        log.info("import job %s: %d rows in %d segments", job.job_id, job.rows, len(segs))
        self._spawn(self._hand_over(job, segs))
        return ACK

    async def _hand_over(self, job: ImportJob, segs: list[Segment]) -> None:
        try:
            for s in segs:
                await self.ctx.bus.publish(subjects.SEGMENT_FLUSHED, s.to_dict())
            await self.query.on_segments_imported(segs)
        finally:
            job.serving = True
            self.index.held.difference_update(s.segment_id for s in segs)
            await asyncio.to_thread(self._clean_up, job)

    def _clean_up(self, job: ImportJob) -> None:
        storage = self.ctx.settings.storage_uri
        remove_tree(layout.import_dir(storage, job.job_id))
        remove_uploads(self.ctx.settings, job.units, self._live_uploads(job))
        if job.write_id and job.state == ImportJobState.COMPLETED:
            remove_tree(layout.staging_dir(storage, job.write_id))

    def _live_uploads(self, but: ImportJob | None = None) -> set[str]:
        """Uploads that jobs still to end read (another job may import one again)."""
        live = [j for j in self.jobs.values() if j is not but and j.state not in IMPORT_FINAL]
        return uploads_of(self.ctx.settings, [u for j in live for u in j.units])

    async def fail(self, req: FailImport) -> FailHeard:
        job = self._job(req.job_id)
        if job.state in IMPORT_FINAL or job.node_id != req.node_id:
            return FailHeard(ignored=True)
        if job.commit_ts is not None:  # past the point of no return: finish elsewhere
            job.node_id = None
            return FailHeard(resumed=True)
        await self._fail(job, ElanusError(req.code, req.reason), req.node_id)
        return FailHeard()

    async def _fail(
        self, job: ImportJob, exc: ElanusError, node: str | None = None, *, force: bool = False
    ) -> None:
        """Failed, and its segments Dropped (GC removes their files), in one write. A
        committed job fails only by ``force`` (its collection was dropped)."""
        async with self._lock:
            if job.state in IMPORT_FINAL or (job.commit_ts is not None and not force):
                return
            if node is not None and job.node_id not in (None, node):
                return
            now = self.ctx.tso.alloc()
            segs = [s for s in (self.data.segments.get(i) for i in job.segment_ids) if s]
            for s in segs:
                transition(s, SegmentState.DROPPED)
                s.dropped_ts = now
            transition(job, ImportJobState.FAILED)
            job.finished_ts = now
            job.reason, job.reason_code = exc.message, str(exc.code)
            await self.data.save_segments(segs, save_job(job))
            log.info("import job %s failed: %s", job.job_id, exc.message)
        await asyncio.to_thread(self._clean_up, job)

    # -- garbage ----------------------------------------------------------------------------
    def collect_garbage(self, delay_s: float) -> list[str]:
        """Stale staging dirs, scratch dirs of finished jobs and expired uploads (runs in a
        thread; ``meta/importfiles.py``)."""
        busy = {
            j.write_id for j in self.jobs.values() if j.write_id and j.state not in IMPORT_FINAL
        }

        def finished(name: str) -> bool:
            job = self.jobs.get(int(name)) if name.isdigit() else None
            return job is None or job.state in IMPORT_FINAL

        settings = self.ctx.settings
        return collect_garbage(settings, delay_s, busy, finished, self._live_uploads())
