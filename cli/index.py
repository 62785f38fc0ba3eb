"""``elanus index create|describe|list|drop|build``: the index service from the shell.

``build`` runs the collection's pending build tasks as a Spark job (``--spark-master``),
with a progress bar while the executors report."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.progress import MofNCompleteColumn, TextColumn

from elanus.cli.admin import CollectionArg
from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, json_object, run_action
from elanus.cli.output import emit, kv_table, stderr_progress, table
from elanus.indexparams import BINARY_TYPES, FLOAT_TYPES, SPARSE_TYPES
from elanus.scalarindex import SCALAR_INDEX_TYPES

if TYPE_CHECKING:
    from elanus.client.client import Client
    from elanus.client.replies import IndexInfo

index_app = typer.Typer(
    help="Create, inspect, drop and build vector and scalar indexes.", no_args_is_help=True
)

TYPE_HELP = (
    f"AUTOINDEX (the field's default); float vectors: {', '.join(FLOAT_TYPES)}; "
    f"binary vectors: {', '.join(BINARY_TYPES)}; sparse vectors (and BM25 fields): "
    f"{', '.join(SPARSE_TYPES)}; scalars and JSON paths: {', '.join(SCALAR_INDEX_TYPES)}."
)
"""Built from the server's own lists, so the help names every type it accepts."""

IndexNameOpt = Annotated[
    str | None, typer.Option("--index-name", "-n", help="Index name (default: the field name).")
]


def _render_indexes(collection: str) -> Any:
    def render(indexes: list[dict[str, Any]]) -> RenderableType:
        if not indexes:
            return f"[yellow]{collection} has no index[/yellow]"
        rows = [
            (
                i["index_name"],
                i["field"],
                i["index_type"],
                i["metric_type"],
                json.dumps(i["params"]),
                i["state"],
                f"{i['indexed_rows']}/{i['total_rows']}",
                i["pending_tasks"],
                "; ".join(f"segment {f['segment_id']}: {f['reason']}" for f in i["failed_tasks"]),
            )
            for i in indexes
        ]
        columns = ("name", "field", "type", "metric", "params", "state", "rows", "pending")
        return table((*columns, "failures"), rows, title=f"indexes of {collection}")

    return render


@index_app.command("create")
def create(
    ctx: typer.Context,
    collection: CollectionArg,
    field: Annotated[
        str, typer.Argument(help="Field to index (vector, scalar or JSON).", show_default=False)
    ],
    index_type: Annotated[
        str,
        typer.Option(
            "--type",
            "-t",
            help=TYPE_HELP,
        ),
    ] = "AUTOINDEX",
    metric: Annotated[
        str | None,
        typer.Option(
            "--metric", help="L2, IP, COSINE (float); HAMMING, JACCARD (binary); IP, BM25 (sparse)."
        ),
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", help='Build parameters as JSON, e.g. {"M": 16}.')
    ] = None,
    index_name: IndexNameOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Index a field; every flushed segment gets a build task. A JSON field is indexed
    by path: --params '{"json_path": "<field>[\\"key\\"]", "json_cast_type": "double"}'."""
    build_params = json_object(params, "--params")

    def action(client: Client) -> list[IndexInfo]:
        client.create_index(
            collection,
            field,
            index_type=index_type,
            metric_type=metric,
            params=build_params,
            index_name=index_name,
        )
        return client.index_infos(collection, field_name=field)

    run_action(ctx, action, _render_indexes(collection), as_json=as_json, uri=uri)


@index_app.command("describe")
def describe(
    ctx: typer.Context,
    collection: CollectionArg,
    index_name: IndexNameOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Indexes with their build progress and failures."""
    run_action(
        ctx,
        lambda c: c.index_infos(collection, index_name),
        _render_indexes(collection),
        as_json=as_json,
        uri=uri,
    )


@index_app.command("list")
def list_(
    ctx: typer.Context, collection: CollectionArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Index names of a collection."""
    run_action(
        ctx,
        lambda c: c.list_indexes(collection),
        lambda names: "\n".join(names) or f"[yellow]{collection} has no index[/yellow]",
        as_json=as_json,
        uri=uri,
    )


@index_app.command("drop")
def drop(
    ctx: typer.Context,
    collection: CollectionArg,
    index_name: IndexNameOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop an index; its files are recycled in the background."""

    def action(client: Client) -> dict[str, Any]:
        client.drop_index(collection, index_name)
        return {
            "dropped": index_name or "(the collection's index)",
            "remaining": client.list_indexes(collection),
        }

    run_action(ctx, action, lambda r: kv_table(r, title="✓ dropped"), as_json=as_json, uri=uri)


@index_app.command("build")
def build(
    ctx: typer.Context,
    collection: CollectionArg,
    spark_master: Annotated[
        str, typer.Option("--spark-master", help="Spark master: local[N] or spark://host:port.")
    ] = "local[2]",
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Also run tasks that failed before.")
    ] = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Run the collection's pending index tasks as a Spark job (one task per segment)."""
    from elanus.spark.index_run import run_index_build

    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    with connect(state) as client:
        client.describe_collection(collection)  # a clear error for an unknown name, before Spark
    with stderr_progress(state.json, MofNCompleteColumn(), TextColumn("segments")) as bar:
        task = bar.add_task(f"index {collection}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        run = run_index_build(
            state.target_uri(),
            collection,
            master=spark_master,
            retry_failed=retry_failed,
            on_progress=progress,
            client_options=state.client_options(),
        )

    def render(result: dict[str, Any]) -> RenderableType:
        values = {k: result[k] for k in ("claimed", "built", "failed", "rejected", "seconds")}
        shown: list[RenderableType] = [kv_table(values, title=f"✓ index build of {collection}")]
        if result["failures"]:
            shown.append(
                table(
                    ("build id", "reason"),
                    [(f["build_id"], f["reason"]) for f in result["failures"]],
                )
            )
        return Group(*shown)

    emit(run.to_dict(), render, state.json)
    if run.failed:
        raise typer.Exit(1)
