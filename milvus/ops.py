"""Flush, segments, indexes, load and release, statistics and compaction: each RPC one
Flight action, its result reshaped into Milvus's reply."""

from __future__ import annotations

import hashlib
from typing import Any, TypedDict

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus import indexprops
from elanus.api.indexcoord import DescribeIndex
from elanus.api.querycoord import LoadState, QueryRoute
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.milvus.params import kv_values
from elanus.milvus.schemas import kv_pairs
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import UNEXPECTED, ok, status_of
from elanus.ops import collections as colls
from elanus.ops import indexes as index_ops
from elanus.ops import loads as load_ops
from elanus.ops import partitions as part_ops
from elanus.ops import segments as segment_ops
from elanus.ops.replies import IndexDescription, IndexDescriptions, SegmentRecord, Segments
from elanus.privileges import Need
from elanus.schema import check_name
from elanus.states import SegmentLevel, SegmentState

_INDEX_KEYS = ("index_type", "metric_type", "params")
_LOAD_STATES = {
    "NotLoad": common_pb2.LoadStateNotLoad,
    "Loading": common_pb2.LoadStateLoading,
    "Loaded": common_pb2.LoadStateLoaded,
}
_SEGMENT_STATES = dict(common_pb2.SegmentState.items())
_COMPACTION = {"executing": common_pb2.Executing, "completed": common_pb2.Completed}
DEFAULT_RESOURCE_GROUP = "__default_resource_group"


def node_number(node_id: str) -> int:
    """A query node's id as Milvus's int64: its hex digits, else a stable hash."""
    try:
        return int(node_id, 16) & (2**63 - 1)
    except ValueError:
        return int.from_bytes(hashlib.blake2b(node_id.encode(), digest_size=8).digest()) >> 1


class IndexBody(TypedDict):
    """The fields of a ``CreateIndex`` operation that Milvus's request gives."""

    collection: str
    field_name: str
    index_name: str | None
    index_type: str | None
    metric_type: str | None
    params: dict[str, Any]


class SegmentFields(TypedDict):
    """What ``PersistentSegmentInfo`` and ``QuerySegmentInfo`` share, in Milvus's words."""

    segmentID: int  # noqa: N815 - Milvus's field names
    collectionID: int  # noqa: N815
    partitionID: int  # noqa: N815
    num_rows: int
    state: int
    level: int
    is_sorted: bool


def index_body(request: Any) -> IndexBody:
    """A ``create_index`` body from Milvus's ``extra_params`` (``params`` as JSON text;
    pymilvus also sends an index's parameters as keys of their own)."""
    extra = kv_values(request.extra_params)
    params = extra.get("params") or {}
    if not isinstance(params, dict):
        raise invalid("CreateIndex: 'params' must be a JSON object")
    params = {**{k: v for k, v in extra.items() if k not in _INDEX_KEYS}, **params}
    return IndexBody(
        collection=request.collection_name,
        field_name=request.field_name,
        index_name=request.index_name or None,
        index_type=extra.get("index_type") or None,
        metric_type=extra.get("metric_type") or None,
        params=params,
    )


def index_description(doc: IndexDescription) -> Any:
    state = str(doc.get("state") or "Finished")
    kinds = {"index_type": doc.get("index_type"), "metric_type": doc.get("metric_type")}
    stored = doc.get("params") or {}
    build = {k: v for k, v in stored.items() if k not in indexprops.KEYS}
    params = {
        **{k: v for k, v in kinds.items() if v},
        **({"params": build} if build else {}),
        # what alter_index_properties set: among the user's params, as Milvus keeps them
        **{k: v for k, v in stored.items() if k in indexprops.KEYS},
    }
    failed = doc.get("failed_tasks") or []
    total, indexed = int(doc.get("total_rows") or 0), int(doc.get("indexed_rows") or 0)
    return milvus_pb2.IndexDescription(
        index_name=doc.get("index_name", ""),
        indexID=int(doc.get("index_id") or 0),
        params=kv_pairs(params),
        field_name=doc.get("field", ""),
        indexed_rows=indexed,
        total_rows=total,
        pending_index_rows=max(total - indexed, 0),
        state=common_pb2.IndexState.Value(state)
        if state in common_pb2.IndexState.keys()  # noqa: SIM118 - a protobuf enum
        else common_pb2.InProgress,
        index_state_fail_reason="; ".join(str(f.get("reason", "")) for f in failed),
    )


class OpsRpcs(Servicer):
    # -- flush and segments -----------------------------------------------------------------
    @served()
    def Flush(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        reply = milvus_pb2.FlushResponse(status=ok(), db_name=ctx.db)
        for name in request.collection_names:
            doc = self.run_op(ctx, segment_ops.Flush(db=ctx.db, collection=name))
            reply.coll_segIDs[name].CopyFrom(schema_pb2.LongArray(data=doc.get("segment_ids", [])))
            reply.flush_coll_segIDs[name].CopyFrom(schema_pb2.LongArray())
            reply.coll_flush_ts[name] = int(doc.get("flush_ts") or 0)
            reply.coll_seal_times[name] = 0
        return reply

    @served()
    def GetFlushState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = segment_ops.GetFlushState(db=ctx.db, segment_ids=list(request.segmentIDs))
        doc = self.run_op(ctx, op)
        return milvus_pb2.GetFlushStateResponse(status=ok(), flushed=bool(doc.get("flushed")))

    def _segments(self, ctx: Ctx, collection: str) -> list[SegmentRecord]:
        op = segment_ops.GetSegmentInfo(db=ctx.db, collection=collection)
        segments: Segments = self.run_op(ctx, op)
        return list(segments["segments"])

    @served()
    def GetPersistentSegmentInfo(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """The segments in ``states`` (none given: all but the growing ones, as Milvus)."""
        wanted = set(request.states)
        raw_segments = self._segments(ctx, request.collectionName)
        segments = [_segment(s) for s in raw_segments]
        infos = [
            milvus_pb2.PersistentSegmentInfo(
                **s,
                insert_channel=str(raw.get("vchannel") or ""),
                compaction_from=[int(i) for i in raw.get("compacted_from") or []],
            )
            for raw, s in zip(raw_segments, segments, strict=True)
            if (s["state"] in wanted if wanted else s["state"] != common_pb2.Growing)
        ]
        return milvus_pb2.GetPersistentSegmentInfoResponse(status=ok(), infos=infos)

    @served()
    def GetQuerySegmentInfo(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        infos = [
            milvus_pb2.QuerySegmentInfo(**_segment(s))
            for s in self._segments(ctx, request.collectionName)
        ]
        return milvus_pb2.GetQuerySegmentInfoResponse(status=ok(), infos=infos)

    # -- indexes ----------------------------------------------------------------------------
    @served()
    def CreateIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, index_ops.CreateIndex(db=ctx.db, **index_body(request)))
        return ok()

    @served()
    def DescribeIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = index_ops.DescribeIndex(
            db=ctx.db,
            index_name=request.index_name or None,
            field_name=request.field_name or None,
            collection=request.collection_name,
        )
        doc: IndexDescriptions = self.run_op(ctx, op)
        return milvus_pb2.DescribeIndexResponse(
            status=ok(), index_descriptions=[index_description(d) for d in doc["indexes"]]
        )

    @served()
    def DropIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Refused while the collection is loaded, as Milvus refuses it (Elanus's own face
        drops the index of a loaded collection, whose searches then scan)."""
        name = check_name(request.collection_name, "collection")
        ctx.caller.require(Need("DropIndex", ctx.db, name))
        info = self.proxy.dml.collection(ctx.db, name)
        load = LoadState(collection_id=info.collection_id)
        if self.proxy.run(self.proxy.coord.query.state(load)).state != "NotLoad":
            raise invalid(
                f"DropIndex: index cannot be dropped while collection {name!r} is loaded; "
                "release it first"
            )
        op = index_ops.DropIndex(
            db=ctx.db,
            index_name=request.index_name or None,
            field_name=request.field_name or None,
            collection=request.collection_name,
        )
        self.run_op(ctx, op)
        return ok()

    # -- load and release -------------------------------------------------------------------
    def _unindexed(self, ctx: Ctx, collection: str) -> Any:
        """Milvus's proxy refuses to load a collection whose vector fields are not all
        indexed (Elanus's own face loads it and searches such fields exactly): with no
        index at all IndexNotExist ``700``, "index not found[collection=...]"; with some
        vector field unindexed Milvus 2.6's unclassified ``65535``, naming those fields.
        ``None`` when every vector field has an index."""
        name = check_name(collection, "collection")
        ctx.caller.require(Need("Load", ctx.db, name))
        info = self.proxy.dml.collection(ctx.db, name)
        described = self.proxy.indexcoord.describe(DescribeIndex(collection_id=info.collection_id))
        indexes = self.proxy.run(described).indexes
        if not indexes:
            raise ElanusError(
                ErrorCode.INDEX_NOT_FOUND,
                f"index not found[collection={name}]: create an index on each vector field "
                "before loading",
            )
        indexed = {i.field for i in indexes}
        missing = [f.name for f in info.schema.vector_fields if f.name not in indexed]
        if not missing:
            return None
        fields = "[" + " ".join(missing) + "]"  # as Go prints a list of strings
        status = status_of(
            ElanusError(
                ErrorCode.INDEX_NOT_FOUND,
                f"there is no vector index on field: {fields}, please create index firstly",
            )
        )
        status.code, status.error_code = UNEXPECTED, common_pb2.UnexpectedError
        return status

    @served()
    def LoadCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return self._load(ctx, request, None)

    @served()
    def LoadPartitions(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return self._load(ctx, request, list(request.partition_names) or None)

    def _load(self, ctx: Ctx, request: Any, partition_names: list[str] | None) -> Any:
        """Both load RPCs: refused without a vector index, a refresh when asked for,
        else one load of the collection (or of the named partitions)."""
        refused = self._unindexed(ctx, request.collection_name)
        if refused is not None:
            return refused
        if request.refresh:
            return self._refresh(ctx, request.collection_name)
        op = load_ops.LoadCollection(
            db=ctx.db,
            collection=request.collection_name,
            partition_names=partition_names,
            replica_number=request.replica_number or None,
        )
        self.run_op(ctx, op)
        return ok()

    def _refresh(self, ctx: Ctx, collection: str) -> Any:
        """A load's ``refresh`` (pymilvus's ``refresh_load``): Milvus pulls the segments a
        loaded collection does not serve yet (after an import or a compaction). Elanus's
        loaded replicas take every flushed, imported or compacted segment as the coord
        hands it over, so there is nothing to pull: a loaded collection answers at once,
        one not (fully) loaded is refused as Milvus refuses it."""
        doc = self.run_op(ctx, load_ops.GetLoadState(db=ctx.db, collection=collection))
        if doc.get("state") != "Loaded":
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED,
                f"collection {collection!r} is not loaded: nothing to refresh",
            )
        return ok()

    @served()
    def GetReplicas(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """pymilvus's ``describe_replica``: it names the collection by id. Node ids are
        numbers in Milvus: an Elanus node id (hex) as its number."""
        name = request.collection_name or self._collection_name(ctx, request.collectionID)
        doc = self.run_op(ctx, load_ops.DescribeReplica(db=ctx.db, collection=name))
        replicas = []
        for r in doc["replicas"]:
            nodes = [node_number(n) for n in r["node_ids"]]
            shards = [
                milvus_pb2.ShardReplica(
                    leaderID=node_number(leader),
                    dm_channel_name=v,
                    node_ids=nodes if request.with_shard_nodes else [node_number(leader)],
                )
                for v, leader in sorted(r["shard_leaders"].items())
            ]
            replicas.append(
                milvus_pb2.ReplicaInfo(
                    replicaID=r["replica_id"],
                    collectionID=r["collection_id"],
                    partition_ids=r["partition_ids"] or [],
                    shard_replicas=shards,
                    node_ids=nodes,
                    resource_group_name=DEFAULT_RESOURCE_GROUP,
                )
            )
        return milvus_pb2.GetReplicasResponse(status=ok(), replicas=replicas)

    def _collection_name(self, ctx: Ctx, collection_id: int) -> str:
        known = self.proxy.cache.get_by_id(collection_id)  # pymilvus described it just now
        if known is not None:
            return known.name
        for name in self.run_op(ctx, colls.ListCollections(db=ctx.db)).get("names") or []:
            if self.proxy.dml.collection(ctx.db, name).collection_id == collection_id:
                return str(name)
        raise ElanusError(
            ErrorCode.COLLECTION_NOT_FOUND, f"no collection has id {collection_id} in {ctx.db!r}"
        )

    @served()
    def ReleaseCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, load_ops.ReleaseCollection(db=ctx.db, collection=request.collection_name))
        return ok()

    @served()
    def ReleasePartitions(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Elanus loads a collection or a set of its partitions: releasing some partitions
        loads the rest (the collection is released when none is left)."""
        name = request.collection_name
        loaded = self._loaded_partitions(ctx, name)
        if loaded is None:  # not loaded: nothing to release, as in Milvus
            self.run_op(ctx, part_ops.ListPartitions(db=ctx.db, collection=name))  # it must exist
            return ok()
        gone = set(request.partition_names)
        known = set(self._partition_ids(ctx, name))
        missing = sorted(gone - known)
        if missing:
            raise ElanusError(
                ErrorCode.PARTITION_NOT_FOUND,
                f"partition(s) {', '.join(missing)} of {name!r} do not exist",
            )
        rest = [p for p in loaded if p not in gone]
        if rest == loaded:
            return ok()
        if rest:
            self.run_op(
                ctx, load_ops.LoadCollection(db=ctx.db, collection=name, partition_names=rest)
            )
        else:
            self.run_op(ctx, load_ops.ReleaseCollection(db=ctx.db, collection=name))
        return ok()

    def _partition_ids(self, ctx: Ctx, collection: str) -> dict[str, int]:
        doc = self.run_op(ctx, part_ops.ListPartitions(db=ctx.db, collection=collection))
        parts = doc.get("partitions") or [{"name": n} for n in doc["names"]]
        return {p["name"]: int(p.get("partition_id", 0)) for p in parts}

    def _loaded_partitions(self, ctx: Ctx, collection: str) -> list[str] | None:
        """The names of the loaded partitions of ``collection``; None: not loaded."""
        doc = self.run_op(ctx, load_ops.GetLoadState(db=ctx.db, collection=collection))
        if doc.get("state") == "NotLoad":
            return None
        ids = self._partition_ids(ctx, collection)
        info = self.proxy.dml.collection(ctx.db, collection)
        req = QueryRoute(collection_id=info.collection_id)
        chosen = self.proxy.run(self.proxy.coord.query.route(req)).partition_ids
        if chosen is None:
            return list(ids)
        return [n for n, pid in ids.items() if pid in set(chosen)]

    def _load_state(self, ctx: Ctx, request: Any) -> tuple[int, int]:
        """(load state, progress) of the collection, or of ``partition_names`` where given
        (partitions not among those loaded: not loaded, 0 %)."""
        op = load_ops.GetLoadState(db=ctx.db, collection=request.collection_name)
        doc = self.run_op(ctx, op)
        state = _LOAD_STATES.get(str(doc.get("state")), common_pb2.LoadStateNotLoad)
        progress = 100 if doc.get("state") == "Loaded" else int(doc.get("progress") or 0)
        if request.partition_names and state != common_pb2.LoadStateNotLoad:
            loaded = self._loaded_partitions(ctx, request.collection_name) or []
            if not set(request.partition_names) <= set(loaded):
                return common_pb2.LoadStateNotLoad, 0
        return state, progress

    @served()
    def GetLoadState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """A collection that does not exist is the state ``NotExist``, not an error, as
        Milvus's proxy answers it (pymilvus's ``LoadState.NotExist``)."""
        try:
            state, _ = self._load_state(ctx, request)
        except ElanusError as e:
            if e.code not in (ErrorCode.COLLECTION_NOT_FOUND, ErrorCode.DATABASE_NOT_FOUND):
                raise
            state = common_pb2.LoadStateNotExist
        return milvus_pb2.GetLoadStateResponse(status=ok(), state=state)

    @served()
    def GetLoadingProgress(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        _, progress = self._load_state(ctx, request)
        return milvus_pb2.GetLoadingProgressResponse(
            status=ok(), progress=progress, refresh_progress=progress
        )

    # -- statistics and compaction ----------------------------------------------------------
    @served()
    def GetCollectionStatistics(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = segment_ops.GetCollectionStats(db=ctx.db, collection=request.collection_name)
        doc = self.run_op(ctx, op)
        return milvus_pb2.GetCollectionStatisticsResponse(
            status=ok(), stats=kv_pairs({"row_count": str(int(doc.get("row_count") or 0))})
        )

    @served()
    def GetPartitionStatistics(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """The rows of the partition's flushed segments, as ``GetCollectionStatistics``
        and Milvus count them (deletes not subtracted until compaction)."""
        pid = self._partition_ids(ctx, request.collection_name).get(request.partition_name)
        if pid is None:
            raise ElanusError(
                ErrorCode.PARTITION_NOT_FOUND,
                f"partition {request.partition_name!r} of {request.collection_name!r} "
                "does not exist",
            )
        rows = sum(
            _segment(s)["num_rows"]
            for s in self._segments(ctx, request.collection_name)
            if int(s.get("partition_id") or 0) == pid and s.get("state") == SegmentState.FLUSHED
        )
        return milvus_pb2.GetPartitionStatisticsResponse(
            status=ok(), stats=kv_pairs({"row_count": str(rows)})
        )

    @served()
    def ManualCompaction(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        if not request.collection_name:
            raise invalid("ManualCompaction: give the collection's name")
        op = segment_ops.Compact(
            db=ctx.db,
            collection=request.collection_name,
            target_size_mb=request.target_size if request.target_size > 0 else None,
            clustering=request.majorCompaction or None,
        )
        doc = self.run_op(ctx, op)
        plans = doc.get("plans")
        count = len(plans) if isinstance(plans, list) else int(plans or 0)
        return milvus_pb2.ManualCompactionResponse(
            status=ok(), compactionID=int(doc["compaction_id"]), compactionPlanCount=count
        )

    @served()
    def GetCompactionState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = segment_ops.GetCompactionState(db=ctx.db, compaction_id=int(request.compactionID))
        doc = self.run_op(ctx, op)
        return milvus_pb2.GetCompactionStateResponse(
            status=ok(),
            state=_COMPACTION.get(str(doc.get("state")), common_pb2.Completed),
            executingPlanNo=int(doc.get("executing") or 0),
            completedPlanNo=int(doc.get("completed") or 0),
            failedPlanNo=int(doc.get("failed") or 0),
        )


def _segment(s: SegmentRecord) -> SegmentFields:
    state = str(s.get("state") or "")
    return SegmentFields(
        segmentID=int(s.get("segment_id") or 0),
        collectionID=int(s.get("collection_id") or 0),
        partitionID=int(s.get("partition_id") or 0),
        num_rows=int(s.get("num_rows") or 0),
        state=_SEGMENT_STATES.get(state.capitalize(), common_pb2.SegmentStateNone),
        level=int(s.get("level", SegmentLevel.L1)),  # Milvus's numbers (states.py)
        is_sorted=bool(s.get("is_sorted")),
    )
