"""``elanus backup create|list|restore``: consistent copies of a server's data.

``create`` asks the running server (its coord writes the copy, so TARGET is a path on the
coord's machine, or ``s3://``); ``list`` and ``restore`` read the backups themselves and
need no server: ``restore`` fills an empty data dir (and storage root) that
``elanus standalone --data-dir`` then serves. docs/deploy.md (Backup) has the details.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType

from elanus import objstore
from elanus.cli.context import CliState, DataDirOpt, JsonOpt, UriOpt, option, run_action
from elanus.cli.output import emit, kv_table, table

if TYPE_CHECKING:
    from elanus.client.client import Client
    from elanus.ops.replies import BackedUpCollection, BackupCreated

backup_app = typer.Typer(
    help="Back up a running server at one timestamp, list backups, restore one.",
    no_args_is_help=True,
)

TargetArg = Annotated[
    str,
    typer.Argument(
        help="Where backups go: a path on the coord's machine (a relative one is taken from "
        "the current directory) or s3://bucket/prefix.",
        show_default=False,
    ),
]


def located(target: str) -> str:
    """A backup place as the server and the readers take it: ``s3://`` as given (without a
    trailing slash), a local path made absolute from the current directory, as every
    command reads its file arguments (the coord, which writes backups, has a directory of
    its own)."""
    if objstore.is_remote(target):
        return target.rstrip("/")
    return str(Path(target).expanduser().absolute())


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _collections(rows: list[BackedUpCollection]) -> RenderableType:
    return table(
        ("database", "collection", "segments", "rows", "loaded"),
        [
            (c["db"], c["name"], c["segments"], c["rows"], "yes" if c.get("loaded") else "no")
            for c in rows
        ],
    )


@backup_app.command("create")
def create(
    ctx: typer.Context,
    target: TargetArg,
    name: Annotated[
        str | None,
        option("--name", "-n", help="Backup name (default backup-<UTC time>)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds the flush and copy may take.")
    ] = 3600.0,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Flush, then copy every collection as it stood at one timestamp to TARGET/NAME."""

    place = located(target)

    def action(client: Client) -> BackupCreated:
        return client.create_backup(place, name, timeout)

    def render(r: BackupCreated) -> RenderableType:
        title = f"[green]✓ backup {r['name']} at ts {r['ts']}[/green]"
        summary = {
            "location": r["location"],
            "segments": r["segments"],
            "rows": r["rows"],
            "files": r["files"],
            "size": _size(r["bytes"]),
            "seconds": r["seconds"],
        }
        return Group(title, kv_table(summary), _collections(r["collections"]))

    run_action(ctx, action, render, as_json=as_json, uri=uri)


@backup_app.command("list")
def list_(ctx: typer.Context, target: TargetArg, as_json: JsonOpt = False) -> None:
    """List the backups under TARGET (read directly; no server needed)."""
    state = CliState.of(ctx).merged(json=as_json)
    settings = state.settings()
    target = located(target)
    if objstore.is_remote(target):
        objstore.configure(settings.replace(storage=target))
    from elanus.meta import backupfiles  # Lance and DuckDB: only for the backup commands

    found = backupfiles.list_backups(target)

    def render(rows: list[dict[str, Any]]) -> RenderableType:
        if not rows:
            return f"[yellow]no backups under {target}[/yellow]"
        shown = [
            (
                b["name"],
                str(b.get("created_at", "-"))[:16].replace("T", " "),
                b.get("ts", "-"),
                len(b.get("collections", [])),
                b.get("rows", "-"),
                _size(b["bytes"]) if "bytes" in b else "-",
                "complete" if b["complete"] else "incomplete",
            )
            for b in rows
        ]
        columns = ("name", "created", "ts", "collections", "rows", "size", "state")
        return table(columns, shown, title=f"backups under {target}")

    emit(found, render, state.json)


@backup_app.command("restore")
def restore(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(help="A backup: TARGET/NAME as create reported.", show_default=False)
    ],
    data_dir: DataDirOpt = None,
    storage: Annotated[
        str | None,
        option(
            "--storage",
            help="Storage root to fill (default: <data-dir>/storage, or the settings').",
        ),
    ] = None,
    load: Annotated[
        bool,
        typer.Option(
            "--load/--no-load",
            help="Whether the restored server loads the collections that were loaded at the "
            "backup (at its start).",
        ),
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Restore a backup into an empty data dir (and storage root); then start a server on it."""
    state = CliState.of(ctx).merged(json=as_json, data_dir=data_dir)
    settings = state.settings(storage=storage)
    from elanus.meta import backupfiles

    result = backupfiles.restore(located(source), settings, load=load)

    def render(r: dict[str, Any]) -> RenderableType:
        title = f"[green]✓ restored {r['name']} (ts {r['ts']}) into {r['data_dir']}[/green]"
        summary = {
            "storage": r["storage"],
            "files": r["files"],
            "size": _size(r["bytes"]),
            "seconds": r["seconds"],
        }
        loading = [c["name"] for c in r["collections"] if c.get("loaded")]
        hint = f"start it: elanus standalone --data-dir {r['data_dir']}" + (
            f"; it loads {', '.join(loading)} again, as at the backup"
            if loading
            else "; then load its collections (elanus load --all)"
        )
        return Group(title, kv_table(summary), _collections(r["collections"]), hint)

    emit(result, render, state.json)
