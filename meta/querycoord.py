"""Query coordination (seed 000 §6.4, seed 001): load, release, distribution, handoff.

Loading a collection gives each of its flushed segments to a worker and each vchannel to
a delegator (least-loaded live query nodes), the delegator starting at the channel's
checkpoint and knowing which sealed segments exist. After a flush or a compaction the new
segment is loaded on a worker first and only then handed to the delegator, which swaps it
for the growing copy (or the compacted sources) in one step. Loaded collections are kept
in DuckDB and loaded again after a coord restart or when query nodes come and go.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elanus.api.base import ACK, Ack
from elanus.api.datanode import Checkpoint
from elanus.api.querycoord import (
    LoadCollection,
    LoadProgress,
    LoadState,
    QueryRoute,
    ReleaseCollection,
    Route,
)
from elanus.api.querynode import (
    NODE_TIMEOUT_S,
    DelegateChannel,
    DropIndexOnNode,
    LoadIndex,
    LoadSegments,
    QueryNodeAPI,
    ReleaseOnNode,
    ReleaseSegments,
    SealedSegment,
    SegmentSpec,
    ServedIndex,
    SyncDistribution,
    WorkerAPI,
)
from elanus.channels.dml import pchannel_of
from elanus.channels.loop import Periodic, cancel_and_wait
from elanus.errors import ElanusError, ErrorCode
from elanus.states import LoadState as Load
from elanus.states import SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import CollectionLookup, SegmentTable, ServedIndexes

log = logging.getLogger(__name__)
NODE_WAIT_S = 5.0


@dataclass
class Loaded:
    collection_id: int
    partition_ids: list[int] | None
    state: Load = Load.LOADING
    channels: dict[str, str] = field(default_factory=dict)  # vchannel -> node
    segments: dict[int, str] = field(default_factory=dict)  # segment -> node

    @property
    def label(self) -> str:
        return f"the load of collection {self.collection_id}"

    def unplaced(self) -> None:
        """Some of it has no node any more: Loading again, until keep_loaded places it."""
        if self.state is Load.LOADED:
            transition(self, Load.LOADING)


class QueryCoord:
    def __init__(
        self, ctx: CoordContext, lookup: CollectionLookup, data: SegmentTable, index: ServedIndexes
    ) -> None:
        self.ctx, self.lookup, self.data, self.index = ctx, lookup, data, index
        self.loaded: dict[int, Loaded] = {}
        self._handoffs: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # placements and handoffs one at a time

    def schedule(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a handoff in the background (the reporting datanode need not wait)."""
        task = self.ctx.supervisor.spawn("handoff", lambda: self._locked(coro))
        self._handoffs.add(task)
        task.add_done_callback(self._handoffs.discard)

    async def _locked(self, coro: Coroutine[Any, Any, None]) -> None:
        async with self._lock:
            await coro  # a failure is logged by the supervisor; keep_loaded repairs it

    async def stop(self) -> None:
        for task in list(self._handoffs):
            await cancel_and_wait(task)

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "query.load": self.load,
            "query.release": self.release,
            "query.state": self.state,
            "query.route": self.route,
        }

    def background(self) -> list[Periodic]:
        return [Periodic(self.keep_loaded, 1.0, "keep collections loaded")]

    async def start(self) -> None:
        rows = await self.ctx.db.run(
            lambda con: con.execute("SELECT collection_id, partitions FROM query_loads").fetchall()
        )
        for cid, parts in rows:
            self.loaded[int(cid)] = Loaded(int(cid), json.loads(parts) if parts else None)

    def serves(self, collection_id: int, partition_id: int) -> bool:
        """Whether a partition's data is loaded into the query nodes."""
        lo = self.loaded.get(collection_id)
        return lo is not None and (lo.partition_ids is None or partition_id in lo.partition_ids)

    # -- helpers ----------------------------------------------------------------------------
    def _nodes(self) -> list[str]:
        return sorted(s.node_id for s in self.ctx.sessions.of_role("querynode"))

    def _node(self, node: str) -> QueryNodeAPI:
        return QueryNodeAPI(self.ctx.bus, node)

    def _worker(self, node: str) -> WorkerAPI:
        return WorkerAPI(self.ctx.bus, node, NODE_TIMEOUT_S)

    async def _wait_for_nodes(self, timeout: float) -> list[str]:
        """Live query nodes, looking again for a little while (one may be just starting)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            nodes = self._nodes()
            if nodes or asyncio.get_running_loop().time() > deadline:
                return nodes
            await self.ctx.sessions.poll()
            if not self._nodes():
                await asyncio.sleep(0.1)

    def _least_loaded(self, nodes: list[str], counts: dict[str, int]) -> str:
        return min(nodes, key=lambda n: (counts.get(n, 0), n))

    def _flushed(self, lo: Loaded) -> list[Any]:
        return [
            s
            for s in self.data.segments.values()
            if s.collection_id == lo.collection_id
            and s.state is SegmentState.FLUSHED
            and s.path
            and (lo.partition_ids is None or s.partition_id in lo.partition_ids)
        ]

    def _segment_spec(self, seg: Any) -> SegmentSpec:
        """What a worker needs to load a segment, with its finished indexes."""
        return SegmentSpec(
            segment_id=seg.segment_id,
            partition_id=seg.partition_id,
            path=seg.path,
            vchannel=seg.vchannel,
            indexes=[ServedIndex(**i) for i in self.index.served(seg.segment_id)],
        )

    # -- load and release -------------------------------------------------------------------
    async def load(self, req: LoadCollection) -> LoadProgress:
        cid, partitions = req.collection_id, req.partition_ids
        lo = Loaded(cid, sorted(partitions) if partitions else None)
        old = self.loaded.get(cid)
        if old is not None and old.state is Load.LOADED and old.partition_ids == lo.partition_ids:
            return await self.state(LoadState(collection_id=cid))
        async with self._lock:
            await self._place(lo)  # raises (nothing recorded) when it cannot place
            self.loaded[cid] = lo
        await self.ctx.db.run(
            lambda con: con.execute(
                "INSERT INTO query_loads VALUES (?, ?) ON CONFLICT (collection_id) "
                "DO UPDATE SET partitions = excluded.partitions",
                [cid, json.dumps(lo.partition_ids) if lo.partition_ids else None],
            )
        )
        return await self.state(LoadState(collection_id=cid))

    async def _place(self, lo: Loaded) -> None:
        nodes = await self._wait_for_nodes(NODE_WAIT_S)
        if not nodes:
            raise ElanusError(ErrorCode.UNAVAILABLE, "no query node is running to load into")
        info = await self.lookup.describe_by_id(lo.collection_id)
        rows: dict[str, int] = {}
        specs: dict[str, list[SegmentSpec]] = {}
        for seg in sorted(self._flushed(lo), key=lambda s: -s.num_rows):
            node = self._least_loaded(nodes, rows)
            rows[node] = rows.get(node, 0) + seg.num_rows
            lo.segments[seg.segment_id] = node
            specs.setdefault(node, []).append(self._segment_spec(seg))
        for node, segs in specs.items():
            await self._worker(node).load(
                LoadSegments(collection_id=lo.collection_id, schema=info["schema"], segments=segs)
            )
        channels: dict[str, int] = {}
        watches = []
        for v in info["vchannels"]:
            node = self._least_loaded(nodes, channels)
            channels[node] = channels.get(node, 0) + 1
            watches.append(self._watch(lo, info, v, node))
        await asyncio.gather(*watches)  # each waits for its delegator to catch up
        transition(lo, Load.LOADED)
        await self._record(lo)

    async def _record(self, lo: Loaded) -> None:
        """Write the collection's distribution (which node serves what) to DuckDB."""
        cid = lo.collection_id

        def write(con: Any) -> None:
            con.execute("BEGIN TRANSACTION")
            con.execute("DELETE FROM query_distribution WHERE collection_id = ?", [cid])
            con.execute("DELETE FROM query_channels WHERE collection_id = ?", [cid])
            if lo.segments:
                con.executemany(
                    "INSERT INTO query_distribution VALUES (?, ?, ?)",
                    [[s, cid, n] for s, n in lo.segments.items()],
                )
            if lo.channels:
                con.executemany(
                    "INSERT INTO query_channels VALUES (?, ?, ?)",
                    [[v, cid, n] for v, n in lo.channels.items()],
                )
            con.execute("COMMIT")

        await self.ctx.db.run(write)

    async def _watch(self, lo: Loaded, info: dict[str, Any], vchannel: str, node: str) -> None:
        """Start the vchannel's delegator at the channel checkpoint; it serves reads once
        its tsafe reaches ``ready_ts``: the checkpoint's tick and the newest row of every
        sealed segment it is given (the checkpoint may be a tick older than a segment
        flushed just now, and a read at it would hide that segment's rows)."""
        checkpoint = self.data.checkpoints.get(vchannel)
        segs = [
            (sid, n, seg)
            for sid, n in lo.segments.items()
            if (seg := self.data.segments.get(sid)) is not None and seg.vchannel == vchannel
        ]
        sealed = [
            SealedSegment(segment_id=sid, node_id=n, partition_id=seg.partition_id, path=seg.path)
            for sid, n, seg in segs
        ]
        ready_ts = max(
            [checkpoint[1] if checkpoint else 0, *(seg.max_ts or 0 for _, _, seg in segs)]
        )
        await self._node(node).watch(
            DelegateChannel(
                vchannel=vchannel,
                pchannel=pchannel_of(vchannel),
                collection_id=lo.collection_id,
                schema=info["schema"],
                checkpoint=Checkpoint(seq=checkpoint[0], ts=checkpoint[1]) if checkpoint else None,
                sealed=sealed,
                partition_ids=lo.partition_ids,
                ready_ts=ready_ts,
            )
        )
        lo.channels[vchannel] = node

    async def release(self, req: ReleaseCollection) -> Ack:
        await self.release_collection(req.collection_id)
        return ACK

    async def release_collection(self, cid: int) -> None:
        lo = self.loaded.pop(cid, None)

        def forget(con: Any) -> None:
            for table in ("query_loads", "query_distribution", "query_channels"):
                con.execute(f"DELETE FROM {table} WHERE collection_id = ?", [cid])

        await self.ctx.db.run(forget)
        if lo is None:
            return
        for node in set(lo.channels.values()) | set(lo.segments.values()):
            if node in self._nodes():
                try:
                    await self._node(node).release_collection(ReleaseOnNode(collection_id=cid))
                except ElanusError as exc:
                    log.warning("query node %s did not release %s: %s", node, cid, exc)

    async def state(self, req: LoadState) -> LoadProgress:
        cid = req.collection_id
        lo = self.loaded.get(cid)
        progress, loaded, persisted = self.progress(cid)
        if lo is None:
            return LoadProgress(
                state=Load.NOT_LOAD, progress=0, persisted_rows=persisted, loaded_rows=0
            )
        return LoadProgress(
            state=lo.state,
            progress=progress,
            persisted_rows=persisted,
            loaded_rows=loaded,
            partition_ids=lo.partition_ids,
        )

    def progress(self, cid: int) -> tuple[int, int, int]:
        """(percent, loaded rows, persisted rows) of collection ``cid``'s load; a state
        read and a metric, so safe off the loop (it only reads)."""
        segments = self.data.segments
        persisted = sum(
            s.num_rows
            for s in list(segments.values())
            if s.collection_id == cid and s.state is SegmentState.FLUSHED
        )
        lo = self.loaded.get(cid)
        if lo is None:
            return 0, 0, persisted
        loaded = sum(segments[s].num_rows for s in list(lo.segments) if s in segments)
        if lo.state is Load.LOADED:
            return 100, loaded, persisted
        return (100 * loaded // persisted if persisted else 0), loaded, persisted

    async def route(self, req: QueryRoute) -> Route:
        cid = req.collection_id
        lo = self.loaded.get(cid)
        if lo is None or lo.state is not Load.LOADED:
            label = await self.lookup.collection_label(cid)
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED,
                f"collection {label} is not loaded; load it first",
            )
        return Route(vchannels=dict(lo.channels), partition_ids=lo.partition_ids)

    # -- handoff ----------------------------------------------------------------------------
    async def on_segment_flushed(self, seg: Any) -> None:
        lo = self.loaded.get(seg.collection_id)
        if lo is None or lo.state is not Load.LOADED or not seg.path:
            return
        if lo.partition_ids is not None and seg.partition_id not in lo.partition_ids:
            return
        await self._hand_over(lo, seg, remove=[])

    async def segment_flushed(self, seg: Any) -> None:
        """DataCoord's ``on_flushed``: hand the segment over in the background."""
        self.schedule(self.on_segment_flushed(seg))

    def index_built(self, collection_id: int, segment_id: int, index: dict[str, Any]) -> None:
        """IndexCoord's ``IndexListener``."""
        self.schedule(self.on_index_built(collection_id, segment_id, index))

    def index_dropped(self, collection_id: int, index_id: int) -> None:
        self.schedule(self.on_index_dropped(collection_id, index_id))

    async def on_segments_imported(self, segs: list[Any]) -> None:
        """Hand a committed import's segments to a loaded collection, now: the import job
        reports Completed once they serve (delegators hold tsafe until they arrive)."""
        async with self._lock:
            for seg in segs:
                try:
                    await self.on_segment_flushed(seg)
                except Exception as exc:  # noqa: BLE001 - keep_loaded repairs what is left
                    log.warning("handoff of imported segment %s failed: %s", seg.segment_id, exc)

    async def on_compacted(self, target: Any, sources: list[int]) -> None:
        lo = self.loaded.get(target.collection_id)
        if lo is None or lo.state is not Load.LOADED:
            return
        if target.state is SegmentState.FLUSHED and target.path:
            await self._hand_over(lo, target, remove=sources)
        else:
            await self._drop(lo, target.vchannel, sources)
            await self._record(lo)

    async def _hand_over(self, lo: Loaded, seg: Any, remove: list[int]) -> None:
        nodes = self._nodes()
        delegator = lo.channels.get(seg.vchannel)
        if not nodes or delegator is None:
            lo.unplaced()
            return
        counts: dict[str, int] = {}
        for n in lo.segments.values():
            counts[n] = counts.get(n, 0) + 1
        node = self._least_loaded(nodes, counts)
        checkpoint = self._trim_checkpoint(lo, seg.vchannel)  # read before the load
        info = await self.lookup.describe_by_id(lo.collection_id)
        spec = self._segment_spec(seg)
        await self._worker(node).load(
            LoadSegments(collection_id=lo.collection_id, schema=info["schema"], segments=[spec])
        )
        lo.segments[seg.segment_id] = node
        sealed = SealedSegment(
            segment_id=spec.segment_id, node_id=node, partition_id=spec.partition_id, path=spec.path
        )
        await self._node(delegator).sync(
            SyncDistribution(
                vchannel=seg.vchannel, remove=remove, add=[sealed], checkpoint=checkpoint
            )
        )
        await self._drop(lo, None, remove)
        await self._record(lo)

    def _trim_checkpoint(self, lo: Loaded, vchannel: str) -> Checkpoint | None:
        """The datanode checkpoint of ``vchannel`` a delegator may trim its delete buffer
        to (``segments/deletebuffer.py``), or none: a segment it serves was compacted
        away and not yet handed over (its files no longer get new deletes)."""
        data = self.data
        for sid in lo.segments:
            s = data.segments.get(sid)
            if s is None or s.state not in (SegmentState.FLUSHED, SegmentState.IMPORTING):
                return None
        checkpoint = data.checkpoints.get(vchannel)
        return Checkpoint(seq=checkpoint[0], ts=checkpoint[1]) if checkpoint else None

    async def on_index_built(
        self, collection_id: int, segment_id: int, index: dict[str, Any]
    ) -> None:
        """A finished build goes to the worker holding the segment, which swaps it in."""
        lo = self.loaded.get(collection_id)
        node = lo.segments.get(segment_id) if lo is not None else None
        if node is None or node not in self._nodes():
            return  # not loaded: the index comes with the segment when it is
        await self._worker(node).load_index(
            LoadIndex(segment_id=segment_id, index=ServedIndex(**index))
        )

    async def on_index_dropped(self, collection_id: int, index_id: int) -> None:
        lo = self.loaded.get(collection_id)
        if lo is None:
            return
        for node in set(lo.segments.values()) & set(self._nodes()):
            await self._worker(node).drop_index(
                DropIndexOnNode(collection_id=collection_id, index_id=index_id)
            )

    async def _drop(self, lo: Loaded, vchannel: str | None, sources: list[int]) -> None:
        if vchannel is not None and vchannel in lo.channels:
            await self._node(lo.channels[vchannel]).sync(
                SyncDistribution(vchannel=vchannel, remove=sources)
            )
        by_node: dict[str, list[int]] = {}
        for sid in sources:
            node = lo.segments.pop(sid, None)
            if node is not None:
                by_node.setdefault(node, []).append(sid)
        for node, sids in by_node.items():
            if node in self._nodes():
                await self._worker(node).release(ReleaseSegments(segment_ids=sids))

    async def keep_loaded(self) -> None:
        """Place collections again whose query nodes went away (or after a restart)."""
        async with self._lock:
            await self._repair()

    async def _repair(self) -> None:
        nodes = set(self._nodes())
        for lo in list(self.loaded.values()):
            lost = [n for n in {*lo.channels.values(), *lo.segments.values()} if n not in nodes]
            if lo.state is Load.LOADED and not lost:
                continue
            if not nodes:
                lo.unplaced()
                continue
            log.info("placing collection %s again (lost nodes %s)", lo.collection_id, lost)
            fresh = Loaded(lo.collection_id, lo.partition_ids)
            self.loaded[lo.collection_id] = fresh
            try:
                await self._place(fresh)
            except ElanusError as exc:
                fresh.unplaced()
                log.warning("could not place collection %s: %s", lo.collection_id, exc)
