"""``elanus database ...``: create, list, describe, alter the properties of and drop
databases (``elanus.dbproperties`` says which keys Elanus acts on)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from elanus.cli.admin import YesOpt, _confirm, _done
from elanus.cli.context import JsonOpt, UriOpt, key_values, option, run_action
from elanus.cli.output import kv_table, table

database_app = typer.Typer(
    help="Create, list, describe, alter the properties of and drop databases.",
    no_args_is_help=True,
)
DatabaseArg = Annotated[str, typer.Argument(help="Database name.", show_default=False)]
SetOpt = Annotated[
    list[str] | None,
    option(
        "--set",
        help="A property KEY=VALUE (repeatable), e.g. database.max.collections=10.",
    ),
]
DropOpt = Annotated[
    list[str] | None,
    option("--drop", help="A property key to remove (repeatable)."),
]


@database_app.command("create")
def database_create(
    ctx: typer.Context,
    name: DatabaseArg,
    props: SetOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Create a database, optionally with properties."""
    properties = key_values(props)

    def create(client: Any) -> dict[str, Any]:
        client.create_database(name, properties=properties or None)
        return {"created": name, "properties": properties}

    created = _done(f"created database [bold]{name}[/bold]")
    run_action(ctx, create, created, as_json=as_json, uri=uri)


@database_app.command("list")
def database_list(ctx: typer.Context, as_json: JsonOpt = False, uri: UriOpt = None) -> None:
    """List the databases."""
    run_action(
        ctx,
        lambda c: list(c.list_databases()),
        lambda names: table(["database"], [[n] for n in names], title=f"{len(names)} database(s)"),
        as_json=as_json,
        uri=uri,
    )


@database_app.command("describe")
def database_describe(
    ctx: typer.Context, name: DatabaseArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """A database's properties (as pymilvus's describe_database: name, then each key)."""
    run_action(
        ctx,
        lambda c: c.describe_database(name),
        lambda d: kv_table(
            {k: v for k, v in d.items() if k != "name"} or {"(none)": ""},
            title=f"database {name}: properties",
        ),  # fmt: skip
        as_json=as_json,
        uri=uri,
    )


@database_app.command("alter")
def database_alter(
    ctx: typer.Context,
    name: DatabaseArg,
    props: SetOpt = None,
    drop: DropOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Set (--set) or remove (--drop) a database's properties: one or the other, as Milvus."""
    properties = key_values(props)
    if bool(properties) == bool(drop):
        raise typer.BadParameter("give --set or --drop (one of them)", param_hint="--set/--drop")

    def alter(client: Any) -> dict[str, Any]:
        if properties:
            client.alter_database_properties(name, properties)
        else:
            client.drop_database_properties(name, list(drop or []))
        return client.describe_database(name)  # type: ignore[no-any-return]

    run_action(ctx, alter, _done(f"altered database [bold]{name}[/bold]"), as_json=as_json, uri=uri)


@database_app.command("drop")
def database_drop(
    ctx: typer.Context,
    name: DatabaseArg,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop an empty database (not 'default')."""
    _confirm(f"Drop database {name!r}?", yes)

    def drop(client: Any) -> dict[str, Any]:
        client.drop_database(name)
        return {"dropped": name}

    run_action(ctx, drop, _done(f"dropped database [bold]{name}[/bold]"), as_json=as_json, uri=uri)
