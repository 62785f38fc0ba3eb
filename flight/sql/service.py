"""The proxy's Flight SQL face: which call does what, and one statement from text to rows.

- ``GetFlightInfo`` with ``CommandStatementQuery`` (or a prepared statement's
  ``CommandPreparedStatementQuery``): the statement is checked (read-only, one statement),
  its collections resolved and the caller's privileges checked (``Query`` on each
  collection it reads, ``Search`` on each it vector-searches), its snapshot timestamp
  chosen (``snapshot``), and its result schema found by binding it over empty tables of
  the collections' schemas. The one endpoint's ticket (``TicketStatementQuery``) carries
  the statement, its parameters and the timestamp (``handles``).
- ``DoGet`` of that ticket runs it (``execution``) and streams the batches as DuckDB makes
  them. ``GetSchema`` answers the schema alone.
- ``CreatePreparedStatement`` / ``DoPut`` (bind) / ``ClosePreparedStatement``: stateless
  handles; the catalog commands (``catalog``): their rows at ``DoGet``, the ticket being
  the command itself.
- Every write (``CommandStatementUpdate``, ingest, transactions) is refused: SQL through
  Elanus is read-only, writes take the write path.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus import flightsql
from elanus.errors import ElanusError, invalid
from elanus.flight.auth import Caller
from elanus.flight.metacache import CollectionInfo
from elanus.flight.sql import snapshot, vector_search
from elanus.flight.sql.catalog import SCHEMAS, Catalog, command_schema
from elanus.flight.sql.execution import Executor, Limits, Source
from elanus.flight.sql.handles import Handle, parameter_values
from elanus.flight.sql.options import SqlOptions
from elanus.flight.sql.statement import Parser, Statement, analyse, parameters_of, rewrite
from elanus.flight.sql.tables import CollectionTable, projection, table_schema
from elanus.flight.sql.vector_search import SearchRun
from elanus.flight.streams import client_batches, coded_stream
from elanus.privileges import Need

if TYPE_CHECKING:
    from elanus.flight.ports import ActionRunner, CollectionLookup
    from elanus.flight.search import QueryService, ReadService
    from elanus.settings import Settings


@dataclass
class Planned:
    """A statement checked and resolved: what it reads, at which timestamp."""

    handle: Handle
    st: Statement
    params: dict[str, Any] | None
    """Parameter values (None: not bound yet, as for CreatePreparedStatement)."""
    tables: dict[tuple[str, str], CollectionInfo]
    ts: int
    searches: list[SearchRun] = field(default_factory=list)

    def names(self) -> list[str]:
        return [f"$vs{i}" for i in range(len(self.searches))]


class SqlService:
    """Given what it uses (``flight/ports.py``), never the proxy."""

    def __init__(
        self,
        *,
        settings: Settings,
        collections: CollectionLookup,
        act: ActionRunner,
        query: QueryService,
        reads: ReadService,
    ) -> None:
        self.settings = settings
        self.collections = collections
        self.query = query
        self.reads = reads
        self.parser = Parser()
        self.catalog = Catalog(settings=settings, collections=collections, act=act)
        self.executor = Executor(Limits.of(settings))

    # -- Flight calls ---------------------------------------------------------------------
    def flight_info(
        self, descriptor: flight.FlightDescriptor, caller: Caller, options: SqlOptions
    ) -> flight.FlightInfo:
        raw = bytes(descriptor.command or b"")
        name, command = _command(raw, "GetFlightInfo command")
        if name in SCHEMAS:
            endpoint = flight.FlightEndpoint(raw, [])
            return flight.FlightInfo(command_schema(name, command), descriptor, [endpoint], -1, -1)
        planned = self.plan(self._handle(name, command, options), caller, options)
        schema = self.schema_of(planned)
        assert schema is not None  # parameters bound: binding failed loudly if it failed
        ticket = Handle(planned.handle.sql, planned.handle.db, planned.handle.params, planned.ts)
        wrapped = flightsql.new("TicketStatementQuery", statement_handle=ticket.encode())
        endpoint = flight.FlightEndpoint(flightsql.pack(wrapped), [])
        return flight.FlightInfo(schema, descriptor, [endpoint], -1, -1)

    def schema(
        self, descriptor: flight.FlightDescriptor, caller: Caller, options: SqlOptions
    ) -> pa.Schema:
        name, command = _command(bytes(descriptor.command or b""), "GetSchema command")
        if name in SCHEMAS:
            return command_schema(name, command)
        schema = self.schema_of(self.plan(self._handle(name, command, options), caller, options))
        assert schema is not None
        return schema

    def do_get(self, raw: bytes, caller: Caller, options: SqlOptions) -> flight.FlightDataStream:
        name, command = _command(raw, "DoGet ticket")
        if name in SCHEMAS:
            return flight.RecordBatchStream(self.catalog.answer(name, command, caller))
        if name != "TicketStatementQuery":
            raise invalid(f"DoGet: a {name} is not a ticket; ask GetFlightInfo for one")
        return self.run(Handle.decode(command.statement_handle, "DoGet ticket"), caller, options)

    def do_put(
        self,
        raw: bytes,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
        caller: Caller,
    ) -> None:
        """Binding a prepared statement's parameters: the answer is a new handle holding
        them (``DoPutPreparedStatementResult``)."""
        name, command = _command(raw, "DoPut command")
        if name != "CommandPreparedStatementQuery":
            raise invalid(f"DoPut with a {name} is not a Flight SQL call Elanus serves")
        handle = Handle.decode(command.prepared_statement_handle, "prepared statement handle")
        batches = list(client_batches(reader, "DoPut"))
        table = pa.Table.from_batches(batches) if batches else None
        params = table.combine_chunks().to_batches()[0] if table is not None else None
        st = analyse(self.parser, handle.sql, handle.db)
        parameter_values(params, st.parameters)  # refused now rather than at the run
        bound = Handle(handle.sql, handle.db, params)
        result = flightsql.new(
            "DoPutPreparedStatementResult", prepared_statement_handle=bound.encode()
        )
        writer.write(pa.py_buffer(flightsql.encode(result)))

    def do_action(
        self, action_type: str, body: bytes, caller: Caller, options: SqlOptions
    ) -> list[bytes]:
        refused = flightsql.REFUSED_ACTIONS.get(action_type)
        if refused is not None:
            raise invalid(f"{action_type}: {refused}")
        if action_type == flightsql.CLOSE_PREPARED:
            _, request = _command(body, f"{action_type} body")
            Handle.decode(request.prepared_statement_handle, "prepared statement handle")
            return []  # stateless: nothing to free
        name, request = _command(body, f"{action_type} body")
        if name != "ActionCreatePreparedStatementRequest":
            raise invalid(f"{action_type}: the body is a {name}, not its request")
        if request.HasField("transaction_id") and request.transaction_id:
            raise invalid("transactions are not supported: SQL through Elanus is read-only")
        handle = Handle(str(request.query), options.db)
        planned = self.plan(handle, caller, options, bound=False)
        schema = self.schema_of(planned)
        params = pa.schema([pa.field(p, pa.null()) for p in _ordered(planned.st.parameters)])
        result = flightsql.new(
            "ActionCreatePreparedStatementResult",
            prepared_statement_handle=handle.encode(),
            dataset_schema=schema.serialize().to_pybytes() if schema is not None else b"",
            parameter_schema=params.serialize().to_pybytes() if len(params) else b"",
        )
        return [flightsql.pack(result)]

    # -- a statement ----------------------------------------------------------------------
    def _handle(self, name: str, command: Any, options: SqlOptions) -> Handle:
        if name == "CommandStatementQuery":
            if command.HasField("transaction_id") and command.transaction_id:
                raise invalid("transactions are not supported: SQL through Elanus is read-only")
            return Handle(str(command.query), options.db)
        if name == "CommandPreparedStatementQuery":
            return Handle.decode(command.prepared_statement_handle, "prepared statement handle")
        raise invalid(
            f"{name} is not a query: GetFlightInfo takes a statement or a catalog command"
        )

    def plan(
        self, handle: Handle, caller: Caller, options: SqlOptions, *, bound: bool = True
    ) -> Planned:
        """Check and resolve a statement (``bound``: its parameters must all have values;
        otherwise, as for CreatePreparedStatement, what needs them is left for the run)."""
        st = analyse(self.parser, handle.sql, handle.db)
        params = parameter_values(handle.params, st.parameters) if bound else None
        tables: dict[tuple[str, str], CollectionInfo] = {}
        for db, name in st.tables:
            caller.require(Need("Query", db, name))
            tables[(db, name)] = self.collections.collection(db, name)
        try:
            searches = [
                vector_search.evaluate(self.parser, call, params, handle.db) for call in st.searches
            ]
            at = handle.ts or snapshot.explicit(self.parser, st, params, options)
        except ElanusError:
            if bound or not st.parameters:
                raise
            return Planned(handle, st, None, tables, 0)  # needs its parameters: at the run
        found = []
        for search in searches:
            caller.require(Need("Search", search.db, search.collection))
            found.append(self.collections.collection(search.db, search.collection))
        ts = snapshot.choose(self.query, self.settings, [*tables.values(), *found], at, options)
        runs = [SearchRun(self.query, i, s, ts) for i, s in zip(found, searches, strict=True)]
        return Planned(handle, st, params, tables, ts, runs)

    def _text(self, planned: Planned, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The text DuckDB runs, and the values of the parameters it still holds (those of
        ``vector_search``'s arguments were used up)."""
        st = planned.st
        if not st.rewritten:
            return st.text, params
        tree = rewrite(st, planned.names())
        used = parameters_of(tree)
        return self.parser.text(tree), {k: v for k, v in params.items() if k in used}

    def schema_of(self, planned: Planned) -> pa.Schema | None:
        """The result's schema, bound over empty tables (None: it needs parameters)."""
        st = planned.st
        if st.searches and len(planned.searches) != len(st.searches):
            return None
        empty: dict[tuple[str, str], Source] = {
            key: table_schema(info, projection(info, st.names, st.every_column)).empty_table()
            for key, info in planned.tables.items()
        }
        hits = {
            n: s.schema.empty_table()
            for n, s in zip(planned.names(), planned.searches, strict=True)
        }
        params = planned.params
        if params is None:
            params = {p: None for p in st.parameters}
        con = self.executor.open(planned.handle.db, empty, hits)
        try:
            return self.executor.schema(con, *self._text(planned, params))
        except ElanusError:
            if planned.params is None and st.parameters:
                return None  # a statement typed by its parameters: known once they are
            raise

    def run(self, handle: Handle, caller: Caller, options: SqlOptions) -> flight.FlightDataStream:
        """Run a ticket's statement: its batches as DuckDB makes them."""
        stack = contextlib.ExitStack()
        stack.enter_context(self.executor.slot())
        try:
            planned = self.plan(handle, caller, options)
            st, deadline = planned.st, self.executor.deadline()
            tables = {
                key: CollectionTable(
                    self.reads,
                    info,
                    planned.ts,
                    projection(info, st.names, st.every_column),
                    deadline,
                )
                for key, info in planned.tables.items()
            }
            hits = {n: s.hits() for n, s in zip(planned.names(), planned.searches, strict=True)}
            con = self.executor.open(handle.db, dict(tables), hits)
            text, params = self._text(planned, planned.params or {})
            result = self.executor.run(con, text, params, list(tables.values()), deadline)
            stack.callback(result.close)
        except BaseException:
            stack.close()
            raise
        batches = _streamed(iter(result), stack)
        weakref.finalize(batches, stack.close)  # a stream never read still frees its slot
        return flight.GeneratorStream(result.schema, batches)


def _command(raw: bytes, what: str) -> tuple[str, Any]:
    name, message = flightsql.unpack(raw, what)
    if message is not None:
        return name, message
    refused = flightsql.REFUSED_COMMANDS.get(name)
    if refused is not None:
        raise invalid(f"{name}: {refused} is not supported; SQL through Elanus is read-only")
    raise invalid(f"{what}: {name} is not a Flight SQL message Elanus serves")


def _ordered(parameters: set[str]) -> list[str]:
    return sorted(parameters, key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p))


def _streamed(batches: Iterator[pa.RecordBatch], stack: contextlib.ExitStack) -> Iterator[Any]:
    """The result's batches, errors coded (``coded_stream``); the slot freed at the end, or
    when the client goes away."""
    try:
        yield from coded_stream(batches, "SQL")
    finally:
        stack.close()
