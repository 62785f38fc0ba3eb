"""Rows of one sealed segment at a timestamp, read from its files (Lance data, delta logs).

The rows visible at ``T`` are those with ``_ts <= T`` that no delete ``(pk, d)`` with
``_ts < d <= T`` removed. The caller brings the deletes that are not in the segment's delta
logs yet (a delegator's buffer, for a plan of a loaded collection) or none (a files-only
plan, taken once every delete up to ``T`` was written: ``flight/search/fileplan.py``).
Only the needed columns are read from Lance (the output, the key, ``_ts`` and what the
filter looks at); ``_ts <= T`` is pushed into the Lance scan (with a collection TTL, also
``_ts >= expire_floor(T, ttl)``: ``segments/querynode/visibility.py``), the filter runs on each
Arrow batch. Used by Spark executors that see the files and by a proxy redeeming a files
ticket.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout, objstore
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import parse
from elanus.properties import expire_floor
from elanus.schema import PK_COLUMN, TIMESTAMP_FIELD, Schema
from elanus.segments import storage
from elanus.segments.storage.compactor import deleted_mask

PAGE_BATCH_ROWS = 65536


@dataclass
class SegmentRead:
    """What to read of one segment: its data path, the snapshot, the columns and filter."""

    segment_id: int
    path: str
    ts: int
    columns: list[str]
    filter: str | None = None
    filter_params: dict[str, Any] = field(default_factory=dict)
    ttl: int = 0
    """The collection's TTL in ms (0: none)."""


def delete_schema(pk_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field(PK_COLUMN, pk_type), pa.field("ts", pa.uint64())])


def deletes_on_disk(path: str, pk_type: pa.DataType) -> pa.Table:
    """The segment's delta logs as (pk, ts) records."""
    schema = delete_schema(pk_type)
    on_disk = storage.read_deltas(layout.parent(path))
    if on_disk is None or not on_disk.num_rows:
        return schema.empty_table()
    return on_disk.select([PK_COLUMN, "ts"]).cast(schema)


def read_segment(
    read: SegmentRead, schema: Schema, batch_size: int, buffered: pa.Table | None = None
) -> Iterator[pa.RecordBatch]:
    """The segment's rows at ``read.ts`` (its ``columns``, typed as the proxy streams them),
    in batches of at most ``batch_size`` rows. ``buffered``: deletes not on disk yet, which
    the caller took before this reads the delta logs."""
    pk = schema.primary.name
    columns = list(read.columns)
    full = schema.to_arrow()
    out_schema = pa.schema([full.field(c) for c in columns])
    expr = parse(read.filter, schema, read.filter_params or None) if read.filter else None
    on_disk = deletes_on_disk(read.path, schema.primary.arrow_type())
    removed = (
        on_disk if buffered is None else pa.concat_tables([buffered.cast(on_disk.schema), on_disk])
    )
    needed = list(dict.fromkeys([*columns, pk, TIMESTAMP_FIELD, *(expr.fields if expr else [])]))
    if not objstore.exists(layout.data_path(layout.parent(read.path))):
        raise ElanusError(
            ErrorCode.SEGMENT_NOT_FOUND,
            f"the files of segment {read.segment_id} are gone (compacted and collected since "
            "the read plan, older than gc_delay_s); read again",
        )
    ds = storage.dataset(read.path)
    defaults = storage.column_defaults(schema)
    present = [c for c in needed if c in ds.schema.names]  # added fields: filled below,
    inputs = [  # a function's output from its input
        v.input
        for c in needed
        if c not in present and isinstance(v := defaults.get(c), storage.Computed)
    ]
    scanner = ds.scanner(
        columns=list(dict.fromkeys([*present, *(i for i in inputs if i in ds.schema.names)])),
        filter=_in_time(read.ts, read.ttl),
        batch_size=batch_size,
    )
    stored = storage.segment_schema(schema)
    target = pa.schema([stored.field(c) for c in needed])
    for batch in scanner.to_batches():
        if batch.num_rows == 0:
            continue
        batch = storage.conform(batch, target, defaults)
        keep = pa.array(
            ~deleted_mask(batch.column(pk), batch.column(TIMESTAMP_FIELD), removed, read.ts)
        )
        if expr is not None:
            keep = pc.and_(keep, expr.evaluate(batch))
        # nothing deleted or filtered out (the usual batch): no copy of it (a filter copies
        # every vector into fresh memory, most of a Spark read's CPU)
        out = (batch if pc.all(keep).as_py() else batch.filter(keep)).select(columns)
        if out.num_rows:
            yield out.cast(out_schema)


def _in_time(ts: int, ttl: int) -> str:
    """The Lance filter of the rows inserted by ``ts`` and not expired then."""
    floor = expire_floor(ts, ttl)
    live = f" AND {TIMESTAMP_FIELD} >= {floor}" if floor else ""
    return f"{TIMESTAMP_FIELD} <= {ts}{live}"


def read_page(read: SegmentRead, schema: Schema, limit: int | None) -> pa.Table:
    """At most ``limit`` rows with the smallest keys (a page of a paged read; its filter
    carries where the page starts), sorted by key, as one table."""
    full = schema.to_arrow()
    pk = schema.primary.name
    wanted = read.columns if pk in read.columns else [*read.columns, pk]
    page = SegmentRead(**{**read.__dict__, "columns": wanted})
    batches = list(read_segment(page, schema, PAGE_BATCH_ROWS))
    table = pa.Table.from_batches(batches, pa.schema([full.field(c) for c in wanted]))
    table = table.sort_by(pk)
    return table if limit is None else table.slice(0, limit)
