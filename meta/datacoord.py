"""Data coordination: segment assignment, sealing, flush and checkpoints (seeds 000 §6.3, 004).

Proxies ask for rows in growing segments in quotas (``segment.assign``), so one request
covers many inserts. Sealing a segment first asks every live proxy to drop its quota for it
and finish what is in flight; the seal timestamp is taken after they answer, so every row
of the segment carries a smaller timestamp. A datanode reports its channel time tick
(``datanode.tt``); once the tick passes a sealed segment's seal timestamp, the segment is
complete and the datanode is told to write it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from elanus import tsutil
from elanus.api.compaction import Recorded
from elanus.api.datacoord import (
    Assigned,
    AssignSegment,
    DatanodeTick,
    DeletesPersisted,
    Flush,
    Flushing,
    FlushProgress,
    FlushState,
    PersistDeletes,
    SegmentFlushed,
    SegmentGrant,
    SegmentInfo,
    SegmentRecord,
    Segments,
    TickReply,
)
from elanus.api.proxy import ProxyAPI, ReleaseQuotas
from elanus.channels import subjects
from elanus.channels.dml import pchannel_of, stream_name
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta import segmentmeta
from elanus.meta.segmentmeta import Segment
from elanus.schema import Schema
from elanus.states import SegmentState, transition

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import ChannelOwners, CollectionLookup, CompactionPlans

log = logging.getLogger(__name__)

QUOTA_LIFETIME_MS = 5_000
CHECKPOINT_SAVE_S = 2.0


def estimate_row_bytes(schema: Schema) -> int:
    total = 16  # primary key / timestamp overhead
    for f in schema.fields:
        if f.dim:
            total += f.dim // 8 if f.dtype.value == "BinaryVector" else f.dim * 4
        elif f.max_length:
            total += min(f.max_length, 256)
        else:
            total += 8
    return total


class DataCoord:
    def __init__(self, ctx: CoordContext, lookup: CollectionLookup) -> None:
        self.ctx, self.lookup = ctx, lookup
        self._on_flushed: list[Callable[[Segment], Awaitable[None]]] = []
        self._plans: CompactionPlans | None = None
        self.segments: dict[int, Segment] = {}
        self.checkpoints: dict[str, tuple[int, int]] = {}
        """vchannel -> (seq, ts) last reported by its datanode."""
        self.saved_checkpoints: dict[str, tuple[int, int]] = {}
        """vchannel -> (seq, ts) in DuckDB: what a restart resumes from, and what purges respect."""
        self._checkpoint_saved_at: dict[str, float] = {}
        self._purge_marks: collections.deque[tuple[float, dict[str, int]]] = collections.deque()
        """(when, pchannel -> purgeable seq) of past purge rounds: with ``log_retention_s``
        the log is cut where it could have been that long ago (``purge_streams``)."""
        self.channel_ticks: dict[str, int] = {}
        self.persist_wanted: dict[str, int] = {}
        """vchannel -> deletes up to this ts are to be written (``persist_deletes``)."""
        self.persisted: dict[str, int] = {}
        """vchannel -> its datanode wrote every delete up to this ts."""
        self._lock = asyncio.Lock()
        self._schemas: dict[int, Schema] = {}
        self.quota_holders: dict[int, set[str]] = {}
        """segment -> proxies that were granted quota in it (only they can still write)."""
        self._holders_unknown: set[int] = set()
        """Growing segments from before a coord restart: their holders are not known."""
        self.channel_failures: dict[str, str] = {}
        """vchannel -> why its datanode task died, until the channel is watched again."""
        self.datanode_heard: dict[str, float] = {}
        """datanode -> when (monotonic) it last reported a tick: the channel manager probes
        the late ones."""
        self.owners: ChannelOwners | None = None
        """Who watches each vchannel: reports from any other datanode are refused."""

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "segment.assign": self.assign,
            "segment.info": self.segment_info,
            "segment.flushed": self.segment_flushed,
            "flush": self.flush,
            "flush.state": self.flush_state,
            "deletes.persist": self.persist_deletes,
            "datanode.tt": self.datanode_tt,
        }

    def on_flushed(self, callback: Callable[[Segment], Awaitable[None]]) -> None:
        """``callback`` hears of each segment a datanode flushed (``SegmentEvents``)."""
        self._on_flushed.append(callback)

    def take_plans_from(self, plans: CompactionPlans) -> None:
        """Tick replies carry the compaction plans of the ticking vchannel: the compaction
        manager is built after DataCoord (it reads the segments), so it is wired here."""
        self._plans = plans

    async def start(self) -> None:
        root = self.ctx.settings.storage_uri

        def load(con: Any) -> tuple[list[Segment], dict[str, tuple[int, int]]]:
            segs = segmentmeta.load(con, root, f"state <> '{SegmentState.DROPPED}'")
            return segs, segmentmeta.load_checkpoints(con)

        segs, self.checkpoints = await self.ctx.db.run(load)
        self.saved_checkpoints = dict(self.checkpoints)
        self.segments = {s.segment_id: s for s in segs}
        self._holders_unknown = {s.segment_id for s in segs if s.state is SegmentState.GROWING}
        await self._recover()

    async def _recover(self) -> None:
        """Finish what a coord that died mid-way left: growing segments whose grants went
        unrecorded, seals without a timestamp (proxies may still hold quotas, so wait out
        their expiry) and flushes nobody confirmed."""
        changed = []
        for s in self.segments.values():
            if s.state is SegmentState.GROWING:
                # its grants since it was created were not recorded: full, so it is sealed
                # at the next grant, with quotas that may be out until they expire
                s.allocated_rows = s.max_rows
                s.last_expire_ts = tsutil.compose(tsutil.now_ms() + QUOTA_LIFETIME_MS)
            elif s.state is SegmentState.SEALED and s.seal_ts is None:
                s.seal_ts = self.ctx.tso.alloc()
                s.last_expire_ts = tsutil.compose(tsutil.now_ms() + QUOTA_LIFETIME_MS)
                changed.append(s)
            elif s.state is SegmentState.FLUSHING:
                transition(s, SegmentState.SEALED)
                changed.append(s)
        await self._save(changed)

    def background(self) -> list[Periodic]:
        """Seal idle segments often; purge consumed stream prefixes now and then."""
        return [
            Periodic(self.seal_idle, 1.0, "seal idle segments"),
            Periodic(self.purge_streams, 5.0, "purge streams"),
        ]

    async def purge_streams(self) -> dict[str, int | None]:
        """Drop stream messages below the lowest checkpoint of the vchannels on each pchannel."""
        live = await self.lookup.live_vchannels()
        purgeable: dict[str, int | None] = {}
        for p in self.ctx.pchannels:
            on_p = [v for v in live if pchannel_of(v) == p]
            if any(v not in self.saved_checkpoints for v in on_p):
                continue  # someone still needs the stream from its start
            purgeable[p] = min((self.saved_checkpoints[v][0] for v in on_p), default=None)
        purged = {}
        for p, seq in self._retained(purgeable).items():
            await self.ctx.bus.js.purge_stream(stream_name(p), seq=seq)
            purged[p] = seq
        return purged

    def _retained(self, purgeable: dict[str, int | None]) -> dict[str, int | None]:
        """What may be purged now: with ``log_retention_s``, only what could already be
        purged that long ago, so change streams (``elanus/client/changes.py``) can read
        that far back (a pchannel with no live vchannel is then left as it is)."""
        keep = self.ctx.settings.log_retention_s
        if keep <= 0:
            return purgeable
        now = time.monotonic()
        marks = self._purge_marks
        marks.append((now, {p: s for p, s in purgeable.items() if s is not None}))
        while len(marks) > 1 and now - marks[1][0] >= keep:
            marks.popleft()
        if now - marks[0][0] < keep:
            return {}
        return {p: s for p, s in marks[0][1].items() if p in purgeable}

    # -- helpers ----------------------------------------------------------------------------
    async def _save(self, segs: list[Segment]) -> None:
        await self.ctx.db.run(segmentmeta.save, segs)

    async def row_bytes(self, collection_id: int) -> int:
        """A row's estimated bytes in the collection (``estimate_row_bytes``): what segment
        sizes are counted in, as rows."""
        return estimate_row_bytes(await self._schema(collection_id))

    async def schema(self, collection_id: int) -> Schema:
        """The collection's schema (a clustering compaction reads its clustering key)."""
        return await self._schema(collection_id)

    async def _schema(self, collection_id: int) -> Schema:
        if collection_id not in self._schemas:
            info = await self.lookup.describe_by_id(collection_id)
            self._schemas[collection_id] = Schema.from_dict(info["schema"])
        return self._schemas[collection_id]

    def growing(self, collection_id: int, partition_id: int, vchannel: str) -> Segment | None:
        for s in self.segments.values():
            if (
                s.state is SegmentState.GROWING
                and s.collection_id == collection_id
                and s.partition_id == partition_id
                and s.vchannel == vchannel
            ):
                return s
        return None

    def of_collection(self, collection_id: int) -> list[Segment]:
        return [s for s in self.segments.values() if s.collection_id == collection_id]

    # -- assignment -------------------------------------------------------------------------
    async def assign(self, req: AssignSegment) -> Assigned:
        cid, pid, vchannel = req.collection_id, req.partition_id, req.vchannel
        rows, proxy_id = req.rows, req.proxy_id
        schema = await self._schema(cid)
        async with self._lock:
            grants, created, full = [], [], []
            expire = tsutil.compose(tsutil.now_ms() + QUOTA_LIFETIME_MS)
            while rows > 0:
                seg = self.growing(cid, pid, vchannel)
                if seg is None:
                    seg = self._new_segment(cid, pid, vchannel, schema)
                    created.append(seg)
                free = seg.max_rows - seg.allocated_rows
                if free <= 0:
                    full.append(seg)
                    transition(seg, SegmentState.SEALED)
                    continue
                quota = max(rows, min(seg.max_rows // 8, 65_536))
                n = min(free, quota)
                seg.allocated_rows += n
                seg.last_expire_ts = max(seg.last_expire_ts, expire)
                seg.last_alloc_at = time.time()
                grants.append(SegmentGrant(segment_id=seg.segment_id, rows=n, expire_ts=expire))
                self.quota_holders.setdefault(seg.segment_id, set()).add(proxy_id)
                rows -= min(rows, n)
            # A grant in an existing segment is kept in memory only (a catalog write per
            # grant was a tenth of an insert's server CPU); a restarted coord takes no
            # more grants in the growing segments it finds (``_recover``).
            await self._save(created + full)
        if full:
            self.ctx.supervisor.spawn("seal full segments", lambda: self.seal(full))
        return Assigned(assignments=grants)

    def _new_segment(self, cid: int, pid: int, vchannel: str, schema: Schema) -> Segment:
        settings = self.ctx.settings
        max_rows = max(
            1,
            min(
                settings.segment_max_rows, settings.segment_max_bytes // estimate_row_bytes(schema)
            ),
        )
        seg = Segment(
            segment_id=self.ctx.ids.alloc(),
            collection_id=cid,
            partition_id=pid,
            vchannel=vchannel,
            state=SegmentState.GROWING,
            max_rows=max_rows,
            created_ts=self.ctx.tso.alloc(),
            last_alloc_at=time.time(),
        )
        self.segments[seg.segment_id] = seg
        return seg

    # -- sealing and flush ------------------------------------------------------------------
    async def seal(self, segs: list[Segment]) -> int:
        """Seal segments: proxies drop their quotas, then the seal timestamp is taken."""
        for s in segs:
            if s.state is not SegmentState.SEALED:  # a full one was sealed when found full
                transition(s, SegmentState.SEALED)
        ids = [s.segment_id for s in segs]
        all_released = await self._release_quotas(ids)
        seal_ts = self.ctx.tso.alloc()
        for s in segs:
            s.seal_ts = seal_ts
            if all_released:
                s.last_expire_ts = 0
        await self._save(segs)
        return seal_ts

    async def _release_quotas(self, segment_ids: list[int]) -> bool:
        """Ask every proxy holding quota in these segments to drop it and finish in-flight
        writes. False when that cannot be confirmed: then the seal waits for expiry."""
        holders: set[str] = set()
        for sid in segment_ids:
            holders |= self.quota_holders.pop(sid, set())
        unknown = any(sid in self._holders_unknown for sid in segment_ids)
        self._holders_unknown -= set(segment_ids)
        if not holders:
            return not unknown

        async def ask(node_id: str) -> bool:
            try:
                await ProxyAPI(self.ctx.bus, node_id).release_quotas(
                    ReleaseQuotas(segment_ids=list(segment_ids))
                )
                return True
            except ElanusError as exc:
                log.warning("proxy %s did not release quotas: %s", node_id, exc)
                return False

        answers = await asyncio.gather(*(ask(p) for p in sorted(holders)))
        return all(answers) and "" not in holders and not unknown

    async def seal_idle(self) -> None:
        idle_s = self.ctx.settings.segment_idle_s
        now = time.time()
        idle = [
            s
            for s in self.segments.values()
            if s.state is SegmentState.GROWING and now - s.last_alloc_at > idle_s
        ]
        if idle:
            async with self._lock:
                await self.seal(idle)

    async def flush(self, req: Flush) -> Flushing:
        cid = req.collection_id
        async with self._lock:
            growing = [s for s in self.of_collection(cid) if s.state is SegmentState.GROWING]
            flush_ts = await self.seal(growing) if growing else self.ctx.tso.alloc()
        pending = [
            s.segment_id
            for s in self.of_collection(cid)
            if s.state in (SegmentState.SEALED, SegmentState.FLUSHING)
        ]
        return Flushing(segment_ids=pending, flush_ts=flush_ts)

    async def seal_all(self) -> tuple[int, list[int]]:
        """Seal every growing segment at one timestamp (a backup's, ``meta/backup.py``):
        that timestamp, and the segments still to be written."""
        async with self._lock:
            growing = [s for s in self.segments.values() if s.state is SegmentState.GROWING]
            ts = await self.seal(growing) if growing else self.ctx.tso.alloc()
        pending = [
            s.segment_id
            for s in self.segments.values()
            if s.state in (SegmentState.SEALED, SegmentState.FLUSHING)
        ]
        return ts, pending

    async def flush_state(self, req: FlushState) -> FlushProgress:
        """Whether ``segment_ids`` are Flushed; given ``collection_id`` and ``flush_ts``,
        also whether every vchannel of that collection checkpointed at or past
        ``flush_ts`` (Milvus's flush-all state: a timestamp no checkpoint has reached,
        a future one included, is not flushed yet)."""
        ids = req.segment_ids
        self._check_channels(ids)
        done = [
            i
            for i in ids
            if i not in self.segments or self.segments[i].state is SegmentState.FLUSHED
        ]
        flushed = len(done) == len(ids)
        if flushed and req.collection_id is not None and req.flush_ts is not None:
            flushed = await self._checkpointed(req.collection_id, req.flush_ts)
        return FlushProgress(flushed=flushed, done=len(done), total=len(ids))

    async def _checkpointed(self, collection_id: int, ts: int) -> bool:
        live = await self.lookup.live_vchannels()
        return all(
            self.checkpoints.get(v, (0, 0))[1] >= ts for v, c in live.items() if c == collection_id
        )

    def _check_channels(self, segment_ids: list[int]) -> None:
        """A flush waiting on a channel whose datanode task died fails, naming it, instead
        of waiting for a report that cannot come (until the channel is watched again)."""
        for sid in segment_ids:
            seg = self.segments.get(sid)
            if seg is None or seg.state is SegmentState.FLUSHED:
                continue
            reason = self.channel_failures.get(seg.vchannel)
            if reason is not None:
                raise ElanusError(
                    ErrorCode.UNAVAILABLE,
                    f"segment {sid} cannot be flushed: the datanode task of channel "
                    f"{seg.vchannel} failed ({reason}); it is being restarted, flush again",
                )

    async def persist_deletes(self, req: PersistDeletes) -> DeletesPersisted:
        """Ask (through tick replies) the datanodes of ``vchannels`` to write their pending
        deletes up to ``ts``; asking again is how a caller waits, and re-asks after a coord
        restart or a channel move (the wish is kept in memory only)."""
        waiting = [v for v in req.vchannels if self.persisted.get(v, 0) < req.ts]
        if waiting:  # a dropped collection's datanodes write nothing more: say so, not wait
            live = await self.lookup.live_vchannels()
            gone = [v for v in waiting if v not in live]
            if gone:
                raise ElanusError(
                    ErrorCode.COLLECTION_NOT_FOUND,
                    f"the collection of vchannel {gone[0]} was dropped while a read plan "
                    "waited for its deletes to be written",
                )
        for v in waiting:
            self.persist_wanted[v] = max(req.ts, self.persist_wanted.get(v, 0))
        return DeletesPersisted(done=not waiting, waiting=waiting)

    async def segment_info(self, req: SegmentInfo) -> Segments:
        ids, cid, include_dropped = req.segment_ids, req.collection_id, req.include_dropped
        if ids is None and cid is None:
            raise invalid("segment.info needs 'segment_ids' or 'collection_id'")
        if ids is not None:
            wanted = set(ids)
            segs = (
                await self.ctx.db.run(
                    segmentmeta.load,
                    self.ctx.settings.storage_uri,
                    f"segment_id IN ({','.join('?' * len(wanted))})",
                    list(wanted),
                )
                if wanted
                else []
            )
        else:
            where = "collection_id = ?" + ("" if include_dropped else " AND state <> ?")
            params = [cid] if include_dropped else [cid, SegmentState.DROPPED.value]
            segs = await self.ctx.db.run(
                segmentmeta.load, self.ctx.settings.storage_uri, where, params
            )
        live = {s.segment_id: s for s in segs}
        live.update({i: s for i, s in self.segments.items() if i in live})
        return Segments(segments=[SegmentRecord(**s.to_dict()) for s in live.values()])

    # -- datanode reports -------------------------------------------------------------------
    async def datanode_tt(self, req: DatanodeTick) -> TickReply:
        """A datanode consumed its channel up to ``ts``: checkpoint it, hand out flushes."""
        vchannel, ts, checkpoint = req.vchannel, req.ts, req.checkpoint
        if req.node_id is not None:
            self.datanode_heard[req.node_id] = time.monotonic()
        if not self._owns(req.node_id, vchannel):
            return TickReply(flush=[])  # its writer is told to stop by the channel manager
        self.channel_ticks[vchannel] = max(ts, self.channel_ticks.get(vchannel, 0))
        if checkpoint is not None:
            seq, cp_ts = int(checkpoint["seq"]), int(checkpoint["ts"])
            await self._checkpoint(vchannel, seq, cp_ts, req.data_seq)
        if req.persisted_ts is not None:
            self.persisted[vchannel] = max(req.persisted_ts, self.persisted.get(vchannel, 0))
        wanted = self.persist_wanted.get(vchannel, 0)
        persist = wanted if self.persisted.get(vchannel, 0) < wanted <= ts else None
        ready = [
            s
            for s in self.segments.values()
            if s.vchannel == vchannel
            and s.state is SegmentState.SEALED
            and s.seal_ts is not None
            and s.seal_ts <= ts
            and s.last_expire_ts <= ts
        ]
        for s in ready:
            transition(s, SegmentState.FLUSHING)
        if ready:
            await self._save(ready)
        compact = self._plans.take_for(vchannel, ts) if self._plans is not None else []
        return TickReply(flush=[s.segment_id for s in ready], compact=compact, persist_ts=persist)

    def _owns(self, node: str | None, vchannel: str) -> bool:
        """Whether a report of ``node`` on ``vchannel`` counts: a datanode the channel moved
        from (taken for dead, yet alive) must not move its checkpoint or flush its segments."""
        owner = self.owners.owner(vchannel) if self.owners is not None else None
        return node is None or owner is None or owner == node

    async def _checkpoint(self, vchannel: str, seq: int, ts: int, data_seq: int | None) -> None:
        """Keep a vchannel's newest checkpoint; write it to DuckDB when a restart would
        otherwise replay data, else at most every CHECKPOINT_SAVE_S.

        Every tick moves the checkpoint, and each DuckDB upsert costs ~4 ms of CPU: per-tick
        writes were half of an idle standalone's CPU. ``data_seq`` is the last non-tick
        message the datanode consumed: when it lies below the saved position, everything
        between the saved and the new checkpoint is ticks, and resuming from the saved one
        replays nothing but ticks. So the saved checkpoint never trails by data."""
        self.checkpoints[vchannel] = current = (seq, ts)
        saved = self.saved_checkpoints.get(vchannel)
        if saved == current:
            return
        replays_data = saved is None or (
            seq != saved[0] and (data_seq is None or data_seq >= saved[0])
        )
        now = time.monotonic()
        last = self._checkpoint_saved_at.get(vchannel)
        if not replays_data and last is not None and now - last < CHECKPOINT_SAVE_S:
            return
        self._checkpoint_saved_at[vchannel] = now
        await self.ctx.db.run(segmentmeta.save_checkpoint, vchannel, seq, ts)
        self.saved_checkpoints[vchannel] = current

    async def segment_flushed(self, req: SegmentFlushed) -> Recorded:
        sid, num_rows, checkpoint = req.segment_id, req.num_rows, req.checkpoint
        if req.vchannel is not None and not self._owns(req.node_id, req.vchannel):
            log.info("ignoring the flush of segment %s by %s: not its channel", sid, req.node_id)
            return Recorded(ignored=True)
        seg = self.segments.get(sid)
        if seg is None:
            # Dropped meanwhile (its partition or collection went): nothing to record, and
            # the datanode must not retry forever.
            log.info("ignoring the flush of segment %s, which is no longer known", sid)
            return Recorded(ignored=True)
        if seg.state is SegmentState.FLUSHED:
            return Recorded()  # a repeated report (the coord restarted and asked again)
        seg.num_rows, seg.path = num_rows, req.path
        seg.min_ts, seg.max_ts, seg.start_seq = req.min_ts, req.max_ts, req.start_seq
        seg.is_sorted = req.is_sorted
        seg.flushed_ts = self.ctx.tso.alloc()
        transition(seg, SegmentState.FLUSHED if num_rows else SegmentState.DROPPED)
        if num_rows == 0:
            seg.dropped_ts = seg.flushed_ts
        if checkpoint is not None:
            seg.checkpoint_seq, seg.checkpoint_ts = int(checkpoint["seq"]), int(checkpoint["ts"])
        await self._save([seg])
        if seg.state is SegmentState.DROPPED:
            del self.segments[sid]
        await self.ctx.bus.publish(subjects.SEGMENT_FLUSHED, seg.to_dict())
        if seg.state is SegmentState.FLUSHED:
            for callback in self._on_flushed:
                await callback(seg)
        return Recorded()

    async def save_segments(
        self, segs: list[Segment], also: Callable[[Any], None] | None = None
    ) -> None:
        """Record segments (and ``also``, another catalog change) in one transaction, then
        keep the live ones: how bulk import registers and commits its segments."""
        async with self._lock:
            await self.ctx.db.run(segmentmeta.save, segs, also)
            for s in segs:
                if s.state is SegmentState.DROPPED:
                    self.segments.pop(s.segment_id, None)
                else:
                    self.segments[s.segment_id] = s

    async def replace(self, sources: list[Segment], targets: list[Segment]) -> None:
        """Swap compacted sources for their targets in one catalog write."""
        async with self._lock:
            await self._save([*sources, *targets])
            for s in sources:
                self.segments.pop(s.segment_id, None)
            for t in targets:
                if t.state is SegmentState.FLUSHED:
                    self.segments[t.segment_id] = t

    # -- collection lifecycle ---------------------------------------------------------------
    async def drop_collection(self, collection_id: int, ts: int) -> None:
        await self.drop_segments(lambda s: s.collection_id == collection_id, ts)
        self._schemas.pop(collection_id, None)

    def forget_schema(self, collection_id: int) -> None:
        """Its schema changed (a field was added): row-size estimates read it again."""
        self._schemas.pop(collection_id, None)

    async def drop_segments(self, which: Callable[[Segment], bool], ts: int) -> list[Segment]:
        """Mark segments dropped (their collection or partition went, or it was
        truncated); GC takes the files. The segments dropped."""
        async with self._lock:
            segs = [s for s in self.segments.values() if which(s)]
            for s in segs:
                transition(s, SegmentState.DROPPED)
                s.dropped_ts = ts
                del self.segments[s.segment_id]
            await self._save(segs)
        return segs

    def reset_flushing(self, vchannel: str) -> None:
        """A channel changed datanode: unfinished flushes start over on the new one."""
        for s in self.segments.values():
            if s.vchannel == vchannel and s.state is SegmentState.FLUSHING:
                transition(s, SegmentState.SEALED)

    def channel_segments(self, vchannel: str) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.segments.values() if s.vchannel == vchannel]
