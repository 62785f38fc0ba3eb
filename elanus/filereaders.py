"""Reading insert/import files into Arrow record batches, shared by ``elanus insert`` (the
CLI, client side) and bulk import (the data node, server side).

Row-based formats: Parquet, JSON Lines and CSV (CSV and JSON Lines may be compressed).
Column-based: NumPy, a set of ``.npy`` files, one per field, named after the field (Milvus's
numpy layout), all with the same number of rows. Staged writes are Arrow IPC files.

What a file format cannot express is converted here: CSV has no lists, so vectors and
arrays arrive as JSON text (``"[0.1, 0.2]"``) and are parsed (dense vectors vectorised with
Arrow compute); a JSON-typed field read from JSON Lines as an object becomes JSON text. The
real checking (types, dimensions, nulls, NaN) is ``elanus.validation.conform_insert``'s.

Only the files named are read, on the server only inside the import roots
(``elanus.importroots``), which may be in the object store (read through pyarrow's file
system; a ``.npy`` object is copied to an unnamed temporary file to be mapped). Errors
are ``ElanusError``s that name the file and never quote its bytes (``elanus.fileerrors``).
"""

from __future__ import annotations

import io
import json
import mmap
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.lib.format as npformat
import pyarrow as pa
import pyarrow.compute as pc

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.fileerrors import reader_failure
from elanus.filenames import (
    ARROW,
    COMPRESSED,
    JSONL,
    NUMPY,
    PARQUET,
    ROW_FORMATS,
    numpy_field_name,
)
from elanus.importroots import Readable, Root, open_confined
from elanus.rows import to_arrow
from elanus.schema import DENSE_FLOAT_TYPES, DYNAMIC_FIELD, DataType, Field, Schema

_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
COPY_BYTES = 8 << 20
"""Bytes per read when a ``.npy`` object is copied to a local file to be mapped."""
_NUMPY_TYPES = {
    DataType.BOOL,
    DataType.INT8,
    DataType.INT16,
    DataType.INT32,
    DataType.INT64,
    DataType.FLOAT,
    DataType.DOUBLE,
    DataType.VARCHAR,
    DataType.JSON,
    DataType.FLOAT_VECTOR,
    DataType.FLOAT16_VECTOR,
    DataType.BFLOAT16_VECTOR,  # floats, or uint16 bit patterns
    DataType.BINARY_VECTOR,
}


# =============================================================================================
# Formats
# =============================================================================================
# =============================================================================================
# Sources
# =============================================================================================
@dataclass
class Source:
    """A file (or numpy set) opened for reading: its record batches, read lazily where the
    format allows, and its row count when the format tells it up front."""

    batches: Iterator[pa.RecordBatch]
    total: int | None


def unreadable(path: str | Path, exc: BaseException, what: str = "") -> ElanusError:
    """A reader failure naming the file and the kind of problem, never the file's bytes."""
    return reader_failure(path, exc, what)


def guarded(
    path: str | Path, batches: Iterator[pa.RecordBatch], what: str = ""
) -> Iterator[pa.RecordBatch]:
    """Reader failures (bad CSV/JSON/Parquet) as INVALID_ARGUMENT naming the file."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - any reader failure; its text is not shown
            raise unreadable(path, exc, what) from None
        yield batch


def open_file(path: str | Path, roots: Sequence[Root] | None) -> Readable:
    """The file, opened for reading: confined to ``roots`` on the server (see
    ``elanus.importroots``; an object-store location opens through its file system), as is
    on the client (``roots`` None)."""
    if roots is not None:
        return open_confined(path, roots)
    try:
        return open(path, "rb")
    except OSError as exc:
        raise unreadable(path, exc) from None


def _closing(handle: Readable, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    finally:
        handle.close()


def open_source(
    path: str | Path,
    fmt: str,
    schema: Schema,
    batch_rows: int,
    *,
    delimiter: str = ",",
    roots: Sequence[Root] | None = None,
) -> Source:
    """Open a row-based file (Parquet, JSON Lines, CSV) or a staged Arrow IPC file."""
    location = os.fspath(path)  # an s3:// location is no Path
    path = Path(path)
    if fmt not in (*ROW_FORMATS, ARROW):
        raise invalid(f"{path.name}: not a row-based format: {fmt!r}")
    handle = open_file(location, roots)
    try:
        if fmt == PARQUET:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(handle)
            batches = pf.iter_batches(batch_size=batch_rows)
            return Source(_closing(handle, batches), pf.metadata.num_rows)
        if fmt == ARROW:
            with handle:
                table = pa.ipc.open_file(_mapped(handle)).read_all()
            return Source(iter(table.to_batches(max_chunksize=batch_rows)), table.num_rows)
        stream = pa.input_stream(handle, compression=_codec(path))
        if fmt == JSONL:
            import pyarrow.json as pajson

            with handle:
                whole = pajson.read_json(stream)  # infers types over the whole file
            return Source(iter(whole.to_batches(max_chunksize=batch_rows)), whole.num_rows)
        import pyarrow.csv as pacsv

        reader = pacsv.open_csv(
            stream,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(column_types=csv_column_types(schema)),
        )
        return Source(_closing(handle, iter(reader)), None)
    except Exception as exc:  # noqa: BLE001 - any reader failure; its text is not shown
        handle.close()
        raise unreadable(path, exc, fmt) from None


def _mapped(handle: Readable) -> Readable | pa.Buffer:
    """A local file memory-mapped: its batches come without a copy, and the pages of
    columns nobody reads are never touched (an import's check pass reads only the keys).
    Any other file as it is."""
    if isinstance(handle, pa.NativeFile):
        return handle
    try:
        return pa.py_buffer(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
    except (OSError, ValueError, io.UnsupportedOperation):  # empty, or not a plain file
        return handle


def _codec(path: Path) -> str | None:
    """What pyarrow's own path-based detection would pick (the file is opened by us)."""
    suffix = path.suffix.lower()
    return _CODECS.get(suffix) if suffix in COMPRESSED else None


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


def open_numpy(
    paths: list[str | Path],
    schema: Schema,
    batch_rows: int,
    roots: Sequence[Root] | None = None,
) -> Source:
    """A set of ``.npy`` files, one per field, memory-mapped and read in row slices."""
    fields = {f.name: f for f in schema.fields}
    arrays: dict[str, tuple[Field | None, np.ndarray]] = {}
    for p in paths:
        name = numpy_field_name(p)
        f = fields.get(name)
        if f is None and not (name == DYNAMIC_FIELD and schema.enable_dynamic_field):
            raise ElanusError(
                ErrorCode.SCHEMA_MISMATCH,
                f"{Path(p).name}: {name!r} is not a field of the collection schema "
                "(numpy files are named after their field)",
            )
        if f is not None and f.dtype not in _NUMPY_TYPES:
            raise invalid(
                f"{Path(p).name}: field {name!r} is {f.dtype.value}, which a .npy file cannot "
                "hold; import it from Parquet or JSON Lines"
            )
        arrays[name] = (f, _load_npy(p, roots))
    counts = {name: int(a.shape[0]) if a.ndim else -1 for name, (_, a) in arrays.items()}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{n}.npy: {c}" for n, c in counts.items())
        raise invalid(f"numpy import: the files do not have the same number of rows ({listed})")
    for name, (f, arr) in arrays.items():
        _check_numpy_shape(name, f, arr)
    total = next(iter(counts.values()), 0)

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, total, batch_rows):
            stop = min(total, start + batch_rows)
            columns = [_numpy_column(f, a[start:stop]) for f, a in arrays.values()]
            yield pa.RecordBatch.from_arrays(columns, names=list(arrays))

    return Source(batches(), total)


def _load_npy(path: str | Path, roots: Sequence[Root] | None) -> np.ndarray:
    """Memory-map an opened ``.npy`` file (no pickles); the map outlives the handle."""
    with _mappable(open_file(path, roots)) as handle:
        try:
            version = npformat.read_magic(handle)
            if version == (1, 0):
                shape, fortran, dtype = npformat.read_array_header_1_0(handle)
            else:
                shape, fortran, dtype = npformat.read_array_header_2_0(handle)
            if dtype.hasobject:
                raise ValueError("pickled objects")
            if not shape or 0 in shape:
                return np.zeros(shape, dtype=dtype)
            mapped: Any = handle  # numpy's stubs want a writable file; "r" maps read-only
            return np.memmap(mapped, dtype, "r", handle.tell(), shape, "F" if fortran else "C")
        except Exception as exc:  # noqa: BLE001 - numpy quotes bad headers: never shown
            raise unreadable(path, exc, ".npy") from None


def _mappable(handle: Readable) -> BinaryIO:
    """A local file numpy can map: the handle itself, or an object-store file copied into
    an unnamed temporary file (gone when closed)."""
    if not isinstance(handle, pa.NativeFile):
        return handle
    with handle:
        local = tempfile.TemporaryFile(prefix="elanus-npy-")  # noqa: SIM115 - the caller's
        try:
            while chunk := handle.read(COPY_BYTES):
                local.write(chunk)
            local.seek(0)
        except BaseException:
            local.close()
            raise
    return local


def _check_numpy_shape(name: str, f: Field | None, arr: np.ndarray) -> None:
    vector = f is not None and f.dtype.is_vector
    want = 2 if vector else 1
    if arr.ndim != want:
        shape = "rows × dimension" if vector else "one value per row"
        raise ElanusError(
            ErrorCode.SCHEMA_MISMATCH,
            f"{name}.npy: expected a {want}-d array ({shape}), got shape {tuple(arr.shape)}",
        )
    if arr.dtype.kind not in "biufU":
        raise ElanusError(
            ErrorCode.SCHEMA_MISMATCH,
            f"{name}.npy: numpy dtype {arr.dtype.str} is not supported (numbers, booleans or "
            "fixed-width unicode strings)",
        )


def _numpy_column(f: Field | None, part: np.ndarray) -> pa.Array:
    if part.ndim == 2:
        flat = np.ascontiguousarray(part).reshape(-1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat), part.shape[1])
    if part.dtype.kind == "U":
        return pa.array(part.tolist(), type=pa.string())
    return pa.array(np.ascontiguousarray(part))


def open_unit(
    unit: dict[str, Any],
    schema: Schema,
    batch_rows: int,
    *,
    delimiter: str = ",",
    roots: Sequence[Root] | None = None,
) -> Source:
    """Open one import unit (``group_files``' output) with its columns converted; on the
    server ``roots`` confines every file it opens."""
    fmt, paths = unit["format"], unit["paths"]
    if fmt == NUMPY:
        return open_numpy(paths, schema, batch_rows, roots)
    path = Path(paths[0])
    source = open_source(paths[0], fmt, schema, batch_rows, delimiter=delimiter, roots=roots)
    if fmt == ARROW:
        return source
    converted = (
        prepare(b, schema, first, path.name)
        for b, first in with_offsets(guarded(path, source.batches, fmt))
    )
    return Source(converted, source.total)


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


def with_offsets(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Each batch with the file row number of its first row."""
    first = 0
    for batch in batches:
        yield batch, first
        first += batch.num_rows


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
    if dt in DENSE_FLOAT_TYPES:
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
            raise invalid(  # the text itself is never quoted (elanus.fileerrors)
                f"field {f.name!r}: the value at row {first_row + i} of {source} is not JSON "
                f"({exc.msg} at character {exc.pos})",
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
