"""Where a segment's files live under the storage root.

Locations are strings: an absolute local path or an ``s3://`` URI (``elanus/objstore.py``),
joined with ``/``. The catalog keeps a segment's data path relative to the root
(``relative``), so a copied data dir or bucket prefix keeps working.

<storage>/collections/<collection>/<partition>/<segment>/data.lance   rows + _ts
<storage>/collections/<collection>/<partition>/<segment>/delta/*.arrow  (pk, ts) deletes
<storage>/collections/<collection>/<partition>/<segment>/pk_stats.arrow bloom + min/max
<storage>/indexes/<build_id>/<version>/<partition>/<segment>/<key>   index files (seed 002)
<storage>/staging/<write_id>/<part>/<collection>/<partition>/<name>.arrow  staged rows
<storage>/imports/<job_id>/                  an import job's scratch files (upsert keys)
"""

from __future__ import annotations

import os
import posixpath
import re

from elanus.errors import invalid

_WRITE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
DEFAULT_PART = "_"
_SEGMENT_DATA = re.compile(r"(?:^|/)(collections/[0-9]+/[0-9]+/[0-9]+/data\.lance)/?$")
Loc = str | os.PathLike[str]


def join(root: Loc, *parts: str) -> str:
    return posixpath.join(os.fspath(root), *parts)


def parent(location: Loc) -> str:
    return posixpath.dirname(os.fspath(location).rstrip("/"))


def relative(location: str | None) -> str | None:
    """A segment's data path as the catalog keeps it: relative to the storage root
    (any root: the layout below it is fixed). Other values are kept as they are."""
    if not location:
        return location
    found = _SEGMENT_DATA.search(location)
    return found.group(1) if found else location


def absolute(root: Loc, path: str | None) -> str | None:
    """A catalog path as a location under ``root`` (absolute ones are kept)."""
    if not path or path.startswith("/") or "://" in path:
        return path
    return join(root, path)


def segment_dir(storage: Loc, collection_id: int, partition_id: int, segment_id: int) -> str:
    return join(storage, "collections", str(collection_id), str(partition_id), str(segment_id))


def data_path(seg_dir: Loc) -> str:
    return join(seg_dir, "data.lance")


def delta_dir(seg_dir: Loc) -> str:
    return join(seg_dir, "delta")


def stats_path(seg_dir: Loc) -> str:
    return join(seg_dir, "pk_stats.arrow")


def collection_dir(storage: Loc, collection_id: int) -> str:
    return join(storage, "collections", str(collection_id))


def index_root(storage: Loc, build_id: int) -> str:
    return join(storage, "indexes", str(build_id))


def index_dir(storage: Loc, build_id: int, version: int, partition_id: int, segment_id: int) -> str:
    """Where one build attempt writes its files; each retry (version) gets its own."""
    return join(index_root(storage, build_id), str(version), str(partition_id), str(segment_id))


def check_write_id(write_id: object, what: str = "write id") -> str:
    """Write ids and parts name directories: letters, digits, ``_`` and ``-`` only."""
    if not isinstance(write_id, str) or not _WRITE_ID.fullmatch(write_id):
        raise invalid(
            f"{what} {write_id!r} must be 1 to 128 letters, digits, underscores or hyphens"
        )
    return write_id


def staging_root(storage: Loc) -> str:
    return join(storage, "staging")


def staging_dir(storage: Loc, write_id: str) -> str:
    return join(staging_root(storage), check_write_id(write_id))


def staged_dir(
    storage: Loc, write_id: str, part: str, collection_id: int, partition_id: int
) -> str:
    """Where one part (a writer task) of a staged write puts a partition's rows."""
    return join(
        staging_dir(storage, write_id),
        check_write_id(part, "part"),
        str(collection_id),
        str(partition_id),
    )


def import_dir(storage: Loc, job_id: int) -> str:
    return join(storage, "imports", str(job_id))


def upsert_keys_path(storage: Loc, job_id: int) -> str:
    """The keys an upsert commit replaces (columns ``pk``, ``partition_id``)."""
    return join(import_dir(storage, job_id), "upsert_keys.arrow")
