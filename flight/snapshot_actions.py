"""DoAction entries of collection snapshots (Milvus 2.6's snapshot API): create_snapshot,
list_snapshots, describe_snapshot, drop_snapshot, restore_snapshot,
get_restore_snapshot_state, list_restore_snapshot_jobs, pin_snapshot_data,
unpin_snapshot_data. Their requests are the records of ``elanus/ops/snapshots.py``;
``flight/snapshots.py`` takes and restores them, the coord keeps them
(``meta/snapshots.py``).

Privileges: taking, dropping, pinning and restoring need ``Backup`` (a restore also needs
what creating the collection and its indexes needs); reading them needs
``DescribeCollection``.
"""

from __future__ import annotations

from typing import Any

from elanus.api.base import Ack, as_body
from elanus.api.snapshot import (
    DropSnapshot,
    ListRestores,
    ListSnapshots,
    Pinned,
    PinSnapshot,
    Snapshots,
    SnapshotView,
    UnpinSnapshot,
)
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import snapshots as ops


def _collection_id(c: OpCall[Any], db: str, collection: str) -> int:
    return c.proxy.snapshots.collection(db, collection).collection_id


def _create(c: OpCall[ops.CreateSnapshot]) -> SnapshotView:
    r = c.request
    return c.proxy.snapshots.create(r.db, r.collection, r.name, r.description or "")


operation(
    ops.CreateSnapshot,
    "Take a snapshot of a collection: it is flushed, and its schema, partitions, indexes and "
    "the segments holding its rows now are recorded; their files are kept while the snapshot "
    "lives. Body: collection, name, description. Result: snapshot_id, name, ts, segments, "
    "rows, partitions, created_at.",
    privilege="Backup",
    run=_create,
)


def _list(c: OpCall[ops.ListSnapshots]) -> Snapshots:
    r = c.request
    which = ListSnapshots(db=r.db)
    if r.collection:
        which = ListSnapshots(db=r.db, collection_id=_collection_id(c, r.db, r.collection))
    return c.proxy.run(c.proxy.coord.snapshots.list(which))


operation(
    ops.ListSnapshots,
    "Snapshots of a database, or of one collection, oldest first. Body: collection. Result: "
    "snapshots (snapshot_id, name, db, collection, description, ts, created_at, partitions, "
    "segments, rows).",
    privilege="DescribeCollection",
    run=_list,
)


def _describe(c: OpCall[ops.DescribeSnapshot]) -> ops.SnapshotDescription:
    r = c.request
    detail = c.proxy.snapshots.detail(r.db, r.collection, r.name)
    listing: ops.SnapshotListing = as_body(detail.snapshot)
    return ops.SnapshotDescription(**listing, shape=detail.shape)


operation(
    ops.DescribeSnapshot,
    "One snapshot of a collection. Body: collection, name. Result: the snapshot's listing "
    "and the collection's description and indexes it restores (shape).",
    privilege="DescribeCollection",
    run=_describe,
)


def _drop(c: OpCall[ops.DropSnapshot]) -> Ack:
    r = c.request
    req = DropSnapshot(collection_id=_collection_id(c, r.db, r.collection), name=r.name)
    return c.proxy.run(c.proxy.coord.snapshots.drop(req))


operation(
    ops.DropSnapshot,
    "Drop a snapshot; its files go with garbage collection unless a pin holds them. "
    "Body: collection, name.",
    privilege="Backup",
    run=_drop,
)


def _restore(c: OpCall[ops.RestoreSnapshot]) -> ops.RestoreStarted:
    r = c.request
    return c.proxy.snapshots.restore(
        r.db, r.collection, r.name, r.into_db, r.target_collection, c.caller
    )


operation(
    ops.RestoreSnapshot,
    "Restore a snapshot into a new collection (refused if it exists): the collection, its "
    "partitions and indexes are created and the snapshot's rows staged; an import job "
    "makes them appear at once. Body: collection, name, target_collection, target_db. "
    "Result: job_id; poll get_restore_snapshot_state.",
    privilege="Backup",
    run=_restore,
)
operation(
    ops.GetRestoreSnapshotState,
    "State of a restore job. Body: job_id. Result: job_id, snapshot, source_db, "
    "source_collection, db, collection, state (RestoreSnapshotPending, Executing, "
    "Completed, Failed), progress (0-100), rows, reason, start_time_ms, time_cost_ms.",
    privilege="DescribeCollection",
    run=lambda c: c.proxy.snapshots.restore_state(c.request.job_id),
)


def _list_restores(c: OpCall[ops.ListRestoreSnapshotJobs]) -> ops.RestoreJobList:
    which = ListRestores(db=c.request.db, collection=c.request.collection or None)
    return ops.RestoreJobList(jobs=c.proxy.snapshots.restore_jobs(which))


operation(
    ops.ListRestoreSnapshotJobs,
    "Restore jobs into a database, or into one collection, oldest first. Body: collection. "
    "Result: jobs (as get_restore_snapshot_state).",
    privilege="DescribeCollection",
    run=_list_restores,
)


def _pin(c: OpCall[ops.PinSnapshotData]) -> Pinned:
    r = c.request
    req = PinSnapshot(
        collection_id=_collection_id(c, r.db, r.collection),
        name=r.name,
        ttl_s=float(r.ttl_seconds or ops.DEFAULT_PIN_TTL_S),
    )
    return c.proxy.run(c.proxy.coord.snapshots.pin(req))


operation(
    ops.PinSnapshotData,
    "Keep a snapshot's files for ttl_seconds even if it is dropped meanwhile (while they are "
    "copied out). Body: collection, name, ttl_seconds (0: an hour). Result: pin_id, "
    "expires_at.",
    privilege="Backup",
    run=_pin,
)
operation(
    ops.UnpinSnapshotData,
    "Release a pin. Body: pin_id.",
    privilege="Backup",
    run=lambda c: c.proxy.run(
        c.proxy.coord.snapshots.unpin(UnpinSnapshot(pin_id=c.request.pin_id))
    ),
)
