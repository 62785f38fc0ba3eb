"""What one sync writes (Milvus's ``SyncPack``): a segment's rows, its flush's pk stats and
delete log, or a delta log of a flushed segment.

Each ``write`` runs on a worker thread (Lance and Arrow IPC leave the GIL) and may be
repeated after a failure: the first rows overwrite the dataset, later rows append only if
the earlier attempt did not commit them, stats and logs are replaced whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from elanus import layout
from elanus.segments import storage
from elanus.segments.flushcommon.writebuffer import Deletes
from elanus.segments.pkstats import PkStats


def delete_records(deletes: Deletes) -> tuple[pa.Array, pa.Array]:
    """(pks, ts) columns of a delta log from (pks, ts) pairs."""
    pks = pa.concat_arrays([d[0] for d in deletes])
    ts = pa.concat_arrays([pa.array(np.full(len(d[0]), d[1], dtype=np.uint64)) for d in deletes])
    return pks, ts


@dataclass
class RowsSync:
    """Rows of a growing segment, appended to its Lance dataset (a spill, or a flush's tail)."""

    seg_dir: Path
    batches: list[pa.RecordBatch]
    target: pa.Schema
    defaults: dict[str, Any]
    rows_before: int
    """Rows the dataset holds before these (0: these start it over)."""

    def write(self, attempt: int) -> None:
        first = self.rows_before == 0
        if attempt and not first and self._committed():
            return
        table = pa.Table.from_batches(self.batches, schema=self.target)
        storage.write_rows(self.seg_dir, table, self.target, first=first, defaults=self.defaults)

    def _committed(self) -> bool:
        """Whether a failed attempt committed its fragment after all (Lance commits whole
        fragments, so the row count tells)."""
        path = layout.data_path(self.seg_dir)
        rows = sum(b.num_rows for b in self.batches)
        try:
            return lance.dataset(str(path)).count_rows() >= self.rows_before + rows
        except (OSError, ValueError):  # no dataset to look at: write it
            return False


@dataclass
class SealSync:
    """A flushed segment's pk stats and the log of the deletes that hit it while growing
    (after its rows: the sync manager runs a segment's syncs in order)."""

    seg_dir: Path
    pks: pa.Array
    deletes: Deletes
    first_seq: int

    def write(self, attempt: int) -> PkStats:
        stats = storage.write_pk_stats(self.seg_dir, self.pks)
        if self.deletes:
            pks, ts = delete_records(self.deletes)
            storage.write_deltas(self.seg_dir, pks, ts, f"{self.first_seq:012d}-flush")
        return stats


@dataclass
class DeltaSync:
    """One delta log of a flushed segment; the name (its first and last stream positions)
    makes a replay write the same file again."""

    seg_dir: Path
    deletes: Deletes
    name: str

    def write(self, attempt: int) -> None:
        pks, ts = delete_records(self.deletes)
        storage.write_deltas(self.seg_dir, pks, ts, self.name)
