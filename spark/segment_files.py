"""Reading a sealed endpoint of a read plan straight from the segment's files, on a Spark
executor that sees them (``elanus.segments.storage.snapshot_files`` reads them).

In a plan of a loaded collection deletes come from two places: the delegator's buffer
(asked through the proxy, first) and the delta logs on disk (read second); every delete is
in at least one of them at that moment (see ``elanus.segments.querynode.snapshot_read``). A
files-only plan was taken once every delete up to its timestamp was on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from elanus import objstore
from elanus.client.client import Client
from elanus.errors import ElanusError
from elanus.schema import PK_COLUMN, Schema
from elanus.segments.storage import snapshot_files
from elanus.wire.codec import encode_json

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
    buffered = buffered_deletes(client, ticket, pk_type)
    on_disk = snapshot_files.deletes_on_disk(str(ticket["sealed"]["path"]), pk_type)
    return pa.concat_tables([buffered, on_disk])


def buffered_deletes(client: Client, ticket: dict[str, Any], pk_type: pa.DataType) -> pa.Table:
    """The delegator's buffered deletes of the segment that may matter at ``T``."""
    sid = int(ticket["sealed"]["segment_id"])
    request = {"read": "deletes", **{k: ticket[k] for k in DELETE_KEYS}, "segment_id": sid}
    schema = snapshot_files.delete_schema(pk_type)
    parts = [
        pa.Table.from_batches([b]).select([PK_COLUMN, "ts"]).cast(schema)
        for b in client.read_endpoint(encode_json(request))
    ]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_sealed(
    client: Client | None, ticket: dict[str, Any], schema: Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The endpoint's rows (its ``columns``, typed as the proxy would stream them), in
    batches of at most ``batch_size`` rows. A files ticket (a files-only plan) needs no
    buffered deletes; a sealed one of a loaded collection asks its delegator first."""
    sealed = ticket["sealed"]
    read = snapshot_files.SegmentRead(
        segment_id=int(sealed["segment_id"]),
        path=str(sealed["path"]),
        ts=int(ticket["ts"]),
        columns=list(ticket["columns"]),
        filter=ticket.get("filter"),
        filter_params=ticket.get("filter_params") or {},
        ttl=int(ticket.get("ttl") or 0),
    )
    buffered = None
    if ticket["read"] != "files":
        assert client is not None, "a loaded collection's segment needs its buffered deletes"
        buffered = buffered_deletes(client, ticket, schema.primary.arrow_type())
    yield from snapshot_files.read_segment(read, schema, batch_size, buffered)
