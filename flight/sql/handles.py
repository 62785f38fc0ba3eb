"""Statement handles and tickets: everything a later call needs, carried by the client.

The proxy keeps no state between Flight SQL calls. A prepared statement's handle holds its
text and database; binding parameters (DoPut) returns a new handle that holds them too
(Flight SQL's ``DoPutPreparedStatementResult``, made for stateless servers), and a query's
ticket holds the text, the parameters and the snapshot timestamp chosen when it was
planned. So any proxy redeems any handle or ticket, a restart loses nothing, and closing
a prepared statement frees nothing. Every call checks the caller's privileges anew; a
handle grants nothing its holder could not send as SQL.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import orjson
import pyarrow as pa

from elanus.errors import invalid
from elanus.requests import Body

VERSION = 1


class HandleDoc(TypedDict):
    """A handle as its bytes hold it (JSON): what a later call needs to run the statement."""

    v: int
    sql: str
    db: str
    ts: NotRequired[int]
    params: NotRequired[str]
    """The bound values: one Arrow IPC stream, base64."""


@dataclass(frozen=True)
class Handle:
    sql: str
    db: str
    params: pa.RecordBatch | None = None
    """One row of bound parameter values (column i is parameter i + 1, or named)."""
    ts: int = 0
    """The snapshot of a ticket (0 in a prepared statement's handle: chosen per run)."""

    def encode(self) -> bytes:
        doc = HandleDoc(v=VERSION, sql=self.sql, db=self.db)
        if self.ts:
            doc["ts"] = self.ts
        if self.params is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, self.params.schema) as writer:
                writer.write_batch(self.params)
            doc["params"] = base64.b64encode(sink.getvalue().to_pybytes()).decode()
        return orjson.dumps(doc)

    @classmethod
    def decode(cls, raw: bytes, what: str) -> Handle:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise invalid(f"{what} is not a statement handle of this server") from None
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            raise invalid(f"{what} is not a statement handle of this server")
        b = Body(doc, what)
        b.int("v")
        sql, db, ts = b.str("sql"), b.str("db"), b.int("ts", 0, lo=0)
        packed = b.str("params", "")
        b.done()
        return cls(sql=sql, db=db, params=_params(packed, what) if packed else None, ts=ts)


def _params(packed: str, what: str) -> pa.RecordBatch:
    try:
        reader = pa.ipc.open_stream(base64.b64decode(packed, validate=True))
        table = reader.read_all()
    except (binascii.Error, ValueError, pa.ArrowException):
        raise invalid(f"{what}: its parameters are unreadable") from None
    table.validate(full=True)
    return table.combine_chunks().to_batches()[0] if table.num_rows else pa.record_batch([])


def parameter_values(batch: pa.RecordBatch | None, wanted: set[str]) -> dict[str, Any]:
    """Values for the statement's parameters (DuckDB's identifiers: ``1``, ``2``, ... or
    names) from one row of bound values: by position for numbered ones, by column name
    for named ones. A parameter without a value, or a value no parameter takes, is
    refused."""
    if batch is None or batch.num_columns == 0:
        if wanted:
            raise invalid(f"the statement has {len(wanted)} parameter(s) and none was bound")
        return {}
    if batch.num_rows != 1:
        raise invalid(f"bind one row of parameter values, not {batch.num_rows}: a query runs once")
    row = batch.to_pylist()[0]
    values: dict[str, Any] = {}
    names = batch.schema.names
    for i, name in enumerate(names):
        key = name if name in wanted and not name.isdigit() else str(i + 1)
        values[key] = row[name]
    missing = sorted(wanted - values.keys())
    if missing:
        raise invalid(f"parameter ${missing[0]} has no bound value")
    extra = sorted(values.keys() - wanted)
    if extra:
        raise invalid(
            f"{len(values)} parameter value(s) bound, but the statement takes {len(wanted)}"
        )
    return values
