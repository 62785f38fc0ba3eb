"""DoAction entry of backups: ``backup_create`` runs the coord's backup (``meta/backup.py``)
and answers when the copy is complete. Listing and restoring are offline
(``elanus backup list|restore``)."""

from __future__ import annotations

from typing import Any

from elanus.api.backup import CreateBackup
from elanus.api.base import as_body
from elanus.errors import invalid
from elanus.flight.actions import action
from elanus.flight.executors import Call
from elanus.layout import check_write_id
from elanus.requests import Body, decode

DEFAULT_TIMEOUT_S = 3600.0
MARGIN_S = 30.0


def _run_backup(c: Call) -> dict[str, Any]:
    req = decode(CreateBackup, c.request)
    timeout = req.timeout_s + MARGIN_S
    return as_body(c.proxy.run(c.proxy.coord.backup.create(req, timeout), timeout=timeout))


@action(
    "backup_create",
    "Write a consistent copy of every collection at one timestamp to a target: an absolute "
    "path on the coord's machine or s3://bucket/prefix; <target>/<name>/ receives it. "
    "Body: target, name, timeout_s. Result: name, location, ts, collections, segments, rows, "
    "files, bytes, seconds.",
    ("target", "name", "timeout_s"),
    privilege="Backup",
    run=_run_backup,
)
def _backup_create(b: Body) -> dict[str, Any]:
    target = b.str("target")
    if not target.strip():
        raise invalid("backup_create: 'target' is empty")
    name = b.str("name", None)
    if name is not None:
        check_write_id(name, "backup name")
    timeout = b.float("timeout_s", DEFAULT_TIMEOUT_S)
    if timeout < 1:
        raise invalid(f"backup_create: 'timeout_s' must be at least 1, got {timeout}")
    return {"target": target, "name": name, "timeout_s": timeout}
