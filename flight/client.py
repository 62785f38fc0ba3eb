"""The Python SDK: a pymilvus-MilvusClient-shaped client over Arrow Flight.

Imports only pyarrow and Elanus's pure shared modules (never nats or duckdb), so
``import elanus`` stays light. Every server error surfaces as ``ElanusError`` with the
server's stable code; an unreachable proxy is ``UNAVAILABLE``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.client_index import BuilderAPI, IndexAPI
from elanus.flight.client_reads import ReadSchemaAPI
from elanus.flight.putresult import PutAck
from elanus.flight.wire import DEFAULT_DB, decode_body, encode_json, from_flight_error
from elanus.rows import to_arrow
from elanus.schema import Schema, check_name

ATOMIC_LIMIT_BYTES = 256 << 20
"""Inserts up to this size are checked whole before anything is written (the proxy's
default ``max_request_bytes``)."""
DEFAULT_BATCH_BYTES = 8 << 20
"""Rows per DoPut batch are sized to about this many bytes (one PutResult each)."""


class Client(IndexAPI, BuilderAPI, ReadSchemaAPI):
    """``Client("grpc://host:8815")``; methods mirror pymilvus's ``MilvusClient``."""

    def __init__(
        self, uri: str = "grpc://localhost:8815", timeout: float | None = None, db: str = DEFAULT_DB
    ) -> None:
        self.uri = uri
        self.timeout = timeout
        self._db = check_name(db, "database")
        self._last_write_ts = 0
        """The newest write of this client: what a Session-consistent read waits for."""
        try:
            self._flight: flight.FlightClient | None = flight.FlightClient(uri)
        except (pa.ArrowException, ValueError) as exc:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"bad proxy uri {uri!r}: {exc}") from None

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def db(self) -> str:
        """The database that calls without an explicit ``db`` act on."""
        return self._db

    def _conn(self) -> flight.FlightClient:
        if self._flight is None:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the client is closed")
        return self._flight

    def _options(self, timeout: float | None) -> flight.FlightCallOptions:
        t = timeout if timeout is not None else self.timeout
        return flight.FlightCallOptions(timeout=t) if t is not None else flight.FlightCallOptions()

    def _action(
        self, name: str, body: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """One DoAction round trip: JSON body in, the first result's JSON object out."""
        action = flight.Action(name, encode_json(body or {}))
        try:
            results = list(self._conn().do_action(action, self._options(timeout)))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        if not results:
            return {}
        try:
            return decode_body(results[0].body.to_pybytes(), f"{name} result")
        except ElanusError as exc:
            raise ElanusError(ErrorCode.INTERNAL, f"unreadable reply: {exc.message}") from None

    def _in_db(self, db: str | None, **body: Any) -> dict[str, Any]:
        return {"db": db or self._db, **body}

    def close(self) -> None:
        if self._flight is not None:
            self._flight.close()
            self._flight = None

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.uri!r}, db={self._db!r})"

    # -- collections ------------------------------------------------------------------------
    def create_collection(
        self,
        name: str,
        dimension: int | None = None,
        *,
        schema: Schema | dict[str, Any] | None = None,
        primary_field_name: str = "id",
        vector_field_name: str = "vector",
        id_type: str = "int64",
        auto_id: bool = False,
        metric_type: str = "COSINE",
        max_length: int | None = None,
        num_shards: int = 1,
        consistency_level: str | ConsistencyLevel = "Bounded",
        properties: dict[str, str] | None = None,
        description: str = "",
        db: str | None = None,
    ) -> dict[str, Any]:
        """Create from a ``Schema`` or by quick setup (``dimension``); returns the description."""
        body = self._in_db(
            db,
            name=name,
            num_shards=num_shards,
            consistency_level=str(consistency_level),
            properties=properties or {},
            description=description,
        )
        if schema is not None:
            body["schema"] = schema.to_dict() if isinstance(schema, Schema) else schema
        if dimension is not None:
            body.update(
                dimension=dimension,
                primary_field=primary_field_name,
                vector_field=vector_field_name,
                id_type=id_type,
                auto_id=auto_id,
                metric_type=metric_type,
                max_length=max_length,
            )
        return self._action("create_collection", body)

    def drop_collection(self, name: str, *, db: str | None = None) -> None:
        self._action("drop_collection", self._in_db(db, name=name))

    def has_collection(self, name: str, *, db: str | None = None) -> bool:
        return bool(self._action("has_collection", self._in_db(db, name=name))["value"])

    def describe_collection(self, name: str, *, db: str | None = None) -> dict[str, Any]:
        return self._action("describe_collection", self._in_db(db, name=name))

    def list_collections(self, *, db: str | None = None) -> list[str]:
        return list(self._action("list_collections", self._in_db(db))["names"])

    def rename_collection(
        self, old_name: str, new_name: str, new_db: str | None = None, *, db: str | None = None
    ) -> None:
        self._action(
            "rename_collection", self._in_db(db, name=old_name, new_name=new_name, new_db=new_db)
        )

    # -- partitions -------------------------------------------------------------------------
    def create_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> None:
        self._action("create_partition", self._partition(db, collection_name, partition_name))

    def drop_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> None:
        self._action("drop_partition", self._partition(db, collection_name, partition_name))

    def has_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> bool:
        body = self._partition(db, collection_name, partition_name)
        return bool(self._action("has_partition", body)["value"])

    def list_partitions(self, collection_name: str, *, db: str | None = None) -> list[str]:
        body = self._in_db(db, collection=collection_name)
        return list(self._action("list_partitions", body)["names"])

    def _partition(self, db: str | None, collection: str, partition: str) -> dict[str, Any]:
        return self._in_db(db, collection=collection, partition=partition)

    # -- databases --------------------------------------------------------------------------
    def create_database(self, db_name: str) -> None:
        self._action("create_database", {"name": db_name})

    def drop_database(self, db_name: str) -> None:
        self._action("drop_database", {"name": db_name})

    def list_databases(self) -> list[str]:
        return list(self._action("list_databases")["names"])

    def using_database(self, db_name: str) -> None:
        """Make ``db_name`` the database of later calls (checked by the server on use)."""
        self._db = check_name(db_name, "database")

    # -- control ----------------------------------------------------------------------------
    def list_sessions(self) -> list[dict[str, Any]]:
        return list(self._action("list_sessions")["sessions"])

    def health(self) -> dict[str, Any]:
        return self._action("health")

    def get_timestamp(self) -> int:
        """A fresh hybrid timestamp from the TSO (``physical_ms << 18 | logical``)."""
        return int(self._action("get_timestamp")["ts"])

    def list_actions(self) -> dict[str, str]:
        """Action name -> description, as the proxy lists them (Flight ListActions)."""
        try:
            actions = self._conn().list_actions(self._options(None))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        return {a.type: a.description for a in actions}

    # -- writes -----------------------------------------------------------------------------
    def _schema_of(self, collection_name: str, db: str | None) -> Schema:
        return Schema.from_dict(self.describe_collection(collection_name, db=db)["schema"])

    def _put(
        self,
        op: str,
        collection_name: str,
        data: Any,
        partition_name: str | None,
        db: str | None,
        timeout: float | None,
        batch_bytes: int,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
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
        command.update(extra or {})
        descriptor = flight.FlightDescriptor.for_command(encode_json(command))
        rows_per_batch = max(1, int(table.num_rows * batch_bytes / max(table.nbytes, 1)))
        acks: list[PutAck] = []
        errors: list[BaseException] = []
        try:
            writer, reader = self._conn().do_put(descriptor, table.schema, self._options(timeout))
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
        try:
            for batch in table.to_batches(max_chunksize=rows_per_batch):
                if errors:  # the server refused a batch: stop sending
                    break
                writer.write_batch(batch)
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
        pks = pa.concat_arrays([a.pks for a in acks]) if acks else pa.array([], pa.int64())
        self._last_write_ts = max([self._last_write_ts, *(a.ts for a in acks)])
        return {
            f"{op}_count": len(pks),
            "ids": pks.to_pylist(),
            "ts": max((a.ts for a in acks), default=0),
        }

    def insert(
        self,
        collection_name: str,
        data: Any,
        partition_name: str | None = None,
        *,
        db: str | None = None,
        timeout: float | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> dict[str, Any]:
        """Insert rows (Arrow table, list of dicts, dict of columns/numpy arrays).

        Returns ``{"insert_count", "ids", "ts"}`` once the log has acknowledged every row.
        """
        return self._put("insert", collection_name, data, partition_name, db, timeout, batch_bytes)

    def upsert(
        self,
        collection_name: str,
        data: Any,
        partition_name: str | None = None,
        *,
        db: str | None = None,
        timeout: float | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> dict[str, Any]:
        """Replace rows by primary key (a delete and an insert at one timestamp)."""
        return self._put("upsert", collection_name, data, partition_name, db, timeout, batch_bytes)

    # -- bulk import and staged writes ------------------------------------------------------
    def bulk_import(
        self,
        collection_name: str,
        files: list[Any],
        partition_name: str | None = None,
        *,
        options: dict[str, Any] | None = None,
        db: str | None = None,
    ) -> int:
        """Start a bulk import (Milvus's bulk insert); returns the job id.

        ``files`` are absolute paths as the data nodes see them: each a Parquet, JSON
        Lines or CSV file, or a list of ``.npy`` files (one per field, named after it).
        Every file is checked before anything is written; poll ``get_import_state`` or
        call ``wait_import``."""
        body = self._in_db(
            db,
            collection=collection_name,
            files=[[str(p) for p in f] if isinstance(f, list | tuple) else str(f) for f in files],
        )
        if partition_name:
            body["partition"] = partition_name
        if options:
            body["options"] = options
        return int(self._action("import", body)["job_id"])

    def get_import_state(self, job_id: int) -> dict[str, Any]:
        """``{"state": Pending|Importing|Completed|Failed, "progress": 0..1, "rows",
        "segment_ids", "reason", ...}``."""
        return self._action("get_import_state", {"job_id": int(job_id)})

    def wait_import(
        self, job_id: int, timeout: float | None = None, *, poll_s: float = 0.1
    ) -> dict[str, Any]:
        """Wait until the job completes (its rows are searchable); its final state.
        A failed job raises its reason as an ``ElanusError``; TIMEOUT after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.get_import_state(job_id)
            if state["state"] == "Completed":
                self._last_write_ts = max(self._last_write_ts, int(state.get("ts") or 0))
                return state
            if state["state"] == "Failed":
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
    ) -> list[dict[str, Any]]:
        body = self._in_db(db)
        if collection_name:
            body["collection"] = collection_name
        return list(self._action("list_import_jobs", body)["jobs"])

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
    ) -> dict[str, Any]:
        """Check and stage rows under ``write_id`` (invisible until ``commit_write``);
        returns ``{"insert_count", "ids"}`` (auto ids included). ``part`` names the writer
        (a Spark task attempt) so a commit can take only some parts."""
        extra: dict[str, Any] = {"stage": write_id}
        if part:
            extra["stage_part"] = part
        op = "upsert" if upsert else "insert"
        reply = self._put(
            op, collection_name, data, partition_name, db, timeout, batch_bytes, extra
        )
        count = reply.pop(f"{op}_count")
        reply.pop("ts", None)
        return {"insert_count": count, **reply}

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
    ) -> dict[str, Any]:
        """Make every row staged under ``write_id`` visible at one timestamp (with
        ``upsert``, older rows with the same keys go at that timestamp). Safe to repeat.
        ``expected_rows`` (what the writers staged) makes a commit that finds fewer fail.
        Returns ``{"job_id", "state": "Completed", "rows", "ts", "segment_ids"}``."""
        body = self._in_db(db, collection=collection_name, write_id=write_id, upsert=upsert)
        if parts is not None:
            body["parts"] = list(parts)
        if expected_rows is not None:
            body["expected_rows"] = int(expected_rows)
        reply = self._action("commit_write", body, timeout=timeout)
        if reply["state"] != "Completed":
            final = self.wait_import(int(reply["job_id"]), timeout)
            reply.update({k: final[k] for k in ("state", "rows", "ts", "segment_ids")})
        self._last_write_ts = max(self._last_write_ts, int(reply.get("ts") or 0))
        return reply

    def abort_write(self, write_id: str) -> bool:
        """Discard what is staged under ``write_id``; whether there was anything."""
        return bool(self._action("abort_write", {"write_id": write_id})["removed"])

    def delete(
        self,
        collection_name: str,
        ids: Any = None,
        partition_name: str | None = None,
        *,
        filter: str = "",
        filter_params: dict[str, Any] | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Delete by primary keys or by a ``filter`` expression (on a loaded collection);
        returns ``{"delete_count", "ts"}``."""
        if (ids is None) == (not filter):
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "delete needs 'ids' or a 'filter'")
        body = self._in_db(db, collection=collection_name)
        if filter:
            body["filter"] = filter
            if filter_params:
                body["filter_params"] = filter_params
        else:
            if isinstance(ids, int | str):
                ids = [ids]
            body["ids"] = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        if partition_name:
            body["partition"] = partition_name
        reply = self._action("delete", body, timeout=timeout)
        self._last_write_ts = max(self._last_write_ts, int(reply.get("ts", 0)))
        return reply

    def flush(
        self,
        collection_name: str,
        *,
        db: str | None = None,
        timeout: float | None = None,
        wait: bool = True,
        poll_s: float = 0.05,
    ) -> list[int]:
        """Seal and persist the collection's growing segments (seed 004).

        With ``wait`` (the default, as in pymilvus) returns once every sealed segment is
        Flushed; returns the segment ids either way.
        """
        reply = self._action("flush", self._in_db(db, collection=collection_name))
        ids = [int(i) for i in reply.get("segment_ids", [])]
        deadline = None if timeout is None else time.monotonic() + timeout
        while wait and ids and not self.get_flush_state(ids):
            if deadline is not None and time.monotonic() > deadline:
                raise ElanusError(ErrorCode.TIMEOUT, f"flush of {collection_name!r} timed out")
            time.sleep(poll_s)
        return ids

    def get_flush_state(self, segment_ids: list[int]) -> bool:
        return bool(self._action("get_flush_state", {"segment_ids": list(segment_ids)})["flushed"])

    def get_segment_info(
        self,
        collection_name: str | None = None,
        *,
        segment_ids: list[int] | None = None,
        db: str | None = None,
    ) -> list[dict[str, Any]]:
        """Segments of a collection (or the given ids): state, rows, vchannel, positions."""
        if segment_ids is not None:
            body: dict[str, Any] = {"segment_ids": list(segment_ids)}
        else:
            body = self._in_db(db, collection=collection_name)
        return list(self._action("get_segment_info", body)["segments"])

    def compact(self, collection_name: str, *, db: str | None = None) -> int:
        """Start merging small segments and dropping deleted rows; returns the job id."""
        reply = self._action("compact", self._in_db(db, collection=collection_name))
        return int(reply["compaction_id"])

    def get_compaction_state(self, compaction_id: int) -> str:
        """``"Executing"``, ``"Completed"`` (pymilvus's spelling) or ``"Failed"`` (the
        action's ``reason`` says why); an unknown id raises COMPACTION_NOT_FOUND."""
        reply = self._action("get_compaction_state", {"compaction_id": compaction_id})
        return str(reply["state"]).capitalize()

    # -- snapshot reads (parallel readers such as Spark) --------------------------------------
    def read_plan(
        self,
        collection_name: str,
        *,
        columns: list[str] | None = None,
        filter: str = "",
        filter_params: dict[str, Any] | None = None,
        partition_names: list[str] | None = None,
        snapshot_ts: int | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A snapshot read plan (Flight ``GetFlightInfo``): ``ts``, ``schema`` (Elanus),
        ``arrow_schema``, ``columns``, ``total_records`` and ``endpoints``, each with its
        ``ticket`` (bytes for :meth:`read_endpoint`), ``kind`` and ``rows``. Reading every
        endpoint gives the rows a query with ``as_of=ts`` returns."""
        descriptor = self._read_command(
            collection_name, db, columns, filter, filter_params, partition_names, snapshot_ts
        )
        try:
            info = self._conn().get_flight_info(descriptor, self._options(timeout))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        meta = decode_body(info.app_metadata, "read plan metadata")
        endpoints = []
        for e in info.endpoints:
            raw = e.ticket.ticket
            extra = decode_body(e.app_metadata, "read plan endpoint")
            endpoints.append({**decode_body(raw, "read plan ticket"), **extra, "ticket": raw})
        return {
            **meta,
            "arrow_schema": info.schema,
            "total_records": info.total_records,
            "endpoints": endpoints,
        }

    def read_endpoint(
        self, ticket: bytes, *, timeout: float | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The record batches of one read-plan ticket (Flight ``DoGet``)."""
        try:
            reader = self._conn().do_get(flight.Ticket(ticket), self._options(timeout))
            for chunk in reader:
                if chunk.data is not None and chunk.data.num_rows:
                    yield chunk.data
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None

    # -- reads ------------------------------------------------------------------------------
    def load_collection(
        self,
        collection_name: str,
        partition_names: list[str] | None = None,
        *,
        db: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Load a collection (or some of its partitions) into the query nodes."""
        body = self._in_db(db, collection=collection_name)
        if partition_names:
            body["partition_names"] = list(partition_names)
        return self._action("load_collection", body, timeout=timeout)

    def release_collection(self, collection_name: str, *, db: str | None = None) -> None:
        self._action("release_collection", self._in_db(db, collection=collection_name))

    def get_load_state(self, collection_name: str, *, db: str | None = None) -> dict[str, Any]:
        return self._action("get_load_state", self._in_db(db, collection=collection_name))

    def _read_options(
        self,
        body: dict[str, Any],
        consistency_level: str | None,
        guarantee_timestamp: int | None,
        as_of: int | None,
        partition_names: list[str] | None,
    ) -> dict[str, Any]:
        if consistency_level:
            try:
                body["consistency_level"] = str(ConsistencyLevel.parse(consistency_level))
            except ValueError as exc:
                raise ElanusError(ErrorCode.INVALID_ARGUMENT, str(exc)) from None
        if not guarantee_timestamp:  # used by Session reads, explicit or the default level
            guarantee_timestamp = self._last_write_ts
        if guarantee_timestamp:
            body["guarantee_timestamp"] = int(guarantee_timestamp)
        if as_of:
            body["as_of"] = int(as_of)
        if partition_names:
            body["partition_names"] = list(partition_names)
        return body

    def search(
        self,
        collection_name: str,
        data: Any,
        limit: int = 10,
        filter: str = "",
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        *,
        anns_field: str | None = None,
        offset: int = 0,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        guarantee_timestamp: int | None = None,
        as_of: int | None = None,
        partition_names: list[str] | None = None,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> list[list[dict[str, Any]]]:
        """pymilvus-style search: per query vector, hits ``{"id", "distance", "entity"}``;
        with ``group_by_field``, ``limit`` groups of up to ``group_size`` hits each."""
        vectors = (
            data.tolist()
            if hasattr(data, "tolist")
            else [v.tolist() if hasattr(v, "tolist") else v for v in data]
        )
        body = self._in_db(
            db,
            collection=collection_name,
            data=vectors,
            limit=limit,
            offset=offset,
            output_fields=list(output_fields or []),
        )
        if filter:
            body["filter"] = filter
        if filter_params:
            body["filter_params"] = filter_params
        if search_params:
            body["search_params"] = search_params
        if anns_field:
            body["anns_field"] = anns_field
        grouping = ("group_by_field", group_by_field), ("group_size", group_size)
        for key, value in (*grouping, ("strict_group_size", strict_group_size)):
            if value is not None:
                body[key] = value
        body = self._read_options(
            body, consistency_level, guarantee_timestamp, as_of, partition_names
        )
        return list(self._action("search", body, timeout=timeout)["results"])

    def query(
        self,
        collection_name: str,
        filter: str = "",
        output_fields: list[str] | None = None,
        *,
        ids: Any = None,
        limit: int | None = None,
        offset: int = 0,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        guarantee_timestamp: int | None = None,
        as_of: int | None = None,
        partition_names: list[str] | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Rows matching a filter (or the given ids; an empty filter takes a ``limit``);
        ``["count(*)"]`` counts them. Without ``output_fields`` every field and dynamic key
        comes back (``["*"]``), as pymilvus's MilvusClient asks; the primary key always."""
        body = self._in_db(
            db,
            collection=collection_name,
            output_fields=list(output_fields or ["*"]),
            offset=offset,
        )
        if ids is not None:
            body["ids"] = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        else:
            body["filter"] = filter
        if limit is not None:
            body["limit"] = limit
        if filter_params:
            body["filter_params"] = filter_params
        body = self._read_options(
            body, consistency_level, guarantee_timestamp, as_of, partition_names
        )
        return list(self._action("query", body, timeout=timeout)["rows"])

    def get(
        self, collection_name: str, ids: Any, output_fields: list[str] | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Rows by primary key."""
        ids = [ids] if isinstance(ids, int | str) else ids
        return self.query(collection_name, output_fields=output_fields, ids=ids, **kwargs)

    def get_collection_stats(
        self, collection_name: str, *, db: str | None = None
    ) -> dict[str, Any]:
        """``{"row_count"}``: rows persisted in flushed segments (Milvus's num_entities)."""
        return self._action("get_collection_stats", self._in_db(db, collection=collection_name))

    def query_iterator(
        self,
        collection_name: str,
        filter: str = "",
        output_fields: list[str] | None = None,
        *,
        batch_size: int = 1000,
        limit: int | None = None,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        partition_names: list[str] | None = None,
        db: str | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """Pages of rows in primary-key order, all read at the first page's timestamp, so
        results of any size stream without holding them all (pymilvus's query_iterator)."""
        schema = self._schema_of(collection_name, db)
        pk = schema.primary.name
        fields = list(output_fields or [pk])
        if pk not in fields:
            fields.append(pk)
        base = f"({filter})" if filter else ""
        params = dict(filter_params or {})
        last: Any = None
        as_of: int | None = None
        left = limit
        while left is None or left > 0:
            size = batch_size if left is None else min(batch_size, left)
            expr = base
            if last is not None:
                params["__after"] = last
                expr = f"{base} and {pk} > {{__after}}" if base else f"{pk} > {{__after}}"
            body = self._in_db(
                db,
                collection=collection_name,
                output_fields=fields,
                limit=size,
                filter=expr or f"{pk} == {pk}",
            )
            if params:
                body["filter_params"] = params
            body = self._read_options(
                body, consistency_level if as_of is None else None, None, as_of, partition_names
            )
            reply = self._action("query", body)
            rows = reply["rows"]
            if not rows:
                return
            as_of = as_of or int(reply["ts"])
            last = rows[-1][pk]
            yield rows
            if left is not None:
                left -= len(rows)
            if len(rows) < size:
                return
