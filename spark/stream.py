"""The ``elanus`` source's streaming half: a collection's change stream in Structured
Streaming (Spark >= 4.0's Python ``DataSourceStreamReader``).

    spark.readStream.format("elanus").option("uri", "grpc://host:8815")
         .option("collection", "docs").option("since", "earliest").load()

Rows are the change stream's (``elanus/client/changes.py``: ``_op``, ``_ts``, then the
fields, all nullable since a delete has only its key), read from the log on the
executors, one partition per vchannel and micro-batch, never through the proxy. An
offset is a position per vchannel (``{vchannel: {seq, ts, upto}}``) kept in the query's
checkpoint; a micro-batch's read is the same whenever it runs again, so a restarted query
writes each change once into a sink that commits by batch (the file sink).

Options: ``uri``, ``collection`` (or ``load(name)``), ``db``, ``since`` (required:
``earliest``, ``latest`` or a hybrid timestamp; it also makes ``load`` a stream),
``nats_user`` / ``nats_password`` (the log's credentials; else the executors'
``ELANUS_NATS_USER`` / ``ELANUS_NATS_PASSWORD``), ``timeout`` (seconds per call, default
30), and the connection options of the batch reader (``tls_ca``, credentials).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType

from elanus.client.changes import OP, TS, ChangeLog, LogCoordinates, Position
from elanus.client.client import Client
from elanus.errors import invalid
from elanus.schema import Schema
from elanus.spark.options import CONNECT_OPTIONS, client_options, target_options
from elanus.spark.types import arrow_target, conform, spark_schema
from elanus.wire.codec import DEFAULT_DB

STREAM_OPTIONS = (
    "uri",
    "collection",
    "path",
    "db",
    "since",
    "nats_user",
    "nats_password",
    "timeout",
    *CONNECT_OPTIONS,
)


@dataclass(frozen=True)
class StreamOptions:
    uri: str
    collection: str
    since: str
    db: str = DEFAULT_DB
    timeout: float = 30.0
    log_login: dict[str, str] = field(default_factory=dict, repr=False)
    connect: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        given, uri, collection = target_options(options, STREAM_OPTIONS)
        since = given.get("since")
        if not since:
            raise invalid("readStream needs option 'since': earliest, latest or a timestamp")
        try:
            timeout = float(given.get("timeout") or 30.0)
        except ValueError:
            raise invalid(f"option 'timeout' must be a number, got {given['timeout']!r}") from None
        login = {
            k.removeprefix("nats_"): given[k]
            for k in ("nats_user", "nats_password")
            if given.get(k)
        }
        return cls(
            uri, collection, since, given.get("db") or DEFAULT_DB, timeout, login,
            client_options(given),
        )  # fmt: skip

    def coordinates(self) -> LogCoordinates:
        with Client(self.uri, timeout=self.timeout, db=self.db, **self.connect) as client:
            return client.watch_coordinates(self.collection)

    def log(self, coords: LogCoordinates) -> ChangeLog:
        return ChangeLog(coords, timeout=self.timeout, **self.log_login)


def change_schema(schema: Schema) -> StructType:
    """``_op``, ``_ts``, then the collection's columns, nullable (a delete's are null)."""
    fields = [StructField(f.name, f.dataType, True) for f in spark_schema(schema).fields]
    return StructType(
        [StructField(OP, StringType(), False), StructField(TS, LongType(), False), *fields]
    )


def stream_schema(options: Mapping[str, str]) -> StructType:
    opts = StreamOptions.parse(options)
    return change_schema(opts.coordinates().schema)


class ChangePartition(InputPartition):
    """One vchannel's changes between two positions."""

    def __init__(self, index: int, vchannel: str, start: list[int], end: list[int]) -> None:
        super().__init__(index)
        self.vchannel, self.start, self.end = vchannel, start, end


class ElanusStreamReader(DataSourceStreamReader):
    """Offsets on the driver (positions from the log's ticks), reads on the executors.
    Picklable: options and the log's coordinates, never a connection."""

    def __init__(self, options: StreamOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.coords = options.coordinates()
        self._latest: dict[str, Any] | None = None

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's names
        with self.options.log(self.coords) as log:
            return _offset(log.starts(self.options.since))

    def latestOffset(  # noqa: N802
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """The newest tick's positions (Spark 4.0 passes no ``start``: the last end)."""
        begin = start or self._latest or self.initialOffset()
        with self.options.log(self.coords) as log:
            self._latest = _offset(log.ends(_positions(begin, self.coords)))
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = _positions(start, self.coords), _positions(end, self.coords)
        return [
            ChangePartition(i, v, first[v].to_json(), last[v].to_json())
            for i, v in enumerate(sorted(last))
            if last[v].ts > first[v].ts
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangePartition)
        v = partition.vchannel
        with self.options.log(self.coords) as log:
            table = log.read(
                v, Position.from_json(partition.start, v), Position.from_json(partition.end, v)
            )
        target = arrow_target(self.schema)
        for batch in table.to_batches(max_chunksize=8192):
            yield conform(batch, target)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # the log's purges follow the datanodes' checkpoints, not the readers'


def _offset(positions: dict[str, Position]) -> dict[str, Any]:
    return {
        v: dict(zip(("seq", "ts", "upto"), p.to_json(), strict=True)) for v, p in positions.items()
    }


def _positions(offset: dict[str, Any], coords: LogCoordinates) -> dict[str, Position]:
    """An offset from Spark's checkpoint, checked against the collection's vchannels."""
    known = {c.vchannel for c in coords.channels}
    if not isinstance(offset, dict) or set(offset) != known:
        named = sorted(offset) if isinstance(offset, dict) else offset
        raise invalid(
            f"the checkpoint's offset names vchannels {named!r}, the collection has "
            f"{sorted(known)}: start the query with a new checkpoint"
        )
    out = {}
    for v, p in offset.items():
        value = [p.get(k) for k in ("seq", "ts", "upto")] if isinstance(p, dict) else p
        out[v] = Position.from_json(value, v)
    return out
