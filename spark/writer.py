"""Writes of the ``elanus`` data source: ``df.write.format("elanus")...mode("append").save()``.

Each Spark task streams its Arrow batches to the proxy as a *staged* DoPut (checked like
an insert, auto ids assigned, but written to staging files instead of the log) under the
job's write id and its own part name (partition and attempt). Nothing is visible until
the driver's ``commit`` asks the coord to make the parts of the successful tasks visible
at one timestamp (``commit_write``); ``abort`` removes the staging files. So a job that
fails, or is cancelled, leaves no row behind, and a retried task's failed attempt is not
committed twice.

Options: ``uri``, ``collection`` (or ``save(collection)``), ``db``, ``partition`` (a
partition name), ``upsert`` (``true``: rows replace those with the same primary keys, at
the commit timestamp), ``batch_bytes`` (bytes per DoPut batch, default 8 MiB),
``timeout`` (seconds per call, default 600), ``tls_ca`` (PEM file of the CA of a
``grpc+tls://`` proxy, read on the driver). Spark's ``overwrite`` mode is refused:
Milvus has no overwrite; drop and create the collection instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from elanus.client.client import Client
from elanus.errors import invalid
from elanus.spark.options import CONNECT_OPTIONS, client_options, target_options
from elanus.states import ImportJobState
from elanus.wire.codec import DEFAULT_DB

WRITE_OPTIONS = (
    "uri",
    "collection",
    "path",
    "db",
    "partition",
    "upsert",
    "batch_bytes",
    "timeout",
    *CONNECT_OPTIONS,
)
DEFAULT_BATCH_BYTES = 8 << 20
STREAM_BYTES = 1 << 30
"""A task's batches go in DoPut streams of about this many bytes: one stream pipelines
Spark, the network and the proxy's staging; a new one keeps under ``max_put_bytes``."""


@dataclass(frozen=True)
class WriteOptions:
    uri: str
    collection: str
    db: str = DEFAULT_DB
    partition: str | None = None
    upsert: bool = False
    batch_bytes: int = DEFAULT_BATCH_BYTES
    timeout: float = 600.0
    connect: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """``Client`` keyword arguments (``options.client_options``)."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        given, uri, collection = target_options(options, WRITE_OPTIONS, "write option")
        upsert = (given.get("upsert") or "false").lower()
        if upsert not in ("true", "false"):
            raise invalid(f"option 'upsert' must be true or false, got {given['upsert']!r}")
        try:
            batch_bytes = int(given.get("batch_bytes") or DEFAULT_BATCH_BYTES)
            timeout = float(given.get("timeout") or 600.0)
        except ValueError as exc:
            raise invalid(f"bad number in the elanus write options: {exc}") from None
        if batch_bytes < 1 or timeout <= 0:
            raise invalid("options 'batch_bytes' and 'timeout' must be positive")
        return cls(
            uri=uri,
            collection=collection,
            db=given.get("db") or DEFAULT_DB,
            partition=given.get("partition") or None,
            upsert=upsert == "true",
            batch_bytes=batch_bytes,
            timeout=timeout,
            connect=client_options(given),
        )

    def client(self) -> Client:
        return Client(self.uri, timeout=self.timeout, db=self.db, **self.connect)


@dataclass
class StagedPart(WriterCommitMessage):
    """What one task staged: its part name and row count."""

    part: str
    rows: int


class ElanusWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.write_id = f"spark_{uuid.uuid4().hex}"
        with options.client() as client:  # fail on the driver, before any task runs
            client.describe_collection(options.collection)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedPart:
        """One task: stage its batches (runs on an executor)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = f"p{ctx.partitionId()}_a{ctx.attemptNumber()}" if ctx else f"p_{uuid.uuid4().hex}"
        opts = self.options
        rows = 0
        with opts.client() as client:
            batches = _rebatch(iterator, opts.batch_bytes)
            while (stream := _stream_of(batches)) is not None:
                rows += client.stage_batches(
                    opts.collection, stream, self.write_id, opts.partition,
                    upsert=opts.upsert, part=part,
                )  # fmt: skip
        return StagedPart(part, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        parts = [m for m in messages if isinstance(m, StagedPart)]
        opts = self.options
        with opts.client() as client:
            reply = client.commit_write(
                opts.collection,
                self.write_id,
                upsert=opts.upsert,
                parts=[p.part for p in parts],
                expected_rows=sum(p.rows for p in parts),
            )
            if reply.get("state") != ImportJobState.COMPLETED:
                client.wait_import(int(reply["job_id"]), timeout=opts.timeout)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        with self.options.client() as client:
            client.abort_write(self.write_id)


def _rebatch(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """Spark's Arrow batches joined into batches of about ``limit`` bytes (one staged file
    per shard each)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, size = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _stream_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """The next batches for one DoPut stream (up to ``STREAM_BYTES``, under the proxy's
    ``max_put_bytes``), or None when there are no more."""
    first = next(batches, None)
    if first is None:
        return None

    def stream() -> Iterator[pa.RecordBatch]:
        size, batch = 0, first
        while True:
            yield batch
            size += batch.nbytes
            if size >= STREAM_BYTES:
                return
            following = next(batches, None)
            if following is None:
                return
            batch = following

    return stream()
