"""Query coordination (seed 000 §6.4, seed 001): load, release, distribution, handoff.

Loading a collection places ``replica_number`` copies of it (``meta/replicas.py``), each
on query nodes of its own: each flushed segment on a worker and each vchannel on a
delegator (least-loaded nodes of the replica), the delegator starting at the channel's
checkpoint and knowing which sealed segments exist. After a flush or a compaction the new
segment is loaded on a worker of every replica first and only then handed to that
replica's delegator, which swaps it for the growing copy (or the compacted sources) in one
step. Loaded collections are kept in DuckDB and placed again after a coord restart; a
replica that loses a query node is placed again on a free one while the others serve.

Past 600 lines: load, release, repair and every handoff (flush, import, compaction,
truncate) share one lock and the replicas' state; split, each part would reach into it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from elanus.api.base import ACK, Ack
from elanus.api.datanode import Checkpoint
from elanus.api.querycoord import (
    GetReplicas,
    JoinGroup,
    LoadCollection,
    LoadProgress,
    LoadState,
    NodeUnreachable,
    QueryRoute,
    ReleaseCollection,
    ReplicaInfo,
    Replicas,
    Route,
)
from elanus.api.querynode import (
    LOADED_MAPPED,
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
    UnwatchChannel,
    WorkerAPI,
)
from elanus.channels.bus import Bus
from elanus.channels.dml import pchannel_of
from elanus.channels.runtime.loop import Periodic, cancel_and_wait
from elanus.errors import ElanusError, ErrorCode
from elanus.meta import replicas as rep
from elanus.meta.balance import balance
from elanus.meta.nodegroups import FannedQueryNode, FannedWorker, NodeGroups, copy_share
from elanus.meta.replicas import Loaded, Replica
from elanus.meta.unreachable import UnreachableNodes
from elanus.mmapsettings import for_field, resolve
from elanus.states import LoadState as Load
from elanus.states import SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import CollectionLookup, SegmentTable, ServedIndexes

log = logging.getLogger(__name__)


class QueryCoord:
    def __init__(
        self, ctx: CoordContext, lookup: CollectionLookup, data: SegmentTable, index: ServedIndexes
    ) -> None:
        self.ctx, self.lookup, self.data, self.index = ctx, lookup, data, index
        self.loaded: dict[int, Loaded] = {}
        self._handoffs: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # placements and handoffs one at a time
        self.unreachable = UnreachableNodes(ctx)
        self.groups = NodeGroups()

    def schedule(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a handoff in the background (the reporting datanode need not wait). The
        coroutine is made under the lock: one made here and cancelled at a stop before
        it ran would never be awaited."""
        task = self.ctx.supervisor.spawn("handoff", lambda: self._locked(make))
        self._handoffs.add(task)
        task.add_done_callback(self._handoffs.discard)

    async def _locked(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        async with self._lock:
            await make()  # a failure is logged by the supervisor; keep_loaded repairs it

    async def stop(self) -> None:
        for task in list(self._handoffs):
            await cancel_and_wait(task)

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "query.load": self.load,
            "query.release": self.release,
            "query.state": self.state,
            "query.route": self.route,
            "query.replicas": self.replicas,
            "query.node_unreachable": self.node_unreachable,
            "query.join_group": self.join_group,
        }

    def background(self) -> list[Periodic]:
        return [Periodic(self.keep_loaded, 1.0, "keep collections loaded")]

    async def start(self) -> None:
        for lo in await self.ctx.db.run(rep.read):
            self.loaded[lo.collection_id] = lo

    def serves(self, collection_id: int, partition_id: int) -> bool:
        """Whether a partition's data is loaded into the query nodes."""
        lo = self.loaded.get(collection_id)
        return lo is not None and (lo.partition_ids is None or partition_id in lo.partition_ids)

    # -- helpers ----------------------------------------------------------------------------
    @property
    def bus(self) -> Bus:
        return self.ctx.bus

    def _nodes(self) -> list[str]:
        """The live query nodes placement sees (a node group counts as one)."""
        sessions = self.ctx.sessions.of_role("querynode")
        return sorted(self.groups.logical(self.unreachable.live(), sessions))

    def node(self, node: str) -> QueryNodeAPI:
        if self.groups.is_group(node):
            return FannedQueryNode(self.bus, node, self.groups)
        return QueryNodeAPI(self.bus, node)

    def worker(self, node: str) -> WorkerAPI:
        if self.groups.is_group(node):
            return FannedWorker(self.bus, node, self.groups)
        return WorkerAPI(self.bus, node, NODE_TIMEOUT_S)

    async def _wait_for_nodes(self, timeout: float, wanted: int = 1) -> list[str]:
        """Live query nodes, looking again for a little while if there are none (one may be
        just starting), once if there are fewer than ``wanted``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            nodes = self._nodes()
            if len(nodes) >= wanted or asyncio.get_running_loop().time() > deadline:
                return nodes
            await self.ctx.sessions.poll()
            if self._nodes():
                return self._nodes()
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

    def segment_spec(self, seg: Any, info: dict[str, Any]) -> SegmentSpec:
        """What a worker needs to load a segment, with its finished indexes (each says
        whether it loads mapped: the collection ``info``'s ``mmap.enabled`` settings)."""
        return SegmentSpec(
            segment_id=seg.segment_id,
            partition_id=seg.partition_id,
            path=seg.path,
            vchannel=seg.vchannel,
            indexes=[served(i, info) for i in self.index.served(seg.segment_id)],
            mmap_fields=[
                f["name"]
                for f in info["schema"]["fields"]
                if not f.get("is_primary") and for_field(info["properties"], f["name"])
            ],
            key_range=seg.key_range,
        )

    async def _release_on(self, cid: int, nodes: set[str]) -> None:
        """Drop what ``nodes`` hold of collection ``cid`` (those still running)."""
        live = set(self._nodes())
        for node in sorted(nodes & live):
            try:
                await self.node(node).release_collection(ReleaseOnNode(collection_id=cid))
            except ElanusError as exc:
                log.warning("query node %s did not release %s: %s", node, cid, exc)

    async def _let_go(self, cid: int, old: list[Replica], new: list[Replica]) -> None:
        """After a placement: the delegators and segments ``old`` had on live nodes that
        ``new`` does not place there are dropped (a node ``new`` does not use, all of it)."""
        live = set(self._nodes())
        kept = {n for r in new for n in (*r.nodes, *r.used())}
        channels = {(v, n) for r in new for v, n in r.channels.items()}
        segments = {(s, n) for r in new for s, n in r.segments.items()}
        stale: dict[str, list[int]] = {}
        try:
            for r in old:
                for v, n in r.channels.items():
                    if n in kept and n in live and (v, n) not in channels:
                        await self.node(n).unwatch(UnwatchChannel(vchannel=v))
                for sid, n in r.segments.items():
                    if n in kept and n in live and (sid, n) not in segments:
                        stale.setdefault(n, []).append(sid)
            for n, sids in stale.items():
                await self.worker(n).release(ReleaseSegments(segment_ids=sids))
        except ElanusError as exc:
            log.warning("collection %s: an old placement was not let go: %s", cid, exc)
        await self._release_on(cid, {n for r in old for n in (*r.nodes, *r.used())} - kept)

    # -- load and release -------------------------------------------------------------------
    async def load(self, req: LoadCollection) -> LoadProgress:
        cid, partitions = req.collection_id, req.partition_ids
        lo = Loaded(cid, sorted(partitions) if partitions else None, req.replica_number)
        old = self.loaded.get(cid)
        if old is not None and old.state is Load.LOADED and old.same_as(lo):
            return await self.state(LoadState(collection_id=cid))
        async with self._lock:
            await self._place(lo)  # raises (nothing recorded) when it cannot place
            self.loaded[cid] = lo
            await self._record(lo)
            if old is not None:
                await self._let_go(cid, old.replicas, lo.replicas)
        return await self.state(LoadState(collection_id=cid))

    async def _place(self, lo: Loaded) -> None:
        """Every replica of a new load, each on its own share of the live nodes."""
        nodes = await self._wait_for_nodes(self.ctx.settings.query_node_wait_s, lo.replica_number)
        if not nodes:
            raise ElanusError(ErrorCode.UNAVAILABLE, "no query node is running to load into")
        if len(nodes) < lo.replica_number:
            label = await self.lookup.collection_label(lo.collection_id)
            raise rep.too_many_replicas(label, lo.replica_number, len(nodes))
        info = await self.lookup.describe_by_id(lo.collection_id)
        groups = rep.split_nodes(nodes, lo.replica_number)
        lo.replicas = [Replica(self.ctx.ids.alloc(), group) for group in groups]
        await asyncio.gather(*(self._place_replica(lo, r, r.nodes, info) for r in lo.replicas))
        transition(lo, Load.LOADED)

    async def _place_replica(
        self, lo: Loaded, r: Replica, nodes: list[str], info: dict[str, Any]
    ) -> None:
        """One full copy on ``nodes``: the flushed segments on their workers, then a
        delegator per vchannel (each waits until it has caught up)."""
        r.placed = False
        before = Replica(r.replica_id, r.nodes, r.channels, r.segments)
        r.nodes, r.channels, r.segments = sorted(nodes), {}, {}
        rows: dict[str, int] = {}
        specs: dict[str, list[SegmentSpec]] = {}
        for seg in sorted(self._flushed(lo), key=lambda s: -s.num_rows):
            node = self._least_loaded(r.nodes, rows)
            rows[node] = rows.get(node, 0) + seg.num_rows
            r.segments[seg.segment_id] = node
            specs.setdefault(node, []).append(self.segment_spec(seg, info))
        for node, segs in specs.items():
            await self.worker(node).load(
                LoadSegments(collection_id=lo.collection_id, schema=info["schema"], segments=segs)
            )
        channels: dict[str, int] = {}
        watches = []
        for v in info["vchannels"]:
            node = self._least_loaded(r.nodes, channels)
            channels[node] = channels.get(node, 0) + 1
            watches.append(self._watch(lo, r, info, v, node))
        await asyncio.gather(*watches)
        r.placed = True
        if before.used():  # placed again: what it held before and no longer does
            await self._let_go(lo.collection_id, [before], [r])

    async def _record(self, lo: Loaded) -> None:
        """Write the load and its distribution (which node serves what) to DuckDB."""
        await self.ctx.db.run(rep.write, lo)

    async def _watch(
        self, lo: Loaded, r: Replica, info: dict[str, Any], vchannel: str, node: str
    ) -> None:
        """Start the vchannel's delegator on ``node``."""
        await self.node(node).watch(self.delegate_request(lo, r, info, vchannel))
        r.channels[vchannel] = node

    def delegate_request(
        self, lo: Loaded, r: Replica, info: dict[str, Any], vchannel: str
    ) -> DelegateChannel:
        """A delegator of ``r`` for ``vchannel``, from the channel checkpoint; it serves
        reads once its tsafe reaches ``ready_ts``: the checkpoint's tick and the newest row
        of every sealed segment it is given (the checkpoint may be a tick older than a
        segment flushed just now, and a read at it would hide that segment's rows)."""
        checkpoint = self.data.checkpoints.get(vchannel)
        segs = [
            (sid, n, seg)
            for sid, n in r.segments.items()
            if (seg := self.data.segments.get(sid)) is not None and seg.vchannel == vchannel
        ]
        sealed = [
            SealedSegment(
                segment_id=sid,
                node_id=n,
                partition_id=seg.partition_id,
                path=seg.path,
                key_range=seg.key_range,
            )
            for sid, n, seg in segs
        ]
        ready_ts = max(
            [checkpoint[1] if checkpoint else 0, *(seg.max_ts or 0 for _, _, seg in segs)]
        )
        return DelegateChannel(
            vchannel=vchannel,
            pchannel=pchannel_of(vchannel),
            collection_id=lo.collection_id,
            schema=info["schema"],
            checkpoint=Checkpoint(seq=checkpoint[0], ts=checkpoint[1]) if checkpoint else None,
            sealed=sealed,
            partition_ids=lo.partition_ids,
            ready_ts=ready_ts,
        )

    async def release(self, req: ReleaseCollection) -> Ack:
        await self.release_collection(req.collection_id)
        return ACK

    async def release_collection(self, cid: int) -> None:
        lo = self.loaded.pop(cid, None)
        await self.ctx.db.run(rep.forget, cid)
        if lo is not None:
            await self._release_on(cid, lo.nodes())

    async def state(self, req: LoadState) -> LoadProgress:
        cid = req.collection_id
        lo = self.loaded.get(cid)
        progress, loaded, persisted = self.progress(cid)
        nodes = self.ctx.sessions.of_role("querynode")
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
            memory_bytes=rep.memory_held(nodes, cid),
            mapped_bytes=rep.memory_held(nodes, cid, LOADED_MAPPED),
        )

    def progress(self, cid: int) -> tuple[int, int, int]:
        """(percent, loaded rows, persisted rows) of collection ``cid``'s load (its fullest
        copy); a state read and a metric, so safe off the loop (it only reads)."""
        segments = self.data.segments
        persisted = sum(
            s.num_rows
            for s in list(segments.values())
            if s.collection_id == cid and s.state is SegmentState.FLUSHED
        )
        lo = self.loaded.get(cid)
        if lo is None:
            return 0, 0, persisted
        loaded = max(
            (
                sum(segments[s].num_rows for s in list(r.segments) if s in segments)
                for r in list(lo.replicas)
            ),
            default=0,
        )
        if lo.state is Load.LOADED:
            return 100, loaded, persisted
        return (100 * loaded // persisted if persisted else 0), loaded, persisted

    async def _loaded(self, cid: int, serving: bool = True) -> Loaded:
        """The load of ``cid``; COLLECTION_NOT_LOADED without one (or while it is Loading,
        for a ``serving`` caller)."""
        lo = self.loaded.get(cid)
        if lo is None or (serving and lo.state is not Load.LOADED):
            label = await self.lookup.collection_label(cid)
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED,
                f"collection {label} is not loaded; load it first",
            )
        return lo

    async def route(self, req: QueryRoute) -> Route:
        """The delegators of every replica that serves, those on live nodes first."""
        lo = await self._loaded(req.collection_id)
        live = set(self._nodes())
        placed = lo.placed()
        ordered = [r for r in placed if r.serves(live)] + [r for r in placed if not r.serves(live)]
        return Route(replicas=[dict(r.channels) for r in ordered], partition_ids=lo.partition_ids)

    async def replicas(self, req: GetReplicas) -> Replicas:
        """Where each replica is placed (pymilvus's ``describe_replica``), also while
        Loading."""
        lo = await self._loaded(req.collection_id, serving=False)
        live = set(self._nodes())
        return Replicas(
            replicas=[
                ReplicaInfo(
                    replica_id=r.replica_id,
                    collection_id=lo.collection_id,
                    partition_ids=lo.partition_ids,
                    node_ids=sorted(r.nodes),
                    shard_leaders=dict(r.channels) if r.placed else {},
                    serving=r.serves(live),
                )
                for r in lo.replicas
            ]
        )

    # -- handoff ----------------------------------------------------------------------------
    async def on_segment_flushed(self, seg: Any) -> None:
        if seg.segment_id not in self.data.segments:
            return  # dropped before its handoff ran (a truncate)
        lo = self.loaded.get(seg.collection_id)
        if lo is None or lo.state is not Load.LOADED or not seg.path:
            return
        if lo.partition_ids is not None and seg.partition_id not in lo.partition_ids:
            return
        await self._hand_over(lo, [seg], remove=[])

    async def segment_flushed(self, seg: Any) -> None:
        """DataCoord's ``on_flushed``: hand the segment over in the background."""
        self.schedule(lambda: self.on_segment_flushed(seg))

    def index_built(self, collection_id: int, segment_id: int, index: dict[str, Any]) -> None:
        """IndexCoord's ``IndexListener``."""
        self.schedule(lambda: self.on_index_built(collection_id, segment_id, index))

    def index_dropped(self, collection_id: int, index_id: int) -> None:
        self.schedule(lambda: self.on_index_dropped(collection_id, index_id))

    async def on_segments_imported(self, segs: list[Any]) -> None:
        """Hand a committed import's segments to a loaded collection, now, side by side
        (their loads overlap): the import job reports Completed once they serve
        (delegators hold tsafe until they arrive)."""

        async def hand_over(seg: Any) -> None:
            try:
                await self.on_segment_flushed(seg)
            except Exception as exc:  # noqa: BLE001 - keep_loaded repairs what is left
                log.warning("handoff of imported segment %s failed: %s", seg.segment_id, exc)

        async with self._lock:
            await asyncio.gather(*(hand_over(seg) for seg in segs))

    async def on_compacted(self, targets: list[Any], sources: list[int]) -> None:
        """A compaction's targets replace its sources in one step of each delegator (a
        clustering compaction has several; none left: the sources just go)."""
        lo = self.loaded.get(targets[0].collection_id)
        if lo is None or lo.state is not Load.LOADED:
            return
        live = [
            t
            for t in targets  # else a truncate dropped it
            if t.state is SegmentState.FLUSHED and t.path and t.segment_id in self.data.segments
        ]
        if live:
            await self._hand_over(lo, live, remove=sources)
        else:
            await self._drop(lo, targets[0].vchannel, sources)
            await self._record(lo)

    async def truncated(self, collection_id: int, vchannels: list[str], dropped: list[int]) -> None:
        """A truncate dropped these segments: the replicas let them go, and their
        delegators the growing copies; after the handoffs already under way, which would
        otherwise bring one back."""
        await asyncio.gather(*list(self._handoffs), return_exceptions=True)
        async with self._lock:
            lo = self.loaded.get(collection_id)
            if lo is not None:
                for v in vchannels:
                    await self._drop(lo, v, dropped)
                await self._record(lo)

    async def _hand_over(self, lo: Loaded, segs: list[Any], remove: list[int]) -> None:
        """The segments (of one vchannel) to workers of every placed replica, then to that
        replica's delegator in one sync; a replica that fails is placed again by
        keep_loaded."""
        live = set(self._nodes())
        info = await self.lookup.describe_by_id(lo.collection_id)
        specs = [self.segment_spec(seg, info) for seg in segs]
        for r in lo.placed():
            try:
                await self._hand_to(lo, r, live, info, specs, remove)
            except ElanusError as exc:
                # A node that is stopping or gone (UNAVAILABLE) is no news here: its session's
                # end says so, and keep_loaded places the replica again either way.
                level = logging.INFO if exc.code is ErrorCode.UNAVAILABLE else logging.WARNING
                log.log(
                    level, "replica %d of collection %d did not take segments %s: %s",
                    r.replica_id, lo.collection_id, [s.segment_id for s in specs], exc,
                )  # fmt: skip
                r.placed = False
        if not lo.placed():
            lo.unplaced()
        await self._drop(lo, None, remove)
        await self._record(lo)

    async def _hand_to(
        self,
        lo: Loaded,
        r: Replica,
        live: set[str],
        info: dict[str, Any],
        specs: list[SegmentSpec],
        remove: list[int],
    ) -> None:
        nodes = [n for n in r.nodes if n in live]
        vchannel = specs[0].vchannel
        delegator = r.channels.get(vchannel)
        if not nodes or delegator is None:
            r.placed = False
            return
        checkpoint = self._trim_checkpoint(r, vchannel)  # read before the load
        sealed: list[SealedSegment] = []
        try:
            for spec in specs:
                counts: dict[str, int] = {}
                for n in r.segments.values():
                    counts[n] = counts.get(n, 0) + 1
                node = self._least_loaded(nodes, counts)
                r.segments[spec.segment_id] = node  # counted by handoffs running beside this
                load = LoadSegments(
                    collection_id=lo.collection_id, schema=info["schema"], segments=[spec]
                )
                await self.worker(node).load(load)
                sealed.append(
                    SealedSegment(
                        segment_id=spec.segment_id,
                        node_id=node,
                        partition_id=spec.partition_id,
                        path=spec.path,
                        key_range=spec.key_range,
                    )
                )
            await self.node(delegator).sync(
                SyncDistribution(
                    vchannel=vchannel, remove=remove, add=sealed, checkpoint=checkpoint
                )
            )
        except BaseException:
            # No delegator took them (the collection released meanwhile, a node gone): the
            # workers must not keep a copy nobody serves. A later load would reuse it as it
            # is, with no delete that came after this load: a deleted key came back.
            for spec in specs:
                r.segments.pop(spec.segment_id, None)
            for s in sealed:
                with contextlib.suppress(ElanusError):
                    await self.worker(s.node_id).release(
                        ReleaseSegments(segment_ids=[s.segment_id])
                    )
            raise

    def _trim_checkpoint(self, r: Replica, vchannel: str) -> Checkpoint | None:
        """The datanode checkpoint of ``vchannel`` a delegator may trim its delete buffer
        to (``segments/querynode/deletebuffer.py``), or none: a segment it serves was compacted
        away and not yet handed over (its files no longer get new deletes)."""
        data = self.data
        for sid in r.segments:
            s = data.segments.get(sid)
            if s is None or s.state not in (SegmentState.FLUSHED, SegmentState.IMPORTING):
                return None
        checkpoint = data.checkpoints.get(vchannel)
        return Checkpoint(seq=checkpoint[0], ts=checkpoint[1]) if checkpoint else None

    async def on_index_built(
        self, collection_id: int, segment_id: int, index: dict[str, Any]
    ) -> None:
        """A finished build goes to the workers holding the segment, which swap it in."""
        lo = self.loaded.get(collection_id)
        if lo is None:
            return  # not loaded: the index comes with the segment when it is
        live = set(self._nodes())
        entry = served(index, await self.lookup.describe_by_id(collection_id))
        for r in lo.replicas:
            node = r.segments.get(segment_id)
            if node is not None and node in live:
                await self.worker(node).load_index(LoadIndex(segment_id=segment_id, index=entry))

    async def on_index_dropped(self, collection_id: int, index_id: int) -> None:
        lo = self.loaded.get(collection_id)
        if lo is None:
            return
        for node in sorted(
            {n for r in lo.replicas for n in r.segments.values()} & set(self._nodes())
        ):
            await self.worker(node).drop_index(
                DropIndexOnNode(collection_id=collection_id, index_id=index_id)
            )

    async def _drop(self, lo: Loaded, vchannel: str | None, sources: list[int]) -> None:
        live = set(self._nodes())
        for r in lo.replicas:
            if vchannel is not None and vchannel in r.channels:
                await self.node(r.channels[vchannel]).sync(
                    SyncDistribution(vchannel=vchannel, remove=sources)
                )
            by_node: dict[str, list[int]] = {}
            for sid in sources:
                node = r.segments.pop(sid, None)
                if node is not None:
                    by_node.setdefault(node, []).append(sid)
            for node, sids in by_node.items():
                if node in live:
                    await self.worker(node).release(ReleaseSegments(segment_ids=sids))

    async def keep_loaded(self) -> None:
        """Place replicas again whose query nodes went away (or after a restart), and copy
        onto group members that hold nothing yet what is placed on their group."""
        await self.unreachable.recheck()
        async with self._lock:
            sessions = self.ctx.sessions.of_role("querynode")
            for member, group in self.groups.strays(self.unreachable.live(), sessions):
                try:
                    await self._join(member, group, afresh=True)
                except ElanusError as exc:  # tried again next time; the others serve
                    log.warning("query node %s could not join group %s: %s", member, group, exc)
            await self._repair()

    async def join_group(self, req: JoinGroup) -> Ack:
        async with self._lock:
            await self._join(req.node_id, req.group)
        return ACK

    async def _join(self, member: str, group: str, afresh: bool = False) -> None:
        """Copy onto ``member`` every placed share of ``group``; then it is one of the
        members every later call to the group goes to."""
        log.info("query node %s joins node group %s", member, group)
        await copy_share(self, group, member, afresh)
        self.groups.join(group, member)

    async def node_unreachable(self, req: NodeUnreachable) -> Ack:
        """Confirmed gone: their replicas are placed again before the proxy hears back."""
        if await self.unreachable.confirm(req.node_ids):
            async with self._lock:
                await self._repair()
        return ACK

    async def _repair(self) -> None:
        live = set(self._nodes())
        for lo in list(self.loaded.values()):
            for r in lo.replicas:
                if r.placed and r.lost(live):
                    log.info(
                        "replica %d of collection %s lost nodes %s",
                        r.replica_id, lo.collection_id, r.lost(live),
                    )  # fmt: skip
                    r.placed = False
            while len(lo.replicas) < lo.replica_number:  # recorded before replicas were
                lo.replicas.append(Replica(self.ctx.ids.alloc(), []))
            if not lo.placed():
                lo.unplaced()
            if all(r.placed for r in lo.replicas):
                if lo.state is Load.LOADING:
                    transition(lo, Load.LOADED)
                if await balance(self, lo, live):
                    await self._record(lo)
                continue
            await self._place_again(lo, live)

    async def _place_again(self, lo: Loaded, live: set[str]) -> None:
        """The unplaced replicas of ``lo`` on their own live nodes and the free ones."""
        shares = rep.share_spare(lo.replicas, live)
        if not any(shares.values()):
            return  # no free query node: the other replicas serve meanwhile
        try:
            info = await self.lookup.describe_by_id(lo.collection_id)
        except ElanusError as exc:
            log.warning("could not place collection %s: %s", lo.collection_id, exc)
            return
        for r in lo.replicas:
            nodes = shares.get(r.replica_id)
            if r.placed or not nodes:
                continue
            log.info(
                "placing replica %d of collection %s on %s", r.replica_id, lo.collection_id, nodes
            )
            try:
                await self._place_replica(lo, r, nodes, info)
            except ElanusError as exc:
                r.placed = False
                log.warning("could not place collection %s: %s", lo.collection_id, exc)
        if lo.placed() and lo.state is Load.LOADING:
            transition(lo, Load.LOADED)
        await self._record(lo)


def served(index: dict[str, Any], info: dict[str, Any]) -> ServedIndex:
    """A finished index as a worker loads it: mapped or not (``elanus.mmapsettings``)."""
    mmap = resolve(info["properties"], index["field"], index.get("index_id"))
    return ServedIndex(**index, mmap=mmap)
