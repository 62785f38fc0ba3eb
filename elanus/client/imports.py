"""The SDK's bulk imports and staged writes (mixed into ``Client``): imports of files
(uploaded first when the server cannot read them in place) and writes staged by many
writers, made visible at one timestamp by ``commit_write``."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.replies import PutOptions
from elanus.client.upload import import_with_uploads, is_loopback, upload
from elanus.client.write import DEFAULT_BATCH_BYTES, WriteAPI
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import imports as ops
from elanus.ops.replies import PrimaryKey
from elanus.states import ImportJobState
from elanus.wire.codec import encode_json


class StagedRows(TypedDict):
    """What ``stage_insert`` returns: the rows staged and their keys (auto ids included)."""

    insert_count: int
    ids: list[PrimaryKey]


class ImportAPI(WriteAPI):
    """Staged writes go through ``WriteAPI``'s DoPut, with a write id."""

    def bulk_import(
        self,
        collection_name: str,
        files: list[Any],
        partition_name: str | None = None,
        *,
        options: dict[str, str] | None = None,
        db: str | None = None,
        upload: bool | None = None,
    ) -> int:
        """Start a bulk import (Milvus's bulk insert); returns the job id.

        ``files``: each a Parquet, JSON Lines or CSV file, or a list of ``.npy`` files (one
        per field, named after it). A path that exists here is a local file; the server
        reads it in place when it can (a server on this machine, the file inside its
        import roots), else it is uploaded first (``upload=True``: always; ``False``:
        never). Other paths are the server's, inside its import roots (relative: under the
        first root). Every file is checked before anything is written; poll
        ``get_import_state`` or call ``wait_import``."""
        entries = [[str(p) for p in f] if isinstance(f, list | tuple) else str(f) for f in files]

        def start(named: list[Any]) -> int:
            op = ops.Import(
                db=self._db_or_own(db),
                collection=collection_name,
                files=named,
                partition=partition_name or None,
                options=options or None,
            )
            return self._reply(op, ops.ImportStarted)["job_id"]

        return import_with_uploads(
            entries,
            start,
            lambda path: self.upload_file(collection_name, path, db=db),
            upload_mode=upload,
            loopback=is_loopback(self.uri),
        )

    def upload_file(
        self, collection_name: str, path: str | os.PathLike[str], *, db: str | None = None
    ) -> str:
        """Stream a local file into the server's import area (for an import into
        ``collection_name``); returns the server path to import. The server removes it
        when the import that reads it ends, or after a while if none does."""
        command = self._in_db(db, collection=collection_name)
        return str(upload(self._conn(), self._options(None), command, path)["path"])

    def get_import_state(self, job_id: int) -> ops.ImportJob:
        """``{"state": Pending|Importing|Completed|Failed, "progress": 0..1, "rows",
        "segment_ids", "reason", ...}``."""
        return self._reply(ops.GetImportState(job_id=int(job_id)), ops.ImportJob)

    def wait_import(
        self, job_id: int, timeout: float | None = None, *, poll_s: float = 0.1
    ) -> ops.ImportJob:
        """Wait until the job completes (its rows are searchable); its final state.
        A failed job raises its reason as an ``ElanusError``; TIMEOUT after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.get_import_state(job_id)
            if state["state"] == ImportJobState.COMPLETED:
                self._saw_write(int(state.get("ts") or 0))
                return state
            if state["state"] == ImportJobState.FAILED:
                code = state.get("reason_code") or ErrorCode.INTERNAL
                raise ElanusError(code, f"import job {job_id} failed: {state.get('reason')}")
            if deadline is not None and time.monotonic() > deadline:
                raise ElanusError(
                    ErrorCode.TIMEOUT,
                    f"import job {job_id} is still {state['state']} after {timeout}s "
                    f"({state.get('progress', 0):.0%})",
                )
            time.sleep(poll_s)

    def list_import_jobs(
        self, collection_name: str | None = None, *, db: str | None = None
    ) -> list[ops.ImportJob]:
        op = ops.ListImportJobs(db=self._db_or_own(db), collection=collection_name or None)
        return list(self._reply(op, ops.ImportJobList)["jobs"])

    def stage_insert(
        self,
        collection_name: str,
        data: Any,
        write_id: str,
        partition_name: str | None = None,
        *,
        upsert: bool = False,
        part: str | None = None,
        db: str | None = None,
        timeout: float | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> StagedRows:
        """Check and stage rows under ``write_id`` (invisible until ``commit_write``);
        returns ``{"insert_count", "ids"}`` (auto ids included). ``part`` names the writer
        (a Spark task attempt) so a commit can take only some parts."""
        options = PutOptions(stage=write_id)
        if part:
            options["stage_part"] = part
        op = "upsert" if upsert else "insert"
        ids, _ = self._put(
            op, collection_name, data, partition_name, db, timeout, batch_bytes, options
        )
        return StagedRows(insert_count=len(ids), ids=ids)

    def stage_batches(
        self,
        collection_name: str,
        batches: Iterable[pa.RecordBatch],
        write_id: str,
        partition_name: str | None = None,
        *,
        upsert: bool = False,
        part: str | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> int:
        """``stage_insert`` of a stream of batches (one schema) in one DoPut: each batch is
        sent while the server checks and stages the one before, instead of a call per
        batch; the rows staged. Not retried (the batches are gone once sent): a writer
        that fails stages again under another ``part``, and commits only the parts that
        succeeded (the Spark writer)."""
        stream = iter(batches)
        first = next(stream, None)
        if first is None:
            return 0
        op = "upsert" if upsert else "insert"
        command: dict[str, str | bool] = {
            "op": op, "collection": collection_name, "db": db or self._db, "atomic": False,
            "stage": write_id,
        }  # fmt: skip
        if partition_name:
            command["partition"] = partition_name
        if part:
            command["stage_part"] = part
        descriptor = flight.FlightDescriptor.for_command(encode_json(command))
        acks = self._stream(descriptor, first.schema, itertools.chain([first], stream), timeout)
        return sum(len(a.pks) for a in acks)

    def commit_write(
        self,
        collection_name: str,
        write_id: str,
        *,
        upsert: bool = False,
        parts: list[str] | None = None,
        expected_rows: int | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> ops.WriteCommitted:
        """Make every row staged under ``write_id`` visible at one timestamp (with
        ``upsert``, older rows with the same keys go at that timestamp). Safe to repeat.
        ``expected_rows`` (what the writers staged) makes a commit that finds fewer fail.
        Returns ``{"job_id", "state": "Completed", "rows", "ts", "segment_ids"}``."""
        op = ops.CommitWrite(
            db=self._db_or_own(db),
            collection=collection_name,
            write_id=write_id,
            upsert=upsert,
            parts=None if parts is None else list(parts),
            expected_rows=None if expected_rows is None else int(expected_rows),
        )
        reply = self._reply(op, ops.WriteCommitted, timeout=timeout)
        if reply["state"] != ImportJobState.COMPLETED:
            final = self.wait_import(int(reply["job_id"]), timeout)
            reply = ops.WriteCommitted(
                job_id=reply["job_id"], state=final["state"], rows=final["rows"],
                ts=final["ts"], segment_ids=final["segment_ids"],
            )  # fmt: skip
        self._saw_write(int(reply.get("ts") or 0))
        return reply

    def abort_write(self, write_id: str) -> bool:
        """Discard what is staged under ``write_id``; whether there was anything."""
        return self._reply(ops.AbortWrite(write_id=write_id), ops.WriteDiscarded)["removed"]
