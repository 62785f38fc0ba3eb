"""Custom privilege groups (Milvus 2.5+): named sets of privileges a role is granted at once.

The catalog keeps each group and its members (migration 10). A grant names the group, as
Milvus stores it; the coord expands it into its members when it builds a user's identity
(``expand``), so the proxies' check (``elanus.privileges.permits``) never learns custom
groups, and a change to a group reaches every proxy through the same invalidation as a
grant. Rules and messages follow Milvus's rootcoord (``meta_table.go``): a name is letters,
digits and underscores and names no built-in privilege or group; the members of a group are
of one level; a group still granted to a role cannot be dropped. Unlike Milvus, a custom
group cannot hold another custom group (Milvus takes one, and does not expand it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb

from elanus.errors import invalid
from elanus.privileges import (
    ALL_PRIVILEGES,
    ANY,
    PRIVILEGE_GROUPS,
    PRIVILEGES,
    ObjectType,
    check_privilege,
)

MAX_GROUP_NAME = 255
"""Milvus's ``proxy.maxNameLength``, which bounds privilege group names too."""
_GROUP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MILVUS_GROUPS = (
    "CollectionReadOnly", "CollectionReadWrite", "CollectionAdmin", "DatabaseReadOnly",
    "DatabaseReadWrite", "DatabaseAdmin", "ClusterReadOnly", "ClusterReadWrite", "ClusterAdmin",
)  # fmt: skip
"""Milvus's nine built-in groups: reserved even where Elanus lists fewer, so a group made
here keeps its meaning against Milvus."""
_RESERVED = {n.lower() for n in (*PRIVILEGES, *PRIVILEGE_GROUPS, *MILVUS_GROUPS, ALL_PRIVILEGES)}


def check_group_name(name: Any) -> str:
    """A custom group's name, as Milvus's proxy checks it (``ValidatePrivilegeGroupName``)."""
    if not isinstance(name, str) or not name.strip():
        raise invalid("privilege group name should not be empty")
    name = name.strip()
    if len(name) > MAX_GROUP_NAME:
        raise invalid(
            f"the length of a privilege group name {name} must be less than "
            f"{MAX_GROUP_NAME} characters"
        )
    if not _GROUP_NAME.match(name):
        raise invalid(
            f"invalid privilege group name {name!r}: the first character must be an "
            "underscore or letter, and the name can only contain numbers, letters and "
            "underscores"
        )
    if name.lower() in _RESERVED:
        raise invalid(
            f"privilege group name [{name}] is defined by built in privileges or privilege "
            "groups in system"
        )
    return name


def level_of(privilege: str) -> ObjectType:
    """The object type a privilege (or built-in group, or ``All``) is checked on: Milvus's
    "privilege level", in Elanus's object types."""
    if privilege in PRIVILEGE_GROUPS:
        return PRIVILEGES[PRIVILEGE_GROUPS[privilege][0]]
    return PRIVILEGES.get(privilege, ObjectType.GLOBAL)


def group_level(members: Iterable[str]) -> ObjectType | None:
    """The one level of a group's members; ``None`` for an empty group."""
    return next((level_of(m) for m in members), None)


# -- on the database thread ----------------------------------------------------------------
def custom_groups(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Every custom group with its members (sorted), groups in name order."""
    names = con.execute("SELECT name FROM privilege_groups ORDER BY name").fetchall()
    groups: dict[str, list[str]] = {str(n): [] for (n,) in names}
    for group, privilege in con.execute(
        "SELECT group_name, privilege FROM privilege_group_members ORDER BY privilege"
    ).fetchall():
        groups.setdefault(str(group), []).append(str(privilege))
    return groups


def _members(con: duckdb.DuckDBPyConnection, name: str) -> list[str] | None:
    """``name``'s members, or ``None`` when no custom group has that name."""
    if con.execute("SELECT 1 FROM privilege_groups WHERE name = ?", [name]).fetchone() is None:
        return None
    rows = con.execute(
        "SELECT privilege FROM privilege_group_members WHERE group_name = ? ORDER BY privilege",
        [name],
    ).fetchall()
    return [str(r[0]) for r in rows]


def create_group(con: duckdb.DuckDBPyConnection, name: str) -> None:
    if _members(con, name) is not None:
        raise invalid(f"privilege group name [{name}] is defined by users")
    con.execute("INSERT INTO privilege_groups VALUES (?)", [name])


def drop_group(con: duckdb.DuckDBPyConnection, name: str) -> None:
    if _members(con, name) is None:
        raise invalid(f"not a custom privilege group: [{name}]")
    role = con.execute(
        "SELECT role FROM grants WHERE privilege = ? ORDER BY role LIMIT 1", [name]
    ).fetchone()
    if role is not None:
        raise invalid(
            f"privilege group [{name}] is used by role [{role[0]}], Use REVOKE API to revoke "
            "it first"
        )
    con.execute("DELETE FROM privilege_group_members WHERE group_name = ?", [name])
    con.execute("DELETE FROM privilege_groups WHERE name = ?", [name])


def operate_group(
    con: duckdb.DuckDBPyConnection, name: str, privileges: Sequence[str], add: bool
) -> None:
    """Add ``privileges`` to the group, or remove them (one it lacks is no error, as in
    Milvus); every name must be a privilege or built-in group, and after an addition the
    group's members are of one level."""
    current = _members(con, name)
    if current is None:
        raise invalid(f"there is no privilege group name [{name}] defined in system to operate")
    if not privileges:
        raise invalid("privileges is empty when alter the privilege group")
    names = [_member(con, p) for p in privileges]
    if add:
        levels = {level_of(m) for m in {*current, *names}}
        if len(levels) > 1:
            raise invalid(
                "privileges are not the same privilege level: "
                + ", ".join(sorted(f"{m} ({level_of(m).value})" for m in {*current, *names}))
            )
        _check_granted_objects(con, name, levels.pop())
        for member in names:
            con.execute(
                "INSERT INTO privilege_group_members VALUES (?, ?) ON CONFLICT DO NOTHING",
                [name, member],
            )
    else:
        for member in names:
            con.execute(
                "DELETE FROM privilege_group_members WHERE group_name = ? AND privilege = ?",
                [name, member],
            )


_FITS = {
    ObjectType.GLOBAL: {ObjectType.GLOBAL.value, ObjectType.DATABASE.value},
    ObjectType.USER: {ObjectType.USER.value, ObjectType.GLOBAL.value},
    ObjectType.COLLECTION: {
        ObjectType.COLLECTION.value, ObjectType.DATABASE.value, ObjectType.GLOBAL.value,
    },
}  # fmt: skip
"""The objects a grant of each level applies on (``auth.check_grant``'s rule)."""


def _check_granted_objects(con: duckdb.DuckDBPyConnection, name: str, level: ObjectType) -> None:
    """An empty group granted already keeps the object it was granted on: privileges that
    could never apply there are refused rather than granted to no effect."""
    row = con.execute(
        "SELECT role, object_type FROM grants WHERE privilege = ? AND object_type NOT IN "
        "(SELECT unnest(?::VARCHAR[])) ORDER BY role LIMIT 1",
        [name, sorted(_FITS[level])],
    ).fetchone()
    if row is not None:
        raise invalid(
            f"privilege group [{name}] is granted to role [{row[0]}] on a {row[1]} object, "
            f"where {level.value} privileges never apply; revoke it first"
        )


def _member(con: duckdb.DuckDBPyConnection, privilege: Any) -> str:
    if not isinstance(privilege, str):
        raise invalid(f"a privilege is a name, not {privilege!r}")
    if _members(con, privilege) is not None:
        raise invalid(
            f"privilege group [{privilege}] is a custom group: a group holds privileges "
            "and built-in groups only"
        )
    try:
        return check_privilege(privilege)
    except ValueError:
        raise invalid(
            f"there is no privilege name or privilege group name [{privilege}] defined in "
            "system to operate"
        ) from None


def custom_level(con: duckdb.DuckDBPyConnection, privilege: str) -> tuple[bool, ObjectType | None]:
    """Whether ``privilege`` names a custom group, and that group's level."""
    members = _members(con, privilege)
    return members is not None, group_level(members or ())


def follow_level(level: ObjectType | None, object_name: str, db_name: str) -> tuple[str, str, str]:
    """The object of a ``grant_privilege_v2`` of a custom group (object type left empty):
    its level's, as Milvus derives it; a group of Global privileges applies to the whole
    database, one of User privileges to every user."""
    if level == ObjectType.GLOBAL:
        return ObjectType.GLOBAL.value, ANY, db_name
    if level == ObjectType.USER:
        return ObjectType.USER.value, ANY, db_name
    return ObjectType.COLLECTION.value, object_name or ANY, db_name


def expand(con: duckdb.DuckDBPyConnection, grants: list[Any]) -> list[list[str]]:
    """``[object_type, object_name, db_name, privilege]`` rows with each custom group's
    grant replaced by one row per member, on the same object."""
    groups = custom_groups(con) if grants else {}
    out: list[list[str]] = []
    for object_type, object_name, db_name, privilege in grants:
        members = groups.get(str(privilege))
        for member in [str(privilege)] if members is None else members:
            out.append([str(object_type), str(object_name), str(db_name), member])
    return out
