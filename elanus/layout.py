"""Where a segment's files live under the storage root.

<storage>/collections/<collection>/<partition>/<segment>/data.lance   rows + _ts
<storage>/collections/<collection>/<partition>/<segment>/delta/*.arrow  (pk, ts) deletes
<storage>/collections/<collection>/<partition>/<segment>/pk_stats.arrow bloom + min/max
<storage>/indexes/<build_id>/<version>/<partition>/<segment>/<key>   index files (seed 002)
<storage>/staging/<write_id>/<part>/<collection>/<partition>/<name>.arrow  staged rows
<storage>/imports/<job_id>/                  an import job's scratch files (upsert keys)
"""

from __future__ import annotations

import re
from pathlib import Path

from elanus.errors import invalid

_WRITE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
DEFAULT_PART = "_"


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


def check_write_id(write_id: object, what: str = "write id") -> str:
    """Write ids and parts name directories: letters, digits, ``_`` and ``-`` only."""
    if not isinstance(write_id, str) or not _WRITE_ID.fullmatch(write_id):
        raise invalid(
            f"{what} {write_id!r} must be 1 to 128 letters, digits, underscores or hyphens"
        )
    return write_id


def staging_root(storage: str | Path) -> Path:
    return Path(storage) / "staging"


def staging_dir(storage: str | Path, write_id: str) -> Path:
    return staging_root(storage) / check_write_id(write_id)


def staged_dir(
    storage: str | Path, write_id: str, part: str, collection_id: int, partition_id: int
) -> Path:
    """Where one part (a writer task) of a staged write puts a partition's rows."""
    return (
        staging_dir(storage, write_id)
        / check_write_id(part, "part")
        / str(collection_id)
        / str(partition_id)
    )


def import_dir(storage: str | Path, job_id: int) -> Path:
    return Path(storage) / "imports" / str(job_id)


def upsert_keys_path(storage: str | Path, job_id: int) -> Path:
    """The keys an upsert commit replaces (columns ``pk``, ``partition_id``)."""
    return import_dir(storage, job_id) / "upsert_keys.arrow"
