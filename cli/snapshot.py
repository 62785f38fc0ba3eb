"""Snapshot commands: ``elanus snapshot create|list|describe|drop|restore`` (the snapshot
actions, docs/protocol.md; docs/deploy.md, Snapshots).

``restore`` follows its job until the rows serve (``--no-wait``: prints the job id);
``describe`` shows the snapshot's timestamp, segments and what a restore recreates.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType

from elanus.cli.admin import CollectionArg, _hybrid_ts
from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, run_action
from elanus.cli.output import emit, kv_table, table
from elanus.errors import ElanusError, ErrorCode

if TYPE_CHECKING:
    from elanus.client.client import Client
    from elanus.ops.snapshots import SnapshotDescription, SnapshotListing

POLL_S = 0.2

snapshot_app = typer.Typer(
    help="Take, list, describe, drop and restore snapshots of collections.", no_args_is_help=True
)
NameArg = Annotated[str, typer.Argument(help="Snapshot name.", show_default=False)]


def _render_snapshot(s: SnapshotListing) -> RenderableType:
    return kv_table(
        {
            "snapshot": s["name"],
            "collection": s["collection"],
            "taken at": _hybrid_ts(s["ts"]),
            "partitions": ", ".join(s["partitions"]),
            "segments": s["segments"],
            "rows": f"{int(s['rows']):,} (before deletes)",
            "description": s["description"] or "-",
        },
        title=f"snapshot {s['name']}",
    )


@snapshot_app.command("create")
def snapshot_create(
    ctx: typer.Context,
    collection: CollectionArg,
    name: NameArg,
    description: Annotated[str, typer.Option("--description", help="What it is for.")] = "",
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Flush a collection and record a snapshot of it (metadata; its files are kept)."""
    run_action(
        ctx,
        lambda c: c.create_snapshot(name, collection, description=description),
        _render_snapshot,
        as_json=as_json,
        uri=uri,
    )


@snapshot_app.command("list")
def snapshot_list(
    ctx: typer.Context,
    collection: Annotated[
        str | None, typer.Argument(help="Only this collection's snapshots.", show_default=False)
    ] = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """List snapshots, oldest first."""

    def render(snapshots: list[SnapshotListing]) -> RenderableType:
        return table(
            ["snapshot", "collection", "taken at", "segments", "rows", "description"],
            [
                (
                    s["name"],
                    s["collection"],
                    _hybrid_ts(s["ts"]),
                    s["segments"],
                    f"{int(s['rows']):,}",
                    s["description"],
                )  # fmt: skip
                for s in snapshots
            ],
            title=f"{len(snapshots)} snapshot(s)",
        )

    run_action(ctx, lambda c: c.list_snapshots(collection or ""), render, as_json=as_json, uri=uri)


@snapshot_app.command("describe")
def snapshot_describe(
    ctx: typer.Context,
    collection: CollectionArg,
    name: NameArg,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Show a snapshot and the indexes a restore recreates."""

    def render(s: SnapshotDescription) -> RenderableType:
        indexes = s["shape"].get("indexes") or []
        shown = table(
            ["field", "index", "type", "metric"],
            [
                (i["field_name"], i["index_name"], i["index_type"], i["metric_type"])
                for i in indexes
            ],
            title=f"{len(indexes)} index(es)",
        )
        return Group(_render_snapshot(s), shown)

    run_action(
        ctx, lambda c: c.describe_snapshot(name, collection), render, as_json=as_json, uri=uri
    )


@snapshot_app.command("drop")
def snapshot_drop(
    ctx: typer.Context,
    collection: CollectionArg,
    name: NameArg,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a snapshot (its files go unless a pin holds them)."""

    def drop(c: Client) -> dict[str, str]:
        c.drop_snapshot(name, collection)
        return {"dropped": name, "collection": collection}

    run_action(
        ctx,
        drop,
        lambda d: f"dropped snapshot {d['dropped']} of {d['collection']}",
        as_json=as_json,
        uri=uri,
    )


@snapshot_app.command("restore")
def snapshot_restore(
    ctx: typer.Context,
    collection: CollectionArg,
    name: NameArg,
    target: Annotated[str, typer.Argument(help="The new collection.", show_default=False)],
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Print the job id and return without waiting.")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0, help="Seconds to wait.")] = 3600.0,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Restore a snapshot into a new collection (not loaded afterwards)."""
    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    with connect(state) as client:
        job_id = client.restore_snapshot(name, collection, target)
        job = client.get_restore_snapshot_state(job_id)
        deadline = time.monotonic() + timeout
        while not no_wait and job["state"] not in (
            "RestoreSnapshotCompleted",
            "RestoreSnapshotFailed",
        ):
            if time.monotonic() >= deadline:
                raise ElanusError(
                    ErrorCode.TIMEOUT,
                    f"restore job {job_id} is still {job['state']} after {timeout:g}s",
                )
            time.sleep(POLL_S)
            job = client.get_restore_snapshot_state(job_id)
    if job["state"] == "RestoreSnapshotFailed":
        raise ElanusError(ErrorCode.INTERNAL, f"restore job {job_id} failed: {job['reason']}")
    values = {
        "job": job_id,
        "snapshot": job["snapshot"],
        "collection": job["collection"],
        "state": job["state"],
        "progress": f"{job['progress']}%",
        "rows": f"{int(job['rows']):,}",
    }
    emit(job, lambda _: kv_table(values, title=f"restore job {job_id}"), state.json)
