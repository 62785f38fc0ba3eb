"""DoAction entries of collection snapshots (Milvus 2.6's snapshot API): create_snapshot,
list_snapshots, describe_snapshot, drop_snapshot, restore_snapshot,
get_restore_snapshot_state, list_restore_snapshot_jobs, pin_snapshot_data,
unpin_snapshot_data. ``flight/snapshots.py`` takes and restores them, the coord keeps them
(``meta/snapshots.py``).

Privileges: taking, dropping, pinning and restoring need ``Backup`` (a restore also needs
what creating the collection and its indexes needs); reading them needs
``DescribeCollection``.
"""

from __future__ import annotations

from typing import Any

from elanus.api.base import as_body
from elanus.api.snapshot import (
    DropSnapshot,
    ListRestores,
    ListSnapshots,
    PinSnapshot,
    UnpinSnapshot,
)
from elanus.errors import invalid
from elanus.flight.actions import action, check_db, check_named
from elanus.flight.executors import Call
from elanus.requests import Body
from elanus.schema import check_name

MAX_DESCRIPTION = 1024
DEFAULT_PIN_TTL_S = 3600
"""A pin's life when the request gives none (Milvus: "0 uses the server default")."""
MAX_PIN_TTL_S = 7 * 24 * 3600


def _named(b: Body) -> dict[str, Any]:
    """db, collection and the snapshot's name (named as collections are)."""
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "name": check_name(b.str("name"), "snapshot"),
    }


def _collection_id(c: Call) -> int:
    return c.proxy.snapshots.collection(c.request["db"], c.request["collection"]).collection_id


@action(
    "create_snapshot",
    "Take a snapshot of a collection: it is flushed, and its schema, partitions, indexes and "
    "the segments holding its rows now are recorded; their files are kept while the snapshot "
    "lives. Body: collection, name, description. Result: snapshot_id, name, ts, segments, "
    "rows, partitions, created_at.",
    ("collection", "name", "description"),
    privilege="Backup",
    run=lambda c: c.proxy.snapshots.create(c.request),
)
def _create_snapshot(b: Body) -> dict[str, Any]:
    named = _named(b)
    description = b.str("description", "")
    if len(description) > MAX_DESCRIPTION:
        raise invalid(f"create_snapshot: 'description' is longer than {MAX_DESCRIPTION} characters")
    return {**named, "description": description}


def _run_list(c: Call) -> dict[str, Any]:
    which = ListSnapshots(db=c.request["db"])
    if c.request["collection"]:
        which = ListSnapshots(db=c.request["db"], collection_id=_collection_id(c))
    return as_body(c.proxy.run(c.proxy.coord.snapshots.list(which)))


@action(
    "list_snapshots",
    "Snapshots of a database, or of one collection, oldest first. Body: collection. Result: "
    "snapshots (snapshot_id, name, db, collection, description, ts, created_at, partitions, "
    "segments, rows).",
    ("collection",),
    privilege="DescribeCollection",
    run=_run_list,
)
def _list_snapshots(b: Body) -> dict[str, Any]:
    collection = b.str("collection", None)
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection") if collection else None,
    }


def _describe(c: Call) -> dict[str, Any]:
    detail = c.proxy.snapshots.detail(c.request["db"], c.request["collection"], c.request["name"])
    return {**as_body(detail.snapshot), "shape": detail.shape}


@action(
    "describe_snapshot",
    "One snapshot of a collection. Body: collection, name. Result: the snapshot's listing "
    "and the collection's description and indexes it restores (shape).",
    ("collection", "name"),
    privilege="DescribeCollection",
    run=lambda c: _describe(c),
)
def _describe_snapshot(b: Body) -> dict[str, Any]:
    return _named(b)


@action(
    "drop_snapshot",
    "Drop a snapshot; its files go with garbage collection unless a pin holds them. "
    "Body: collection, name.",
    ("collection", "name"),
    privilege="Backup",
    run=lambda c: as_body(
        c.proxy.run(
            c.proxy.coord.snapshots.drop(
                DropSnapshot(collection_id=_collection_id(c), name=c.request["name"])
            )
        )
    ),
)
def _drop_snapshot(b: Body) -> dict[str, Any]:
    return _named(b)


@action(
    "restore_snapshot",
    "Restore a snapshot into a new collection (refused if it exists): the collection, its "
    "partitions and indexes are created and the snapshot's rows staged; an import job "
    "makes them appear at once. Body: collection, name, target_collection, target_db. "
    "Result: job_id; poll get_restore_snapshot_state.",
    ("collection", "name", "target_collection", "target_db"),
    privilege="Backup",
    run=lambda c: c.proxy.snapshots.restore(c.request, c.caller),
)
def _restore_snapshot(b: Body) -> dict[str, Any]:
    named = _named(b)
    target_db = b.str("target_db", None) or named["db"]
    return {
        **named,
        "target_db": check_name(target_db, "database"),
        "target_collection": check_named(b, "target_collection", "collection"),
    }


@action(
    "get_restore_snapshot_state",
    "State of a restore job. Body: job_id. Result: job_id, snapshot, source_db, "
    "source_collection, db, collection, state (RestoreSnapshotPending, Executing, "
    "Completed, Failed), progress (0-100), rows, reason, start_time_ms, time_cost_ms.",
    ("job_id",),
    privilege="DescribeCollection",
    run=lambda c: c.proxy.snapshots.restore_state(c.request["job_id"]),
)
def _restore_state(b: Body) -> dict[str, Any]:
    check_db(b)
    return {"job_id": b.int("job_id", lo=1)}


@action(
    "list_restore_snapshot_jobs",
    "Restore jobs into a database, or into one collection, oldest first. Body: collection. "
    "Result: jobs (as get_restore_snapshot_state).",
    ("collection",),
    privilege="DescribeCollection",
    run=lambda c: {
        "jobs": c.proxy.snapshots.restore_jobs(
            ListRestores(db=c.request["db"], collection=c.request["collection"])
        )
    },
)
def _list_restores(b: Body) -> dict[str, Any]:
    collection = b.str("collection", None)
    return {
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection") if collection else None,
    }


@action(
    "pin_snapshot_data",
    "Keep a snapshot's files for ttl_seconds even if it is dropped meanwhile (while they are "
    "copied out). Body: collection, name, ttl_seconds (0: an hour). Result: pin_id, "
    "expires_at.",
    ("collection", "name", "ttl_seconds"),
    privilege="Backup",
    run=lambda c: as_body(
        c.proxy.run(
            c.proxy.coord.snapshots.pin(
                PinSnapshot(
                    collection_id=_collection_id(c),
                    name=c.request["name"],
                    ttl_s=float(c.request["ttl_seconds"]),
                )
            )
        )
    ),
)
def _pin(b: Body) -> dict[str, Any]:
    named = _named(b)
    ttl = b.int("ttl_seconds", 0, lo=0, hi=MAX_PIN_TTL_S)
    return {**named, "ttl_seconds": ttl or DEFAULT_PIN_TTL_S}


@action(
    "unpin_snapshot_data",
    "Release a pin. Body: pin_id.",
    ("pin_id",),
    privilege="Backup",
    run=lambda c: as_body(
        c.proxy.run(c.proxy.coord.snapshots.unpin(UnpinSnapshot(pin_id=c.request["pin_id"])))
    ),
)
def _unpin(b: Body) -> dict[str, Any]:
    check_db(b)
    return {"pin_id": b.int("pin_id", lo=1)}
