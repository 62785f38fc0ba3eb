"""One bulk import job on a datanode (Milvus's import task): files become segments directly.

The coord's ``ImportManager`` owns the job and its ordering with the log (see
``meta/importjobs.py``); this is the work in between, in two passes over the files:

1. **Check**: every batch of every file goes through ``conform_insert``, exactly as an
   insert would at the proxy (schema, dimensions, dtypes, NaN, nulls, auto-id fields), and
   the primary keys are kept to check them for duplicates across all files. Nothing is
   written; any error fails the job with a reason naming the file. A staged write's files
   were written by the proxy after those very checks: one with the exact conformed schema
   is taken as it is (no second conversion), any other is conformed.
2. **Plan**: auto ids come from the coord's allocator; each row goes to the vchannel its
   key hashes to (as the proxy routes inserts, so deletes find it) within its partition,
   and each (partition, vchannel) run of rows is cut into segments of at most
   ``max_rows``. The coord registers those segments (Importing).
3. **Write**: the files are read and conformed again (as in 1) and every row is appended to its
   segment's Lance dataset; then each segment is put in primary-key order
   (``storage.sort_segment``) and its pk stats written.
4. **Commit**: the coord publishes the job at its import timestamp ``T``; the rows get
   ``_ts = T`` (one new column file per fragment) and the coord is told to finish.

Files are read off the event loop; progress goes to the coord every half second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from elanus import layout, objstore
from elanus.api.datanode import RunImport
from elanus.api.imports import (
    CommitImport,
    FailImport,
    FinishImport,
    ImportAPI,
    ImportProgress,
    PrepareImport,
)
from elanus.api.rootcoord import IdAlloc, RootCoordAPI
from elanus.channels.runtime.loop import Periodic
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.fileerrors import unknown_columns, without_file_text
from elanus.filereaders import open_unit, unreadable
from elanus.importroots import Root, import_roots
from elanus.partitionkey import group_rows, key_partition_ids, partition_index
from elanus.pkhash import shard_of
from elanus.schema import DYNAMIC_FIELD, PK_COLUMN, Schema
from elanus.segments import storage
from elanus.segments.datanode.orderedwrites import OrderedWrites
from elanus.segments.flushcommon.host import DataNodeHost
from elanus.validation import check_unique_across, conform_insert

log = logging.getLogger(__name__)
R = TypeVar("R")

BATCH_ROWS = 8192
STAGED_BATCH_ROWS = 1 << 20
"""A staged file is read whole anyway (one proxy batch, a few MiB): one batch of it."""
WRITE_BYTES = 64 << 20
"""A segment's rows are appended to its Lance dataset in writes of about this size."""
REPORT_S = 0.5
ID_BLOCK_MAX = 10_000_000
"""The coord's ``id.alloc`` hands out at most this many ids per call."""
RETRYABLE = (ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT)
CHECK_SHARE, WRITE_SHARE = 0.45, 0.45
"""Progress: the check pass is the first 45%, the write pass the next 45%."""


@dataclass
class Plan:
    """Where every row goes, in the order the files are read."""

    pks: pa.Array
    partitions: np.ndarray
    seg_of_row: np.ndarray
    segments: list[dict[str, Any]]
    unit_rows: list[int]


class ImportTask:
    def __init__(self, node: DataNodeHost, spec: RunImport) -> None:
        self.node = node
        self.job_id = spec.job_id
        self.collection_id = spec.collection_id
        self.schema = Schema.from_dict(spec.schema)
        self.vchannels = list(spec.vchannels)
        self.units = list(spec.units)
        self.max_rows = spec.max_rows
        self.key = self.schema.partition_key
        self.key_ids: list[int] = []
        """A partition key collection's partitions in routing order: rows go by key."""
        if self.key is not None:
            names = {str(p["name"]): int(p["partition_id"]) for p in spec.partitions}
            self.key_ids = key_partition_ids(names, str(self.collection_id))
        self._key_rows: list[np.ndarray] = []
        self.staged = spec.staged
        self._staged_schema = self.schema.to_arrow()
        """What the proxy writes to a staged file: ``conform_insert``'s output, ids included."""
        options = spec.options
        self.upsert = bool(options.get("upsert"))
        self.delimiter = str(options.get("sep") or ",")
        self.expected_rows: int | None = options.get("expected_rows")
        self.storage = node.settings.storage_uri
        self.coord = ImportAPI(node.bus)
        self._roots: list[Root] = (
            [layout.staging_root(self.storage)] if self.staged else import_roots(node.settings)
        )
        """Where this job may open files: the import roots, or the staging area (on the
        storage, local or an object store) for the Arrow files of a staged write (checked
        again at every open)."""
        self.progress = 0.0
        self.stage = "checking"
        self._dirs: list[str] = []

    @property
    def _auto_ids(self) -> bool:
        return self.schema.primary.auto_id and not self.staged

    # -- the job ----------------------------------------------------------------------------
    async def run(self) -> None:
        reporter = Periodic(self._report, REPORT_S, f"import {self.job_id} progress").start()
        committed = False
        try:
            pks, unit_rows = await asyncio.to_thread(self._check)
            if self._auto_ids:
                pks = await self._alloc_ids(sum(unit_rows))
            self.stage = "planning"
            plan = await asyncio.to_thread(self._plan, pks, unit_rows)
            prepare = PrepareImport(
                job_id=self.job_id,
                node_id=self.node.node_id,
                segments=plan.segments,
                max_rows=self.max_rows,
            )
            prepared = await retried("import.prepare", lambda: self.coord.prepare(prepare))
            seg_ids = prepared.segment_ids
            self.stage = "writing"
            await asyncio.to_thread(self._write, plan, seg_ids)
            self.stage = "committing"
            commit = CommitImport(job_id=self.job_id, node_id=self.node.node_id)
            ts = (await retried("import.commit", lambda: self.coord.commit(commit))).ts
            committed = True
            await finalize(self.node, self.job_id, ts, self._dirs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes the job's reason
            err = exc if isinstance(exc, ElanusError) else _internal(exc)
            if committed:  # the coord finishes it (here or on another node)
                log.warning("import job %s: finishing failed: %s", self.job_id, err)
                await self._report_failure(err)
                return
            log.info("import job %s failed: %s", self.job_id, err.message)
            await asyncio.to_thread(self._remove_written)
            await self._report_failure(err)
        finally:
            await reporter.stop()

    async def _report(self) -> None:
        report = ImportProgress(
            job_id=self.job_id,
            node_id=self.node.node_id,
            progress=round(self.progress, 4),
            stage=self.stage,
        )
        try:
            await self.coord.progress(report, timeout=10)
        except ElanusError as exc:
            log.debug("import job %s: progress report failed: %s", self.job_id, exc)

    async def _report_failure(self, err: ElanusError) -> None:
        try:
            await report_failure(self.node, self.job_id, err.message, str(err.code))
        except ElanusError as exc:  # the coord fails it itself when it sees us gone
            log.warning("import job %s: could not report the failure: %s", self.job_id, exc)

    async def _alloc_ids(self, total: int) -> pa.Array:
        parts = []
        root = RootCoordAPI(self.node.bus)
        while total > 0:
            count = min(total, ID_BLOCK_MAX)
            req = IdAlloc(count=count)
            block = await retried("id.alloc", partial(root.alloc_ids, req))
            start = block.start
            parts.append(np.arange(start, start + count, dtype=np.int64))
            total -= count
        return pa.array(np.concatenate(parts))

    # -- pass 1: check ----------------------------------------------------------------------
    def _check(self) -> tuple[pa.Array | None, list[int]]:
        pk = self.schema.primary
        keys: list[pa.Array] = []
        unit_rows: list[int] = []
        for i, unit in enumerate(self.units):
            rows = 0
            for table, total in self._tables(unit):
                rows += table.num_rows
                if not self._auto_ids:
                    keys.append(table.column(pk.name).combine_chunks())
                if self.key is not None:
                    column = table.column(self.key.name)
                    self._key_rows.append(partition_index(column, len(self.key_ids)))
                done = rows / total if total else 0.5
                self.progress = CHECK_SHARE * (i + min(done, 1.0)) / len(self.units)
            unit_rows.append(rows)
        if not sum(unit_rows):
            raise invalid("the import files hold no rows")
        if self.expected_rows is not None and sum(unit_rows) != self.expected_rows:
            raise invalid(
                f"{sum(unit_rows)} row(s) are staged but the writer staged {self.expected_rows} "
                "(files removed as stale after gc_delay_s, or a part missing?)"
            )
        if self._auto_ids:
            return None, unit_rows
        try:
            check_unique_across(keys, pk.name)
        except ElanusError as exc:
            quiet = without_file_text(exc, [pk.name])
            raise ElanusError(
                exc.code,
                quiet.message.replace("within a request", "within an import")
                + " (rows are numbered across all files, in order)",
            ) from None
        return pa.concat_arrays(keys), unit_rows

    def _tables(self, unit: dict[str, Any]) -> Iterator[tuple[pa.Table, int | None]]:
        """The unit's batches, conformed to the schema, with the file's row count. Files
        are opened inside the import roots only, and no message quotes what they hold."""
        name = ", ".join(Path(p).name for p in unit["paths"])
        fields = [f.name for f in self.schema.fields]
        names = [*fields, DYNAMIC_FIELD]  # what a message may quote (the schema's own)
        try:
            rows = STAGED_BATCH_ROWS if self.staged else BATCH_ROWS
            source = open_unit(unit, self.schema, rows, delimiter=self.delimiter, roots=self._roots)
        except ElanusError as exc:  # a refused path quotes only the path it was given
            if exc.code == ErrorCode.PATH_NOT_ALLOWED:
                raise
            raise without_file_text(exc, names) from None
        first = 0
        while True:
            try:
                batch = next(source.batches)
            except StopIteration:
                return
            except ElanusError as exc:
                raise _in_file(without_file_text(exc, names), name, first) from None
            except Exception as exc:  # noqa: BLE001 - any reader failure; its text is not shown
                raise unreadable(name, exc) from None
            if not batch.num_rows:
                continue
            if self.staged and batch.schema.equals(self._staged_schema, check_metadata=True):
                # the proxy checked these very rows (conform_insert) before it wrote them;
                # a file of another shape (a field added since) is conformed below
                first += batch.num_rows
                yield pa.Table.from_batches([batch]), source.total
                continue
            if not self.schema.enable_dynamic_field:
                unknown = unknown_columns(name, batch.schema.names, fields)
                if unknown is not None:
                    raise unknown
            try:
                table = conform_insert(batch, self.schema, upsert=self.staged, staged=self.staged)
            except ElanusError as exc:
                raise _in_file(without_file_text(exc, names), name, first) from None
            first += batch.num_rows
            yield table, source.total

    # -- planning ---------------------------------------------------------------------------
    def _plan(self, pks: pa.Array, unit_rows: list[int]) -> Plan:
        """Each row's segment: rows of one (partition, vchannel) in read order, cut every
        ``max_rows``."""
        n = len(pks)
        unit_parts = [int(u["partition_id"]) for u in self.units]
        partitions = np.repeat(np.array(unit_parts, dtype=np.int64), unit_rows)
        if self.key is not None:  # the partition each row's key hashes to, not its file's
            rows = np.concatenate(self._key_rows) if self._key_rows else np.zeros(0, np.int64)
            partitions = np.array(self.key_ids, dtype=np.int64)[rows]
        part_ids, part_index = np.unique(partitions, return_inverse=True)
        nv = len(self.vchannels)
        group = part_index.astype(np.int64) * nv + shard_of(pks, nv)
        order = np.argsort(group, kind="stable")
        groups, starts, counts = np.unique(group[order], return_index=True, return_counts=True)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - np.repeat(starts, counts)
        per_group = -(-counts // self.max_rows)  # segments per group (ceil)
        base = np.concatenate([[0], np.cumsum(per_group)[:-1]])
        group_of_row = np.searchsorted(groups, group)
        seg_of_row = base[group_of_row] + rank // self.max_rows
        seg_rows = np.bincount(seg_of_row, minlength=int(per_group.sum()))
        segments = []
        for g, first, count in zip(groups.tolist(), base.tolist(), per_group.tolist(), strict=True):
            for s in range(first, first + count):
                segments.append(
                    {
                        "vchannel": self.vchannels[g % nv],
                        "partition_id": int(part_ids[g // nv]),
                        "rows": int(seg_rows[s]),
                    }
                )
        return Plan(pks, partitions, seg_of_row, segments, unit_rows)

    # -- pass 2: write ----------------------------------------------------------------------
    def _write(self, plan: Plan, seg_ids: list[int]) -> None:
        dirs = [
            layout.segment_dir(self.storage, self.collection_id, int(s["partition_id"]), sid)
            for s, sid in zip(plan.segments, seg_ids, strict=True)
        ]
        self._dirs = dirs
        pending: dict[int, list[pa.Table]] = {}
        pending_bytes: dict[int, int] = {}
        started: set[int] = set()
        target = storage.segment_schema(self.schema, with_ts=False)  # the commit adds _ts

        writes = OrderedWrites(name=f"import-{self.job_id}")

        def write(s: int) -> None:
            table = pa.concat_tables(pending.pop(s))
            pending_bytes.pop(s, None)
            writes.submit(s, storage.write_rows, dirs[s], table, target, first=s not in started)
            started.add(s)

        with writes:  # the segments' appends at once, each segment's in order
            self._write_rows(plan, pending, pending_bytes, write)
        for d in dirs:  # in key order, as a flushed segment (the coord records it sorted)
            storage.sort_segment(d, self.schema.primary.name)
        order = np.argsort(plan.seg_of_row, kind="stable")
        by_segment = plan.pks.take(pa.array(order))
        ends = np.cumsum(np.bincount(plan.seg_of_row, minlength=len(dirs)))
        for s, d in enumerate(dirs):
            start = int(ends[s - 1]) if s else 0
            storage.write_pk_stats(d, by_segment.slice(start, int(ends[s]) - start))
        if self.upsert:
            self._write_keys(plan)

    def _write_rows(
        self,
        plan: Plan,
        pending: dict[int, list[pa.Table]],
        pending_bytes: dict[int, int],
        write: Callable[[int], None],
    ) -> None:
        """Every unit's rows, grouped by segment and handed to ``write`` in pieces of about
        ``WRITE_BYTES`` (the rest at the end)."""
        pk = self.schema.primary
        position = [f.name for f in self.schema.fields].index(pk.name)
        offset, total = 0, len(plan.pks)
        for i, unit in enumerate(self.units):
            unit_start = offset
            for table, _ in self._tables(unit):
                n = table.num_rows
                if offset + n - unit_start > plan.unit_rows[i]:
                    raise invalid(f"{unit['paths'][0]}: the file changed during the import")
                if self._auto_ids:
                    ids = plan.pks.slice(offset, n)
                    table = table.add_column(position, pk.arrow_field(), ids)
                for s, part in group_rows(table, plan.seg_of_row[offset : offset + n]):
                    pending.setdefault(s, []).append(part)
                    pending_bytes[s] = pending_bytes.get(s, 0) + part.nbytes
                    if pending_bytes[s] >= WRITE_BYTES:
                        write(s)
                offset += n
                self.progress = CHECK_SHARE + WRITE_SHARE * offset / total
            if offset - unit_start != plan.unit_rows[i]:
                raise invalid(f"{unit['paths'][0]}: the file changed during the import")
        for s in list(pending):
            write(s)

    def _write_keys(self, plan: Plan) -> None:
        """The keys an upsert replaces, for the coord to publish as deletes at commit."""
        path = layout.upsert_keys_path(self.storage, self.job_id)
        # With a partition key the replaced row may sit in another partition: 0 reaches all.
        parts = plan.partitions if self.key is None else np.zeros(len(plan.pks), np.int64)
        table = pa.table({PK_COLUMN: plan.pks, "partition_id": pa.array(parts)})
        objstore.write_ipc(path, table)

    def _remove_written(self) -> None:
        for d in self._dirs:
            objstore.remove_tree(d)
        objstore.remove_tree(layout.import_dir(self.storage, self.job_id))


async def finalize(node: DataNodeHost, job_id: int, ts: int, dirs: list[str]) -> None:
    """Stamp the committed segments with the import timestamp, then let the coord finish
    the job (also what a datanode does for a job whose executor went away)."""
    for d in dirs:
        await asyncio.to_thread(storage.set_import_ts, d, ts)
    finish = FinishImport(job_id=job_id, node_id=node.node_id)
    await retried("import.finish", lambda: ImportAPI(node.bus).finish(finish))


async def report_failure(node: DataNodeHost, job_id: int, reason: str, code: str) -> None:
    """Tell the coord a job failed here (it fails the job, or finishes it elsewhere)."""
    failed = FailImport(job_id=job_id, node_id=node.node_id, reason=reason, code=code)
    await retried("import.fail", lambda: ImportAPI(node.bus).fail(failed))


async def retried(method: str, call: Callable[[], Awaitable[R]]) -> R:
    """A call to the coord, retried for a while when it is away (restarting)."""
    delay = 0.1
    for attempt in range(40):
        try:
            return await call()
        except ElanusError as exc:
            if exc.code not in RETRYABLE or attempt == 39:
                raise
            log.warning("%s failed, retrying: %s", method, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


def _in_file(exc: ElanusError, name: str, first: int) -> ElanusError:
    where = f" (row numbers count from row {first} of the file)" if first else ""
    return ElanusError(exc.code, f"{name}: {exc.message}{where}")


def _internal(exc: BaseException) -> ElanusError:
    """An unexpected failure: its text may hold file content, so only its kind travels
    (the data node's log has the rest)."""
    log.warning("import failed unexpectedly", exc_info=exc)
    return ElanusError(
        ErrorCode.INTERNAL,
        f"the import failed unexpectedly ({type(exc).__name__}); the data node's log has details",
    )
