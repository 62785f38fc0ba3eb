"""Files-only read plans: a snapshot read of a collection that is not loaded.

With no delegator to serve growing rows and buffered deletes, the plan makes the files
complete up to its timestamp ``T`` first, as Milvus's bulk readers do with a flush:

1. ``T`` is taken (a fresh Strong timestamp, or the caller's ``snapshot_ts``);
2. the collection is flushed (its flush timestamp comes after ``T``, so every row stamped
   <= ``T`` is in a flushed segment once the flush is done);
3. the datanodes write every pending delete up to ``T`` to delta logs
   (``datacoord.persist_deletes``: asked through their tick replies, waited for here);
4. one endpoint per flushed segment: a ``files`` ticket, read from the segment's Lance
   data and delta logs alone, by a Spark executor that sees the files, or through any
   proxy, which has a query node read it page by page (``querynode.read.files``).

A segment compacted away after the plan keeps its files ``gc_delay_s`` and its delta logs
hold every delete up to ``T``; its target is not listed, so no row comes twice.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from elanus.api.coord import ListSessions
from elanus.api.datacoord import FlushState, PersistDeletes, SegmentInfo
from elanus.api.querynode import QueryNodeAPI, ReadFiles
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.metacache import CollectionInfo
from elanus.ops.reads import ReadTicket, SealedSegment
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.channels.bus import Bus
    from elanus.flight.ports import Flusher, LoopBridge

POLL_S = 0.05
WAIT_S = 120.0
"""How long a plan waits for the flush and the deletes to be written."""
REQUEST_TIMEOUT_S = 120.0
_turn = itertools.count()

PageFetch = Callable[[str | None, dict[str, Any], list[str], Any], pa.Table]
"""One page of a ticket: (filter text, params, columns with the key, row limit or None)."""


@dataclass
class Endpoint:
    """One ticket of a read plan (``readplan.py``), and what it holds."""

    kind: str  # "sealed" (one segment, readable from its files) or "growing"
    ticket: ReadTicket
    rows: int
    """Rows stored in the segments (an upper bound on what the ticket returns)."""
    partition_id: int | None = None
    """The one partition of the ticket's rows, when it has one (sealed endpoints, and
    growing ones of a plan split by partition)."""


class FilesReads(Protocol):
    """What a files-only plan uses of the read service (``readplan.ReadService``)."""

    loop: LoopBridge
    coord: CoordAPI
    bus: Bus
    flusher: Flusher


def _wait(what: str, done: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise ElanusError(
                ErrorCode.TIMEOUT, f"read plan: {what} took longer than {WAIT_S:g} s; try again"
            )
        time.sleep(POLL_S)


def make_files_complete(reads: FilesReads, info: CollectionInfo, ts: int) -> None:
    """Flush, then have every delete up to ``ts`` written (steps 2 and 3)."""
    loop, coord = reads.loop, reads.coord
    flushing = loop.run(reads.flusher.flush(info))
    if flushing.segment_ids:
        state = FlushState(segment_ids=flushing.segment_ids)
        _wait("the flush", lambda: loop.run(coord.data.flush_state(state)).flushed)
    ask = PersistDeletes(vchannels=list(info.vchannels), ts=ts)
    if loop.run(coord.data.persist_deletes(ask)).done:
        return
    # The wish is with the coord: a tick past ``ts`` now, so the datanodes see it at once
    # rather than a tick interval later, write their deletes and say so (at once too).
    loop.run(coord.timeticks.now())
    _wait("writing the deletes", lambda: loop.run(coord.data.persist_deletes(ask)).done)


def endpoints(
    reads: FilesReads,
    info: CollectionInfo,
    pids: list[int] | None,
    base: ReadTicket,
) -> list[Endpoint]:
    """One ``files`` endpoint per flushed segment of the wanted partitions (step 4)."""
    ask = SegmentInfo(collection_id=info.collection_id)
    stored = reads.loop.run(reads.coord.data.segment_info(ask))
    wanted = set(pids) if pids else None
    out = []
    for s in sorted(stored.segments, key=lambda s: s.segment_id):
        if s.state != SegmentState.FLUSHED or not s.num_rows or not s.path:
            continue
        if wanted is not None and s.partition_id not in wanted:
            continue
        sealed: SealedSegment = {
            "segment_id": s.segment_id,
            "partition_id": s.partition_id,
            "path": s.path,
        }
        ticket: ReadTicket = {
            **base,
            "read": "files",
            "vchannel": s.vchannel,
            "segment_id": s.segment_id,
            "sealed": sealed,
        }
        out.append(Endpoint("sealed", ticket, s.num_rows, s.partition_id))
    return out


def files_page(reads: FilesReads, info: CollectionInfo, ticket: ReadTicket) -> PageFetch:
    """Pages of a files ticket redeemed by the proxy, each read by a query node (loaded or
    not: any reads files). The segment's path comes from the catalog, never from the
    ticket, so a caller reads only the collection the ticket names."""
    sid = ticket["segment_id"]
    found = reads.loop.run(
        reads.coord.data.segment_info(SegmentInfo(segment_ids=[sid], include_dropped=True))
    )
    record = next((s for s in found.segments if s.segment_id == sid), None)
    if record is None or record.collection_id != info.collection_id or not record.path:
        raise ElanusError(
            ErrorCode.SEGMENT_NOT_FOUND,
            f"segment {sid} is not a segment of collection {info.name!r} with files; "
            "plan the read again",
        )
    schema = info.schema.to_dict()
    return segment_page(reads, sid, record.path, ticket["ts"], schema, ticket["ttl"])


def segment_page(
    reads: FilesReads, sid: int, path: str, ts: int, schema: dict[str, Any], ttl: int = 0
) -> PageFetch:
    """Pages of one segment's files at ``ts``, each read by a query node (a snapshot's
    restore reads its segments so too, every row of ``ts``: ``ttl`` 0, the restored
    collection's own TTL applies to its reads)."""
    loop, bus = reads.loop, reads.bus
    node = _reader_node(reads)

    def fetch(text: str | None, params: dict[str, Any], wanted: list[str], limit: int) -> pa.Table:
        req = ReadFiles(
            segment_id=sid,
            path=path,
            ts=ts,
            schema=schema,
            filter=text,
            params=params,
            output_fields=wanted,
            limit=limit,
            ttl=ttl,
        )
        return loop.run(QueryNodeAPI(bus, node, REQUEST_TIMEOUT_S).read_files(req)).rows

    return fetch


def _reader_node(reads: FilesReads) -> str:
    """A live query node, in turn."""
    sessions = reads.loop.run(reads.coord.list_sessions(ListSessions())).sessions
    nodes = sorted(str(s["node_id"]) for s in sessions if s.get("role") == "querynode")
    if not nodes:
        raise ElanusError(ErrorCode.UNAVAILABLE, "no query node is running to read the files")
    return nodes[next(_turn) % len(nodes)]
