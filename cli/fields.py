"""``elanus collection alter-field``: set or remove one field's properties, as Milvus's
``alter_collection_field`` (``elanus.fieldprops`` says which keys and what they do).
Registered on ``collection_app`` by ``cli/admin.py``; apart so that module stays short."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from elanus.cli.context import JsonOpt, UriOpt, key_values, option, run_action


def collection_alter_field(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Collection name.", show_default=False)],
    field: Annotated[str, typer.Argument(help="Field name.", show_default=False)],
    props: Annotated[
        list[str] | None,
        option(
            "--set",
            help="KEY=VALUE (repeatable): max_length, max_capacity, mmap.enabled, warmup...",
        ),
    ] = None,
    drop: Annotated[
        list[str] | None,
        option("--drop", help="A key to remove (mmap.enabled, warm-up keys)."),
    ] = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Change a field's max_length (VarChar) or max_capacity (Array), raised or lowered;
    set or remove its mmap.enabled and warm-up keys while the collection is released."""
    properties = key_values(props)
    if not properties and not drop:
        raise typer.BadParameter("give --set or --drop", param_hint="--set/--drop")

    def alter(client: Any) -> dict[str, Any]:
        if properties:
            client.alter_collection_field(name, field, properties)
        if drop:
            client.drop_collection_field_properties(name, field, list(drop))
        fields = client.describe_collection(name)["fields"]
        params = next(f for f in fields if f["name"] == field)["params"]
        return {"collection": name, "field": field, "params": params}

    def shown(result: dict[str, Any]) -> str:
        params = ", ".join(f"{k}={v}" for k, v in result["params"].items())
        return (
            f"[green]✓[/green] altered field [bold]{field}[/bold] of [bold]{name}[/bold]: {params}"
        )

    run_action(ctx, alter, shown, as_json=as_json, uri=uri)
