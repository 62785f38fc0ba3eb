"""Collection snapshots (Milvus 2.6's ``create_snapshot``): metadata only, as Milvus's are.

A snapshot is a row in the catalog: the collection's shape (schema, partitions, indexes,
as ``describe_collection`` and ``describe_index`` answered) and the segments that held
its rows at the snapshot's timestamp ``T``, with their files. The proxy makes those files
complete up to ``T`` first (``flight/snapshots.py``: a flush, then every delete up to
``T`` written), so a segment's Lance rows with ``_ts <= T`` less its delta logs' deletes
up to ``T`` are exactly what a read at ``T`` saw (``segments/storage/snapshot_files.py``).

The segments are chosen as a backup's catalog at ``T`` keeps them (``backupfiles.as_of``):
flushed or dropped after ``T`` (a compaction's sources swapped out since stay), never a
compaction's target made after ``T`` (its rows are its sources'), none wholly after ``T``.

Garbage collection keeps the files of every segment a live snapshot lists, and of every
snapshot dropped while a pin on it lives (``held``): compacting or dropping the source
collection removes nothing a snapshot needs. Pins (``pin_snapshot_data``) expire.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from elanus import layout
from elanus.api import snapshot as api
from elanus.api.base import ACK, Ack
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.states import SegmentState

if TYPE_CHECKING:
    import duckdb

    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext

MAX_PER_COLLECTION = 100
"""Live snapshots a collection may have (Milvus caps them per collection too)."""
_VIEW = (
    "s.snapshot_id, s.name, s.db, s.collection, s.collection_id, s.description, s.ts, "
    "s.created_at, s.shape, (SELECT count(*) FROM snapshot_segments g "
    "WHERE g.snapshot_id = s.snapshot_id), (SELECT coalesce(sum(g.num_rows), 0) "
    "FROM snapshot_segments g WHERE g.snapshot_id = s.snapshot_id)"
)


def not_found(name: str, collection: str) -> ElanusError:
    return ElanusError(
        ErrorCode.SNAPSHOT_NOT_FOUND,
        f"snapshot not found[snapshot={name}]: collection {collection!r} has no snapshot "
        f"named {name!r}",
    )


def held(con: duckdb.DuckDBPyConnection, now: float) -> tuple[set[int], set[int]]:
    """The segments and collections whose files garbage collection must keep: those of
    live snapshots and of dropped ones a pin still holds. Expired pins and dropped
    snapshots nothing holds are forgotten first."""
    con.execute("DELETE FROM snapshot_pins WHERE expires_at <= ?", [now])
    gone = "dropped_at IS NOT NULL AND snapshot_id NOT IN (SELECT snapshot_id FROM snapshot_pins)"
    con.execute(
        f"DELETE FROM snapshot_segments WHERE snapshot_id IN "
        f"(SELECT snapshot_id FROM snapshots WHERE {gone})"
    )
    con.execute(f"DELETE FROM snapshots WHERE {gone}")
    rows = con.execute(
        "SELECT g.segment_id, s.collection_id FROM snapshot_segments g JOIN snapshots s "
        "USING (snapshot_id)"
    ).fetchall()
    segments = {int(r[0]) for r in rows}
    collections = {int(r[0]) for r in con.execute("SELECT collection_id FROM snapshots").fetchall()}
    return segments, collections


class SnapshotService:
    def __init__(self, ctx: CoordContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "snapshot.create": self.create,
            "snapshot.list": self.list_snapshots,
            "snapshot.get": self.get,
            "snapshot.drop": self.drop,
            "snapshot.pin": self.pin,
            "snapshot.unpin": self.unpin,
            "snapshot.restore_record": self.record_restore,
            "snapshot.restores": self.restores,
        }

    @property
    def _storage(self) -> str:
        return self.ctx.settings.storage_uri

    async def create(self, req: api.CreateSnapshot) -> api.SnapshotView:
        snapshot_id, now = self.ctx.ids.alloc(), time.time()
        flushed, dropped = SegmentState.FLUSHED.value, SegmentState.DROPPED.value

        def write(con: duckdb.DuckDBPyConnection) -> api.SnapshotView:
            live = con.execute(
                "SELECT name FROM snapshots WHERE collection_id = ? AND dropped_at IS NULL",
                [req.collection_id],
            ).fetchall()
            if req.name in {r[0] for r in live}:
                raise invalid(
                    f"snapshot {req.name!r} of collection {req.collection!r} already exists; "
                    "drop it or choose another name"
                )
            if len(live) >= MAX_PER_COLLECTION:
                raise invalid(
                    f"collection {req.collection!r} has {len(live)} snapshots, the most it "
                    "may have; drop one first"
                )
            con.execute(
                "INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                [
                    snapshot_id, req.name, req.collection_id, req.db, req.collection,
                    req.description, req.ts, now, json.dumps(req.shape),
                ],
            )  # fmt: skip
            con.execute(
                "INSERT INTO snapshot_segments SELECT ?, segment_id, partition_id, path, "
                "num_rows FROM segments WHERE collection_id = ? AND path IS NOT NULL "
                "AND state IN (?, ?) AND (dropped_ts IS NULL OR dropped_ts > ?) "
                "AND (coalesce(compacted_from, '[]') = '[]' OR created_ts <= ?) "
                "AND (min_ts IS NULL OR min_ts <= ?) AND num_rows > 0",
                [snapshot_id, req.collection_id, flushed, dropped, req.ts, req.ts, req.ts],
            )
            return self._views(con, "s.snapshot_id = ?", [snapshot_id])[0]

        return await self.ctx.db.run(write)

    def _views(
        self, con: duckdb.DuckDBPyConnection, where: str, params: list[Any]
    ) -> list[api.SnapshotView]:
        rows = con.execute(
            f"SELECT {_VIEW} FROM snapshots s WHERE s.dropped_at IS NULL AND {where} "
            "ORDER BY s.created_at, s.snapshot_id",
            params,
        ).fetchall()
        return [
            api.SnapshotView(
                snapshot_id=int(r[0]),
                name=r[1],
                db=r[2],
                collection=r[3],
                collection_id=int(r[4]),
                description=r[5],
                ts=int(r[6]),
                created_at=float(r[7]),
                partitions=_partitions(json.loads(r[8])),
                segments=int(r[9]),
                rows=int(r[10]),
            )  # fmt: skip
            for r in rows
        ]

    async def list_snapshots(self, req: api.ListSnapshots) -> api.Snapshots:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if req.db is not None:
            where.append("s.db = ?")
            params.append(req.db)
        if req.collection_id is not None:
            where.append("s.collection_id = ?")
            params.append(req.collection_id)
        views = await self.ctx.db.run(self._views, " AND ".join(where), params)
        return api.Snapshots(snapshots=views)

    def _one(self, con: duckdb.DuckDBPyConnection, cid: int, name: str) -> api.SnapshotView:
        found = self._views(con, "s.collection_id = ? AND s.name = ?", [cid, name])
        if not found:
            collection = con.execute(
                "SELECT name FROM collections WHERE collection_id = ?", [cid]
            ).fetchone()
            raise not_found(name, collection[0] if collection else str(cid))
        return found[0]

    async def get(self, req: api.GetSnapshot) -> api.SnapshotDetail:
        def read(con: duckdb.DuckDBPyConnection) -> api.SnapshotDetail:
            view = self._one(con, req.collection_id, req.name)
            shape = con.execute(
                "SELECT shape FROM snapshots WHERE snapshot_id = ?", [view.snapshot_id]
            ).fetchone()
            files = con.execute(
                "SELECT segment_id, partition_id, path, num_rows FROM snapshot_segments "
                "WHERE snapshot_id = ? ORDER BY segment_id",
                [view.snapshot_id],
            ).fetchall()
            return api.SnapshotDetail(
                snapshot=view,
                shape=json.loads(shape[0]) if shape else {},
                files=[
                    api.SnapshotSegment(
                        segment_id=int(s),
                        partition_id=int(p),
                        path=layout.absolute(self._storage, path) or path,
                        num_rows=int(n),
                    )  # fmt: skip
                    for s, p, path, n in files
                ],
            )

        return await self.ctx.db.run(read)

    async def drop(self, req: api.DropSnapshot) -> Ack:
        """The snapshot goes from listings at once; its files go with the next collection
        unless a pin still holds them."""

        def write(con: duckdb.DuckDBPyConnection) -> None:
            view = self._one(con, req.collection_id, req.name)
            con.execute(
                "UPDATE snapshots SET dropped_at = ? WHERE snapshot_id = ?",
                [time.time(), view.snapshot_id],
            )
            held(con, time.time())

        await self.ctx.db.run(write)
        return ACK

    async def pin(self, req: api.PinSnapshot) -> api.Pinned:
        pin_id = self.ctx.ids.alloc()
        expires = time.time() + req.ttl_s

        def write(con: duckdb.DuckDBPyConnection) -> None:
            view = self._one(con, req.collection_id, req.name)
            con.execute(
                "INSERT INTO snapshot_pins VALUES (?, ?, ?)", [pin_id, view.snapshot_id, expires]
            )

        await self.ctx.db.run(write)
        return api.Pinned(pin_id=pin_id, expires_at=expires)

    async def unpin(self, req: api.UnpinSnapshot) -> Ack:
        def write(con: duckdb.DuckDBPyConnection) -> None:
            now = time.time()
            found = con.execute(
                "SELECT 1 FROM snapshot_pins WHERE pin_id = ? AND expires_at > ?",
                [req.pin_id, now],
            ).fetchone()
            if found is None:
                raise ElanusError(
                    ErrorCode.SNAPSHOT_NOT_FOUND,
                    f"pin {req.pin_id} does not exist (never made, unpinned or expired)",
                )
            con.execute("DELETE FROM snapshot_pins WHERE pin_id = ?", [req.pin_id])
            held(con, now)

        await self.ctx.db.run(write)
        return ACK

    async def record_restore(self, req: api.RecordRestore) -> Ack:
        row = [
            req.job_id, req.snapshot, req.source_db, req.source_collection, req.db,
            req.collection, time.time(),
        ]  # fmt: skip
        await self.ctx.db.run(
            lambda con: con.execute(
                "INSERT INTO snapshot_restores VALUES (?, ?, ?, ?, ?, ?, ?)", row
            )
        )
        return ACK

    async def restores(self, req: api.ListRestores) -> api.RestoreJobs:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        for column, value in (
            ("job_id", req.job_id),
            ("db", req.db),
            ("collection", req.collection),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)

        def read(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
            return con.execute(
                "SELECT job_id, snapshot, source_db, source_collection, db, collection, "
                f"started_at FROM snapshot_restores WHERE {' AND '.join(where)} ORDER BY job_id",
                params,
            ).fetchall()

        rows = await self.ctx.db.run(read)
        return api.RestoreJobs(
            jobs=[
                api.RestoreJob(
                    job_id=int(r[0]),
                    snapshot=r[1],
                    source_db=r[2],
                    source_collection=r[3],
                    db=r[4],
                    collection=r[5],
                    started_at=float(r[6]),
                )  # fmt: skip
                for r in rows
            ]
        )


def _partitions(shape: dict[str, Any]) -> list[str]:
    return [str(p["name"]) for p in (shape.get("collection") or {}).get("partitions") or []]
