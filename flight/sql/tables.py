"""A collection as a SQL table: its columns, and its rows at one timestamp as Arrow.

A collection's table has its fields (a function's output, never returned by reads, is
left out), ``$meta`` (the dynamic fields, as JSON) when it has them, and ``$partition``:
the partition of each row. JSON fields are Arrow's JSON type, which DuckDB reads as its
JSON (``->>``, ``json_extract``); float16 and bfloat16 vectors are widened to float32
lists (DuckDB has no half floats). ``$`` cannot begin a field's name, so neither name
collides with a field.

The rows come through the read plan (``flight/search/readplan.py``): the plan at ``T``
lists the sealed segments and each vchannel's growing ones (split by partition), and each
endpoint's ticket is read page by page from the query node that serves it, with deletes
applied at ``T``. Nothing here touches a segment file. A table is an Arrow C stream
source: DuckDB asks for it when a scan starts (again for each scan of a self-join), and
pulls its batches as it goes, so a statement holds what its operators hold, not the
collection: that and one page read ahead (``readahead``), so that paging on the query node
and DuckDB's work overlap.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from elanus import bfloat16
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.metacache import CollectionInfo
from elanus.flight.search import ReadPlan, check_ticket
from elanus.flight.sql.readahead import readahead
from elanus.ops.reads import PlanRead
from elanus.schema import DYNAMIC_FIELD, DataType

if TYPE_CHECKING:
    from elanus.flight.search import ReadService

PARTITION = "$partition"
PAGE_SCALE = 8
"""Pages of a SQL scan are 8 times a Spark reader's (fewer round trips, and a query node
pages a segment by key once per page): a statement holds one page per scan at a time,
and one more read ahead."""
_HALF = (DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR)


def readable_fields(info: CollectionInfo) -> list[str]:
    """The collection's columns a read may return, in schema order (``$meta`` last)."""
    schema = info.schema
    computed = {n for fn in schema.functions for n in fn.output_field_names}
    names = [f.name for f in schema.fields if f.name not in computed]
    if schema.enable_dynamic_field:
        names.append(DYNAMIC_FIELD)
    return names


def sql_type(info: CollectionInfo, name: str) -> pa.DataType:
    """The Arrow type of a column as SQL sees it."""
    if name == PARTITION:
        return pa.string()
    if name == DYNAMIC_FIELD:
        return pa.json_()
    field = next(f for f in info.schema.fields if f.name == name)
    if field.dtype == DataType.JSON:
        return pa.json_()
    if field.dtype in _HALF:
        return pa.list_(pa.float32(), field.dim or 0)
    return field.arrow_type()


def table_schema(info: CollectionInfo, columns: list[str]) -> pa.Schema:
    """The SQL schema of ``columns`` of the collection (``PARTITION`` included)."""
    by_name = {f.name: f for f in info.schema.fields}
    fields = []
    for name in columns:
        nullable = name in (PARTITION, DYNAMIC_FIELD) or by_name[name].nullable
        fields.append(pa.field(name, sql_type(info, name), nullable=nullable))
    return pa.schema(fields)


def projection(info: CollectionInfo, names: set[str], every: bool) -> list[str]:
    """The columns a statement needs: all readable ones (``every``), or those it names
    (case-insensitively, as SQL does), else the primary key alone (``count(*)``)."""
    lowered = {n.lower() for n in names}
    readable = readable_fields(info)
    columns = [c for c in readable if every or c.lower() in lowered]
    if PARTITION.lower() in lowered:
        columns.append(PARTITION)
    return columns or [info.schema.primary.name]


class CollectionTable:
    """The rows of one collection at ``ts``, as an Arrow C stream source (see the module's
    docstring). ``failure`` keeps the first error a read raised: DuckDB reports it as its
    own error, with the Python traceback as text, so the caller raises this one instead."""

    def __init__(
        self,
        reads: ReadService,
        info: CollectionInfo,
        ts: int,
        columns: list[str],
        deadline: float,
    ) -> None:
        self.reads = reads
        self.info = info
        self.ts = ts
        self.columns = columns
        self.schema = table_schema(info, columns)
        self.deadline = deadline
        self.failure: ElanusError | None = None
        self._plan: ReadPlan | None = None
        self._names = {pid: name for name, pid in info.partitions.items()}

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        batches = readahead(self._guarded(), depth=1, name=f"sql-read-{self.info.name}")
        reader = pa.RecordBatchReader.from_batches(self.schema, batches)
        return reader.__arrow_c_stream__(requested_schema)

    def _guarded(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self.batches()
        except ElanusError as exc:
            self.failure = self.failure or exc
            raise
        except Exception as exc:
            self.failure = self.failure or ElanusError(
                ErrorCode.INTERNAL, f"reading {self.info.name!r}: {type(exc).__name__}: {exc}"
            )
            raise

    def plan(self) -> ReadPlan:
        """The read plan at ``ts`` (made once; every scan of the statement reads it)."""
        if self._plan is None:
            stored = [c for c in self.columns if c != PARTITION] or [self.info.schema.primary.name]
            request = PlanRead(
                db=self.info.db, collection=self.info.name, snapshot_ts=self.ts, columns=stored
            )
            self._plan = self.reads.plan(request, by_partition=PARTITION in self.columns)
        return self._plan

    def batches(self) -> Iterator[pa.RecordBatch]:
        for endpoint in self.plan().endpoints:
            self._check_deadline()
            partition = self._names.get(endpoint.partition_id or -1)
            ticket = check_ticket(endpoint.ticket)
            _, pages = self.reads.rows(self.info, ticket, PAGE_SCALE)
            for batch in pages:
                self._check_deadline()
                yield self._conform(batch, partition)

    def _check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise ElanusError(
                ErrorCode.TIMEOUT,
                f"reading {self.info.name!r} ran past the statement timeout "
                "(setting sql_timeout_s)",
            )

    def _conform(self, batch: pa.RecordBatch, partition: str | None) -> pa.RecordBatch:
        """A page as the table's schema: JSON typed as JSON, half-float vectors widened,
        the partition's name added."""
        arrays = []
        for field in self.schema:
            if field.name == PARTITION:
                arrays.append(pa.repeat(pa.scalar(partition, pa.string()), batch.num_rows))
                continue
            column = batch.column(field.name)
            if column.type == field.type:
                arrays.append(column)
            elif field.type == pa.json_():
                arrays.append(pa.ExtensionArray.from_storage(field.type, column.cast(pa.string())))
            elif bfloat16.is_bits_type(column.type):
                arrays.append(bfloat16.widen_column(column))
            else:
                arrays.append(pc.cast(column, field.type))  # float16 vectors
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
