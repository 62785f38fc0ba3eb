"""The cluster's own calls: its live sessions, its health, timestamps from the TSO, and a
backup of every collection.

None is about a database: ``db`` is checked as every action's and otherwise unused (the SDK
sends none), and a privilege is checked in the default database whatever ``db`` says, as
it was when their requests held no database.
"""

from __future__ import annotations

from typing import Annotated

from elanus.errors import invalid
from elanus.layout import check_write_id
from elanus.ops import DbName, PrivilegeScope, operation, shape
from elanus.requests import Range

MAX_TIMESTAMPS = 10_000
"""The most timestamps one ``get_timestamp`` allocates."""
DEFAULT_BACKUP_TIMEOUT_S = 3600.0


@shape
class ClusterWide:
    db: DbName | None = None

    def privilege_scope(self) -> PrivilegeScope:
        return {}  # a cluster's privilege, checked in the default database


@operation("list_sessions")
class ListSessions(ClusterWide):
    pass


@operation("health")
class Health(ClusterWide):
    pass


@operation("get_timestamp")
class GetTimestamp(ClusterWide):
    count: Annotated[int, Range(1, MAX_TIMESTAMPS)] | None = None
    """Absent: one (the SDK and the Milvus face send none)."""


@operation("backup_create")
class CreateBackup(ClusterWide):
    """Write every collection at one timestamp under ``target`` (``meta/backup.py``)."""

    target: str
    """An absolute path on the coord's machine, or ``s3://bucket/prefix``."""
    name: str | None = None
    """Letters, digits, ``_`` and ``-``; absent: ``backup-<UTC time>``."""
    timeout_s: float = DEFAULT_BACKUP_TIMEOUT_S

    def check(self) -> None:
        if not self.target.strip():
            raise invalid("backup_create: 'target' is empty")
        if self.name is not None:
            check_write_id(self.name, "backup name")
        if self.timeout_s < 1:
            raise invalid(f"backup_create: 'timeout_s' must be at least 1, got {self.timeout_s}")
