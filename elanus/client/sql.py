"""SQL over collections (docs/sql.md): ``client.sql("SELECT ...")`` returns an Arrow table.

It speaks Flight SQL, as any Flight SQL client would: a statement alone is one
``GetFlightInfo`` (``CommandStatementQuery``) and one ``DoGet`` per endpoint; with
parameters, the statement is prepared (``CreatePreparedStatement``), its values bound
(``DoPut``, which answers a handle holding them) and then run. The snapshot options travel
as call headers (``elanus-database``, ``elanus-consistency-level``, ``elanus-as-of``).
Protobuf is imported on the first call, so ``import elanus`` stays light.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.base import ClientBase
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.wire.codec import from_flight_error


class SqlAPI(ClientBase):
    def sql(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        as_of: int | None = None,
        consistency_level: str | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> pa.Table:
        """Run one read-only SQL statement; its rows as an Arrow table.

        ``params``: values of ``?`` / ``$1`` parameters in order, or of ``$name`` ones by
        name. ``as_of``: read at that hybrid timestamp (as ``AT (VERSION => ts)`` does);
        otherwise ``consistency_level`` (default: the strictest of the collections') picks
        the snapshot. ``db``: the database of unqualified names (the client's)."""
        from elanus import flightsql

        headers = [(b"elanus-database", (db or self.db).encode())]
        if consistency_level is not None:
            try:
                level = ConsistencyLevel.parse(consistency_level).value
            except ValueError as exc:
                raise invalid(f"sql: {exc}") from None
            headers.append((b"elanus-consistency-level", level.encode()))
        if as_of is not None:
            headers.append((b"elanus-as-of", str(int(as_of)).encode()))
        self._options(timeout)  # renews an expiring token first
        options = flight.FlightCallOptions(
            timeout=timeout if timeout is not None else self.timeout,
            headers=[*self._headers, *headers],
        )
        conn = self._conn()
        try:
            if params is None:
                command = flightsql.new("CommandStatementQuery", query=query)
            else:
                command = self._bound(query, params, options)
            descriptor = flight.FlightDescriptor.for_command(flightsql.pack(command))
            info = conn.get_flight_info(descriptor, options)
            tables = [conn.do_get(e.ticket, options).read_all() for e in info.endpoints]
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        if not tables:
            return info.schema.empty_table()
        return pa.concat_tables(tables)

    def _bound(self, query: str, params: Sequence[Any] | Mapping[str, Any], options: Any) -> Any:
        """A prepared statement's command with ``params`` bound (the server hands back a
        handle that holds them)."""
        from elanus import flightsql

        if isinstance(params, Mapping):
            names, values = [str(k) for k in params], list(params.values())
        elif isinstance(params, str | bytes) or not isinstance(params, Sequence):
            raise invalid("sql: params must be a list of values or a dict of named values")
        else:
            names, values = [str(i + 1) for i in range(len(params))], list(params)
        try:
            batch = pa.RecordBatch.from_arrays([pa.array([v]) for v in values], names=names)
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise invalid(f"sql: a parameter value has no Arrow type: {exc}") from None
        conn = self._conn()
        request = flightsql.new("ActionCreatePreparedStatementRequest", query=query)
        action = flight.Action(flightsql.CREATE_PREPARED, flightsql.pack(request))
        results = list(conn.do_action(action, options))
        name, created = flightsql.unpack(results[0].body.to_pybytes(), "prepared statement")
        if name != "ActionCreatePreparedStatementResult":
            raise ElanusError(ErrorCode.INTERNAL, f"unexpected answer {name!r} to a prepare")
        handle = created.prepared_statement_handle
        command = flightsql.new("CommandPreparedStatementQuery", prepared_statement_handle=handle)
        descriptor = flight.FlightDescriptor.for_command(flightsql.pack(command))
        writer, reader = conn.do_put(descriptor, batch.schema, options)
        writer.write_batch(batch)
        writer.done_writing()
        answer = reader.read()
        writer.close()
        if answer is not None:
            bound = flightsql.decode(
                "DoPutPreparedStatementResult", answer.to_pybytes(), "bound statement"
            )
            if bound.HasField("prepared_statement_handle"):
                handle = bound.prepared_statement_handle
        return flightsql.new("CommandPreparedStatementQuery", prepared_statement_handle=handle)
