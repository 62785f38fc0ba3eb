"""The read half of the SDK (mixed into ``Client``): load and release, search, query,
get, and snapshot read plans for parallel readers (the paging iterators build on it in
``client_iterators``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.client.results import SearchResult, load_state
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode
from elanus.ops import body_of
from elanus.ops import loads as load_ops
from elanus.ops import segments as segment_ops
from elanus.ops.reads import PlanRead, Query, ReadKeys
from elanus.ops.replies import LoadProgress
from elanus.ops.search import Search
from elanus.wire.codec import decode_body, encode_json, from_flight_error


class ReadAPI(ClientBase):
    # -- snapshot reads (parallel readers such as Spark) --------------------------------------
    def _plan_command(self, command: PlanRead) -> flight.FlightDescriptor:
        """The ``read_plan`` body of GetFlightInfo and GetSchema, as a command descriptor."""
        return flight.FlightDescriptor.for_command(encode_json(body_of(command)))

    def read_schema(
        self,
        collection_name: str,
        *,
        columns: list[str] | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> pa.Schema:
        """The Arrow schema of a snapshot read of these columns (Flight ``GetSchema``),
        without taking a snapshot."""
        descriptor = self._plan_command(
            PlanRead(
                db=self._db_or_own(db),
                collection=collection_name,
                columns=None if columns is None else list(columns),
            )
        )
        try:
            return self._conn().get_schema(descriptor, self._options(timeout)).schema
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None

    def read_plan(
        self,
        collection_name: str,
        *,
        columns: list[str] | None = None,
        filter: str = "",
        filter_params: dict[str, Any] | None = None,
        partition_names: list[str] | None = None,
        snapshot_ts: int | None = None,
        files_only: bool = False,
        db: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A snapshot read plan (Flight ``GetFlightInfo``): ``ts``, ``schema`` (Elanus),
        ``arrow_schema``, ``columns``, ``total_records`` and ``endpoints``, each with its
        ``ticket`` (bytes for :meth:`read_endpoint`), ``kind`` and ``rows``. Reading every
        endpoint gives the rows a query with ``as_of=ts`` returns. ``files_only``: a
        files-only plan even for a loaded collection (it flushes first; see
        docs/protocol.md)."""
        descriptor = self._plan_command(
            PlanRead(
                db=self._db_or_own(db),
                collection=collection_name,
                columns=None if columns is None else list(columns),
                filter=filter or None,
                filter_params=filter_params or None,
                partition_names=list(partition_names) if partition_names else None,
                snapshot_ts=int(snapshot_ts) if snapshot_ts else None,
                files_only=True if files_only else None,
            )
        )
        try:
            info = self._conn().get_flight_info(descriptor, self._options(timeout))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        meta = decode_body(info.app_metadata, "read plan metadata")
        endpoints = []
        for e in info.endpoints:
            raw = e.ticket.ticket
            extra = decode_body(e.app_metadata, "read plan endpoint")
            endpoints.append({**decode_body(raw, "read plan ticket"), **extra, "ticket": raw})
        return {
            **meta,
            "arrow_schema": info.schema,
            "total_records": info.total_records,
            "endpoints": endpoints,
        }

    def read_endpoint(
        self, ticket: bytes, *, timeout: float | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The record batches of one read-plan ticket (Flight ``DoGet``)."""
        try:
            reader = self._conn().do_get(flight.Ticket(ticket), self._options(timeout))
            for chunk in reader:
                if chunk.data is not None and chunk.data.num_rows:
                    yield chunk.data
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None

    # -- reads ------------------------------------------------------------------------------
    def load_collection(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        partition_names: list[str] | None = None,
        replica_number: int | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> LoadProgress:
        """Load a collection (or some of its partitions) into the query nodes, in
        ``replica_number`` in-memory copies, each on query nodes of its own (default: the
        database's ``database.replica.number``, else 1)."""
        reject_unknown("load_collection", kwargs)
        op = load_ops.LoadCollection(
            db=self._db_or_own(db),
            collection=collection_name,
            partition_names=list(partition_names) if partition_names else None,
            replica_number=replica_number,
        )
        return self._reply(op, LoadProgress, timeout=timeout)

    def load_partitions(
        self,
        collection_name: str,
        partition_names: str | list[str],
        timeout: float | None = None,
        *,
        replica_number: int | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> LoadProgress:
        """Load only these partitions (pymilvus's ``load_partitions``)."""
        names = [partition_names] if isinstance(partition_names, str) else list(partition_names)
        if not names:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "load_partitions needs partition names")
        reject_unknown("load_partitions", kwargs)
        return self.load_collection(
            collection_name, timeout, partition_names=names, replica_number=replica_number, db=db
        )

    def describe_replica(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """The in-memory replicas of a loaded collection (pymilvus's ``describe_replica``):
        per replica ``replica_id``, ``node_ids``, ``shard_leaders`` (vchannel -> query
        node) and ``serving``."""
        reject_unknown("describe_replica", kwargs)
        op = load_ops.DescribeReplica(db=self._db_or_own(db), collection=collection_name)
        return list(self._op(op, timeout=timeout)["replicas"])

    def release_collection(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("release_collection", kwargs)
        op = load_ops.ReleaseCollection(db=self._db_or_own(db), collection=collection_name)
        self._op(op, timeout=timeout)

    def release_partitions(
        self,
        collection_name: str,
        partition_names: str | list[str],
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Stop serving these partitions (pymilvus's ``release_partitions``): the collection
        stays loaded with the others, or is released when none is left."""
        names = {partition_names} if isinstance(partition_names, str) else set(partition_names)
        if not names:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT, "release_partitions needs partition names"
            )
        reject_unknown("release_partitions", kwargs)
        op = load_ops.GetLoadState(db=self._db_or_own(db), collection=collection_name)
        load = self._reply(op, LoadProgress, timeout=timeout)
        if load.get("state") == "NotLoad":
            return
        desc = self._action("describe_collection", self._in_db(db, name=collection_name))
        ids = {p["name"]: p["partition_id"] for p in desc.get("partitions") or []}
        unknown = sorted(names - ids.keys())
        if unknown:
            raise ElanusError(
                ErrorCode.PARTITION_NOT_FOUND,
                f"collection {collection_name!r} has no partition(s) {', '.join(unknown)}",
            )
        loaded = load.get("partition_ids")
        keep = [n for n, i in ids.items() if n not in names and (loaded is None or i in loaded)]
        if keep:
            self.load_collection(collection_name, timeout, partition_names=keep, db=db)
        else:
            self.release_collection(collection_name, timeout, db=db)

    def get_load_state(
        self,
        collection_name: str,
        partition_name: str | None = "",
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> LoadProgress:
        """``{"state": LoadState.Loaded, "progress", ...}`` of the collection (``state`` a
        ``LoadState``: NotLoad, Loading or Loaded, equal to its name as a string). Elanus
        keeps no load state per partition, so asking for one is refused."""
        if partition_name:
            kwargs["partition_name"] = partition_name
        reject_unknown("get_load_state", kwargs)
        op = load_ops.GetLoadState(db=self._db_or_own(db), collection=collection_name)
        return load_state(self._reply(op, LoadProgress, timeout=timeout))

    def _read_options(
        self,
        body: dict[str, Any],
        consistency_level: str | None,
        guarantee_timestamp: int | None,
        as_of: int | None,
        partition_names: list[str] | None,
    ) -> dict[str, Any]:
        """``body`` with a read's options (``_read_keys``)."""
        body.update(self._read_keys(consistency_level, guarantee_timestamp, as_of, partition_names))
        return body

    def _read_keys(
        self,
        consistency_level: str | None,
        guarantee_timestamp: int | None,
        as_of: int | None,
        partition_names: list[str] | None,
    ) -> ReadKeys:
        """A read's options (``ReadOptions``'s keys, those given): the level named, else the
        collection's raised to this client's newest write (``session_ts``), so a client
        always reads its own writes (as pymilvus does through Elanus's Milvus face; Milvus
        reads its plain default)."""
        body: ReadKeys = {}
        if consistency_level:
            try:
                body["consistency_level"] = str(ConsistencyLevel.parse(consistency_level))
            except ValueError as exc:
                raise ElanusError(ErrorCode.INVALID_ARGUMENT, str(exc)) from None
        elif self._last_write_ts and not as_of:
            body["session_ts"] = self._last_write_ts
        if not guarantee_timestamp and consistency_level:  # what a named Session read waits for
            guarantee_timestamp = self._last_write_ts
        if guarantee_timestamp:
            body["guarantee_timestamp"] = int(guarantee_timestamp)
        if as_of:
            body["as_of"] = int(as_of)
        if partition_names:
            body["partition_names"] = list(partition_names)
        return body

    def search(
        self,
        collection_name: str,
        data: Any = None,
        filter: str = "",
        limit: int = 10,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        *,
        offset: int = 0,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        guarantee_timestamp: int | None = None,
        as_of: int | None = None,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool | None = None,
        ranker: Any = None,
        db: str | None = None,
        ids: list[Any] | int | str | None = None,
        highlighter: Any = None,
        **kwargs: Any,
    ) -> SearchResult:
        """pymilvus-style search: per query vector, ``Hits`` of ``Hit`` dicts ``{"id",
        "distance", "entity"}`` (also ``hit.id``, ``hit.distance``, ``hit["title"]``); with
        ``group_by_field``, ``limit`` groups of up to ``group_size`` hits each. ``ids``
        instead of ``data`` searches with the stored vectors of those primary keys. A
        ``highlighter`` (pymilvus's ``LexicalHighlighter`` or its params as a dict) gives
        each hit ``highlight``: ``{field: {"fragments": [...]}}``."""
        reject_unknown("search", kwargs)
        if data is not None and ids is not None:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "search: give data or ids, not both")
        if data is None and ids is None:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "search needs query vectors ('data')")
        keys = None
        if ids is not None:
            keys = [ids] if isinstance(ids, int | str) else list(ids)
            keys = [k.item() if hasattr(k, "item") else k for k in keys]
        else:
            data = (
                data.tolist()
                if hasattr(data, "tolist")
                else [v.tolist() if hasattr(v, "tolist") else v for v in data]
            )
        op = Search(
            db=self._db_or_own(db),
            collection=collection_name,
            data=data if keys is None else None,
            ids=keys,
            limit=limit,
            offset=offset,
            output_fields=list(output_fields or []),
            filter=filter or None,
            filter_params=filter_params or None,
            search_params=search_params or None,
            anns_field=anns_field or None,
            ranker=None if ranker is None else function_ranker_body(ranker),
            highlighter=None if highlighter is None else highlighter_body(highlighter),
            group_by_field=group_by_field,
            group_size=group_size,
            strict_group_size=strict_group_size,
            **self._read_keys(consistency_level, guarantee_timestamp, as_of, partition_names),
        )
        return SearchResult(self._op(op, timeout=timeout)["results"])

    def query(
        self,
        collection_name: str,
        filter: str = "",
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        ids: Any = None,
        partition_names: list[str] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        guarantee_timestamp: int | None = None,
        as_of: int | None = None,
        db: str | None = None,
        group_by_fields: list[str] | None = None,
        order_by_fields: list[str] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Rows matching a filter (or the given ids); ``["count(*)"]`` counts them. With
        ``group_by_fields`` (or ``sum(f)``, ``avg(f)``, ``min(f)``, ``max(f)`` outputs),
        one row per group with its aggregates, as Milvus's aggregating query;
        ``order_by_fields`` sorts rows (``["price:desc", "id"]``)."""
        reject_unknown("query", kwargs)
        if ids is not None:
            ids = [ids] if isinstance(ids, int | str) else ids
            ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        op = Query(
            db=self._db_or_own(db),
            collection=collection_name,
            output_fields=list(output_fields or group_by_fields or ["*"]),
            offset=offset,
            group_by_fields=list(group_by_fields) if group_by_fields else None,
            # "field" or "field:desc", as pymilvus sends them
            order_by_fields=list(order_by_fields) if order_by_fields else None,
            ids=ids,
            filter=filter if ids is None else None,
            limit=limit,
            filter_params=filter_params or None,
            **self._read_keys(consistency_level, guarantee_timestamp, as_of, partition_names),
        )
        return list(self._op(op, timeout=timeout)["rows"])

    def get(
        self,
        collection_name: str,
        ids: Any,
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Rows by primary key (keywords as for ``query``)."""
        ids = [ids] if isinstance(ids, int | str) else ids
        return self.query(
            collection_name,
            output_fields=output_fields,
            timeout=timeout,
            ids=ids,
            partition_names=partition_names,
            **kwargs,
        )

    def get_collection_stats(
        self,
        collection_name: str,
        timeout: float | None = None,
        *,
        db: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``{"row_count"}``: rows persisted in flushed segments (Milvus's num_entities)."""
        reject_unknown("get_collection_stats", kwargs)
        op = segment_ops.GetCollectionStats(db=self._db_or_own(db), collection=collection_name)
        return self._op(op, timeout=timeout)


def function_body(ranker: Any) -> dict[str, Any] | None:
    """A pymilvus ``Function`` or ``FunctionScore`` as the wire dict (the ``type`` left
    out: every ranker is a rerank function): a one-function FunctionScore without params
    as its function, any other as ``{"functions": [...], "params": {...}}`` (the server
    runs several functions when all are boost); None for anything else."""
    functions = getattr(ranker, "functions", None)
    if isinstance(functions, list):
        params = dict(getattr(ranker, "params", None) or {})
        if len(functions) != 1 or params:
            bodies = [function_body(f) for f in functions]
            if any(b is None for b in bodies):
                raise ElanusError(
                    ErrorCode.INVALID_ARGUMENT,
                    "a FunctionScore's functions must be pymilvus Functions",
                )
            return {"functions": bodies, "params": params}
        ranker = functions[0]
    to_dict = getattr(ranker, "to_dict", None)
    if not callable(to_dict) or not hasattr(ranker, "input_field_names"):
        return None
    out = to_dict()
    return {
        "name": out.get("name", ""),
        "input_field_names": list(out.get("input_field_names") or []),
        "params": dict(out.get("params") or {}),
    }


def highlighter_body(highlighter: Any) -> dict[str, Any]:
    """``search``'s highlighter on the wire: the params of a pymilvus
    ``LexicalHighlighter`` (a ``SemanticHighlighter`` calls a model Elanus cannot reach),
    or a dict of them."""
    if isinstance(highlighter, dict):
        return dict(highlighter)
    if type(highlighter).__name__ == "LexicalHighlighter":
        return dict(highlighter.params)
    raise ElanusError(
        ErrorCode.INVALID_ARGUMENT,
        f"search: the highlighter must be a LexicalHighlighter or a dict of its params, got "
        f"{type(highlighter).__name__}",
    )


def function_ranker_body(ranker: Any) -> dict[str, Any]:
    """``search``'s ranker on the wire: a pymilvus ``Function`` / ``FunctionScore`` or a
    dict already in the wire form."""
    if isinstance(ranker, dict):
        return dict(ranker)
    body = function_body(ranker)
    if body is None:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"search: the ranker must be a Function, a FunctionScore or a dict, got "
            f"{type(ranker).__name__}",
        )
    return body
