"""The ``elanus`` PySpark data source (Spark >= 4.0 Python data source API): reads.

    spark.read.format("elanus").option("uri", "grpc://host:8815")
         .option("collection", "docs").load()

Planning asks the proxy for a snapshot read plan (Flight GetFlightInfo): one Spark
partition per sealed segment, read straight from its Lance files when this machine can
see them (else through the proxy), plus one per vchannel for the growing data, read
through the proxy. A collection that is not loaded needs no load: its plan is files-only
(``flight/search/fileplan.py``: flushed first, one partition per flushed segment, read
from its files). Every partition reads at the plan's timestamp, so the DataFrame equals
a ``query`` with ``as_of`` that timestamp. (Spark 4.x keeps the first read plan of a
loaded DataFrame for its later actions, so one ``load()`` is one snapshot there; Spark 5
plans every scan anew. ``snapshot_ts`` pins one either way.)

Options: ``uri`` and ``collection`` (or ``load(collection)``), ``db``, ``partitions``
(comma list of partition names), ``snapshot_ts`` (a hybrid timestamp inside the retention
window), ``filter`` (an Elanus expression) with ``filter_params`` (a JSON object),
``columns`` (comma list: column pruning), ``batch_size`` (rows per Arrow batch, default
8192), ``direct`` (``auto``: read sealed segments from their files when present; ``true``;
``false``: always through the proxy), ``files_only`` (``true``: a files-only plan even
for a loaded collection, flushed first; a collection that is not loaded always gets one),
``pushdown`` (``auto``: take Spark's filters from
Spark 5 on, see ``safe_pushdown``; ``true``; ``false``), ``timeout`` (seconds per call,
default 120), ``tls_ca`` (PEM file of the CA of a ``grpc+tls://`` proxy, read on the
driver).

Column pruning: Spark (4.3) tells Python readers nothing about the columns a query uses,
so the read covers the DataFrame's schema: all columns, or those named by ``columns``,
or those of a schema the caller gives (``spark.read.schema("id long, title string")``).
Filters Spark pushes (needs ``spark.sql.python.filterPushdown.enabled``, which
``elanus.spark.session`` sets) become an Elanus expression applied in every partition;
those that do not translate are handed back to Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from elanus.client.client import Client
from elanus.errors import invalid
from elanus.schema import Schema
from elanus.spark import segment_files
from elanus.spark.filters import translate_all
from elanus.spark.options import CONNECT_OPTIONS, client_options, target_options
from elanus.spark.types import arrow_target, conform, spark_schema
from elanus.wire.codec import DEFAULT_DB, decode_body

MODES = ("auto", "true", "false")
OPTIONS = (
    "uri",
    "collection",
    "path",
    "db",
    "partitions",
    "snapshot_ts",
    "filter",
    "filter_params",
    "columns",
    "batch_size",
    "direct",
    "pushdown",
    "files_only",
    "timeout",
    *CONNECT_OPTIONS,
)


@dataclass(frozen=True)
class ReadOptions:
    uri: str
    collection: str
    db: str = DEFAULT_DB
    partitions: list[str] | None = None
    snapshot_ts: int | None = None
    filter: str = ""
    filter_params: dict[str, Any] = field(default_factory=dict)
    columns: list[str] | None = None
    batch_size: int = 8192
    direct: str = "auto"
    pushdown: str = "auto"
    files_only: bool = False
    timeout: float = 120.0
    connect: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """``Client`` keyword arguments (``options.client_options``)."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Check the reader's options; errors name the option."""
        given, uri, collection = target_options(options, OPTIONS)
        direct, pushdown = (_mode(given, key) for key in ("direct", "pushdown"))
        return cls(
            uri=uri,
            collection=collection,
            db=given.get("db") or DEFAULT_DB,
            partitions=_names(given.get("partitions")),
            snapshot_ts=_number(given, "snapshot_ts", int, 1) or None,
            filter=given.get("filter") or "",
            filter_params=decode_body(
                (given.get("filter_params") or "").encode(), "option 'filter_params'"
            ),
            columns=_names(given.get("columns")),
            batch_size=_number(given, "batch_size", int, 1) or 8192,
            direct=direct,
            pushdown=pushdown,
            files_only=_flag(given, "files_only"),
            timeout=_number(given, "timeout", float, 0.001) or 120.0,
            connect=client_options(given),
        )

    def client(self) -> Client:
        return Client(self.uri, timeout=self.timeout, db=self.db, **self.connect)

    @property
    def pushes_filters(self) -> bool:
        """Whether the reader accepts Spark's filters (``auto``: on Spark 5 and newer)."""
        if self.pushdown == "auto":
            return safe_pushdown()
        return self.pushdown == "true"


def safe_pushdown() -> bool:
    """Spark 4.x keeps the read plan of the last scan that pushed filters on the loaded
    DataFrame and reuses it for a later scan of the same DataFrame without filters, which
    then silently returns only the filtered rows (``df.filter(...).count()`` then
    ``df.count()``). Spark 5 keeps read plans per scan. So filters are pushed by default
    only from Spark 5 on; ``pushdown=true`` forces it (then load once per query)."""
    return int(pyspark_version().split(".")[0]) >= 5


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _mode(given: dict[str, str], key: str) -> str:
    value = given.get(key, "auto").lower()
    if value not in MODES:
        raise invalid(f"option {key!r} must be one of {', '.join(MODES)}, got {value!r}")
    return value


def _flag(given: dict[str, str], key: str) -> bool:
    value = given.get(key, "false").lower()
    if value not in ("true", "false"):
        raise invalid(f"option {key!r} must be true or false, got {value!r}")
    return value == "true"


def _names(text: str | None) -> list[str] | None:
    if text is None or not text.strip():
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def _number(given: dict[str, str], key: str, kind: type, lo: float) -> Any:
    raw = given.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise invalid(f"option {key!r} must be a number, got {raw!r}") from None
    if value < lo:
        raise invalid(f"option {key!r} must be at least {lo}, got {raw!r}")
    return value


class ElanusPartition(InputPartition):
    """One endpoint of the read plan: a sealed segment, or a vchannel's growing data."""

    def __init__(self, index: int, kind: str, ticket: bytes, rows: int, schema: dict[str, Any]):
        super().__init__(index)
        self.kind = kind
        self.ticket = ticket
        self.rows = rows
        self.schema = schema

    def describe(self) -> dict[str, Any]:
        """The ticket as JSON (segment ids, vchannel, timestamp, ...)."""
        return {**json.loads(self.ticket), "kind": self.kind, "rows": self.rows}


class ElanusDataSource(DataSource):
    """Format ``elanus``: a collection as a DataFrame (reads) and the destination of
    ``df.write`` (staged, committed at once; see ``elanus.spark.writer``)."""

    @classmethod
    def name(cls) -> str:
        return "elanus"

    def schema(self) -> StructType:
        if _streaming(self.options):
            from elanus.spark.stream import stream_schema

            return stream_schema(self.options)
        opts = ReadOptions.parse(self.options)
        return spark_schema(collection_schema(opts), opts.columns)

    def reader(self, schema: StructType) -> ElanusReader:
        if _streaming(self.options):
            raise invalid("option 'since' is for spark.readStream (a change stream), not read")
        opts = ReadOptions.parse(self.options)
        kind = PushdownReader if opts.pushes_filters else ElanusReader
        return kind(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """The collection's changes (``elanus.spark.stream``), for ``spark.readStream``."""
        from elanus.spark.stream import ElanusStreamReader, StreamOptions

        return ElanusStreamReader(StreamOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from elanus.spark.writer import ElanusWriter, WriteOptions

        if overwrite:
            raise invalid(
                "mode('overwrite') is not supported: Elanus, like Milvus, does not replace a "
                "collection's rows; use mode('append') (option upsert=true replaces rows by "
                "key), or drop and create the collection first"
            )
        return ElanusWriter(WriteOptions.parse(self.options))


def _streaming(options: Mapping[str, str]) -> bool:
    """A change stream is asked for by its starting point, option ``since``."""
    return any(k.lower() == "since" for k in options)


def collection_schema(opts: ReadOptions) -> Schema:
    with opts.client() as client:
        return Schema.from_dict(client.describe_collection(opts.collection)["schema"])


class ElanusReader(DataSourceReader):
    """Plans in ``partitions``, reads in ``read``. Picklable: holds options and text only,
    never a connection. Spark pickles it before ``partitions`` runs, so what ``read``
    needs travels in the partitions."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.columns = [f.name for f in schema.fields]
        self.pushed: list[str] = []
        self.params: dict[str, Any] = dict(options.filter_params)

    @property
    def filter(self) -> str:
        """The user's filter and the pushed ones, as one expression."""
        parts = [self.options.filter, *self.pushed]
        parts = [p for p in parts if p]
        return " and ".join(f"({p})" for p in parts) if len(parts) > 1 else "".join(parts)

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        with opts.client() as client:
            plan = client.read_plan(
                opts.collection,
                columns=self.columns,
                filter=self.filter,
                filter_params=self.params if self.filter else None,
                partition_names=opts.partitions,
                snapshot_ts=opts.snapshot_ts,
                files_only=opts.files_only,
            )
        return [
            ElanusPartition(i, e["kind"], e["ticket"], int(e["rows"]), plan["schema"])
            for i, e in enumerate(plan["endpoints"])
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ElanusPartition)
        target = arrow_target(self.schema)
        size = self.options.batch_size
        for batch in self._batches(partition):
            for start in range(0, batch.num_rows, size):
                yield conform(batch.slice(start, size), target)

    def _batches(self, partition: ElanusPartition) -> Iterator[pa.RecordBatch]:
        ticket = json.loads(partition.ticket)
        if self._from_files(partition, ticket) and ticket["read"] == "files":
            yield from self._files(None, partition, ticket)  # no call to the proxy at all
            return
        with self.options.client() as client:
            if self._from_files(partition, ticket):
                yield from self._files(client, partition, ticket)
            else:
                yield from client.read_endpoint(partition.ticket)

    def _from_files(self, partition: ElanusPartition, ticket: dict[str, Any]) -> bool:
        mode = self.options.direct
        return partition.kind == "sealed" and (
            mode == "true" or (mode == "auto" and segment_files.readable(ticket))
        )

    def _files(
        self, client: Client | None, partition: ElanusPartition, ticket: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        schema = Schema.from_dict(partition.schema)
        return segment_files.read_sealed(client, ticket, schema, self.options.batch_size)


class PushdownReader(ElanusReader):
    """The reader that also takes the filters Spark pushes (see ``safe_pushdown``)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 - Spark's name
        pushed, self.params, rejected = translate_all(
            filters, collection_schema(self.options), self.params
        )
        self.pushed += pushed
        yield from rejected


@dataclass
class LocalRead:
    """What the reader did outside Spark: each partition with the rows it returned."""

    parts: list[tuple[ElanusPartition, pa.Table]]
    rejected: list[Filter]

    @property
    def table(self) -> pa.Table:
        return pa.concat_tables([t for _, t in self.parts])

    @property
    def rows(self) -> list[int]:
        return [t.num_rows for _, t in self.parts]


def read_partitions(options: Mapping[str, str], filters: list[Filter] | None = None) -> LocalRead:
    """Run the data source's planning and every partition's read in this process, as
    Spark would (schema, pushFilters, partitions, read): for tests and debugging."""
    source = ElanusDataSource(dict(options))
    reader = source.reader(source.schema())
    rejected = list(reader.pushFilters(list(filters or [])))
    target = arrow_target(reader.schema)
    parts = []
    for p in reader.partitions():
        assert isinstance(p, ElanusPartition)
        parts.append((p, pa.Table.from_batches(list(reader.read(p)), target)))
    return LocalRead(parts, rejected)
