"""The files around import jobs that the coord removes: staging dirs of staged writes,
scratch dirs of jobs, and uploads (``flight/uploads.py``).

An upload is removed when the job that imported it ends (completed or failed); one that no
job took (the client went away between the upload and the import) expires after
``UPLOAD_GRACE_S``, or ``gc_delay_s`` when that is longer. Runs in threads.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import layout
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
    storage = settings.storage_path
    removed = []
    cutoff = time.time() - delay_s
    root = layout.staging_root(storage)
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.name in busy_writes or newest_mtime(d) > cutoff:
            continue
        if remove_tree(d):
            removed.append(str(d))
    imports = Path(storage) / "imports"
    for d in sorted(imports.iterdir()) if imports.is_dir() else []:
        if finished_job(d.name) and newest_mtime(d) <= cutoff and remove_tree(d):
            removed.append(str(d))
    area = upload_area(settings)
    upload_cutoff = time.time() - max(delay_s, UPLOAD_GRACE_S)
    for d in sorted(area.iterdir()) if area.is_dir() else []:
        if d in busy_uploads or newest_mtime(d) > upload_cutoff:
            continue
        if remove_tree(d):
            removed.append(str(d))
    return removed


def upsert_keys(path: Path) -> list[tuple[int, pa.Array]]:
    """The distinct keys an upsert replaces in each partition (file columns ``pk``,
    ``partition_id``), to be deleted at its commit."""
    with pa.memory_map(str(path)) as source:
        keys = pa.ipc.open_file(source).read_all().combine_chunks()
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


def remove_tree(path: Path) -> bool:
    if not path.exists():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True
