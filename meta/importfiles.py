"""The files around import jobs that the coord removes: staging dirs of staged writes,
scratch dirs of jobs, and uploads (``flight/uploads.py``), all on the storage (local or an
object store) through ``elanus/objstore.py``.

An upload is removed when the job that imported it ends (completed or failed); one that no
job took (the client went away between the upload and the import) expires after
``UPLOAD_GRACE_S``, or ``gc_delay_s`` when that is longer. A staged write nobody commits
goes once untouched for ``gc_delay_s``, but never sooner than ``STAGING_GRACE_S``: its
writer commits right after its last file (a snapshot's restore, a Spark driver), and a
``gc_delay_s`` of 0 (dropped files collected at once) must not sweep a write mid-commit.
Runs in threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from elanus import layout, objstore
from elanus.importroots import upload_area
from elanus.settings import Settings

UPLOAD_GRACE_S = 600.0
"""How long an upload waits for the import that uses it."""
STAGING_GRACE_S = 30.0
"""The least time a staged write waits for its commit."""


def uploads_of(settings: Settings, units: Iterable[dict[str, Any]]) -> set[str]:
    """The upload directories (``<area>/<id>``) that a job's units read from."""
    area = upload_area(settings)
    found = set()
    for unit in units:
        for p in unit.get("paths", []):
            upload = _upload_of(p, area)
            if upload is not None:
                found.add(layout.join(area, upload))
    return found


def _upload_of(path: str, area: str) -> str | None:
    """The upload id ``path`` lies under, if it is inside ``area``."""
    if objstore.is_remote(area):
        below = path[len(area) + 1 :] if path.startswith(area + "/") else ""
        return below.split("/", 1)[0] or None
    local, root = Path(path), Path(area)
    if local == root or root not in local.parents:
        return None
    return local.relative_to(root).parts[0]


def remove_uploads(
    settings: Settings, units: Iterable[dict[str, Any]], keep: set[str] | None = None
) -> None:
    """Remove the uploads ``units`` read, but those in ``keep`` (other jobs read them)."""
    for d in uploads_of(settings, units) - (keep or set()):
        remove_tree(d)


def collect_garbage(
    settings: Settings,
    delay_s: float,
    busy_writes: set[str],
    finished_job: Any,
    busy_uploads: set[str],
    staging_grace_s: float = STAGING_GRACE_S,
) -> list[str]:
    """Staging dirs untouched for ``delay_s`` (at least ``staging_grace_s``) and not being
    committed, scratch dirs of finished jobs (``finished_job(name)`` says), and expired
    uploads no live job reads."""
    storage = settings.storage_uri
    cutoff = time.time() - delay_s
    staging = layout.staging_root(storage)
    staged_cutoff = time.time() - max(delay_s, staging_grace_s)
    removed = _sweep(staging, lambda name, _: name not in busy_writes, staged_cutoff)
    removed += _sweep(layout.join(storage, "imports"), lambda name, _: finished_job(name), cutoff)
    upload_cutoff = time.time() - max(delay_s, UPLOAD_GRACE_S)
    removed += _sweep(
        upload_area(settings), lambda _, path: path not in busy_uploads, upload_cutoff
    )
    return removed


def _sweep(root: str, idle: Callable[[str, str], bool], cutoff: float) -> list[str]:
    """Remove the dirs under ``root`` untouched since ``cutoff`` that ``idle(name, path)``
    says nothing uses; the paths removed."""
    removed = []
    for name in objstore.list_dir(root):
        path = layout.join(root, name)
        if not idle(name, path) or (objstore.modified(path) or 0.0) > cutoff:
            continue
        if remove_tree(path):
            removed.append(path)
    return removed


def remove_tree(path: str | Path) -> bool:
    if not objstore.exists(path):
        return False
    objstore.remove_tree(path)
    return True
