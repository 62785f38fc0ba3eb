"""Users, roles, grants and privilege groups: the operations of Milvus's RBAC calls.

Their names are plain strings, not held to Milvus's naming rules here: the coord checks
what it stores, as it always has. ``db`` is optional: the SDK sends none (the privilege is
then checked in the default database), the Milvus face sends the call's.
"""

from __future__ import annotations

from typing import Any

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, DbName, operation
from elanus.privileges import ANY


@operation("whoami")
class Whoami:
    db: DbName | None = None


# -- users ----------------------------------------------------------------------------------
@operation("create_user")
class CreateUser:
    db: DbName | None = None
    user_name: str
    password: str


@operation("drop_user")
class DropUser:
    db: DbName | None = None
    user_name: str


@operation("update_password")
class UpdatePassword:
    db: DbName | None = None
    user_name: str
    old_password: str | None = None
    """Absent: another user's password, reset by someone holding UpdateUser on them."""
    new_password: str


@operation("list_users")
class ListUsers:
    db: DbName | None = None


@operation("describe_user")
class DescribeUser:
    db: DbName | None = None
    user_name: str


# -- roles ----------------------------------------------------------------------------------
@operation("create_role")
class CreateRole:
    db: DbName | None = None
    role_name: str


@operation("drop_role")
class DropRole:
    db: DbName | None = None
    role_name: str
    force_drop: bool = False


@operation("grant_role")
class GrantRole:
    db: DbName | None = None
    user_name: str
    role_name: str


@operation("revoke_role")
class RevokeRole:
    db: DbName | None = None
    user_name: str
    role_name: str


# -- privileges -----------------------------------------------------------------------------
@operation("grant_privilege")
class GrantPrivilege:
    db: DbName | None = None
    role_name: str
    object_type: str
    privilege: str
    object_name: str = ANY
    db_name: str | None = None
    """The database of the grant; absent or empty: the request's (``on_db``)."""

    def on_db(self) -> str:
        """The database the grant applies in."""
        return self.db_name or self.db or DEFAULT_DB


@operation("revoke_privilege")
class RevokePrivilege:
    db: DbName | None = None
    role_name: str
    object_type: str
    privilege: str
    object_name: str = ANY
    db_name: str | None = None
    """As ``GrantPrivilege.db_name``."""

    def on_db(self) -> str:
        """The database the grant applies in."""
        return self.db_name or self.db or DEFAULT_DB


@operation("list_roles")
class ListRoles:
    db: DbName | None = None


@operation("describe_role")
class DescribeRole:
    db: DbName | None = None
    role_name: str


# -- privilege groups -----------------------------------------------------------------------
@operation("create_privilege_group")
class CreatePrivilegeGroup:
    db: DbName | None = None
    group_name: str


@operation("drop_privilege_group")
class DropPrivilegeGroup:
    db: DbName | None = None
    group_name: str


def _check_privilege_names(privileges: list[Any]) -> None:
    """Each item a name; checked after the list, with the words the dict checker used."""
    if not all(isinstance(p, str) for p in privileges):
        raise invalid("privileges must be a list of privilege names")


@operation("add_privileges_to_group")
class AddPrivilegesToGroup:
    db: DbName | None = None
    privileges: list[Any]
    """Privilege names (``check``: not ``list[str]``, whose per-item words differ); read
    before ``group_name``, as the dict checker did."""
    group_name: str

    def check(self) -> None:
        _check_privilege_names(self.privileges)


@operation("remove_privileges_from_group")
class RemovePrivilegesFromGroup:
    db: DbName | None = None
    privileges: list[Any]
    """As ``AddPrivilegesToGroup.privileges``."""
    group_name: str

    def check(self) -> None:
        _check_privilege_names(self.privileges)


@operation("list_privilege_groups")
class ListPrivilegeGroups:
    db: DbName | None = None
