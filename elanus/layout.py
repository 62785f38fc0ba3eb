"""Where a segment's files live under the storage root.

<storage>/collections/<collection>/<partition>/<segment>/data.lance   rows + _ts
<storage>/collections/<collection>/<partition>/<segment>/delta/*.arrow  (pk, ts) deletes
<storage>/collections/<collection>/<partition>/<segment>/pk_stats.arrow bloom + min/max
<storage>/indexes/<build_id>/<version>/<partition>/<segment>/<key>   index files (seed 002)
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


def index_root(storage: str | Path, build_id: int) -> Path:
    return Path(storage) / "indexes" / str(build_id)


def index_dir(
    storage: str | Path, build_id: int, version: int, partition_id: int, segment_id: int
) -> Path:
    """Where one build attempt writes its files; each retry (version) gets its own."""
    return index_root(storage, build_id) / str(version) / str(partition_id) / str(segment_id)
