"""DoAction entry of backups: ``backup_create`` runs the coord's backup (``meta/backup.py``)
and answers when the copy is complete. Listing and restoring are offline
(``elanus backup list|restore``). Its request is ``elanus/ops/control.py``'s record."""

from __future__ import annotations

from typing import Any

from elanus.api.backup import CreateBackup
from elanus.api.base import as_body
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import control

MARGIN_S = 30.0


def _run_backup(c: OpCall[control.CreateBackup]) -> Any:
    r = c.request
    req = CreateBackup(target=r.target, name=r.name, timeout_s=r.timeout_s)
    timeout = req.timeout_s + MARGIN_S
    return as_body(c.proxy.run(c.proxy.coord.backup.create(req, timeout), timeout=timeout))


operation(
    control.CreateBackup,
    "Write a consistent copy of every collection at one timestamp to a target: an absolute "
    "path on the coord's machine or s3://bucket/prefix; <target>/<name>/ receives it. "
    "Body: target, name, timeout_s. Result: name, location, ts, collections, segments, rows, "
    "files, bytes, seconds.",
    privilege="Backup",
    run=_run_backup,
)
