"""Data commands: ``insert`` (a Parquet, JSON Lines or CSV file), ``flush`` and ``segments``.

``insert`` streams the file with pyarrow (``elanus.filereaders``, shared with bulk import)
and sends it in batches of ``--batch-rows`` through ``Client.insert``; the server does the
real checking (types, dimensions, nulls); the readers only convert what a file format
cannot express (vectors and arrays as JSON text in CSV, JSON objects in JSON Lines).

Progress bars go to stderr, and only when it is a terminal, so stdout stays a table or JSON
and a failure stays one ``error: [CODE] message`` line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.progress import (
    MofNCompleteColumn,
    Progress,
    TextColumn,
)

from elanus import filenames, filereaders
from elanus.cli.admin import CollectionArg, _hybrid_ts
from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, option, run_action
from elanus.cli.output import emit, kv_table, stderr_progress, table
from elanus.errors import ElanusError, ErrorCode
from elanus.filereaders import rebatch
from elanus.ops.replies import SegmentRecord
from elanus.schema import Schema
from elanus.states import SegmentState

if TYPE_CHECKING:
    from elanus.client.client import Client

DEFAULT_BATCH_ROWS = 10_000
DEFAULT_FLUSH_TIMEOUT_S = 300.0
POLL_S = 0.1

_DONE_STATES = (SegmentState.FLUSHED, SegmentState.DROPPED)
_ROW_ERRORS = (
    ErrorCode.SCHEMA_MISMATCH,
    ErrorCode.INVALID_ARGUMENT,
    ErrorCode.REQUEST_TOO_LARGE,
)

FileArg = Annotated[
    Path,
    typer.Argument(
        help="A .parquet, .jsonl/.ndjson or .csv file (CSV and JSON Lines may be .gz/.bz2/.zst).",
        show_default=False,
    ),
]
PartitionOpt = Annotated[
    str | None,
    option("--partition", "-p", help="Partition to insert into."),
]
BatchRowsOpt = Annotated[int, typer.Option("--batch-rows", min=1, help="Rows per insert request.")]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0, help="Seconds to wait for the flush.")
]


# =============================================================================================
# Reading files (the readers live in elanus.filereaders, shared with bulk import)
# =============================================================================================
def file_format(path: Path) -> str:
    """The format of ``path`` from its extension; a usage error naming the file otherwise."""
    try:
        return filenames.file_format(path)
    except ElanusError as exc:
        raise typer.BadParameter(exc.message, param_hint="FILE") from None


def check_file(path: Path) -> str:
    """Usage errors for a file that is not there or not readable; returns its format."""
    fmt = file_format(path)
    check_readable(path)
    return fmt


def check_readable(path: Path, hint: str = "FILE") -> None:
    if not path.exists():
        raise typer.BadParameter(f"{path}: no such file", param_hint=hint)
    if not path.is_file():
        raise typer.BadParameter(f"{path}: not a file", param_hint=hint)
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint=hint) from None


# =============================================================================================
# elanus insert
# =============================================================================================
def _rate(count: int, elapsed: float) -> str:
    return f"{count / elapsed:,.0f} rows/s" if elapsed > 0 and count else "-"


def insert(
    ctx: typer.Context,
    collection: CollectionArg,
    file: FileArg,
    partition: PartitionOpt = None,
    batch_rows: BatchRowsOpt = DEFAULT_BATCH_ROWS,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Insert the rows of a Parquet, JSON Lines or CSV file, in batches."""
    fmt = check_file(file)
    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    inserted = sent = 0
    timestamps: list[int] = []
    batches = 0
    started = time.monotonic()
    with connect(state) as client:
        schema = Schema.from_dict(client.describe_collection(collection)["schema"])
        source = filereaders.open_unit({"format": fmt, "paths": [file]}, schema, batch_rows)
        with stderr_progress(state.json, MofNCompleteColumn(), TextColumn("rows")) as progress:
            label = f"insert {file.name}"
            task = progress.add_task(label, total=source.total)

            def waiting(exc: ElanusError, wait: float) -> None:  # flow control refused a batch
                reason = exc.message.partition(": ")[2].partition(";")[0] or exc.message
                note = f"{label}: waiting {wait:.1f}s, the server is behind ({reason[:80]})"
                progress.update(task, description=note)

            client.on_retry = waiting
            for chunk in rebatch(source.batches, batch_rows):
                try:
                    result = client.insert(collection, chunk, partition_name=partition)
                except ElanusError as exc:
                    raise _batch_error(exc, file, sent, chunk.num_rows) from None
                progress.update(task, description=label)
                inserted += int(result.get("insert_count", 0))
                sent += chunk.num_rows
                timestamps.append(int(result.get("ts", 0)))
                batches += 1
                progress.advance(task, chunk.num_rows)
    elapsed = time.monotonic() - started
    summary = {
        "insert_count": inserted,
        "ts": timestamps[-1] if timestamps else 0,
        "elapsed_s": round(elapsed, 3),
    }

    def render(_: dict[str, Any]) -> RenderableType:
        return kv_table(
            {
                "rows inserted": f"{inserted:,}",
                "into": f"{collection}" + (f" (partition {partition})" if partition else ""),
                "from": f"{file} ({fmt}, {batches} batch(es))",
                "elapsed": f"{elapsed:.2f}s",
                "rate": _rate(inserted, elapsed),
                "first ts": _hybrid_ts(timestamps[0]) if timestamps else "-",
                "last ts": _hybrid_ts(timestamps[-1]) if timestamps else "-",
            },
            title=f"✓ inserted {inserted:,} row(s) into {collection}",
        )

    emit(summary, render, state.json)


def _batch_error(exc: ElanusError, file: Path, sent: int, size: int) -> ElanusError:
    """The server's error, saying where in the file it happened and what already went in."""
    notes = []
    if exc.code in _ROW_ERRORS:  # the server's "row i" counts from the start of the batch
        notes.append(
            f"batch of rows {sent}-{sent + size - 1} of {file.name}; its row 0 is row {sent}"
        )
    if exc.code == ErrorCode.REQUEST_TOO_LARGE:
        notes.append("a smaller --batch-rows makes smaller requests")
    if sent:
        notes.append(f"the {sent} row(s) before this batch were inserted")
    return ElanusError(exc.code, f"{exc.message} ({'; '.join(notes)})" if notes else exc.message)


# =============================================================================================
# elanus flush / elanus segments
# =============================================================================================
def _partition_names(client: Client, collection: str) -> dict[int, str]:
    described = client.describe_collection(collection)
    return {
        int(p["partition_id"]): str(p["name"])
        for p in described.get("partitions") or []
        if p.get("partition_id") is not None
    }


class SegmentRow(SegmentRecord):
    """A segment as ``segment list`` shows it: with its partition's name."""

    partition: str | None


def segment_list(client: Client, collection: str) -> list[SegmentRow]:
    """The collection's segments by id, each with its partition's name added."""
    names = _partition_names(client, collection)
    segments = sorted(client.get_segment_info(collection), key=lambda s: s["segment_id"])

    def named(s: SegmentRecord) -> SegmentRow:
        pid = s.get("partition_id")
        return {**s, "partition": names.get(pid, str(pid)) if isinstance(pid, int) else None}

    return [named(s) for s in segments]


def render_segments(collection: str) -> Callable[[list[SegmentRow]], RenderableType]:
    def render(segments: list[SegmentRow]) -> RenderableType:
        rows = sum(int(s.get("num_rows") or 0) for s in segments)
        return table(
            ["segment", "partition", "vchannel", "state", "rows"],
            [
                (
                    s.get("segment_id"),
                    s.get("partition"),
                    s.get("vchannel"),
                    s.get("state"),
                    f"{int(s.get('num_rows') or 0):,}",
                )
                for s in segments
            ],
            title=f"{collection}: {len(segments)} segment(s), {rows:,} row(s)",
        )

    return render


def _wait_flushed(
    client: Client, collection: str, ids: list[int], timeout: float, progress: Progress
) -> None:
    """Poll until every segment in ``ids`` is Flushed; TIMEOUT after ``timeout`` seconds."""
    task = progress.add_task(f"flush {collection}", total=len(ids))
    deadline = time.monotonic() + timeout
    while True:
        infos = client.get_segment_info(segment_ids=ids)
        states = {int(s["segment_id"]): s.get("state") for s in infos}
        done = sum(1 for i in ids if states.get(i, SegmentState.FLUSHED) in _DONE_STATES)
        progress.update(task, completed=done)
        if done == len(ids) and client.get_flush_state(ids):
            return
        if time.monotonic() >= deadline:
            raise ElanusError(
                ErrorCode.TIMEOUT,
                f"flush of {collection!r} not done after {timeout:g}s: "
                f"{done} of {len(ids)} segment(s) flushed",
            )
        time.sleep(POLL_S)


def flush(
    ctx: typer.Context,
    collection: CollectionArg,
    timeout: TimeoutOpt = DEFAULT_FLUSH_TIMEOUT_S,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Seal the collection's growing segments, wait until they are written, list segments."""
    state = CliState.of(ctx).merged(json=as_json, uri=uri)

    def action(client: Client) -> dict[str, Any]:
        ids = client.flush(collection, wait=False)
        if ids:
            with stderr_progress(state.json, MofNCompleteColumn(), TextColumn("segments")) as bar:
                _wait_flushed(client, collection, ids, timeout, bar)
        return {"segment_ids": ids, "flushed": True, "segments": segment_list(client, collection)}

    def render(result: dict[str, Any]) -> RenderableType:
        shown = render_segments(collection)(result["segments"])
        n = len(result["segment_ids"])
        title = f"✓ flushed {n} segment(s) of {collection}" if n else "nothing to flush"
        return Group(f"[green]{title}[/green]", "", shown)

    run_action(ctx, action, render, as_json=as_json, uri=uri)


def segments(
    ctx: typer.Context, collection: CollectionArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """List a collection's segments: partition, vchannel, state and rows."""
    run_action(
        ctx,
        lambda c: segment_list(c, collection),
        render_segments(collection),
        as_json=as_json,
        uri=uri,
    )
