"""Reading and writing a segment's files: Lance data, delta logs, pk stats."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout
from elanus.channels.dml import PK_COLUMN
from elanus.schema import TIMESTAMP_FIELD
from elanus.segments.pkstats import PkStats

DELTA_SCHEMA = pa.schema([pa.field("ts", pa.uint64(), nullable=False)])


def write_segment(seg_dir: Path, table: pa.Table, pk_field: str) -> Path:
    """Write (or rewrite, on replay after a crash) the segment's rows and its pk stats."""
    path = write_rows(seg_dir, table, first=True)
    write_pk_stats(seg_dir, table.column(pk_field))
    return path


def write_rows(seg_dir: Path, table: pa.Table, *, first: bool) -> Path:
    """Rows into the segment's Lance dataset: ``first`` starts it over (a replay after a
    crash rewrites it from the start), later calls add fragments."""
    seg_dir.mkdir(parents=True, exist_ok=True)
    path = layout.data_path(seg_dir)
    lance.write_dataset(table, str(path), mode="overwrite" if first else "append")
    return path


def set_import_ts(seg_dir: Path, ts: int) -> None:
    """Give every row of an imported segment the job's timestamp as ``_ts``: one new column
    file per fragment, the other columns untouched. Idempotent (a resumed job repeats it)."""
    ds = lance.dataset(str(layout.data_path(seg_dir)))
    if TIMESTAMP_FIELD in ds.schema.names:
        current = ds.to_table(columns=[TIMESTAMP_FIELD]).column(0)
        if pc.all(pc.equal(current, pa.scalar(ts, pa.uint64()))).as_py():
            return
        ds.drop_columns([TIMESTAMP_FIELD])
        ds = lance.dataset(str(layout.data_path(seg_dir)))
    out = pa.schema([pa.field(TIMESTAMP_FIELD, pa.uint64())])  # nullable, as flushes write it

    @lance.batch_udf(output_schema=out)
    def stamp(batch: pa.RecordBatch) -> pa.RecordBatch:
        values = pa.array(np.full(batch.num_rows, ts, dtype=np.uint64))
        return pa.record_batch([values], schema=out)

    ds.add_columns(stamp, read_columns=[ds.schema.names[0]])


def write_pk_stats(seg_dir: Path, pks: pa.Array | pa.ChunkedArray) -> PkStats:
    stats = PkStats.build(pks)
    stats.save(layout.stats_path(seg_dir))
    return stats


def write_deltas(seg_dir: Path, pks: pa.Array, ts: pa.Array, name: str) -> Path:
    """One delta log file of (pk, ts) delete records; ``name`` makes a replay idempotent."""
    d = layout.delta_dir(seg_dir)
    d.mkdir(parents=True, exist_ok=True)
    table = pa.table({PK_COLUMN: pks, "ts": ts.cast(pa.uint64())})
    path = d / f"{name}.arrow"
    tmp = d / f"{name}.arrow.tmp"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    tmp.replace(path)
    return path


def read_deltas(seg_dir: Path) -> pa.Table | None:
    d = layout.delta_dir(seg_dir)
    if not d.is_dir():
        return None
    tables = []
    for f in sorted(d.glob("*.arrow")):
        with pa.memory_map(str(f)) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    return pa.concat_tables(tables) if tables else None


def read_segment(seg_dir: Path, columns: list[str] | None = None) -> pa.Table:
    return lance.dataset(str(layout.data_path(seg_dir))).to_table(columns=columns)


def load_pk_stats(seg_dir: Path) -> PkStats | None:
    path = layout.stats_path(seg_dir)
    return PkStats.load(path) if path.exists() else None


def remove_segment(seg_dir: Path) -> None:
    shutil.rmtree(seg_dir, ignore_errors=True)
