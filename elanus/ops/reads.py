"""Reads by filter or key: ``query``, and the options every read takes (``ReadOptions``).

The proxy's own reads (a delete by filter, a search by primary keys, a partial upsert's
lookup, hybrid search's output fetch) build the same ``Query`` record a client sends, so
the query path reads one typed request whoever asks."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation, shape
from elanus.outputs import COUNT, is_aggregate
from elanus.requests import Range
from elanus.schema import check_name

MAX_QUERY_LIMIT = 10_000_000


@shape
class ReadOptions:
    """The keys every read takes: how fresh (a consistency level, or the timestamps it must
    see), at which timestamp (``as_of``), and which partitions (``None``: all)."""

    consistency_level: str | None = None
    """A level's name as a client writes it (``"strong"``, ``"Strong"``); empty as absent:
    the collection's level, raised to ``session_ts``."""
    guarantee_timestamp: Annotated[int, Range(0)] | None = None
    session_ts: Annotated[int, Range(0)] | None = None
    as_of: Annotated[int, Range(0)] | None = None
    """Absent timestamps are 0 (none); left out of a body as the SDK always did."""
    partition_names: list[Any] | None = None

    def check_read(self) -> None:
        if self.consistency_level:
            try:
                ConsistencyLevel.parse(self.consistency_level)
            except ValueError as exc:
                raise invalid(str(exc)) from None
        for name in self.partition_names or ():
            check_name(name, "partition")


class ReadKeys(TypedDict, total=False):
    """``ReadOptions``'s keys as a face passes them on (``Query(**keys)``), those given."""

    consistency_level: str | None
    guarantee_timestamp: int | None
    session_ts: int | None
    as_of: int | None
    partition_names: list[Any] | None


@operation("query")
class Query(ReadOptions):
    db: DbName = DEFAULT_DB
    collection: CollectionName
    filter: str | None = None
    """Empty as absent."""
    ids: list[Any] | None = None
    """Primary keys (checked against the key's type when the collection is known)."""
    output_fields: list[Any] | None = None
    group_by_fields: list[Any] | None = None
    order_by_fields: list[Any] | None = None
    """``"field"`` or ``"field:desc"``."""
    limit: Annotated[int, Range(1, MAX_QUERY_LIMIT)] | None = None
    offset: Annotated[int, Range(0)] | None = None
    filter_params: dict[str, Any] | None = None

    @property
    def outputs(self) -> list[Any]:
        return self.output_fields or []

    @property
    def groups(self) -> list[str]:
        return [str(g) for g in self.group_by_fields or ()]

    @property
    def grouping(self) -> bool:
        """Whether the query aggregates: by groups, or a sum/avg/min/max over all rows."""
        return bool(self.group_by_fields) or any(
            is_aggregate(n) and n != COUNT for n in self.outputs
        )

    def check(self) -> None:
        outputs = self.outputs
        if not self.grouping and COUNT in outputs and any(n != COUNT for n in outputs):
            others = [repr(n) for n in outputs if n != COUNT]
            others = others[:3] + (["..."] if len(others) > 3 else [])
            raise invalid(
                f"query: 'count(*)' must be the only output field (also asked for: "
                f"{', '.join(others)}); count in one query and fetch fields in another"
            )
        if (
            not self.filter
            and self.ids is None
            and outputs != [COUNT]
            and self.limit is None
            and not self.grouping
        ):  # Milvus: "empty expression should be used with limit"
            raise invalid(
                "query: an empty filter needs a 'limit' (or give a 'filter' or 'ids'; "
                "only count(*) may go without)"
            )
        if self.filter and self.ids is not None:
            raise invalid("query: give either 'filter' or 'ids', not both")
        self.check_read()


class QueryReply(TypedDict):
    """The ``query`` action's reply: the rows (or the count, or one row per group) and
    the read timestamp."""

    rows: list[dict[str, Any]]
    ts: int


class SealedSegment(TypedDict):
    """The flushed segment a ``files`` ticket reads (its executor reads the files; the
    proxy trusts the catalog's path, never this one)."""

    segment_id: int
    partition_id: int
    path: str | None


class ReadTicket(TypedDict, total=False):
    """A read plan's ticket, the JSON of a DoGet ticket: what every ticket carries
    (``read``: segments, deletes or files; the snapshot ``ts``; the TTL in force), then
    per kind its vchannel and segments, and the plan's columns and filter."""

    read: str
    db: str
    collection: str
    collection_id: int
    ts: int
    ttl: int
    vchannel: str
    segment_id: int
    segment_ids: list[int]
    columns: list[str]
    filter: str | None
    filter_params: dict[str, Any]
    sealed: SealedSegment


class PlanMetadata(TypedDict):
    """What a read plan says of itself (GetFlightInfo's app metadata)."""

    ts: int
    collection_id: int
    schema: dict[str, Any]
    """The collection's schema document."""
    columns: list[str]


class PlanEndpoint(TypedDict):
    ticket: ReadTicket
    kind: str
    """``sealed`` (one segment, readable from its files) or ``growing``."""
    rows: int


class ReadPlanReply(PlanMetadata):
    """The ``read_plan`` action's reply."""

    total_records: int
    endpoints: list[PlanEndpoint]


@operation("read_plan")
class PlanRead:
    """A snapshot read plan for parallel readers (the ``read_plan`` action, and the command
    of GetFlightInfo and GetSchema): one timestamp for all shards, and a ticket per piece."""

    db: DbName = DEFAULT_DB
    collection: CollectionName
    partition_names: list[Any] | None = None
    snapshot_ts: Annotated[int, Range(0)] | None = None
    """Absent or 0: now (a fresh timestamp); else an earlier one, inside the retention."""
    filter: str | None = None
    """Empty as absent."""
    filter_params: dict[str, Any] | None = None
    columns: list[Any] | None = None
    """Absent: every field; else field names, each once."""
    files_only: bool | None = None
    """A plan of the segments' files alone, even for a loaded collection."""

    def check(self) -> None:
        columns = self.columns
        if columns is not None:
            if not columns or not all(isinstance(c, str) for c in columns):
                raise invalid("read_plan: 'columns' must be a non-empty list of field names")
            if len(set(columns)) != len(columns):
                raise invalid("read_plan: 'columns' names a field twice")
        for name in self.partition_names or ():
            check_name(name, "partition")
