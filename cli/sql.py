"""``elanus sql "SELECT ..."``: one read-only SQL statement over the collections (docs/sql.md),
printed as a table, as JSON (``--json``: a list of row objects) or as CSV (``--csv``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, option
from elanus.cli.output import console, table
from elanus.cli.read import ConsistencyOpt, check_consistency

if TYPE_CHECKING:
    import pyarrow as pa

StatementArg = Annotated[
    str, typer.Argument(help='One read-only SQL statement, e.g. "SELECT count(*) FROM books".')
]


def _params(values: list[str] | None) -> list[Any] | None:
    """``--param`` values as JSON (``3``, ``"text"``, ``[0.1, 0.2]``); bare text is text."""
    if not values:
        return None
    out = []
    for value in values:
        try:
            out.append(json.loads(value))
        except json.JSONDecodeError:
            out.append(value)
    return out


def sql(
    ctx: typer.Context,
    statement: StatementArg,
    params: Annotated[
        list[str] | None,
        option(
            "--param",
            help="Value of the next ? or $N parameter, as JSON (repeat, in order).",
        ),
    ] = None,
    as_of: Annotated[
        int | None,
        typer.Option("--as-of", min=1, help="Read at this hybrid timestamp.", show_default=False),
    ] = None,
    consistency: ConsistencyOpt = None,
    db: Annotated[
        str | None,
        option("--db", help="Database of unqualified collection names."),
    ] = None,
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV (a header, then rows).")] = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Run one SQL statement (read-only) over the collections; tables are collections."""
    level = check_consistency(consistency)
    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    if csv and state.json:
        raise typer.BadParameter("give --csv or --json, not both", param_hint="--csv")
    with connect(state) as client:
        result = client.sql(statement, _params(params), as_of=as_of, consistency_level=level, db=db)
    if csv:
        _csv(result)
    elif state.json:
        print(json.dumps(result.to_pylist(), indent=2, default=str))
    else:
        console.print(table(result.column_names, _rows(result)))


def _rows(result: pa.Table) -> list[list[Any]]:
    return [[row[n] for n in result.column_names] for row in result.to_pylist()]


def _csv(result: pa.Table) -> None:
    import csv as csv_module

    writer = csv_module.writer(sys.stdout, lineterminator="\n")
    writer.writerow(result.column_names)
    for row in _rows(result):
        writer.writerow(
            [json.dumps(v) if isinstance(v, list | dict) else "" if v is None else v for v in row]
        )
