"""Bulk import and staged writes in the proxy.

``import`` and the job queries go to the coord's ``ImportManager``. A **staged write** is
how a parallel writer (the Spark data source) makes many tasks' rows appear at once: each
task's DoPut carries ``"stage": <write_id>`` and is checked and conformed exactly like an
insert (auto ids assigned and returned in the PutResults), but its batches land in Arrow
IPC files under ``<storage>/staging/<write_id>/<part>/<collection>/<partition>/`` instead of
the log, one file per batch and shard (vchannel), so that the commit moves each file's rows
into its segment without reordering them. ``commit_write`` turns every staged file of the
write (or of the named parts) into one import job, which publishes all of it at one
timestamp; until then nothing is visible. Runs on Flight threads; the coord is reached
through the loop bridge. Given what it uses (``flight/ports.py``), never the proxy.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from elanus import layout, objstore
from elanus.api.imports import AbortWrite, CreateImport, ImportJobView, ImportState
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.metacache import CollectionInfo
from elanus.importroots import absolute, confine, import_roots
from elanus.ops.imports import ImportStarted, ImportUnit, WriteCommitted, WriteDiscarded
from elanus.partitionkey import group_rows, key_partition_ids, split_by_partition
from elanus.pkhash import shard_of
from elanus.states import IMPORT_FINAL, ImportJobState
from elanus.validation import conform_insert
from elanus.wire.putresult import PutAck

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.flight.ports import CollectionLookup, IdSource, LoopBridge
    from elanus.flight.putcommand import PutCommand
    from elanus.settings import Settings

POLL_S = 0.05


ABORTED_KEPT = 1024
"""Aborted write ids a proxy remembers, to refuse and clean up their late parts."""


class ImportService:
    def __init__(
        self,
        *,
        loop: LoopBridge,
        coord: CoordAPI,
        settings: Settings,
        collections: CollectionLookup,
        ids: IdSource,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.settings = settings
        self.collections = collections
        self.ids = ids
        """Auto ids of staged rows, from the same cache as inserts'."""
        self._aborted: dict[str, None] = {}
        """Writes aborted through this proxy (insertion ordered, the oldest forgotten first).
        When a Spark job fails, the driver aborts while other tasks may still be streaming:
        their parts are refused, and a part already being written removes itself."""

    @property
    def storage(self) -> str:
        """The storage root (local or an object store): the data node reads staged files
        from there, whichever machine it runs on."""
        return self.settings.storage_uri

    def _create(self, req: CreateImport) -> int:
        """A job (the coord checks its units: they are the client's files)."""
        return self.loop.run(self.coord.imports.create(req)).job_id

    def _state(self, job_id: int) -> ImportJobView:
        return self.loop.run(self.coord.imports.state(ImportState(job_id=job_id)))

    # -- executors of flight/import_actions.py ---------------------------------------------
    def start(
        self,
        db: str,
        collection: str,
        partition: str | None,
        units: list[ImportUnit],
        sep: str | None,
    ) -> ImportStarted:
        """An ``import`` job of files inside the import roots (``units``: ``group_files``');
        ``sep``: a CSV file's separator."""
        info = self.collections.collection(db, collection)
        req = CreateImport(
            collection_id=info.collection_id,
            db=info.db,
            collection=info.name,
            partition_id=_job_partition(self.collections, info, partition, "an import"),
            units=self._confined(units),
            options={"sep": sep} if sep is not None else {},
        )
        return ImportStarted(job_id=self._create(req))

    def abort(self, write_id: str) -> WriteDiscarded:
        self._aborted[write_id] = None  # before the files go: see stage()
        while len(self._aborted) > ABORTED_KEPT:
            del self._aborted[next(iter(self._aborted))]
        aborted = self.loop.run(self.coord.imports.abort_write(AbortWrite(write_id=write_id)))
        return WriteDiscarded(removed=aborted.removed)

    def _confined(self, units: list[ImportUnit]) -> list[ImportUnit]:
        """Every path must name a regular file inside the import roots (refused with
        PATH_NOT_ALLOWED otherwise); relative ones are taken under the first root. The data
        node checks again when it opens them."""
        roots = import_roots(self.settings)
        out = []
        for unit in units:
            paths = []
            for p in unit["paths"]:
                confine(p, roots)
                paths.append(absolute(p, roots))
            out.append(ImportUnit(format=unit["format"], paths=paths))
        return out

    def commit_write(
        self,
        db: str,
        collection: str,
        write_id: str,
        *,
        upsert: bool,
        parts: list[str] | None,
        expected_rows: int | None,
        wait_s: float,
    ) -> WriteCommitted:
        """One import job of every staged file of ``write_id`` (of ``parts`` only, if
        given); waits up to ``wait_s`` for it to end."""
        info = self.collections.collection(db, collection)
        units = self._staged_units(info, write_id, parts)
        req = CreateImport(
            collection_id=info.collection_id,
            db=info.db,
            collection=info.name,
            partition_id=_job_partition(self.collections, info, None, "a commit"),
            units=units,
            options={"upsert": upsert, "expected_rows": expected_rows},
            write_id=write_id,
        )
        job_id = self._create(req)
        deadline = time.monotonic() + wait_s
        while True:
            state = self._state(job_id)
            if state.state in IMPORT_FINAL or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        if state.state == ImportJobState.FAILED:
            code = state.reason_code or ErrorCode.INTERNAL.value
            raise ElanusError(
                code, f"commit of write {write_id!r} failed (import job {job_id}): {state.reason}"
            )
        return WriteCommitted(
            job_id=job_id,
            state=state.state,
            rows=state.rows,
            ts=state.ts,
            segment_ids=state.segment_ids,
        )

    def _staged_units(
        self, info: CollectionInfo, write_id: str, parts: list[str] | None
    ) -> list[ImportUnit]:
        root = layout.staging_dir(self.storage, write_id)
        units: list[ImportUnit] = []
        others = 0
        for rel in sorted(objstore.list_tree(root), key=lambda r: r.split("/")):
            names = rel.split("/")  # part / collection / partition / file
            if len(names) != 4 or not names[3].endswith(".arrow"):
                continue
            part, collection, partition, _ = names
            if parts is not None and part not in parts:
                continue
            if collection != str(info.collection_id):
                others += 1
            elif partition.isdigit():
                path = layout.join(root, rel)
                unit = ImportUnit(format="arrow", paths=[path], partition_id=int(partition))
                units.append(unit)
        if others and not units:
            raise invalid(
                f"write {write_id!r} staged rows for another collection, not {info.name!r}"
            )
        return units

    # -- DoPut with "stage" -----------------------------------------------------------------
    def stage(
        self,
        info: CollectionInfo,
        request: PutCommand,
        batches: Iterable[pa.RecordBatch],
        writer: flight.FlightMetadataWriter,
    ) -> None:
        """Check each batch as an insert would, then write it to the staging area (the
        command names the write: ``stage``, ``stage_part``)."""
        write_id, part = request["stage"], request["stage_part"]
        if write_id is None:
            raise invalid("DoPut command: a staged write needs 'stage'")
        upsert = request["op"] == "upsert"
        pid = _job_partition(self.collections, info, request["partition"], "a staged write")
        key = info.schema.partition_key
        limit = self.settings.max_request_bytes
        pk = info.schema.primary
        self._refuse_aborted(write_id)
        for batch in batches:
            table = conform_insert(batch, info.schema, upsert=upsert, max_bytes=limit)
            if pk.auto_id and not upsert:
                start = self.loop.run(self.ids.take(table.num_rows))
                ids = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
                position = [f.name for f in info.schema.fields].index(pk.name)
                table = table.add_column(position, pk.arrow_field(), ids)
            parts = [(pid, table)]
            if key is not None:  # one file per partition the rows' keys hash to
                parts = split_by_partition(
                    table, key, key_partition_ids(info.partitions, info.name)
                )
            for part_id, rows in parts:
                for written in self.stage_rows(info, write_id, part, part_id, rows):
                    if write_id in self._aborted:  # aborted while it was written
                        objstore.remove_file(written)
                        self._refuse_aborted(write_id)
            writer.write(PutAck(table.column(pk.name).combine_chunks(), 0).encode())

    def stage_rows(
        self, info: CollectionInfo, write_id: str, part: str, partition_id: int, rows: pa.Table
    ) -> Iterable[str]:
        """Write conformed rows (ids included) of one partition as staged files, one per
        shard, as the commit appends each file to its segment as it is; yields each file
        once written (a snapshot's restore stages its rows so too)."""
        target = layout.staged_dir(self.storage, write_id, part, info.collection_id, partition_id)
        shards = shard_of(rows.column(info.schema.primary.name), len(info.vchannels))
        for _, shard_rows in group_rows(rows, shards):
            yield _write_staged(target, shard_rows)

    def _refuse_aborted(self, write_id: str) -> None:
        if write_id in self._aborted:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                f"write {write_id!r} was aborted; start a new write to stage more rows",
            )


def _job_partition(
    collections: CollectionLookup, info: CollectionInfo, partition: str | None, doing: str
) -> int:
    """A job's or staged write's partition: the named one (``_default`` if None). With a
    partition key a name is refused and rows are routed by key (the data node routes each
    file's rows; staging splits them), so the job names the first key partition."""
    if info.schema.partition_key is not None and not partition:
        return key_partition_ids(info.partitions, info.name)[0]
    return collections.partition_id(info, partition, doing)


def _write_staged(directory: str, table: pa.Table) -> str:
    """One batch, one file, written whole before it gets its name, or as one object (a
    commit never reads half a file)."""
    final = layout.join(directory, f"{uuid.uuid4().hex}.arrow")
    objstore.write_ipc(final, table)
    return final
