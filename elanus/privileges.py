"""Milvus's RBAC vocabulary: object types, privileges, built-in roles and groups. Pure: the
coord stores grants, the proxy decides with ``permits``; both read these tables. The
privilege each DoAction needs is declared with the action (``flight/actions.py``,
``privilege_table``), so docs/security.md and the code cannot drift.

A grant is ``(object_type, object_name, db_name, privilege)``. ``Global`` objects are named
``*``; ``Database`` objects by the database's name; ``Collection`` objects by the
collection's name inside ``db_name``; ``User`` objects by a user's name. ``*`` matches any
name, and ``db_name`` ``*`` any database.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

ROOT_USER = "root"
ADMIN_ROLE = "admin"
PUBLIC_ROLE = "public"
BUILTIN_ROLES = (ADMIN_ROLE, PUBLIC_ROLE)
ANY = "*"
ALL_PRIVILEGES = "All"
"""A grant of ``All`` (on any object type) carries every privilege of its scope."""


class ObjectType(enum.StrEnum):
    GLOBAL = "Global"
    DATABASE = "Database"
    COLLECTION = "Collection"
    USER = "User"

    @classmethod
    def parse(cls, text: str) -> ObjectType:
        for member in cls:
            if member.value.lower() == str(text).lower():
                return member
        known = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown object type {text!r}; the object types are {known}")


# privilege -> the object type it is checked on (Milvus's users_and_roles table)
PRIVILEGES: dict[str, ObjectType] = {
    # Global
    "CreateCollection": ObjectType.GLOBAL,
    "DropCollection": ObjectType.GLOBAL,
    "DescribeCollection": ObjectType.GLOBAL,
    "ShowCollections": ObjectType.GLOBAL,
    "RenameCollection": ObjectType.GLOBAL,
    "CreateDatabase": ObjectType.GLOBAL,
    "DropDatabase": ObjectType.GLOBAL,
    "ListDatabases": ObjectType.GLOBAL,
    "DescribeDatabase": ObjectType.GLOBAL,
    "AlterDatabase": ObjectType.GLOBAL,
    "CreateOwnership": ObjectType.GLOBAL,
    "DropOwnership": ObjectType.GLOBAL,
    "SelectOwnership": ObjectType.GLOBAL,
    "ManageOwnership": ObjectType.GLOBAL,
    "CreateAlias": ObjectType.GLOBAL,
    "DropAlias": ObjectType.GLOBAL,
    "DescribeAlias": ObjectType.GLOBAL,
    "ListAliases": ObjectType.GLOBAL,
    "DescribeCluster": ObjectType.GLOBAL,  # Elanus: list_sessions
    "IndexBuilder": ObjectType.GLOBAL,  # Elanus: claim/heartbeat/report index build tasks
    "Backup": ObjectType.GLOBAL,  # Elanus: backup_create (writes where the request names)
    "CreatePrivilegeGroup": ObjectType.GLOBAL,
    "DropPrivilegeGroup": ObjectType.GLOBAL,
    "ListPrivilegeGroups": ObjectType.GLOBAL,
    "OperatePrivilegeGroup": ObjectType.GLOBAL,
    # Collection
    "CreateIndex": ObjectType.COLLECTION,
    "DropIndex": ObjectType.COLLECTION,
    "IndexDetail": ObjectType.COLLECTION,
    "Load": ObjectType.COLLECTION,
    "GetLoadState": ObjectType.COLLECTION,
    "Release": ObjectType.COLLECTION,
    "Insert": ObjectType.COLLECTION,
    "Delete": ObjectType.COLLECTION,
    "Upsert": ObjectType.COLLECTION,
    "Search": ObjectType.COLLECTION,
    "Query": ObjectType.COLLECTION,
    "Flush": ObjectType.COLLECTION,
    "Compaction": ObjectType.COLLECTION,
    "Import": ObjectType.COLLECTION,
    "GetStatistics": ObjectType.COLLECTION,
    "CreatePartition": ObjectType.COLLECTION,
    "DropPartition": ObjectType.COLLECTION,
    "ShowPartitions": ObjectType.COLLECTION,
    "HasPartition": ObjectType.COLLECTION,
    "AddCollectionField": ObjectType.COLLECTION,
    # User
    "UpdateUser": ObjectType.USER,
    "SelectUser": ObjectType.USER,
}

PRIVILEGE_GROUPS: dict[str, tuple[str, ...]] = {
    "CollectionReadOnly": (
        "Query", "Search", "IndexDetail", "GetLoadState", "GetStatistics", "HasPartition",
        "ShowPartitions",
    ),
    "CollectionReadWrite": (
        "Query", "Search", "IndexDetail", "GetLoadState", "GetStatistics", "HasPartition",
        "ShowPartitions", "Load", "Release", "Insert", "Delete", "Upsert", "Import", "Flush",
        "Compaction", "CreateIndex", "DropIndex", "CreatePartition", "DropPartition",
    ),
    "DatabaseReadOnly": ("DescribeCollection", "ShowCollections", "DescribeDatabase"),
    "DatabaseReadWrite": (
        "DescribeCollection", "ShowCollections", "DescribeDatabase", "AlterDatabase",
        "CreateCollection", "DropCollection", "RenameCollection",
    ),
}  # fmt: skip
"""Milvus 2.5's built-in privilege groups (the subset that names Elanus's privileges): a
grant of a group's name grants each member on the same object."""

PUBLIC_GRANTS: tuple[tuple[str, str, str, str], ...] = (
    (ObjectType.GLOBAL, ANY, ANY, "DescribeCollection"),
    (ObjectType.GLOBAL, ANY, ANY, "ShowCollections"),
    (ObjectType.COLLECTION, ANY, ANY, "IndexDetail"),
)
"""What every user has through ``public``, as in Milvus."""


def check_privilege(name: str) -> str:
    """A privilege, group or ``All``, spelt as Milvus spells it (case-insensitive in)."""
    for known in (*PRIVILEGES, *PRIVILEGE_GROUPS, ALL_PRIVILEGES):
        if known.lower() == str(name).lower():
            return known
    raise ValueError(f"unknown privilege {name!r}; docs/security.md lists the privileges")


@dataclass(frozen=True)
class Grant:
    object_type: str
    object_name: str
    db_name: str
    privilege: str

    def covers(self, need: Need) -> bool:
        if not _privilege_covers(self.privilege, need.privilege):
            return False
        if self.object_type == ObjectType.GLOBAL:
            return self.db_name in (ANY, need.db)
        if self.object_type == ObjectType.DATABASE:
            return self.object_name in (ANY, need.db)
        if self.object_type != PRIVILEGES[need.privilege]:
            return False
        if self.object_type == ObjectType.USER:
            return self.object_name in (ANY, need.name)
        return self.db_name in (ANY, need.db) and self.object_name in (ANY, need.name)


def _privilege_covers(granted: str, wanted: str) -> bool:
    if granted in (wanted, ALL_PRIVILEGES):
        return True
    return wanted in PRIVILEGE_GROUPS.get(granted, ())


@dataclass(frozen=True)
class Need:
    """What one call needs: a privilege on an object (``name`` is the collection or user;
    ``*`` where the call names none)."""

    privilege: str
    db: str
    name: str = ANY

    def describe(self) -> str:
        kind = PRIVILEGES[self.privilege]
        if kind == ObjectType.GLOBAL:
            return f"{self.privilege} on Global in database {self.db!r}"
        if kind == ObjectType.USER:
            return f"{self.privilege} on User {self.name!r}"
        return f"{self.privilege} on Collection {self.name!r} in database {self.db!r}"


def permits(grants: Iterable[Grant], need: Need) -> bool:
    return any(g.covers(need) for g in grants)


# -- what each call needs ------------------------------------------------------------------
OPEN = ""
"""Any authenticated user may make the call (health, timestamps, polls of opaque ids).
DoPut needs Insert (Upsert for upserts, Import for uploads); DoExchange, Search; DoGet,
GetFlightInfo and GetSchema, Query."""
