"""Data commands: ``insert`` (a Parquet, JSON Lines or CSV file), ``flush`` and ``segments``.

``insert`` streams the file with pyarrow and sends it in batches of ``--batch-rows`` through
``Client.insert``; the server does the real checking (types, dimensions, nulls), so the
only work done here is what a file format cannot express: CSV has no lists, so vectors and
arrays arrive as JSON text (``"[0.1, 0.2]"``) and are parsed (dense vectors vectorised with
Arrow compute), and a JSON-typed field read from JSON Lines as an object becomes JSON text.

Progress bars go to stderr, and only when it is a terminal, so stdout stays a table or JSON
and a failure stays one ``error: [CODE] message`` line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.console import Group, RenderableType
from rich.progress import (
    MofNCompleteColumn,
    Progress,
    TextColumn,
)

from elanus.cli.admin import CollectionArg, _hybrid_ts
from elanus.cli.context import CliState, JsonOpt, UriOpt, connect, run_action
from elanus.cli.output import emit, kv_table, stderr_progress, table
from elanus.errors import ElanusError, ErrorCode
from elanus.rows import to_arrow
from elanus.schema import DataType, Field, Schema

if TYPE_CHECKING:
    from elanus.flight.client import Client

DEFAULT_BATCH_ROWS = 10_000
DEFAULT_FLUSH_TIMEOUT_S = 300.0
POLL_S = 0.1

PARQUET = "parquet"
JSONL = "jsonl"
CSV = "csv"
_FORMATS = {".parquet": PARQUET, ".pq": PARQUET, ".jsonl": JSONL, ".ndjson": JSONL, ".csv": CSV}
# pyarrow's CSV and JSON readers decompress these on the fly (not Parquet: it compresses inside)
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")

_DONE_STATES = ("Flushed", "Dropped")
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
    typer.Option("--partition", "-p", help="Partition to insert into.", show_default=False),
]
BatchRowsOpt = Annotated[int, typer.Option("--batch-rows", min=1, help="Rows per insert request.")]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0, help="Seconds to wait for the flush.")
]


# =============================================================================================
# Reading files
# =============================================================================================
def file_format(path: Path) -> str:
    """The format of ``path`` from its extension; a usage error naming the file otherwise."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
        if suffixes and _FORMATS.get(suffixes[-1]) == PARQUET:
            suffixes = []  # a compressed Parquet file is not something pyarrow reads
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise typer.BadParameter(
            f"{path}: unknown file type; expected .parquet, .jsonl/.ndjson or .csv",
            param_hint="FILE",
        )
    return fmt


def check_file(path: Path) -> str:
    """Usage errors for a file that is not there or not readable; returns its format."""
    fmt = file_format(path)
    if not path.exists():
        raise typer.BadParameter(f"{path}: no such file", param_hint="FILE")
    if not path.is_file():
        raise typer.BadParameter(f"{path}: not a file", param_hint="FILE")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint="FILE") from None
    return fmt


@dataclass
class Source:
    """A file opened for reading: its record batches (read lazily where the format allows;
    wrap them in ``_guarded``) and its row count when the format tells it up front."""

    batches: Iterator[pa.RecordBatch]
    total: int | None


def _unreadable(path: Path, exc: BaseException) -> ElanusError:
    message = " ".join(str(exc).split()) or type(exc).__name__
    return ElanusError(ErrorCode.INVALID_ARGUMENT, f"cannot read {path.name}: {message}")


def _guarded(path: Path, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Reader failures (bad CSV/JSON/Parquet) as INVALID_ARGUMENT naming the file."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _unreadable(path, exc) from None
        yield batch


def open_source(path: Path, fmt: str, schema: Schema, batch_rows: int) -> Source:
    try:
        if fmt == PARQUET:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            return Source(iter(pf.iter_batches(batch_size=batch_rows)), pf.metadata.num_rows)
        if fmt == JSONL:
            import pyarrow.json as pajson

            whole = pajson.read_json(path)  # infers types over the whole file
            return Source(iter(whole.to_batches(max_chunksize=batch_rows)), whole.num_rows)
        import pyarrow.csv as pacsv

        reader = pacsv.open_csv(
            path, convert_options=pacsv.ConvertOptions(column_types=csv_column_types(schema))
        )
        return Source(iter(reader), None)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None


def csv_column_types(schema: Schema) -> dict[str, pa.DataType]:
    """Pin the schema's columns so CSV inference cannot guess wrong (``"007"`` stays a
    string); lists of any kind arrive as JSON text. Numbers are read wide: the server
    narrows them with range checks and names any value that does not fit."""
    types: dict[str, pa.DataType] = {}
    for f in schema.fields:
        dt = f.dtype
        if dt == DataType.BOOL:
            types[f.name] = pa.bool_()
        elif dt.is_scalar_number:
            types[f.name] = pa.float64() if dt in (DataType.FLOAT, DataType.DOUBLE) else pa.int64()
        else:  # VarChar, JSON text, and vectors/arrays as JSON text
            types[f.name] = pa.string()
    return types


def rebatch(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Tables of exactly ``rows`` rows (the last may be shorter); empty batches vanish."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        if pending and batch.schema != pending[0].schema:
            yield pa.Table.from_batches(pending)
            pending, count = [], 0
        while batch.num_rows:
            take = min(rows - count, batch.num_rows)
            pending.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == rows:
                yield pa.Table.from_batches(pending)
                pending, count = [], 0
    if count:
        yield pa.Table.from_batches(pending)


# =============================================================================================
# Columns a file format cannot type: JSON text in, Arrow lists out
# =============================================================================================
def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def prepare(
    batch: pa.RecordBatch, schema: Schema, first_row: int = 0, source: str = "the file"
) -> pa.RecordBatch:
    """Convert the columns whose file type cannot be what the schema field needs."""
    fields = {f.name: f for f in schema.fields}
    columns = list(batch.columns)
    changed = False
    for i, name in enumerate(batch.schema.names):
        f = fields.get(name)
        if f is None:
            continue
        converted = convert_column(f, columns[i], first_row, source)
        if converted is not columns[i]:
            columns[i] = converted
            changed = True
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def convert_column(
    f: Field, arr: pa.Array, first_row: int = 0, source: str = "the file"
) -> pa.Array:
    t = arr.type
    dt = f.dtype
    if pa.types.is_null(t):
        return arr
    if dt in (DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR):
        if not _is_text(t):
            return arr
        parsed = parse_dense_vectors(arr)
        if parsed is not None:
            return parsed
        return _by_rows(f, _json_rows(f, arr, first_row, source))
    if dt in (DataType.BINARY_VECTOR, DataType.SPARSE_FLOAT_VECTOR, DataType.ARRAY):
        if _is_text(t):
            return _by_rows(f, _json_rows(f, arr, first_row, source))
        if dt == DataType.BINARY_VECTOR and _is_list(t):  # lists of byte values
            return _by_rows(f, arr.to_pylist())
        if dt == DataType.SPARSE_FLOAT_VECTOR and not pa.types.is_map(t):
            return _by_rows(f, [_drop_null_keys(v) for v in arr.to_pylist()])
        return arr
    if dt == DataType.JSON and not _is_text(t):
        # JSON Lines gives objects as structs (the union of the rows' keys, missing = null)
        struct_like = pa.types.is_struct(t)
        out = [
            None
            if v is None
            else json.dumps(_drop_null_keys(v) if struct_like else v, ensure_ascii=False)
            for v in arr.to_pylist()
        ]
        return pa.array(out, type=pa.string())
    return arr


def parse_dense_vectors(arr: pa.Array) -> pa.Array | None:
    """``"[0.1, 2, 3e-1]"`` text → ``list<float32>``, vectorised; None when some value is
    not that simple shape (then rows are parsed one by one, to name the bad one)."""
    text = pc.utf8_trim_whitespace(arr)
    bracketed = pc.and_(pc.starts_with(text, "["), pc.ends_with(text, "]"))
    if not pc.all(pc.fill_null(bracketed, True)).as_py():
        return None
    parts = pc.split_pattern(pc.utf8_slice_codeunits(text, 1, -1), ",")
    try:
        values = pc.utf8_trim_whitespace(pc.list_flatten(parts)).cast(pa.float32())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    lengths = pc.fill_null(pc.list_value_length(parts), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    mask = pc.is_null(arr) if arr.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask)


def _json_rows(f: Field, arr: pa.Array, first_row: int, source: str) -> list[Any]:
    rows: list[Any] = []
    for i, text in enumerate(arr.to_pylist()):
        if text is None:
            rows.append(None)
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                f"field {f.name!r}: the value at row {first_row + i} of {source} is not JSON "
                f"({exc.msg}): {text[:60]!r}",
            ) from None
        rows.append(_drop_null_keys(value))
    return rows


def _drop_null_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_null_keys(v) for k, v in value.items() if v is not None}
    return value


def _by_rows(f: Field, values: list[Any]) -> pa.Array:
    """Python values typed by the SDK's own conversion (``elanus.rows.to_arrow``)."""
    if all(v is None for v in values):
        return pa.nulls(len(values), type=f.arrow_type())
    column = to_arrow({f.name: values}, Schema([f])).column(f.name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


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
        source = open_source(file, fmt, schema, batch_rows)
        prepared = (
            prepare(b, schema, first, file.name)
            for b, first in _with_offsets(_guarded(file, source.batches))
        )
        with stderr_progress(state.json, MofNCompleteColumn(), TextColumn("rows")) as progress:
            task = progress.add_task(f"insert {file.name}", total=source.total)
            for chunk in rebatch(prepared, batch_rows):
                try:
                    result = client.insert(collection, chunk, partition_name=partition)
                except ElanusError as exc:
                    raise _batch_error(exc, file, sent, chunk.num_rows) from None
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


def _with_offsets(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
    first = 0
    for batch in batches:
        yield batch, first
        first += batch.num_rows


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


def segment_list(client: Client, collection: str) -> list[dict[str, Any]]:
    """The collection's segments by id, each with its partition's name added."""
    names = _partition_names(client, collection)
    segments = sorted(client.get_segment_info(collection), key=lambda s: s["segment_id"])
    for s in segments:
        pid = s.get("partition_id")
        s["partition"] = names.get(pid, str(pid)) if isinstance(pid, int) else None
    return segments


def render_segments(collection: str) -> Callable[[list[dict[str, Any]]], RenderableType]:
    def render(segments: list[dict[str, Any]]) -> RenderableType:
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
        done = sum(1 for i in ids if states.get(i, "Flushed") in _DONE_STATES)
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
