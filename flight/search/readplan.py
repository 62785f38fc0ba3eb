"""Snapshot reads for parallel readers (Spark, any Flight client): read plans and tickets.

``GetFlightInfo`` (or the ``read_plan`` action) with a JSON command fixes a snapshot
timestamp ``T`` (a Strong read: a fresh TSO timestamp, or the caller's ``snapshot_ts``
inside the retention window), waits until every delegator of the collection applied all
messages up to ``T``, and returns one endpoint per sealed segment plus one per vchannel
for its growing segments. Each ticket names its segments by id and carries ``T``, so
redeeming every ticket (in any order, in parallel, later) returns exactly the rows a
``query`` with ``as_of=T`` returns (see ``elanus.segments.querynode.snapshot_read`` for why listed
ids stay right while flushes and compactions go on).

Tickets (JSON, redeemed with ``DoGet`` on any proxy):
- ``{"read": "segments", ...}``: the rows at ``T`` of the listed segments, streamed in
  pages by primary key (each page one bounded request to the delegator);
- ``{"read": "deletes", ...}``: the deletes stamped <= ``T`` of one sealed segment that
  are not necessarily in its delta logs yet, for readers of the segment's own files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from elanus.api.datacoord import SegmentInfo
from elanus.api.querynode import (
    PlannedGrowing,
    QueryNodeAPI,
    ReadDeletes,
    ReadSegments,
    ReadShard,
)
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.auth import ANONYMOUS, Caller, authorize
from elanus.flight.metacache import CollectionInfo
from elanus.flight.registry import check_db, check_named, check_request, lookup
from elanus.flight.search import fileplan
from elanus.flight.search.check import check_filter, check_issued
from elanus.flight.search.fileplan import Endpoint, PageFetch
from elanus.flight.streams import coded_stream
from elanus.ops.reads import (
    PlanEndpoint,
    PlanMetadata,
    PlanRead,
    ReadOptions,
    ReadPlanReply,
    ReadTicket,
    SealedSegment,
)
from elanus.requests import Body
from elanus.schema import DENSE_FLOAT_TYPES, DYNAMIC_FIELD, DataType, Schema
from elanus.wire.codec import encode_json

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.channels.bus import Bus
    from elanus.flight.ports import CollectionLookup, Flusher, LoopBridge, ReadGate
    from elanus.flight.search.service import QueryService

TICKET_KINDS = ("segments", "deletes", "files")
PAGE_BYTES = 4 << 20
"""A page of a segments ticket is about this big (one delegator request each)."""
MAX_PAGE_ROWS = 65536
"""... and holds at most this many rows (``scale`` times as many for pages ``scale``
times as big)."""
AFTER = "__elanus_after"
REQUEST_TIMEOUT_S = 120.0


def check_ticket(doc: ReadTicket | dict[str, Any]) -> ReadTicket:
    """Static checks of a read ticket (a JSON object with a ``read`` key: a client's, or
    one this proxy planned)."""
    b = Body(doc, "DoGet ticket")
    kind = b.str("read")
    if kind not in TICKET_KINDS:
        raise invalid(f"DoGet ticket: 'read' must be one of {', '.join(TICKET_KINDS)}")
    ticket: ReadTicket = {
        "read": kind,
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "collection_id": b.int("collection_id", lo=0),
        "vchannel": b.str("vchannel"),
        "ts": b.int("ts", lo=1),
        "ttl": b.int("ttl", 0, lo=0),
    }
    if kind == "deletes":
        ticket["segment_id"] = b.int("segment_id", lo=0)
    else:
        if kind == "segments":
            ids = b.list("segment_ids")
            if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise invalid("DoGet ticket: 'segment_ids' must be a non-empty list of integers")
            ticket["segment_ids"] = ids
        else:
            ticket["segment_id"] = b.int("segment_id", lo=0)
        columns = b.list("columns")
        if not columns or not all(isinstance(c, str) for c in columns):
            raise invalid("DoGet ticket: 'columns' must be a non-empty list of field names")
        if len(set(columns)) != len(columns):
            raise invalid("DoGet ticket: 'columns' names a field twice")
        ticket["columns"] = columns
        ticket["filter"] = b.str("filter", "") or None
        ticket["filter_params"] = b.dict("filter_params", {})
        b.dict("sealed", None)  # for executors reading the files; never trusted here
    b.done()
    return ticket


@dataclass
class ReadPlan:
    info: CollectionInfo
    ts: int
    columns: list[str]
    schema: pa.Schema
    endpoints: list[Endpoint]

    @property
    def total_records(self) -> int:
        return sum(e.rows for e in self.endpoints)

    def metadata(self) -> PlanMetadata:
        return {
            "ts": self.ts,
            "collection_id": self.info.collection_id,
            "schema": self.info.schema.to_dict(),
            "columns": self.columns,
        }

    def to_json(self) -> ReadPlanReply:
        endpoints: list[PlanEndpoint] = [
            {"ticket": e.ticket, "kind": e.kind, "rows": e.rows} for e in self.endpoints
        ]
        return {**self.metadata(), "total_records": self.total_records, "endpoints": endpoints}

    def flight_info(self, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        endpoints = [
            flight.FlightEndpoint(encode_json(e.ticket), [], app_metadata=encode_json(meta))
            for e in self.endpoints
            for meta in [{"kind": e.kind, "rows": e.rows}]
        ]
        return flight.FlightInfo(
            self.schema,
            descriptor,
            endpoints,
            self.total_records,
            -1,
            app_metadata=encode_json(self.metadata()),
        )


def arrow_schema(schema: Schema, columns: list[str] | None) -> tuple[list[str], pa.Schema]:
    """The columns a read returns (all user columns by default, but a function's output,
    which is never returned: see ``elanus/outputs.py``) and their Arrow schema."""
    full = schema.to_arrow()
    computed = {n for fn in schema.functions for n in fn.output_field_names}
    if columns is None:
        names = [n for n in full.names if n not in computed]
        return names, pa.schema([full.field(n) for n in names])
    for c in columns:
        if c in computed:
            raise invalid(f"not allowed to retrieve raw data of field {c}")
        if c not in full.names:
            extra = "" if c != DYNAMIC_FIELD else " (dynamic fields are off)"
            raise invalid(f"column {c!r} is not a field of the collection{extra}")
    return list(columns), pa.schema([full.field(c) for c in columns])


def page_rows(schema: Schema, columns: list[str], scale: int = 1) -> int:
    """Rows per page of a segments ticket: about ``scale`` times ``PAGE_BYTES`` of the
    widest rows."""
    width = 0
    for name in columns:
        f = next((f for f in schema.fields if f.name == name), None)
        if f is not None and f.dtype in DENSE_FLOAT_TYPES:
            width += 4 * (f.dim or 0)
        elif f is not None and f.dtype is DataType.BINARY_VECTOR:
            width += (f.dim or 0) // 8
        elif f is None or f.dtype in (DataType.VARCHAR, DataType.JSON, DataType.ARRAY):
            width += 64
        elif f.dtype is DataType.SPARSE_FLOAT_VECTOR:
            width += 256
        else:
            width += 8
    return max(256, min(MAX_PAGE_ROWS * scale, PAGE_BYTES * scale // max(width, 1)))


class ReadService:
    """The proxy's half of snapshot reads: plans (Flight threads) and ticket streams."""

    def __init__(
        self,
        *,
        query: QueryService,
        loop: LoopBridge,
        coord: CoordAPI,
        bus: Bus,
        collections: CollectionLookup,
        gate: ReadGate,
        flusher: Flusher,
    ) -> None:
        self.query = query
        """Timestamps, partitions and routes, as a search takes them."""
        self.loop = loop
        self.coord = coord
        self.bus = bus
        self.collections = collections
        self.gate = gate
        self.flusher = flusher
        """A files-only plan flushes first (``fileplan.make_files_complete``)."""

    def _info(self, db: str, collection: str) -> CollectionInfo:
        """A read's collection (refused where its database denies reading)."""
        return self.gate.read_collection(db, collection)

    # -- plans ------------------------------------------------------------------------------
    def plan_request(self, raw: bytes) -> PlanRead:
        """A GetFlightInfo/GetSchema command: the body of the ``read_plan`` action."""
        request: PlanRead = check_request("read_plan", raw)[1]
        return request

    def schema(self, request: PlanRead) -> pa.Schema:
        info = self.collections.collection(request.db, request.collection)
        return arrow_schema(info.schema, request.columns)[1]

    def plan(self, request: PlanRead, *, by_partition: bool = False) -> ReadPlan:
        """The plan of a checked ``read_plan`` body. ``by_partition``: one growing endpoint
        per vchannel and partition (not per vchannel), so every endpoint is of one
        partition (SQL's ``$partition`` column)."""
        query = self.query
        info = self._info(request.db, request.collection)
        columns, schema = arrow_schema(info.schema, request.columns)
        text, params = request.filter or None, request.filter_params or {}
        check_filter(info, text, params)
        pids = query.partition_ids(info, request.partition_names, text, params)
        at = ReadOptions(as_of=request.snapshot_ts, consistency_level="Strong")
        ts, _ = query.times.read_at(info, at)  # one ts for all shards
        if request.files_only:
            return self._files_plan(request, info, pids, ts, columns, schema)
        try:
            replies = query.fan_out(
                info,
                pids,
                lambda node, v: node.read_plan(
                    ReadShard(vchannel=v, guarantee_ts=ts, ts=ts, partition_ids=pids)
                ),
                spread=False,  # the replica its tickets are read from (``_delegator``)
            )
        except ElanusError as exc:
            if exc.code is not ErrorCode.COLLECTION_NOT_LOADED:
                raise
            # Not loaded (all or some of the wanted partitions): the files alone.
            return self._files_plan(request, info, pids, ts, columns, schema)
        stored = self.loop.run(
            self.coord.data.segment_info(SegmentInfo(collection_id=info.collection_id))
        )
        rows = {s.segment_id: s.num_rows for s in stored.segments}
        base = _ticket_base(info, ts, columns, request)
        sealed: list[Endpoint] = []
        growing: list[Endpoint] = []
        for reply in sorted(replies, key=lambda r: r.vchannel):
            v = reply.vchannel
            for s in reply.sealed:
                sid = s.segment_id
                planned: SealedSegment = {
                    "segment_id": sid, "partition_id": s.partition_id, "path": s.path
                }  # fmt: skip
                ticket: ReadTicket = {
                    **base, "vchannel": v, "segment_ids": [sid], "sealed": planned
                }  # fmt: skip
                sealed.append(Endpoint("sealed", ticket, rows.get(sid, 0), s.partition_id))
            groups: dict[int | None, list[PlannedGrowing]] = {}
            for g in reply.growing:
                groups.setdefault(g.partition_id if by_partition else None, []).append(g)
            for pid, group in sorted(groups.items(), key=lambda kv: kv[0] or 0):
                ids = [g.segment_id for g in group]
                ticket = {**base, "vchannel": v, "segment_ids": ids}
                growing.append(Endpoint("growing", ticket, sum(g.rows for g in group), pid))
        sealed.sort(key=lambda e: e.ticket["segment_ids"][0])
        return ReadPlan(info, ts, columns, schema, sealed + growing)

    def _files_plan(
        self,
        request: PlanRead,
        info: CollectionInfo,
        pids: list[int] | None,
        ts: int,
        columns: list[str],
        schema: pa.Schema,
    ) -> ReadPlan:
        fileplan.make_files_complete(self, info, ts)
        base = _ticket_base(info, ts, columns, request)
        return ReadPlan(info, ts, columns, schema, fileplan.endpoints(self, info, pids, base))

    # -- tickets ----------------------------------------------------------------------------
    def stream(self, doc: dict[str, Any], caller: Caller = ANONYMOUS) -> flight.FlightDataStream:
        ticket = check_ticket(doc)
        authorize(
            caller, lookup("read_plan"), {"db": ticket["db"], "collection": ticket["collection"]}
        )
        # a plan's snapshot is a timestamp already handed out: a later one is made up
        check_issued(self.query.times.newest_ts, ticket["ts"], "DoGet ticket: 'ts'")
        info = self._info(ticket["db"], ticket["collection"])
        if info.collection_id != ticket["collection_id"]:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_FOUND,
                f"collection {info.name!r} was dropped or replaced since the read plan",
            )
        if ticket["read"] == "deletes":
            node = self._delegator(info, ticket["vchannel"])
            req = ReadDeletes(
                vchannel=ticket["vchannel"],
                segment_id=ticket["segment_id"],
                ts=ticket["ts"],
                guarantee_ts=ticket["ts"],
            )
            reply = self.loop.run(self._node(node).read_deletes(req))
            return flight.RecordBatchStream(reply.deletes)
        schema, pages = self.rows(info, ticket)
        first = next(pages, None)  # errors before the stream starts reach the client cleanly
        batches = [] if first is None else [first]
        return flight.GeneratorStream(schema, coded_stream(_chain(batches, pages), "DoGet"))

    def rows(
        self, info: CollectionInfo, ticket: ReadTicket, page_scale: int = 1
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """The rows of a checked ``segments`` or ``files`` ticket of ``info`` (the caller
        authorised it), page by page (``page_scale`` times the usual pages): its schema
        and its batches."""
        columns, schema = arrow_schema(info.schema, ticket["columns"])
        check_filter(info, ticket["filter"], ticket["filter_params"])
        if ticket["read"] == "files":
            page = fileplan.files_page(self, info, ticket)
        else:
            page = self._segments_page(self._delegator(info, ticket["vchannel"]), ticket)
        text, params = ticket["filter"], ticket["filter_params"]
        return schema, self._pages(info, text, params, columns, schema, page, page_scale)

    def every_row(self, info: CollectionInfo, page: PageFetch) -> Iterator[pa.RecordBatch]:
        """Every row ``page`` reads (its user columns, no filter), in key order."""
        columns, schema = arrow_schema(info.schema, None)
        return self._pages(info, None, {}, columns, schema, page, 1)

    def _delegator(self, info: CollectionInfo, vchannel: str) -> str:
        route = self.query.route(info, None)
        node = route.get(vchannel)
        if node is None:
            raise invalid(f"{vchannel!r} is not a vchannel of collection {info.name!r}")
        return str(node)

    def _node(self, node: str) -> QueryNodeAPI:
        return QueryNodeAPI(self.bus, node, REQUEST_TIMEOUT_S)

    def _segments_page(self, node: str, ticket: ReadTicket) -> PageFetch:
        def fetch(
            text: str | None, params: dict[str, Any], wanted: list[str], limit: int
        ) -> pa.Table:
            req = ReadSegments(
                vchannel=ticket["vchannel"],
                segment_ids=ticket["segment_ids"],
                ts=ticket["ts"],
                guarantee_ts=ticket["ts"],
                filter=text,
                params=params,
                output_fields=wanted,
                limit=limit,
                ttl=ticket["ttl"],
            )
            return self.loop.run(self._node(node).read_segments(req)).rows

        return fetch

    def _pages(
        self,
        info: CollectionInfo,
        filter_text: str | None,
        filter_params: dict[str, Any],
        columns: list[str],
        schema: pa.Schema,
        page: PageFetch,
        page_scale: int,
    ) -> Iterator[pa.RecordBatch]:
        """The rows matching the filter in primary-key order, one bounded request (``page``)
        per page.

        Keys may repeat (two inserts of one key both stay visible), so a full page is cut
        before its last key, and the next page starts at that key (``>=``); a page that is
        one key only is followed by all rows of that key, then the keys after it."""
        pk = info.schema.primary.name
        wanted = columns if pk in columns else [*columns, pk]
        size = page_rows(info.schema, wanted, page_scale)

        def fetch(op: str | None, key: Any, limit: int | None) -> pa.Table:
            text, params = filter_text, dict(filter_params)
            if op is not None:
                params[AFTER] = key
                cond = f"{pk} {op} {{{AFTER}}}"
                text = f"({text}) and {cond}" if text else cond
            table = page(text, params, wanted, limit).sort_by(pk)
            return table if limit is None else table.slice(0, limit)

        def out(table: pa.Table) -> Iterator[pa.RecordBatch]:
            if table.num_rows:
                yield from table.select(columns).cast(schema).combine_chunks().to_batches()

        op: str | None = None
        key: Any = None
        while True:
            table = fetch(op, key, size)
            if table.num_rows < size:
                yield from out(table)
                return
            last = table.column(pk)[-1]
            head = table.filter(pc.less(table.column(pk), last))
            if head.num_rows:
                yield from out(head)
                op, key = ">=", last.as_py()
            else:  # a whole page of one key
                yield from out(fetch("==", last.as_py(), None))
                op, key = ">", last.as_py()


def _ticket_base(
    info: CollectionInfo, ts: int, columns: list[str], request: PlanRead
) -> ReadTicket:
    """What every ticket of a plan carries."""
    base: ReadTicket = {
        "read": "segments",
        "db": info.db,
        "collection": info.name,
        "collection_id": info.collection_id,
        "ts": ts,
        "columns": columns,
    }
    if info.ttl:  # the TTL in force when planned: every page reads the same snapshot
        base["ttl"] = info.ttl
    if request.filter:
        base["filter"] = request.filter
        if request.filter_params:
            base["filter_params"] = request.filter_params
    return base


def _chain(first: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from first
    yield from rest
