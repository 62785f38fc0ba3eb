"""Bulk import commands: ``elanus import COLLECTION FILE...``, ``elanus import-state JOB``
and ``elanus import-jobs [COLLECTION]``.

``import`` hands the files to the server: a server on this machine reads a file in place
when it lies inside its import roots; any other file is first uploaded into the server's
import area over Flight (``--upload`` always, ``--no-upload`` never). It then follows the
job with a progress bar on stderr; ``--no-wait`` prints the job id and returns at once.
Files that are not there are usage errors before anything is sent; a file the server
refuses fails the job, and the command, with the server's reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType
from rich.progress import TaskProgressColumn, TextColumn

from elanus.cli.admin import CollectionArg, _hybrid_ts
from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, option, run_action
from elanus.cli.data import PartitionOpt, check_readable
from elanus.cli.output import emit, kv_table, stderr_progress, table
from elanus.errors import ElanusError, ErrorCode
from elanus.filenames import group_files
from elanus.ops.imports import ImportJob
from elanus.states import ImportJobState

if TYPE_CHECKING:
    from elanus.client.client import Client

POLL_S = 0.1
DEFAULT_TIMEOUT_S = 3600.0

FilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="Parquet, JSON Lines (.jsonl/.ndjson) or CSV files, and/or the .npy files of "
        "one column set (one file per field, named after the field).",
        show_default=False,
    ),
]
JobArg = Annotated[int, typer.Argument(help="Import job id.", show_default=False)]
NoWaitOpt = Annotated[
    bool, typer.Option("--no-wait", help="Print the job id and return without waiting.")
]
UploadOpt = Annotated[
    bool | None,
    option(
        "--upload/--no-upload",
        help="Upload the files to the server first (default: when it cannot read them).",
    ),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0, help="Seconds to wait for the job.")]


def import_files(
    ctx: typer.Context,
    collection: CollectionArg,
    files: FilesArg,
    partition: PartitionOpt = None,
    no_wait: NoWaitOpt = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    upload: UploadOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Bulk import files into a collection as new segments (checked whole first)."""
    paths = [str(f.expanduser().resolve()) for f in files]
    try:
        group_files(paths)
    except ElanusError as exc:
        raise typer.BadParameter(exc.message, param_hint="FILE") from None
    for f in files:
        check_readable(f)
    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    started = time.monotonic()
    with connect(state) as client:
        job_id = client.bulk_import(collection, paths, partition_name=partition, upload=upload)
        if no_wait:
            result = client.get_import_state(job_id)
        else:
            result = _follow(client, job_id, timeout, state)
    timed: TimedImportJob = {**result, "elapsed_s": round(time.monotonic() - started, 3)}
    emit(timed, _render_job(f"import job {job_id}"), state.json)


def _follow(client: Client, job_id: int, timeout: float, state: CliState) -> ImportJob:
    """Poll the job with a progress bar until it ends; a failed job is this command's error."""
    deadline = time.monotonic() + timeout
    with stderr_progress(
        state.json, TaskProgressColumn(), TextColumn("{task.fields[stage]}")
    ) as bar:
        task = bar.add_task(f"import job {job_id}", total=1.0, stage="")
        while True:
            job = client.get_import_state(job_id)
            bar.update(task, completed=float(job["progress"]), stage=job.get("stage", ""))
            if job["state"] == ImportJobState.COMPLETED:
                return job
            if job["state"] == ImportJobState.FAILED:
                code = job.get("reason_code") or ErrorCode.INTERNAL.value
                raise ElanusError(code, f"import job {job_id} failed: {job['reason']}")
            if time.monotonic() >= deadline:
                raise ElanusError(
                    ErrorCode.TIMEOUT,
                    f"import job {job_id} is still {job['state']} after {timeout:g}s "
                    f"({float(job['progress']):.0%}); follow it with elanus import-state {job_id}",
                )
            time.sleep(POLL_S)


class TimedImportJob(ImportJob, total=False):
    """A job as ``import`` shows it: with the seconds the command took."""

    elapsed_s: float


def _untimed(job: ImportJob) -> TimedImportJob:
    """A job as shown by a command that did not wait for it: no ``elapsed_s``."""
    return {**job}


def _render_job(title: str) -> Callable[[TimedImportJob], RenderableType]:
    def render(job: TimedImportJob) -> RenderableType:
        values = {
            "job": job["job_id"],
            "collection": job.get("collection"),
            "state": job["state"],
            "progress": f"{float(job['progress']):.0%}",
            "rows": f"{int(job.get('rows') or 0):,}",
            "segments": len(job.get("segment_ids") or []),
            "import ts": _hybrid_ts(job["ts"]) if job.get("ts") else "-",
        }
        if job.get("reason"):
            values["reason"] = job["reason"]
        if job.get("files"):
            values["files"] = ", ".join(Path(p).name for p in job["files"])
        if "elapsed_s" in job:
            values["elapsed"] = f"{job['elapsed_s']:.2f}s"
        mark = "✓ " if job["state"] == ImportJobState.COMPLETED else ""
        return kv_table(values, title=f"{mark}{title}: {job['state']}")

    return render


def import_state(
    ctx: typer.Context, job: JobArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Show an import job: state, progress, rows, segments and any failure reason."""
    run_action(
        ctx,
        lambda c: _untimed(c.get_import_state(job)),
        _render_job(f"import job {job}"),
        as_json=as_json,
        uri=uri,
    )


def import_jobs(
    ctx: typer.Context,
    collection: Annotated[
        str | None, typer.Argument(help="Only this collection's jobs.", show_default=False)
    ] = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """List import jobs, oldest first."""

    def render(jobs: list[ImportJob]) -> RenderableType:
        return table(
            ["job", "collection", "state", "progress", "rows", "reason"],
            [
                (
                    j["job_id"],
                    j.get("collection"),
                    j["state"],
                    f"{float(j['progress']):.0%}",
                    f"{int(j.get('total_rows') or 0):,}",
                    j.get("reason") or "",
                )
                for j in jobs
            ],
            title=f"{len(jobs)} import job(s)",
        )

    run_action(ctx, lambda c: c.list_import_jobs(collection), render, as_json=as_json, uri=uri)
