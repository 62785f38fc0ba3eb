"""``vector_search(collection, vector, limit, filter => ..., output_fields => [...])``: an
indexed search as a table inside SQL.

DuckDB runs no Python table functions, so a call is taken out of the statement before it
runs (``statement.rewrite``): its arguments are evaluated as constant expressions (they
may be parameters), the search runs as the ``search`` action would (same checks, indexes,
filter and partitions) at the statement's snapshot timestamp, and its hits become a table
the statement then reads in the call's place. Its columns: the primary key (under its
field's name, so ``JOIN books USING (id)`` works), ``distance``, then the output fields
(dynamic ones in ``$meta``), ordered best first.

Arguments: ``collection`` (``'books'``, or ``'db.books'``), ``vector`` (a list of numbers;
query text for a BM25 function's output field), ``limit``, by position or by name; by name
only: ``filter``, ``filter_params`` (a struct or JSON text), ``output_fields`` (a list),
``anns_field``, ``search_params`` (a struct or JSON text: ``metric_type``, ``params``,
``radius``, ``range_filter``) and ``partition_names`` (a list).
"""

from __future__ import annotations

import dataclasses
import decimal
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from elanus.errors import invalid
from elanus.flight.metacache import CollectionInfo
from elanus.flight.search import hits_table
from elanus.flight.sql.statement import SEARCH_FUNCTION, Parser, SearchCall
from elanus.flight.sql.tables import sql_type
from elanus.ops import checked
from elanus.ops.search import Search
from elanus.outputs import stored_columns

if TYPE_CHECKING:
    from elanus.flight.search import QueryService

POSITIONAL = ("collection", "vector", "limit")
NAMED = (
    "filter",
    "filter_params",
    "output_fields",
    "anns_field",
    "search_params",
    "partition_names",
)
DISTANCE = "distance"


def evaluate(
    parser: Parser, call: SearchCall, params: dict[str, Any] | None, default_db: str
) -> Search:
    """The call's arguments as a ``search`` record, unchecked (``params``: the statement's
    bound values; None while they are unknown, when an argument that needs one is
    refused)."""
    if len(call.positional) > len(POSITIONAL):
        raise invalid(
            f"{SEARCH_FUNCTION} takes {len(POSITIONAL)} arguments by position "
            f"({', '.join(POSITIONAL)}), then named ones (name => value)"
        )
    args = dict(zip(POSITIONAL, call.positional, strict=False))
    for name, expr in call.named.items():
        if name not in POSITIONAL + NAMED:
            raise invalid(
                f"{SEARCH_FUNCTION}: unknown argument {name!r}; it takes "
                f"{', '.join(POSITIONAL + NAMED)}"
            )
        if name in args:
            raise invalid(f"{SEARCH_FUNCTION}: argument {name!r} is given twice")
        args[name] = expr
    missing = [n for n in POSITIONAL if n not in args]
    if missing:
        raise invalid(f"{SEARCH_FUNCTION}: argument {missing[0]!r} is missing")
    values = {name: _plain(parser.evaluate(expr, params)) for name, expr in args.items()}
    target = values.pop("collection")
    if not isinstance(target, str):
        raise invalid(f"{SEARCH_FUNCTION}: 'collection' must be a name (text)")
    db, _, name = target.rpartition(".")
    for key in ("filter_params", "search_params"):
        if isinstance(values.get(key), str):
            try:
                values[key] = orjson.loads(values[key])
            except orjson.JSONDecodeError:
                raise invalid(f"{SEARCH_FUNCTION}: '{key}' is not a JSON object") from None
    return Search(
        db=db or default_db,
        collection=name,
        data=[values.pop("vector")],
        limit=values.pop("limit"),
        **values,
    )


def _plain(value: Any) -> Any:
    """DuckDB's Python values as JSON's: decimals (``[0.1, 0.2]`` is DECIMAL) as floats."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class SearchRun:
    """A checked search at the statement's timestamp: its result schema, and its hits."""

    def __init__(self, query: QueryService, info: CollectionInfo, search: Search, ts: int):
        self.query = query
        self.info = info
        self.request = checked(dataclasses.replace(search, as_of=ts, consistency_level=None))
        self.plan = query.prepare_search(info, self.request)
        pk = info.schema.primary
        fields = [pa.field(pk.name, pk.arrow_type(), nullable=False)]
        fields.append(pa.field(DISTANCE, pa.float32(), nullable=False))
        for name in stored_columns(info.schema, self.plan.outputs):
            if name == DISTANCE:
                raise invalid(
                    f"{SEARCH_FUNCTION}: an output field named {DISTANCE!r} would hide "
                    "the distance column; select it from the collection with a join"
                )
            if name != pk.name:
                fields.append(pa.field(name, sql_type(info, name)))
        self.schema = pa.schema(fields)

    def hits(self) -> pa.Table:
        """Run the search: its hits, best first, as ``schema``."""
        query = self.query
        queries = query.search_data(self.plan, self.request.data)
        merged, _ = query.run_search(self.plan, queries)
        pk = self.info.schema.primary.name
        table = hits_table(merged, self.info.schema.primary.arrow_type())
        table = table.rename_columns([pk if n == "id" else n for n in table.column_names])
        columns = []
        for field in self.schema:
            column = table.column(field.name).combine_chunks()
            if field.type == pa.json_():
                column = pa.ExtensionArray.from_storage(field.type, column.cast(pa.string()))
            columns.append(column.cast(field.type))
        return pa.Table.from_arrays(columns, schema=self.schema)
