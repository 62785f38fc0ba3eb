"""``elanus backup create|list|restore``: consistent copies of a server's data.

``create`` asks the running server (its coord writes the copy, so TARGET is a path on the
coord's machine, or ``s3://``); ``list`` and ``restore`` read the backups themselves and
need no server: ``restore`` fills an empty data dir (and storage root) that
``elanus standalone --data-dir`` then serves. docs/deploy.md (Backup) has the details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType

from elanus import objstore
from elanus.cli.context import CliState, DataDirOpt, JsonOpt, UriOpt, run_action
from elanus.cli.output import emit, kv_table, table

if TYPE_CHECKING:
    from elanus.client.client import Client

backup_app = typer.Typer(
    help="Back up a running server at one timestamp, list backups, restore one.",
    no_args_is_help=True,
)

TargetArg = Annotated[
    str,
    typer.Argument(
        help="Where backups go: an absolute path (on the coord's machine) or s3://bucket/prefix.",
        show_default=False,
    ),
]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _collections(rows: list[dict[str, Any]]) -> RenderableType:
    return table(
        ("database", "collection", "segments", "rows"),
        [(c["db"], c["name"], c["segments"], c["rows"]) for c in rows],
    )


@backup_app.command("create")
def create(
    ctx: typer.Context,
    target: TargetArg,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", "-n", help="Backup name (default backup-<UTC time>).", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds the flush and copy may take.")
    ] = 3600.0,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Flush, then copy every collection as it stood at one timestamp to TARGET/NAME."""

    def action(client: Client) -> dict[str, Any]:
        return client.create_backup(target, name, timeout)

    def render(r: dict[str, Any]) -> RenderableType:
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
    if objstore.is_remote(target):
        objstore.configure(settings.replace(storage=target.rstrip("/")))
    from elanus.meta import backupfiles  # Lance and DuckDB: only for the backup commands

    found = backupfiles.list_backups(target.rstrip("/") if objstore.is_remote(target) else target)

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
        typer.Option(
            "--storage",
            show_default=False,
            help="Storage root to fill (default: <data-dir>/storage, or the settings').",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore a backup into an empty data dir (and storage root); then start a server on it."""
    state = CliState.of(ctx).merged(json=as_json, data_dir=data_dir)
    settings = state.settings(storage=storage)
    source = source.rstrip("/") if objstore.is_remote(source) else source
    from elanus.meta import backupfiles

    result = backupfiles.restore(source, settings)

    def render(r: dict[str, Any]) -> RenderableType:
        title = f"[green]✓ restored {r['name']} (ts {r['ts']}) into {r['data_dir']}[/green]"
        summary = {
            "storage": r["storage"],
            "files": r["files"],
            "size": _size(r["bytes"]),
            "seconds": r["seconds"],
        }
        hint = f"start it: elanus standalone --data-dir {r['data_dir']}; then load its collections"
        return Group(title, kv_table(summary), _collections(r["collections"]), hint)

    emit(result, render, state.json)
