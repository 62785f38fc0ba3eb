"""Where a segment's files live under the storage root.

<storage>/collections/<collection>/<partition>/<segment>/data.lance   rows + _ts
<storage>/collections/<collection>/<partition>/<segment>/delta/*.arrow  (pk, ts) deletes
<storage>/collections/<collection>/<partition>/<segment>/pk_stats.arrow bloom + min/max
"""

from __future__ import annotations

from pathlib import Path


def segment_dir(
    storage: str | Path, collection_id: int, partition_id: int, segment_id: int
) -> Path:
    return Path(storage) / "collections" / str(collection_id) / str(partition_id) / str(segment_id)


def data_path(seg_dir: str | Path) -> Path:
    return Path(seg_dir) / "data.lance"


def delta_dir(seg_dir: str | Path) -> Path:
    return Path(seg_dir) / "delta"


def stats_path(seg_dir: str | Path) -> Path:
    return Path(seg_dir) / "pk_stats.arrow"


def collection_dir(storage: str | Path, collection_id: int) -> Path:
    return Path(storage) / "collections" / str(collection_id)
