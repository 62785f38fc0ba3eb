"""Index coordination (seed 002): indexes on vector and scalar fields (and JSON paths),
one build task per flushed segment, builders chosen by load, versions against stale
builders, recycling of files.

Builders come in two kinds. Index nodes hold a session; the coord's task scheduler
(``meta/scheduler.py``, this class is its index-build queue) pushes tasks to the
least-loaded live one (at most ``MAX_TASKS_PER_BUILDER`` in flight each). A Spark
index run pulls: ``index.claim`` hands it the pending tasks under a lease it renews with
``index.heartbeat``. Either way a builder that disappears (session gone, lease lapsed)
has its unfinished tasks issued again, and the next assignment raises their version, so
a late report from the lost builder is ignored.

Past 600 lines: one state machine. Index records and their build tasks change under one
lock and one table (creating an index makes its tasks, dropping one marks them, a verified
report finishes one, recycling forgets them); cut in two, each half would reach into the
other's state. The records and the table are ``meta/indexmeta.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elanus import layout, objstore
from elanus.api.indexcoord import (
    Claimed,
    ClaimIndexTasks,
    CreateIndex,
    DescribeIndex,
    DropIndex,
    FailedBuild,
    IndexCreated,
    IndexDescription,
    IndexDescriptions,
    IndexDropped,
    IndexHeartbeat,
    IndexLoadFailed,
    IndexReport,
    IndexTaskRecord,
    IndexTasks,
    Lease,
    ListIndexTasks,
    Reissued,
    Verdict,
)
from elanus.api.indexnode import BuildIndex, IndexNodeAPI
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta import indexmeta
from elanus.meta.indexmeta import IndexRecord, IndexTask, field_spec, path_words, spec_slot
from elanus.meta.scheduler import Lapsed
from elanus.schema import Schema
from elanus.states import IndexTaskState, SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import CollectionLookup, IndexListener, ProxyNotices, SegmentTable
    from elanus.meta.segmentmeta import Segment

log = logging.getLogger(__name__)
MAX_TASKS_PER_BUILDER = 2
BUILD_REQUEST_TIMEOUT_S = 10.0
_PENDING = frozenset({IndexTaskState.UNISSUED, IndexTaskState.IN_PROGRESS})
_RUNNING = IndexTaskState.IN_PROGRESS


class IndexCoord:
    def __init__(
        self, ctx: CoordContext, lookup: CollectionLookup, proxies: ProxyNotices, data: SegmentTable
    ) -> None:
        self.ctx, self.lookup, self.proxies, self.data = ctx, lookup, proxies, data
        self._listeners: list[IndexListener] = []
        self.indexes: dict[int, IndexRecord] = {}
        self.tasks: dict[int, IndexTask] = {}
        self.leases: dict[str, float] = {}
        # Builders that did not answer a dispatch are passed over until this time, so a
        # killed process whose session has not yet expired is not handed task after task.
        self.unreachable: dict[str, float] = {}
        """Pulling builders (Spark runs): node id → lease expiry (monotonic seconds)."""
        self._lock = asyncio.Lock()
        self._verifying: dict[tuple[int, int], asyncio.Future[str | None]] = {}
        """Reports being verified, by (build id, version): a retry joins the running check."""
        self.held: set[int] = set()
        """Segments whose builds wait: an import's, until they serve (their load goes first)."""

    def subscribe(self, listener: IndexListener) -> None:
        """``listener`` hears of each index built or dropped (``IndexEvents``)."""
        self._listeners.append(listener)

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "index.create": self.create,
            "index.drop": self.drop,
            "index.describe": self.describe,
            "index.tasks": self.list_tasks,
            "index.report": self.report,
            "index.claim": self.claim,
            "index.heartbeat": self.heartbeat,
            "index.load_failed": self.load_failed,
        }

    def background(self) -> list[Periodic]:
        """Recycling; builds are dispatched by the coord's task scheduler."""
        recycle_every = max(0.5, min(30.0, self.ctx.settings.gc_delay_s / 4))
        return [Periodic(self.recycle, recycle_every, "index file recycling")]

    async def start(self) -> None:
        indexes, tasks = await self.ctx.db.run(indexmeta.load)
        self.indexes = {i.index_id: i for i in indexes}
        self.tasks = {t.build_id: t for t in tasks}

    async def _save(
        self, indexes: list[IndexRecord] | None = None, tasks: list[IndexTask] | None = None
    ) -> None:
        await self.ctx.db.run(indexmeta.save, indexes or [], tasks or [])

    # -- lookups ----------------------------------------------------------------------------
    def live_indexes(self, collection_id: int) -> list[IndexRecord]:
        return [
            i for i in self.indexes.values() if i.collection_id == collection_id and not i.deleted
        ]

    async def _find(
        self, collection_id: int, index_name: str | None, field: str | None
    ) -> IndexRecord:
        for i in self.live_indexes(collection_id):
            if (index_name is None or i.index_name == index_name) and (
                field is None or i.field_name == field
            ):
                return i
        what = f"index {index_name!r}" if index_name else f"an index on {field!r}"
        if index_name is None and field is None:
            what = "an index"
        label = await self.lookup.collection_label(collection_id)
        raise ElanusError(ErrorCode.INDEX_NOT_FOUND, f"collection {label} has no {what}")

    def served(self, segment_id: int) -> list[dict[str, Any]]:
        """Finished indexes of a segment, as a worker loads them with the segment."""
        out = []
        for t in self.tasks.values():
            served = t.state is IndexTaskState.FINISHED and not t.mark_deleted
            if t.segment_id != segment_id or not served:
                continue
            out.append(self._served_entry(t))
        return out

    def _served_entry(self, t: IndexTask) -> dict[str, Any]:
        index = self.indexes[t.index_id]
        return {
            "index_id": index.index_id,
            "field": index.field_name,
            "spec": index.spec,
            "dir": str(self._dir(t, t.version)),
            "build_id": t.build_id,
            "version": t.version,
        }

    def _dir(self, t: IndexTask, version: int) -> str:
        return layout.index_dir(
            self.ctx.settings.storage_uri, t.build_id, version, t.partition_id, t.segment_id
        )

    def task_spec(self, t: IndexTask) -> BuildIndex:
        """What a builder needs: where to read, what to build, where to write."""
        index = self.indexes[t.index_id]
        return BuildIndex(
            build_id=t.build_id,
            version=t.version,
            collection_id=t.collection_id,
            partition_id=t.partition_id,
            segment_id=t.segment_id,
            num_rows=t.num_rows,
            field=index.field_name,
            spec=index.spec,
            data_path=t.data_path,
            out_dir=str(self._dir(t, t.version)),
        )

    # -- create / drop / describe -----------------------------------------------------------
    async def create(self, req: CreateIndex) -> IndexCreated:
        cid, field_name = req.collection_id, req.field
        index_name = req.index_name or field_name
        index_type, metric, params = req.index_type, req.metric_type, req.params or {}
        info = await self.lookup.describe_by_id(cid)
        schema = Schema.from_dict(info["schema"])
        if field_name not in {f.name for f in schema.fields}:
            raise invalid(f"field {field_name!r} does not exist in {info['name']!r}")
        field = schema.field(field_name)
        spec = field_spec(field, index_type, metric, params)
        async with self._lock:
            for i in self.live_indexes(cid):
                if i.field_name == field_name and spec_slot(i.spec) == spec_slot(spec):
                    if i.spec == spec and i.index_name == index_name:
                        return IndexCreated(index_id=i.index_id, created=False)
                    raise ElanusError(
                        ErrorCode.INDEX_ALREADY_EXISTS,
                        f"field {field_name!r}{path_words(spec)} already has index "
                        f"{i.index_name!r} with different parameters; drop it first",
                    )
                if i.index_name == index_name:
                    raise ElanusError(
                        ErrorCode.INDEX_ALREADY_EXISTS,
                        f"index name {index_name!r} is already used on field {i.field_name!r}"
                        f"{path_words(i.spec)}; give this index another index_name",
                    )
            record = IndexRecord(
                self.ctx.ids.alloc(), cid, field_name, index_name, spec,
                self.ctx.tso.alloc(),
            )  # fmt: skip
            self.indexes[record.index_id] = record
            tasks = [
                self._new_task(record, s)
                for s in self.data.segments.values()
                if s.collection_id == cid and s.state is SegmentState.FLUSHED and s.path
            ]
            await self._save([record], tasks)
        log.info("index %s on %s.%s: %d tasks", index_name, cid, field_name, len(tasks))
        await self._searches_changed("index.create", info)
        return IndexCreated(index_id=record.index_id, created=True)

    async def _searches_changed(self, kind: str, info: dict[str, Any]) -> None:
        """An index fixes the metric searches of its field use: proxies drop the search
        plans they made before it came or went (a meta invalidation, as DDL sends)."""
        cid = int(info["collection_id"])
        ts = self.ctx.tso.alloc()
        await self.proxies.invalidate(kind, str(info["db"]), str(info["name"]), cid, ts)

    def _new_task(self, index: IndexRecord, seg: Segment) -> IndexTask:
        assert seg.path is not None
        t = IndexTask(
            self.ctx.ids.alloc(), index.index_id, seg.collection_id, seg.partition_id,
            seg.segment_id, seg.num_rows, seg.path,
        )  # fmt: skip
        self.tasks[t.build_id] = t
        return t

    async def on_new_segment(self, seg: Segment) -> None:
        """A flushed, compacted or imported segment gets a task for each index."""
        if seg.state is not SegmentState.FLUSHED or not seg.path or not seg.num_rows:
            return
        async with self._lock:
            have = {(t.index_id, t.segment_id) for t in self.tasks.values()}
            tasks = [
                self._new_task(i, seg)
                for i in self.live_indexes(seg.collection_id)
                if (i.index_id, seg.segment_id) not in have
            ]
            if tasks:
                await self._save(tasks=tasks)

    async def drop(self, req: DropIndex) -> IndexDropped:
        cid = req.collection_id
        async with self._lock:
            record = await self._find(cid, req.index_name, req.field)
            await self._mark_deleted([record])
        for listener in self._listeners:
            listener.index_dropped(cid, record.index_id)
        await self._searches_changed("index.drop", await self.lookup.describe_by_id(cid))
        return IndexDropped(index_id=record.index_id)

    async def drop_collection(self, collection_id: int) -> None:
        async with self._lock:
            await self._mark_deleted(self.live_indexes(collection_id))

    async def drop_field(self, collection_id: int, field_name: str) -> None:
        """A dropped field's indexes go with it, as Milvus cascades them."""
        async with self._lock:
            records = [i for i in self.live_indexes(collection_id) if i.field_name == field_name]
            await self._mark_deleted(records)
        for record in records:
            for listener in self._listeners:
                listener.index_dropped(collection_id, record.index_id)

    async def _mark_deleted(self, records: list[IndexRecord]) -> None:
        ids = {r.index_id for r in records}
        tasks = [t for t in self.tasks.values() if t.index_id in ids and not t.mark_deleted]
        for r in records:
            r.deleted = True
        for t in tasks:
            t.mark_deleted = True
        await self._save(records, tasks)

    async def describe(self, req: DescribeIndex) -> IndexDescriptions:
        cid, index_name, field = req.collection_id, req.index_name, req.field
        records = self.live_indexes(cid)
        if index_name is not None or field is not None:
            records = [await self._find(cid, index_name, field)]
        flushed = {
            s.segment_id: s
            for s in self.data.segments.values()
            if s.collection_id == cid and s.state is SegmentState.FLUSHED and s.num_rows
        }
        total = sum(s.num_rows for s in flushed.values())
        return IndexDescriptions(indexes=[self._progress(r, flushed, total) for r in records])

    def _progress(
        self, r: IndexRecord, flushed: dict[int, Segment], total: int
    ) -> IndexDescription:
        tasks = [
            t
            for t in self.tasks.values()
            if t.index_id == r.index_id and not t.mark_deleted and t.segment_id in flushed
        ]
        done = [t for t in tasks if t.state is IndexTaskState.FINISHED]
        failed = [t for t in tasks if t.state is IndexTaskState.FAILED]
        pending = [t for t in tasks if t.state in _PENDING]
        if failed:
            state = IndexTaskState.FAILED
        elif pending:
            busy = any(t.state is IndexTaskState.IN_PROGRESS for t in pending)
            state = IndexTaskState.IN_PROGRESS if busy or done else IndexTaskState.UNISSUED
        else:
            state = IndexTaskState.FINISHED
        spec = r.spec
        return IndexDescription(
            index_name=r.index_name,
            index_id=r.index_id,
            field=r.field_name,
            index_type=spec["index_type"],
            metric_type=spec["metric"],
            params=spec["params"],
            state=state,
            indexed_rows=sum(t.num_rows for t in done),
            total_rows=total,
            pending_tasks=len(pending),
            finished_tasks=len(done),
            failed_tasks=[
                FailedBuild(segment_id=t.segment_id, build_id=t.build_id, reason=t.fail_reason)
                for t in failed
            ],
        )

    async def list_tasks(self, req: ListIndexTasks) -> IndexTasks:
        cid = req.collection_id
        return IndexTasks(
            tasks=[
                IndexTaskRecord(**t.to_dict())
                for t in self.tasks.values()
                if cid is None or t.collection_id == cid
            ]
        )

    # -- builders ---------------------------------------------------------------------------
    def _session_builders(self) -> list[str]:
        return sorted(s.node_id for s in self.ctx.sessions.of_role("indexnode"))

    def _live_builders(self) -> set[str]:
        now = time.monotonic()
        leased = {n for n, expiry in self.leases.items() if expiry > now}
        return set(self._session_builders()) | leased

    # -- the scheduler's queue of builds (seed 002's assignTaskLoop) ------------------------
    name = "index builds"

    def running(self) -> list[IndexTask]:
        return [t for t in self.tasks.values() if t.state is _RUNNING and not t.mark_deleted]

    def live_holders(self) -> set[str]:
        return self._live_builders()

    def may_retry(self, task: IndexTask) -> bool:
        return True  # a build whose builder went is built again, however often

    async def retry(self, lapsed: Sequence[Lapsed[IndexTask]]) -> None:
        async with self._lock:
            changed: list[IndexTask] = []
            for x in lapsed:
                t = x.task
                if t.state is _RUNNING and not t.mark_deleted and x.current():
                    log.info("index task %s: builder %s gone, build again", t.build_id, x.holder)
                    transition(t, IndexTaskState.UNISSUED)
                    t.node_id = None
                    changed.append(t)
            if changed:
                await self._save(tasks=changed)

    async def give_up(self, lapsed: Sequence[Lapsed[IndexTask]]) -> None:
        """Never called (``may_retry``); fails the builds, should the policy change."""
        async with self._lock:
            failed = [x.task for x in lapsed if x.current() and x.task.state is _RUNNING]
            for t in failed:
                transition(t, IndexTaskState.FAILED)
                t.fail_reason = f"builder {t.node_id} went away"
            await self._save(tasks=failed)

    async def dispatch(self) -> None:
        """Push Unissued tasks to the least-loaded live index nodes."""
        async with self._lock:
            for n in [n for n, e in self.leases.items() if e <= time.monotonic()]:
                del self.leases[n]
            now = time.monotonic()
            self.unreachable = {n: t for n, t in self.unreachable.items() if t > now}
            builders = [n for n in self._session_builders() if n not in self.unreachable]
            load = {n: 0 for n in builders}
            for t in self.tasks.values():
                if t.state is IndexTaskState.IN_PROGRESS and t.node_id in load:
                    load[t.node_id] += 1
            pending = sorted(
                (t for t in self.tasks.values()
                 if t.state is IndexTaskState.UNISSUED and not t.mark_deleted
                 and t.segment_id not in self.held),
                key=lambda t: (t.version, t.build_id),
            )  # fmt: skip
            issued: list[IndexTask] = []
            for t in pending:
                free = [n for n in builders if load[n] < MAX_TASKS_PER_BUILDER]
                if not free:
                    break
                node = min(free, key=lambda n: (load[n], n))
                load[node] += 1
                self._issue(t, node)
                issued.append(t)
            if issued:
                await self._save(tasks=issued)
        for t in issued:
            await self._send(t)

    def _issue(self, t: IndexTask, node: str) -> None:
        t.version += 1
        transition(t, IndexTaskState.IN_PROGRESS)
        t.node_id, t.fail_reason = node, None

    async def _send(self, t: IndexTask) -> None:
        node, version = t.node_id, t.version
        assert node is not None
        try:
            builder = IndexNodeAPI(self.ctx.bus, node)
            await builder.build(self.task_spec(t), BUILD_REQUEST_TIMEOUT_S)
        except ElanusError as exc:
            log.warning("index node %s did not take task %s: %s", node, t.build_id, exc)
            async with self._lock:
                ttl = self.ctx.settings.session_ttl_s
                self.unreachable[node] = time.monotonic() + ttl
                if t.state is IndexTaskState.IN_PROGRESS and t.version == version:
                    transition(t, IndexTaskState.UNISSUED)
                    t.node_id = None
                    await self._save(tasks=[t])

    async def claim(self, req: ClaimIndexTasks) -> Claimed:
        """A pulling builder (a Spark run) takes pending tasks under a lease."""
        node, cid, limit = req.node_id, req.collection_id, req.limit
        wanted = {IndexTaskState.UNISSUED, *([IndexTaskState.FAILED] if req.retry_failed else [])}
        async with self._lock:
            self.leases[node] = time.monotonic() + self.ctx.settings.session_ttl_s
            tasks = sorted(
                (t for t in self.tasks.values()
                 if t.state in wanted and not t.mark_deleted
                 and (cid is None or t.collection_id == cid)),
                key=lambda t: (t.version, t.build_id),
            )[:limit]  # fmt: skip
            for t in tasks:
                self._issue(t, node)
            await self._save(tasks=tasks)
            return Claimed(tasks=[self.task_spec(t) for t in tasks], lease_s=self._lease_s())

    def _lease_s(self) -> float:
        return float(self.ctx.settings.session_ttl_s)

    async def heartbeat(self, req: IndexHeartbeat) -> Lease:
        node = req.node_id
        if node not in self.leases:
            return Lease(alive=False, tasks=[])
        self.leases[node] = time.monotonic() + self._lease_s()
        mine = [
            t.build_id
            for t in self.tasks.values()
            if t.node_id == node and t.state is IndexTaskState.IN_PROGRESS
        ]
        return Lease(alive=True, tasks=mine)

    async def report(self, req: IndexReport) -> Verdict:
        """A builder's result; only the current version of a live task, from the builder
        it was issued to, counts, and a success only once its files are verified."""
        build_id, version, ok, files = req.build_id, req.version, req.ok, req.files
        reason, node = req.fail_reason, req.node_id
        async with self._lock:
            t = self.tasks.get(build_id)
            if t is None or t.mark_deleted:
                return Verdict(accepted=False, reason="the task was dropped")
            same = (version, files) == (t.version, t.file_paths)
            if ok and t.state is IndexTaskState.FINISHED and same:
                return Verdict(accepted=True)  # a retry of a report that was accepted
            if version != t.version or t.state is not IndexTaskState.IN_PROGRESS:
                log.info(
                    "ignoring stale report for task %s (v%s, now v%s)", build_id, version, t.version
                )
                return Verdict(accepted=False, reason=f"stale version {version} (now {t.version})")
            if node is not None and node != t.node_id:
                return Verdict(accepted=False, reason="the task is assigned to another builder")
            if not ok:
                transition(t, IndexTaskState.FAILED)
                t.fail_reason = reason or "unknown failure"
                await self._save(tasks=[t])
                return Verdict(accepted=True)
            key = (build_id, version)
            check = self._verifying.get(key)
            if check is None:  # a retried report waits for the same check
                check = asyncio.ensure_future(self._verify(t, version, files))
                self._verifying[key] = check
                check.add_done_callback(lambda _: self._verifying.pop(key, None))
        rejected = await asyncio.shield(check)
        async with self._lock:
            if t.mark_deleted or t.version != version:
                return Verdict(accepted=False, reason="the task changed while it was verified")
            if t.state is IndexTaskState.FINISHED:
                return Verdict(accepted=rejected is None)  # the other copy of this report won
            if rejected is not None:
                log.warning("index task %s v%s: report rejected: %s", build_id, version, rejected)
                self._reissue(t, f"report rejected: {rejected}")
                await self._save(tasks=[t])
                return Verdict(accepted=False, reason=f"verification failed: {rejected}")
            transition(t, IndexTaskState.FINISHED)
            t.file_paths, t.fail_reason = files, None
            await self._save(tasks=[t])
        for listener in self._listeners:
            listener.index_built(t.collection_id, t.segment_id, self._served_entry(t))
        return Verdict(accepted=True)

    async def _verify(self, t: IndexTask, version: int, files: list[str]) -> str | None:
        """Why the files of ``t``'s build ``version`` are no index of it (``None``: they
        are). In a thread: it reads the files and loads them with FAISS."""
        # The coord's only use of index/ (docs/design-notes.md): the query node's loader.
        from elanus.index.verify import verify_report

        storage = self.ctx.settings.storage_uri
        spec = self.indexes[t.index_id].spec
        out_dir = self._dir(t, version)
        return await asyncio.to_thread(verify_report, storage, out_dir, files, spec, t.num_rows)

    def _reissue(self, t: IndexTask, reason: str) -> None:
        """Back to Unissued under a new version: the attempt that failed is retired at
        once (anything still reported for it is stale), and a builder builds it again."""
        transition(t, IndexTaskState.UNISSUED)
        t.node_id, t.fail_reason = None, reason
        t.version += 1

    async def load_failed(self, req: IndexLoadFailed) -> Reissued:
        """A query node could not load a Finished index. The coord checks the files itself
        (one node's trouble, memory say, is no reason to rebuild) and, if they do not hold,
        issues the task again; searches of the segment stay exact meanwhile."""
        build_id, version, node = req.build_id, req.version, req.node_id
        async with self._lock:
            t = self.tasks.get(build_id)
            if t is None or t.mark_deleted or t.version != version:
                return Reissued(reissued=False)
            if t.state is not IndexTaskState.FINISHED:
                return Reissued(reissued=t.state is IndexTaskState.UNISSUED)
            files = list(t.file_paths)
        rejected = await self._verify(t, version, files)
        async with self._lock:
            if t.mark_deleted or t.version != version or t.state is not IndexTaskState.FINISHED:
                return Reissued(reissued=t.state is IndexTaskState.UNISSUED)
            if rejected is None:
                log.warning("index task %s loads here but not on %s", build_id, node)
                return Reissued(reissued=False)
            log.warning(
                "index task %s: %s cannot load it (%s); building again", build_id, node, rejected
            )
            self._reissue(t, f"query node {node} could not load the index: {rejected}")
            await self._save(tasks=[t])
        return Reissued(reissued=True)

    # -- recycling --------------------------------------------------------------------------
    async def recycle(self) -> list[str]:
        """Seed 002's recycleUnusedIndexFiles: files of dropped tasks (and their rows), and
        of versions older than a finished task's."""
        storage = self.ctx.settings.storage_uri
        removed: list[str] = []
        async with self._lock:
            gone_segments = [
                t
                for t in self.tasks.values()
                if not t.mark_deleted
                and (
                    (s := self.data.segments.get(t.segment_id)) is None
                    or s.state is not SegmentState.FLUSHED
                )
            ]
            for t in gone_segments:
                t.mark_deleted = True
            dropped: list[IndexTask] = [t for t in self.tasks.values() if t.mark_deleted]
            superseded = [
                t for t in self.tasks.values()
                if t.state is IndexTaskState.FINISHED and not t.recycled and not t.mark_deleted
            ]  # fmt: skip
            if gone_segments:
                await self._save(tasks=gone_segments)

        def remove() -> None:
            for t in dropped:
                root = layout.index_root(storage, t.build_id)
                if objstore.is_dir(root):
                    objstore.remove_tree(root)
                    removed.append(root)
            for t in superseded:
                for v in range(1, t.version):
                    old = layout.join(layout.index_root(storage, t.build_id), str(v))
                    if objstore.is_dir(old):
                        objstore.remove_tree(old)
                        removed.append(old)

        await asyncio.to_thread(remove)
        async with self._lock:
            for t in superseded:
                t.recycled = True
            gone = {x.build_id for x in dropped}
            forget = [b for b, x in self.tasks.items() if b in gone and x.mark_deleted]
            for b in forget:
                del self.tasks[b]
            empty = [
                i.index_id
                for i in self.indexes.values()
                if i.deleted and not any(t.index_id == i.index_id for t in self.tasks.values())
            ]
            for i in empty:
                del self.indexes[i]
            if superseded:
                await self._save(tasks=superseded)
            if forget or empty:
                await self.ctx.db.run(indexmeta.forget, forget, empty)
        return removed
