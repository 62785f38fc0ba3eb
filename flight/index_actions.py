"""DoAction entries of the index service (seed 002): create, drop, describe and list
indexes, and the pull protocol of external builders (Spark index runs): claim pending
tasks under a lease, renew it, report each result.

Parameters are checked by the coord (``elanus.indexparams``), where the field's type and
dimension are known; here only the body's shape.
"""

from __future__ import annotations

import dataclasses

from elanus.api.indexcoord import (
    Claimed,
    ClaimIndexTasks,
    CreateIndex,
    DescribeIndex,
    DropIndex,
    IndexCreated,
    IndexDescriptions,
    IndexDropped,
    IndexHeartbeat,
    IndexReport,
    Lease,
    Verdict,
)
from elanus.api.rootcoord import Names
from elanus.flight.executors import Call, OpCall
from elanus.flight.registry import operation
from elanus.ops import indexes as ops


def _collection_id(c: Call, db: str, collection: str) -> int:
    return c.proxy.dml.collection(db, collection).collection_id


def _index_target(c: OpCall[ops.DropIndex] | OpCall[ops.DescribeIndex]) -> DescribeIndex:
    """The coord's name for the index(es) a request means (an empty name: not given)."""
    r = c.request
    return DescribeIndex(
        collection_id=_collection_id(c, r.db, r.collection),
        index_name=r.index_name or None,
        field=r.field_name or None,
    )


def _run_create(c: OpCall[ops.CreateIndex]) -> IndexCreated:
    r = c.request
    assert r.field_name  # required: its record's check
    req = CreateIndex(
        collection_id=_collection_id(c, r.db, r.collection),
        field=r.field_name,
        index_name=r.index_name or None,
        index_type="AUTOINDEX" if r.index_type is None else r.index_type,
        metric_type=r.metric_type or None,
        params={} if r.params is None else r.params,
    )
    return c.proxy.run(c.proxy.indexcoord.create(req))


def _run_drop(c: OpCall[ops.DropIndex]) -> IndexDropped:
    target = _index_target(c)
    req = DropIndex(
        collection_id=target.collection_id, index_name=target.index_name, field=target.field
    )
    return c.proxy.run(c.proxy.indexcoord.drop(req))


def _run_describe(c: OpCall[ops.DescribeIndex]) -> IndexDescriptions:
    """The indexes with the settings ``alter_index_properties`` gave them among their
    params, as Milvus shows them (``elanus.indexprops``)."""
    described = c.proxy.run(c.proxy.indexcoord.describe(_index_target(c)))
    info = c.proxy.dml.collection(c.request.db, c.request.collection)
    settings = info.described.index_properties
    indexes = [
        dataclasses.replace(i, params={**i.params, **settings.get(str(i.index_id), {})})
        for i in described.indexes
    ]
    return IndexDescriptions(indexes=indexes)


def _run_list(c: OpCall[ops.ListIndexes]) -> Names:
    req = DescribeIndex(collection_id=_collection_id(c, c.request.db, c.request.collection))
    described = c.proxy.run(c.proxy.indexcoord.describe(req))
    return Names(names=[i.index_name for i in described.indexes])


def _run_claim(c: OpCall[ops.ClaimIndexTasks]) -> Claimed:
    r = c.request
    claim = ClaimIndexTasks(
        node_id=r.node_id,
        collection_id=_collection_id(c, r.db, r.collection) if r.collection else None,
        limit=r.limit,
        retry_failed=r.retry_failed,
    )
    return c.proxy.run(c.proxy.indexcoord.claim(claim))


def _run_heartbeat(c: OpCall[ops.IndexHeartbeat]) -> Lease:
    return c.proxy.run(c.proxy.indexcoord.heartbeat(IndexHeartbeat(node_id=c.request.node_id)))


def _run_report(c: OpCall[ops.ReportIndexTask]) -> Verdict:
    r = c.request
    report = IndexReport(
        build_id=r.build_id,
        version=r.version,
        ok=r.ok,
        files=list(r.files or ()),
        fail_reason=r.fail_reason,
        node_id=r.node_id,
        seconds=r.seconds,
    )
    return c.proxy.run(c.proxy.indexcoord.report(report))


operation(
    ops.CreateIndex,
    "Build an index on a field of every flushed segment (and of later ones). Body: "
    "collection, field_name, index_type (vectors: FLAT, IVF_FLAT, IVF_SQ8, IVF_PQ, HNSW, "
    "BIN_FLAT, BIN_IVF_FLAT, SPARSE_INVERTED_INDEX, SPARSE_WAND; scalars: INVERTED, BITMAP, "
    "STL_SORT, TRIE; AUTOINDEX), metric_type, params (json_path and json_cast_type for a "
    "JSON path), index_name. Result: index_id, created.",
    privilege="CreateIndex",
    run=_run_create,
)
operation(
    ops.DropIndex,
    "Drop an index (by index_name or field_name); its files are recycled in the "
    "background. Body: collection, index_name, field_name. Result: index_id.",
    privilege="DropIndex",
    run=_run_drop,
)
operation(
    ops.DescribeIndex,
    "Indexes of a collection with their build progress. Body: collection, index_name, "
    "field_name. Result: indexes (index_name, field, index_type, metric_type, params, "
    "state, indexed_rows, total_rows, pending_tasks, failed_tasks).",
    privilege="IndexDetail",
    run=_run_describe,
)
operation(
    ops.ListIndexes,
    "Index names of a collection. Body: collection. Result: names.",
    privilege="IndexDetail",
    run=_run_list,
)


operation(
    ops.ClaimIndexTasks,
    "For external builders (Spark index runs): take the pending build tasks of a "
    "collection under a lease. Body: collection, node_id, limit, retry_failed. Result: "
    "tasks (build_id, version, field, spec, data_path, out_dir, ...), lease_s.",
    privilege="IndexBuilder",
    run=_run_claim,
)
operation(
    ops.IndexHeartbeat,
    "Renew an external builder's lease. Body: node_id. Result: alive, tasks.",
    privilege="IndexBuilder",
    run=_run_heartbeat,
)
operation(
    ops.ReportIndexTask,
    "An external builder's result for one task. Body: build_id, version, node_id, ok, "
    "files, fail_reason, seconds. Result: accepted (false for a stale version).",
    privilege="IndexBuilder",
    run=_run_report,
)
