"""The index-progress RPCs older than ``DescribeIndex``'s progress (which pymilvus 3 reads
instead): ``GetIndexState``, ``GetIndexBuildProgress``, ``GetIndexStatistics`` and
``ListIndexedSegment``, from the same ``describe_index`` action.

As Milvus's datacoord picks the index: by ``index_name``; unnamed, the collection's only
index (no index: IndexNotExist ``700``; several: ``702``, asking for the name).
Milvus's own proxy answers ``ListIndexedSegment`` "unimplemented"; Elanus serves it: the
flushed segments whose build of the index finished.
"""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import feder_pb2, milvus_pb2

from elanus.api.indexcoord import ListIndexTasks
from elanus.errors import ElanusError, ErrorCode
from elanus.milvus.ops import index_description
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import indexes as index_ops
from elanus.ops import segments as segment_ops
from elanus.ops.replies import IndexDescription, IndexDescriptions, Segments
from elanus.states import IndexTaskState, SegmentState


class IndexStateRpcs(Servicer):
    def _indexes(self, ctx: Ctx, request: Any, field: str = "") -> list[IndexDescription]:
        op = index_ops.DescribeIndex(
            db=ctx.db,
            index_name=request.index_name or None,
            field_name=field or None,
            collection=request.collection_name,
        )
        doc: IndexDescriptions = self.run_op(ctx, op)
        indexes = list(doc["indexes"])
        if not indexes:
            raise ElanusError(
                ErrorCode.INDEX_NOT_FOUND,
                f"index not found: collection {request.collection_name!r} has no index",
            )
        return indexes

    def _index(self, ctx: Ctx, request: Any, field: str = "") -> IndexDescription:
        indexes = self._indexes(ctx, request, field)
        if len(indexes) > 1:
            names = ", ".join(sorted(str(i.get("index_name")) for i in indexes))
            raise ElanusError(
                ErrorCode.INDEX_ALREADY_EXISTS,
                f"collection {request.collection_name!r} has several indexes ({names}): "
                "give index_name",
            )
        return indexes[0]

    @served()
    def GetIndexState(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        d = index_description(self._index(ctx, request, request.field_name))
        return milvus_pb2.GetIndexStateResponse(
            status=ok(), state=d.state, fail_reason=d.index_state_fail_reason
        )

    @served()
    def GetIndexBuildProgress(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        d = index_description(self._index(ctx, request, request.field_name))
        return milvus_pb2.GetIndexBuildProgressResponse(
            status=ok(), indexed_rows=d.indexed_rows, total_rows=d.total_rows
        )

    @served()
    def GetIndexStatistics(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Every index (or the one named) with its rows and state, as ``DescribeIndex``."""
        return milvus_pb2.GetIndexStatisticsResponse(
            status=ok(),
            index_descriptions=[index_description(d) for d in self._indexes(ctx, request)],
        )

    @served()
    def ListIndexedSegment(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        index_id = int(self._index(ctx, request)["index_id"])
        info = self.proxy.dml.collection(ctx.db, request.collection_name)
        op = segment_ops.GetSegmentInfo(db=ctx.db, collection=request.collection_name)
        segments: Segments = self.run_op(ctx, op)
        flushed = {
            int(s["segment_id"])
            for s in segments["segments"]
            if s.get("state") == SegmentState.FLUSHED
        }
        tasks = self.proxy.run(
            self.proxy.indexcoord.tasks(ListIndexTasks(collection_id=info.collection_id))
        ).tasks
        indexed = {
            t.segment_id
            for t in tasks
            if t.index_id == index_id
            and t.state == IndexTaskState.FINISHED
            and not t.mark_deleted
            and t.segment_id in flushed
        }
        return feder_pb2.ListIndexedSegmentResponse(status=ok(), segmentIDs=sorted(indexed))
