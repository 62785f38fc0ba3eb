"""The files around import jobs that the coord removes: staging dirs of staged writes,
scratch dirs of jobs, and uploads (``flight/uploads.py``).

An upload is removed when the job that imported it ends (completed or failed); one that no
job took (the client went away between the upload and the import) expires after
``UPLOAD_GRACE_S``, or ``gc_delay_s`` when that is longer. Runs in threads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout, objstore
from elanus.importroots import upload_area, within
from elanus.schema import PK_COLUMN
from elanus.settings import Settings

UPLOAD_GRACE_S = 600.0
"""How long an upload waits for the import that uses it."""


def uploads_of(settings: Settings, units: Iterable[dict[str, Any]]) -> set[Path]:
    """The upload directories (``<area>/<id>``) that a job's units read from."""
    area = upload_area(settings)
    found = set()
    for unit in units:
        for p in unit.get("paths", []):
            path = Path(p)
            if within(path, area) and path != area:
                found.add(area / path.relative_to(area).parts[0])
    return found


def remove_uploads(
    settings: Settings, units: Iterable[dict[str, Any]], keep: set[Path] | None = None
) -> None:
    """Remove the uploads ``units`` read, but those in ``keep`` (other jobs read them)."""
    for d in uploads_of(settings, units) - (keep or set()):
        remove_tree(d)


def collect_garbage(
    settings: Settings,
    delay_s: float,
    busy_writes: set[str],
    finished_job: Any,
    busy_uploads: set[Path],
) -> list[str]:
    """Staging dirs untouched for ``delay_s`` and not being committed, scratch dirs of
    finished jobs (``finished_job(name)`` says), and expired uploads no live job reads."""
    storage = settings.storage_uri
    removed = []
    cutoff = time.time() - delay_s
    root = layout.staging_root(settings.files_path)
    for name in objstore.list_dir(root):
        d = layout.join(root, name)
        if name in busy_writes or (objstore.modified(d) or 0.0) > cutoff:
            continue
        if remove_tree(d):
            removed.append(d)
    imports = layout.join(storage, "imports")
    for name in objstore.list_dir(imports):
        d = layout.join(imports, name)
        if finished_job(name) and (objstore.modified(d) or 0.0) <= cutoff and remove_tree(d):
            removed.append(d)
    area = upload_area(settings)
    upload_cutoff = time.time() - max(delay_s, UPLOAD_GRACE_S)
    for upload in sorted(area.iterdir()) if area.is_dir() else []:
        if upload in busy_uploads or newest_mtime(upload) > upload_cutoff:
            continue
        if remove_tree(upload):
            removed.append(str(upload))
    return removed


def upsert_keys(path: str) -> list[tuple[int, pa.Array]]:
    """The distinct keys an upsert replaces in each partition (file columns ``pk``,
    ``partition_id``), to be deleted at its commit."""
    keys = objstore.read_ipc(path).combine_chunks()
    parts = keys.column("partition_id").to_numpy()
    pks = keys.column(PK_COLUMN).combine_chunks()
    return [(int(pid), pc.unique(pks.filter(pa.array(parts == pid)))) for pid in np.unique(parts)]


def newest_mtime(path: Path) -> float:
    newest = path.stat().st_mtime
    for p in path.rglob("*"):
        try:
            newest = max(newest, p.stat().st_mtime)
        except OSError:
            continue
    return newest


def remove_tree(path: str | Path) -> bool:
    if not objstore.exists(path):
        return False
    objstore.remove_tree(path)
    return True
