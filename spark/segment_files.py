"""Reading a sealed endpoint of a read plan straight from the segment's files.

The rows visible at the plan's timestamp ``T`` are those with ``_ts <= T`` that no delete
``(pk, d)`` with ``_ts < d <= T`` removed. Deletes come from two places: the delegator's
buffer (asked through the proxy, first) and the delta logs on disk (read second); every
delete is in at least one of them at that moment (see ``elanus.segments.snapshot_read``).
Only the needed columns are read from Lance (the output, the key, ``_ts`` and what the
filter looks at); ``_ts <= T`` is pushed into the Lance scan, the filter runs on each
Arrow batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout, objstore
from elanus.client.client import Client
from elanus.client.wire import encode_json
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import parse
from elanus.schema import PK_COLUMN, TIMESTAMP_FIELD, Schema
from elanus.segments import storage
from elanus.segments.compactor import deleted_mask

DELETE_KEYS = ("db", "collection", "collection_id", "vchannel", "ts")


def readable(ticket: dict[str, Any]) -> bool:
    """Whether this process can read the endpoint's segment files itself."""
    sealed = ticket.get("sealed") or {}
    if not sealed.get("path"):
        return False
    try:  # an s3:// root this executor has no settings for: read through the proxy
        return objstore.is_dir(sealed["path"])
    except ElanusError:
        return False


def deletes(client: Client, ticket: dict[str, Any], pk_type: pa.DataType) -> pa.Table:
    """Every delete record of the segment that may matter at ``T``: buffer, then disk."""
    sid = int(ticket["sealed"]["segment_id"])
    request = {"read": "deletes", **{k: ticket[k] for k in DELETE_KEYS}, "segment_id": sid}
    schema = pa.schema([pa.field(PK_COLUMN, pk_type), pa.field("ts", pa.uint64())])
    parts = [
        pa.Table.from_batches([b]).select([PK_COLUMN, "ts"]).cast(schema)
        for b in client.read_endpoint(encode_json(request))
    ]
    on_disk = storage.read_deltas(layout.parent(ticket["sealed"]["path"]))
    if on_disk is not None and on_disk.num_rows:
        parts.append(on_disk.select([PK_COLUMN, "ts"]).cast(schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_sealed(
    client: Client, ticket: dict[str, Any], schema: Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The endpoint's rows (its ``columns``, typed as the proxy would stream them), in
    batches of at most ``batch_size`` rows."""
    ts = int(ticket["ts"])
    pk = schema.primary.name
    columns = list(ticket["columns"])
    full = schema.to_arrow()
    out_schema = pa.schema([full.field(c) for c in columns])  # as the proxy streams them
    text = ticket.get("filter")
    expr = parse(text, schema, ticket.get("filter_params")) if text else None
    removed = deletes(client, ticket, schema.primary.arrow_type())
    needed = list(dict.fromkeys([*columns, pk, TIMESTAMP_FIELD, *(expr.fields if expr else [])]))
    path = str(ticket["sealed"]["path"])
    if not objstore.exists(layout.data_path(layout.parent(path))):
        raise ElanusError(
            ErrorCode.SEGMENT_NOT_FOUND,
            f"the files of segment {ticket['sealed']['segment_id']} are gone (compacted and "
            "collected since the read plan, older than gc_delay_s); read again",
        )
    ds = storage.dataset(path)
    scanner = ds.scanner(
        columns=[c for c in needed if c in ds.schema.names],  # added fields: filled below
        filter=f"{TIMESTAMP_FIELD} <= {ts}",
        batch_size=batch_size,
    )
    stored = storage.segment_schema(schema)
    target = pa.schema([stored.field(c) for c in needed])
    defaults = storage.column_defaults(schema)
    for batch in scanner.to_batches():
        if batch.num_rows == 0:
            continue
        batch = storage.conform(batch, target, defaults)
        keep = pa.array(~deleted_mask(batch.column(pk), batch.column(TIMESTAMP_FIELD), removed, ts))
        if expr is not None:
            keep = pc.and_(keep, expr.evaluate(batch))
        out = batch.filter(keep).select(columns)
        if out.num_rows:
            yield out.cast(out_schema)
