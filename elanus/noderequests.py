"""Request types of a query node: its delegators (``querynode.<id>.<method>``) and its
worker (``querynode.<id>.worker.<method>``).

The coord sends the distribution ones (watch, sync, load, release); the proxy and other
delegators send the reads. Key names are the wire format.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import pyarrow as pa

from elanus.requests import request
from elanus.searchrequest import SearchRequest

# -- delegators ----------------------------------------------------------------------------------


@request("querynode.watch")
class DelegateChannel:
    """Start the vchannel's delegator at the channel checkpoint (seed 001)."""

    vchannel: str
    pchannel: str
    collection_id: int
    schema: dict[str, Any]
    checkpoint: dict[str, Any] | None = None
    sealed: list[dict[str, Any]] = field(default_factory=list)
    partition_ids: list[int] | None = None
    ready_ts: int = 0


@request("querynode.unwatch")
class UnwatchChannel:
    vchannel: str


@request("querynode.sync")
class SyncDistribution:
    """A handoff: sealed segments join, others leave; ``checkpoint`` lets the delete
    buffer trim what is on disk."""

    vchannel: str
    add: list[dict[str, Any]] = field(default_factory=list)
    remove: list[int] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None


@request("querynode.release_collection")
class ReleaseOnNode:
    collection_id: int


@request("querynode.search")
class SearchShard:
    vchannel: str
    request: SearchRequest


@request("querynode.read")
class ReadShard:
    """A query or a count on one vchannel (``query``, ``count``, ``read.plan``)."""

    vchannel: str
    filter: str | None = None
    params: dict[str, Any] | None = None
    guarantee_ts: int = 0
    ts: int = 0
    partition_ids: list[int] | None = None
    output_fields: list[str] = field(default_factory=list)
    limit: int | None = None


@request("querynode.read.segments")
class ReadSegments:
    """One page of a snapshot read: rows of sealed segments at ``ts``."""

    vchannel: str
    segment_ids: list[int]
    ts: int
    guarantee_ts: int = 0
    filter: str | None = None
    params: dict[str, Any] | None = None
    output_fields: list[str] = field(default_factory=list)
    limit: int | None = None


@request("querynode.read.deletes")
class ReadDeletes:
    vchannel: str
    segment_id: int
    ts: int
    guarantee_ts: int = 0


# -- the worker ----------------------------------------------------------------------------------


@request("worker.load")
class LoadSegments:
    collection_id: int
    schema: dict[str, Any]
    segments: list[dict[str, Any]]


@request("worker.release")
class ReleaseSegments:
    segment_ids: list[int]


@request("worker.delete")
class DeleteInSegments:
    """Keys as Arrow; ``ts`` one timestamp for all, or a uint64 array with one per key."""

    segment_ids: list[int]
    pks: pa.Array
    ts: Any


@request("worker.load_index")
class LoadIndex:
    segment_id: int
    index: dict[str, Any]


@request("worker.drop_index")
class DropIndexOnNode:
    """One dropped index, by id: its field may keep other (JSON path) indexes."""

    collection_id: int
    index_id: int


@request("worker.search")
class SearchSegments:
    segment_ids: list[int]
    request: SearchRequest


@request("worker.read")
class ReadSegmentRows:
    """A query or a count of sealed segments at ``ts`` (``worker.query``/``worker.count``)."""

    segment_ids: list[int]
    ts: int
    filter: str | None = None
    params: dict[str, Any] | None = None
    output_fields: list[str] = field(default_factory=list)
    limit: int | None = None
