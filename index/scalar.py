"""Scalar indexes of a sealed segment: built by the index service like vector indexes
(``elanus.index.buildtask``), written next to the segment, loaded by workers and used by
filters (``elanus.expr.indexed``).

What is indexed is exactly what a filter reads: the column, or for a JSON path index the
filter's typed view of the path (its numbers, strings or booleans), so an answer from the
index equals the plain evaluation row for row. Two file formats, one per family:

- STL_SORT and TRIE, sorted lists: ``scalar.arrow`` holds one record per non-NULL row,
  ``(value, row)`` in value order (a sorted array, or a sorted string list a trie walk
  would give); lookups binary-search it.
- INVERTED and BITMAP, posting lists: ``scalar.arrow`` holds one record per distinct value,
  ``(value, bitmap)`` with the rows as a serialized Roaring bitmap.

Both keep the NULL (and NaN) rows as Roaring bitmaps in the file's schema metadata;
``meta.json`` holds the spec and the row count. In memory both become a
:class:`~elanus.expr.indexed.ValueIndex`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from elanus import objstore
from elanus.errors import invalid
from elanus.expr.indexed import ValueIndex, distinct_starts
from elanus.expr.nodes import Context
from elanus.scalarindex import ScalarSpec
from elanus.schema import DataType, Field
from elanus.schemachange import column_of_field

FORMAT = "elanus-scalar-1"
META_FILE = "meta.json"
DATA_FILE = "scalar.arrow"
SORTED_TYPES = frozenset({"STL_SORT", "TRIE"})


def indexed_values(table: pa.Table, field: str, spec: ScalarSpec) -> pa.Array:
    """The values a filter on ``field`` (or on the spec's JSON path) reads, per row."""
    ctx = Context(table, {})
    if spec.json_path is None:
        return ctx.column(field)
    view = ctx.json(field, spec.path)
    if spec.dtype == DataType.DOUBLE:
        return view.number()
    if spec.dtype == DataType.VARCHAR:
        return view.string()
    return view.boolean()


def build_scalar_index(lance_path: str, field: str, spec: ScalarSpec) -> ValueIndex:
    """Index column ``field`` of the Lance dataset at ``lance_path`` (that column only)."""
    import lance

    try:
        dataset = lance.dataset(lance_path, storage_options=objstore.lance_options(lance_path))
        tag = None if spec.field_id is None else str(spec.field_id).encode()
        if field not in dataset.schema.names or not column_of_field(
            dataset.schema.field(field), tag
        ):  # a field added after the segment was written (maybe a dropped one's namesake)
            return ValueIndex.from_array(_nulls(dataset.count_rows(), field, spec))
        table = dataset.to_table(columns=[field])
    except (ValueError, OSError) as e:
        raise invalid(f"cannot read field {field!r} from {lance_path}: {e}") from None
    return ValueIndex.from_array(indexed_values(table, field, spec))


def _nulls(n: int, field: str, spec: ScalarSpec) -> pa.Array:
    return pa.nulls(n, Field(field, spec.dtype).arrow_type())


def _bitmap(rows: np.ndarray) -> bytes:
    return bytes(BitMap(rows.astype(np.uint32)).serialize())


def _rows(blob: bytes) -> np.ndarray:
    return np.asarray(BitMap.deserialize(blob).to_array(), dtype=np.int64)


def write_scalar_index(index: ValueIndex, spec: ScalarSpec, directory: Path | str) -> list[str]:
    """Write ``index`` in its type's format into ``directory``; returns the file keys."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    counts = np.diff(index.offsets)
    if spec.index_type in SORTED_TYPES:
        values = index.values.take(pa.array(np.repeat(np.arange(len(counts)), counts)))
        table = pa.table({"value": values, "row": pa.array(index.rows, pa.int64())})
    else:
        blobs = [_bitmap(index.rows_between(i, i + 1)) for i in range(len(counts))]
        table = pa.table({"value": index.values, "bitmap": pa.array(blobs, pa.binary())})
    table = table.replace_schema_metadata(
        {b"nulls": _bitmap(index.nulls), b"nans": _bitmap(index.nans)}
    )
    with ipc.new_file(str(directory / DATA_FILE), table.schema) as out:
        out.write_table(table)
    meta = {"format": FORMAT, "spec": spec.to_dict(), "num_rows": index.num_rows}
    (directory / META_FILE).write_text(json.dumps(meta, indent=1))
    return [DATA_FILE, META_FILE]


def read_meta(directory: Path | str) -> dict[str, Any]:
    try:
        meta = json.loads((Path(directory) / META_FILE).read_text())
    except (OSError, ValueError) as e:
        raise invalid(f"no readable scalar index metadata in {directory}: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise invalid(f"{directory} holds no scalar index of format {FORMAT}")
    return meta


def load_scalar_index(directory: Path | str) -> tuple[ValueIndex, ScalarSpec]:
    """Read an index written by :func:`write_scalar_index` fully into memory."""
    meta = read_meta(directory)
    spec = ScalarSpec.from_dict(meta["spec"])
    n = int(meta["num_rows"])
    with ipc.open_file(str(Path(directory) / DATA_FILE)) as f:
        table = f.read_all()
    md = table.schema.metadata or {}
    nulls, nans = _rows(md[b"nulls"]), _rows(md[b"nans"])
    if spec.index_type in SORTED_TYPES:
        values = table.column("value").combine_chunks()
        rows = table.column("row").to_numpy()
        starts = distinct_starts(values)
        distinct = values.take(pa.array(starts, pa.int64()))
        offsets = np.concatenate([starts, [len(rows)]]).astype(np.int64)
    else:
        distinct = table.column("value").combine_chunks()
        parts = [_rows(b) for b in table.column("bitmap").to_pylist()]
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    index = ValueIndex(distinct, offsets, rows.astype(np.int64), nulls, nans, n)
    covered = len(rows) + len(nulls) + len(nans)
    if covered != n or (len(rows) and (rows.min() < 0 or rows.max() >= n)):
        raise invalid(f"the scalar index in {directory} does not cover its {n} rows")
    return index, spec


class ScalarSegmentIndex:
    """A loaded scalar index as a worker holds it: the values, the spec, and what a filter
    looks it up by (``key``: field and JSON path)."""

    def __init__(self, field: str, index: ValueIndex, spec: ScalarSpec) -> None:
        self.field = field
        self.index = index
        self.spec = spec

    @property
    def key(self) -> tuple[str, tuple[str | int, ...]]:
        return self.field, self.spec.path

    @property
    def entry(self) -> tuple[ValueIndex, DataType]:
        return self.index, self.spec.dtype


def load_segment_scalar(field: str, directory: Path | str) -> ScalarSegmentIndex:
    index, spec = load_scalar_index(directory)
    return ScalarSegmentIndex(field, index, spec)
