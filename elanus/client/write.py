"""The write half of the SDK (mixed into ``Client``): inserts and upserts over DoPut,
deletes, flush and compaction (bulk imports and staged writes: ``client_import``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.base import ClientBase
from elanus.client.bodyalign import BodyAligner
from elanus.client.compat import reject_unknown
from elanus.client.replies import InsertResult, PutOptions, UpsertResult
from elanus.client.retry import retrying
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.ops import segments as segment_ops
from elanus.ops.replies import DeleteResult, PrimaryKey, SegmentRecord, Segments
from elanus.ops.writes import Delete
from elanus.rows import same_fields, to_arrow
from elanus.wire.codec import encode_json, from_flight_error
from elanus.wire.putresult import PutAck

ATOMIC_LIMIT_BYTES = 256 << 20
"""Inserts up to this size are checked whole before anything is written (the proxy's
default ``max_request_bytes``)."""
DEFAULT_BATCH_BYTES = 8 << 20
"""Rows per DoPut batch are sized to about this many bytes (one PutResult each)."""


class WriteAPI(ClientBase):
    def _put(
        self,
        op: str,
        collection_name: str,
        data: Any,
        partition_name: str | None,
        db: str | None,
        timeout: float | None,
        batch_bytes: int,
        options: PutOptions | None = None,
    ) -> tuple[list[PrimaryKey], int]:
        """Stream ``data`` with DoPut; the primary keys written and the newest timestamp."""
        table = to_arrow(data, self._schema_of(collection_name, db))
        # All or nothing for bad input, up to the server's request limit; larger inserts
        # stream batch by batch (each batch still checked whole before it is written).
        command = {
            "op": op,
            "collection": collection_name,
            "db": db or self._db,
            "atomic": table.nbytes <= ATOMIC_LIMIT_BYTES,
        }
        if partition_name:
            command["partition"] = partition_name
        command.update(options or {})
        descriptor = flight.FlightDescriptor.for_command(encode_json(command))
        rows_per_batch = max(1, int(table.num_rows * batch_bytes / max(table.nbytes, 1)))
        acks = retrying(
            lambda: self._stream(
                descriptor, table.schema, table.to_batches(max_chunksize=rows_per_batch), timeout
            ),
            self.retry_deadline_s,
            self.on_retry,
            one_request=bool(command["atomic"]),
        )
        pks = pa.concat_arrays([a.pks for a in acks]) if acks else pa.array([], pa.int64())
        ts = max((a.ts for a in acks), default=0)
        self._saw_write(ts)
        return pks.to_pylist(), ts

    def _stream(
        self,
        descriptor: flight.FlightDescriptor,
        schema: pa.Schema,
        batches: Iterable[pa.RecordBatch],
        timeout: float | None,
    ) -> list[PutAck]:
        """One DoPut of ``batches``: their acks, or the server's first error."""
        acks: list[PutAck] = []
        errors: list[BaseException] = []
        try:
            writer, reader = self._conn().do_put(descriptor, schema, self._options(timeout))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None

        def read_acks() -> None:  # acks stream back while later batches are still sent
            try:
                while (buf := reader.read()) is not None:
                    acks.append(PutAck.decode(buf))
            except BaseException as exc:  # noqa: BLE001 - reported by the caller
                errors.append(exc)

        acker = threading.Thread(target=read_acks, name="elanus-put-acks", daemon=True)
        acker.start()
        aligner = BodyAligner()
        try:
            for batch in batches:
                if errors:  # the server refused a batch: stop sending
                    break
                pad = aligner.padding(batch)  # the body lands 8-aligned: no copy downstream
                if pad is None:
                    writer.write_batch(batch)
                else:
                    writer.write_with_metadata(batch, pad)
            writer.done_writing()
            acker.join()
        except (flight.FlightError, pa.ArrowException) as exc:
            errors.insert(0, exc)
        finally:
            try:  # always end the call, or the server keeps it open
                writer.close()
            except (flight.FlightError, pa.ArrowException) as exc:
                errors.append(exc)
            acker.join(timeout=5)
        if errors:
            first = errors[0]
            if isinstance(first, flight.FlightError | pa.ArrowException):
                raise from_flight_error(first) from None
            raise first
        return acks

    def insert(
        self,
        collection_name: str,
        data: Any,
        timeout: float | None = None,
        partition_name: str | None = "",
        *,
        db: str | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        **kwargs: Any,
    ) -> InsertResult:
        """Insert rows (Arrow table, list of dicts, dict of columns/numpy arrays).

        Returns ``{"insert_count", "ids", "ts"}`` once the log has acknowledged every row.
        """
        reject_unknown("insert", kwargs)
        ids, ts = self._put(
            "insert", collection_name, data, partition_name, db, timeout, batch_bytes
        )
        return InsertResult(insert_count=len(ids), ids=ids, ts=ts)

    def upsert(
        self,
        collection_name: str,
        data: Any,
        timeout: float | None = None,
        partition_name: str | None = "",
        *,
        db: str | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        partial_update: bool = False,
        field_ops: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> UpsertResult:
        """Replace rows by primary key (a delete and an insert at one timestamp).

        With ``partial_update`` the rows may leave fields out: a stored row keeps what they
        omit (its dynamic keys are merged), a new key is inserted with defaults or nulls
        (a field with neither refuses the request). ``field_ops`` maps Array fields to
        ``"array_append"`` or ``"array_remove"`` (and implies ``partial_update``), as
        Milvus 2.6's ``upsert(..., field_ops=...)``. Every row must give the same fields.
        """
        reject_unknown("upsert", kwargs)
        mode: PutOptions | None = None
        if partial_update or field_ops:
            if isinstance(data, list | tuple):
                same_fields(data, self._schema_of(collection_name, db))
            mode = PutOptions(partial_update=True, field_ops=dict(field_ops or {}))
        ids, ts = self._put(
            "upsert", collection_name, data, partition_name, db, timeout, batch_bytes, mode
        )
        return UpsertResult(upsert_count=len(ids), ids=ids, ts=ts)

    def delete(
        self,
        collection_name: str,
        ids: Any = None,
        timeout: float | None = None,
        filter: str | None = None,
        partition_name: str | None = None,
        *,
        filter_params: dict[str, Any] | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> DeleteResult:
        """Delete by primary keys or by a ``filter`` expression (on a loaded collection);
        returns ``{"delete_count", "ts"}``."""
        reject_unknown("delete", kwargs)
        if (ids is None) == (not filter):
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "delete needs 'ids' or a 'filter'")
        if not filter:
            ids = [ids] if isinstance(ids, int | str) else ids
            ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        op = Delete(
            db=self._db_or_own(db),
            collection=collection_name,
            filter=filter or None,
            filter_params=(filter_params or None) if filter else None,
            ids=None if filter else ids,
            partition=partition_name or None,
        )
        reply = retrying(
            lambda: self._reply(op, DeleteResult, timeout=timeout),
            self.retry_deadline_s,
            self.on_retry,
            one_request=True,
        )
        self._saw_write(int(reply.get("ts", 0)))
        return reply

    def flush(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        wait: bool = True,
        poll_s: float = 0.05,
        **kwargs: Any,
    ) -> list[int]:
        """Seal and persist the collection's growing segments (seed 004).

        With ``wait`` (the default, as in pymilvus) returns once every sealed segment is
        Flushed; returns the segment ids either way.
        """
        reject_unknown("flush", kwargs)
        op = segment_ops.Flush(db=self._db_or_own(db), collection=collection_name)
        reply = self._op(op, timeout=timeout)
        ids = [int(i) for i in reply.get("segment_ids", [])]
        deadline = None if timeout is None else time.monotonic() + timeout
        while wait and ids and not self.get_flush_state(ids):
            if deadline is not None and time.monotonic() > deadline:
                raise ElanusError(ErrorCode.TIMEOUT, f"flush of {collection_name!r} timed out")
            time.sleep(poll_s)
        return ids

    def get_flush_state(self, segment_ids: list[int]) -> bool:
        return bool(self._op(segment_ops.GetFlushState(segment_ids=list(segment_ids)))["flushed"])

    def get_segment_info(
        self,
        collection_name: str | None = None,
        *,
        segment_ids: list[int] | None = None,
        db: str | None = None,
    ) -> list[SegmentRecord]:
        """Segments of a collection (or the given ids): state, rows, vchannel, positions."""
        if segment_ids is not None:
            op = segment_ops.GetSegmentInfo(segment_ids=list(segment_ids))
        else:
            op = segment_ops.GetSegmentInfo(db=self._db_or_own(db), collection=collection_name)
        return list(self._reply(op, Segments)["segments"])

    def compact(
        self,
        collection_name: str,
        is_clustering: bool | None = False,
        is_l0: bool | None = False,
        target_size: int | None = None,
        target_size_unit: str = "mb",
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> int:
        """Start merging small segments and dropping deleted rows; returns the job id.
        ``target_size`` (in ``target_size_unit``: b, kb, mb, gb, tb, pb) is Milvus's force
        merge: targets of up to that size. ``is_clustering``: a clustering compaction (the
        collection needs a clustering key), into segments of contiguous key ranges of up to
        that size (else the segment row limit). Elanus has no L0-only compaction: asking for
        one is refused."""
        if is_l0:
            kwargs["is_l0"] = is_l0
        reject_unknown("compact", kwargs)
        target = None if target_size is None else _megabytes(target_size, target_size_unit)
        op = segment_ops.Compact(
            db=self._db_or_own(db),
            collection=collection_name,
            target_size_mb=target,
            clustering=True if is_clustering else None,
        )
        return int(self._op(op, timeout=timeout)["compaction_id"])

    def get_compaction_state(self, job_id: int, timeout: float | None = None, **kwargs: Any) -> str:
        """``"Executing"``, ``"Completed"`` (pymilvus's spelling) or ``"Failed"`` (the
        action's ``reason`` says why); an unknown id raises COMPACTION_NOT_FOUND."""
        reject_unknown("get_compaction_state", kwargs)
        op = segment_ops.GetCompactionState(compaction_id=int(job_id))
        reply = self._op(op, timeout=timeout)
        return str(reply["state"]).capitalize()


_UNIT_BYTES = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}


def _megabytes(size: int, unit: str) -> int:
    """A compaction's target size in whole MB, as pymilvus converts it (rounded down;
    at least 1 MB)."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise invalid(f"target_size must be a positive int, got {size!r}")
    factor = _UNIT_BYTES.get(str(unit).lower())
    if factor is None:
        units = ", ".join(_UNIT_BYTES)
        raise invalid(f"target_size_unit {unit!r} is not one of {units}")
    mb = size * factor >> 20
    if mb < 1:
        raise invalid(f"target size {size}{unit} is under 1 MB")
    return mb
