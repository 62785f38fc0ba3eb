"""What one sync writes (Milvus's ``SyncPack``): a segment's rows, its flush's pk stats and
delete log, or a delta log of a flushed segment.

Each ``write`` runs on a worker thread (Lance and Arrow IPC leave the GIL) and may be
repeated after a failure: the first rows overwrite the dataset, later rows append only if
the earlier attempt did not commit them, stats and logs are replaced whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from elanus import layout
from elanus.schema import Schema
from elanus.segments import storage
from elanus.segments.flushcommon.writebuffer import Deletes
from elanus.segments.storage.pkstats import PkStats


def delete_records(deletes: Deletes) -> tuple[pa.Array, pa.Array]:
    """(pks, ts) columns of a delta log from (pks, ts) pairs."""
    pks = pa.concat_arrays([d[0] for d in deletes])
    ts = pa.concat_arrays([pa.array(np.full(len(d[0]), d[1], dtype=np.uint64)) for d in deletes])
    return pks, ts


@dataclass
class RowsSync:
    """Rows of a growing segment, appended to its Lance dataset (a spill, or a flush's tail)."""

    seg_dir: str
    batches: list[pa.RecordBatch]
    target: pa.Schema
    defaults: dict[str, Any]
    rows_before: int
    """Rows the dataset holds before these (0: these start it over)."""
    stats: PkStats | None = None
    """The segment's growing key stats, which these rows' keys join once written."""
    pk_field: str = ""
    whole: bool = False
    """These are all the segment's rows (a flush with no spill before it): written in key
    order at once, so the flush's ``sort_segment`` has nothing to rewrite."""
    _counted: bool = field(default=False, init=False, repr=False)

    def write(self, attempt: int) -> None:
        first = self.rows_before == 0
        if not (attempt and not first and self._committed()):
            table = pa.Table.from_batches(self.batches, schema=self.target)
            if self.whole and first:
                table = storage.by_key(table, self.pk_field)
            storage.write_rows(
                self.seg_dir, table, self.target, first=first, defaults=self.defaults
            )
        if self.stats is not None and not self._counted:
            self.stats.add(pa.concat_arrays([b.column(self.pk_field) for b in self.batches]))
            self._counted = True

    def _committed(self) -> bool:
        """Whether a failed attempt committed its fragment after all (Lance commits whole
        fragments, so the row count tells)."""
        path = layout.data_path(self.seg_dir)
        rows = sum(b.num_rows for b in self.batches)
        try:
            return storage.dataset(path).count_rows() >= self.rows_before + rows
        except (OSError, ValueError):  # no dataset to look at: write it
            return False


@dataclass
class SealSync:
    """A flushed segment's rows put in key order (``storage.sort_segment``), its pk stats
    and the log of the deletes that hit it while growing (after its rows: the sync manager
    runs a segment's syncs in order)."""

    seg_dir: str
    pks: pa.Array
    deletes: Deletes
    first_seq: int
    pk_field: str
    stats: PkStats | None = None
    """The stats its spills built; used (folded) when they hold every key, else built."""
    schema_now: Callable[[], Schema] | None = None
    """The channel's segment schema and defaults when this runs: a field or function added
    since the last spill widens the dataset before it is sealed (an index build reads the
    column from the files)."""

    def write(self, attempt: int) -> PkStats:
        if self.schema_now is not None:
            storage.widen_to(layout.data_path(self.seg_dir), self.schema_now())
        storage.sort_segment(self.seg_dir, self.pk_field)
        if self.stats is not None and self.stats.num_keys == len(self.pks):
            stats = self.stats.fold()
            storage.save_pk_stats(self.seg_dir, stats)
        else:
            stats = storage.write_pk_stats(self.seg_dir, self.pks)
        if self.deletes:
            pks, ts = delete_records(self.deletes)
            storage.write_deltas(self.seg_dir, pks, ts, f"{self.first_seq:012d}-flush")
        return stats


@dataclass
class DeltaSync:
    """One delta log of a flushed segment; the name (its first and last stream positions)
    makes a replay write the same file again."""

    seg_dir: str
    deletes: Deletes
    name: str

    def write(self, attempt: int) -> None:
        pks, ts = delete_records(self.deletes)
        storage.write_deltas(self.seg_dir, pks, ts, self.name)
