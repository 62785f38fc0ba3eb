"""Cluster-wide flush and compaction plans: ``FlushAll`` and ``GetFlushAllState``
(pymilvus's ``flush_all``, ``get_flush_all_state``), ``GetCompactionStateWithPlans``
(``get_compaction_plans``, ``get_compaction_tasks``).

``FlushAll`` flushes every collection of its targets (the request's ``flush_targets``;
else the database the call names; else every database, as Milvus does) and answers the
latest seal timestamp. ``GetFlushAllState`` needs no memory of the call: it is true once
every segment of those collections sealed at or before that timestamp is Flushed (a
segment sealed later holds rows written after the flush; compacted ones are gone, their
rows in a flushed target) and, as Milvus's datacoord checks channel checkpoints, every
vchannel of theirs was consumed past it: a timestamp no checkpoint reached (one in the
future) is not flushed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus.api.compaction import CompactionPlans, GetCompactionPlans, ListCompactions
from elanus.api.datacoord import FlushState
from elanus.errors import invalid
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops.collections import ListCollections
from elanus.ops.control import GetTimestamp
from elanus.ops.databases import ListDatabases
from elanus.ops.segments import Flush, GetSegmentInfo
from elanus.states import CompactionState

_TASK_STATES = {
    CompactionState.PENDING.value: common_pb2.CompactionTaskStatePipelining,
    CompactionState.EXECUTING.value: common_pb2.CompactionTaskStateExecuting,
    CompactionState.COMPLETED.value: common_pb2.CompactionTaskStateCompleted,
    CompactionState.FAILED.value: common_pb2.CompactionTaskStateFailed,
}
_LISTED = 1000
"""The most compactions a collection's plans are gathered from (the coord keeps those
since it started)."""


class FlushAllRpcs(Servicer):
    def _targets(self, ctx: Ctx, request: Any) -> dict[str, list[str]]:
        """database → collections a flush-all covers (see the module's docstring)."""
        if request.flush_targets:
            out: dict[str, list[str]] = {}
            for t in request.flush_targets:
                db = t.db_name or ctx.db
                names = list(t.collection_names) or self._collections(ctx, db)
                out.setdefault(db, []).extend(n for n in names if n not in out.get(db, []))
            return out
        if ctx.db_named:
            return {ctx.db: self._collections(ctx, ctx.db)}
        dbs = self.run_op(ctx, ListDatabases()).get("names") or []
        return {str(db): self._collections(ctx, str(db)) for db in dbs}

    def _collections(self, ctx: Ctx, db: str) -> list[str]:
        return [str(n) for n in self.run_op(ctx, ListCollections(db=db))["names"]]

    @served()
    def FlushAll(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        reply = milvus_pb2.FlushAllResponse(status=ok())
        flush_ts = 0
        for db, names in self._targets(ctx, request).items():
            result = reply.flush_results.add(db_name=db)
            for name in names:
                doc = self.run_op(ctx, Flush(db=db, collection=name))
                ts = int(doc.get("flush_ts") or 0)
                flush_ts = max(flush_ts, ts)
                result.collection_results.add(
                    collection_name=name,
                    segment_ids=schema_pb2.LongArray(data=doc.get("segment_ids") or []),
                    flush_ts=ts,
                )
        reply.flush_all_ts = flush_ts or int(self.run_op(ctx, GetTimestamp(db=ctx.db))["ts"])
        return reply

    @served()
    def GetFlushAllState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        ts = int(request.flush_all_ts)
        if not ts:
            raise invalid("GetFlushAllState: give flush_all_ts, the timestamp FlushAll answered")
        reply = milvus_pb2.GetFlushAllStateResponse(status=ok(), flushed=True)
        for db, names in self._targets(ctx, request).items():
            state = reply.flush_states.add(db_name=db)
            for name in names:
                done = self._flushed(replace(ctx, db=db), name, ts)
                state.collection_flush_states[name] = done
                reply.flushed = reply.flushed and done
        return reply

    def _flushed(self, ctx: Ctx, name: str, ts: int) -> bool:
        """The segments of ``name`` sealed at or before ``ts`` are Flushed and each of its
        vchannels' datanodes consumed past ``ts`` (Milvus's channel checkpoint test)."""
        doc = self.run_op(ctx, GetSegmentInfo(db=ctx.db, collection=name))
        sealed = [
            int(s["segment_id"])
            for s in doc["segments"]
            if s.get("seal_ts") and int(s["seal_ts"]) <= ts
        ]
        cid = self.proxy.dml.collection(ctx.db, name).collection_id
        state = FlushState(segment_ids=sealed, collection_id=cid, flush_ts=ts)
        return self.proxy.run(self.proxy.datacoord.flush_state(state)).flushed

    @served()
    def GetCompactionStateWithPlans(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """The plans of ``compactionID``, or, given a collection, of every compaction
        the coord holds that merged its segments (pymilvus's ``get_compaction_tasks``)."""
        if request.compactionID:
            found = [self._plans(request.compactionID)]
        elif request.collection_name:
            cid = self.proxy.dml.collection(ctx.db, request.collection_name).collection_id
            listed = self.proxy.run(self.proxy.compaction.recent(ListCompactions(limit=_LISTED)))
            found = [
                self._plans(c.compaction_id)
                for c in listed.compactions
                if cid in c.collection_ids or c.collection_id == cid
            ]
        else:
            raise invalid("GetCompactionStateWithPlans: give compactionID or collection_name")
        executing = any(f.progress.state == CompactionState.EXECUTING for f in found)
        return milvus_pb2.GetCompactionPlansResponse(
            status=ok(),
            state=common_pb2.Executing if executing else common_pb2.Completed,
            mergeInfos=[_merge_info(f, p) for f in found for p in f.plans],
        )

    def _plans(self, compaction_id: int) -> CompactionPlans:
        req = GetCompactionPlans(compaction_id=int(compaction_id))
        return self.proxy.run(self.proxy.compaction.plans(req))


def _merge_info(found: CompactionPlans, plan: Any) -> Any:
    return milvus_pb2.CompactionMergeInfo(
        sources=plan.sources,
        target=plan.targets[0] if plan.targets else 0,
        targets=plan.targets,
        plan_id=plan.plan_id,
        trigger_id=found.progress.compaction_id,
        collection_id=plan.collection_id,
        partition_id=plan.partition_id,
        channel=plan.vchannel,
        type=common_pb2.CompactionTypeClustering
        if plan.clustering
        else common_pb2.CompactionTypeMix,
        state=_TASK_STATES.get(plan.state, common_pb2.CompactionTaskStateUnknown),
        failure_reason=plan.reason or "",
    )
