"""Users, roles, grants and privilege groups: the operations of Milvus's RBAC calls.

Their names are plain strings, not held to Milvus's naming rules here: the coord checks
what it stores, as it always has. ``db`` is optional: the SDK sends none (the privilege is
then checked in the default database), the Milvus face sends the call's.
"""

from __future__ import annotations

from typing import Any

from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, DbName, operation, shape
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


@shape
class UserNamed:
    db: DbName | None = None
    user_name: str


@operation("drop_user")
class DropUser(UserNamed):
    pass


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
class DescribeUser(UserNamed):
    pass


# -- roles ----------------------------------------------------------------------------------
@shape
class RoleNamed:
    db: DbName | None = None
    role_name: str


@operation("create_role")
class CreateRole(RoleNamed):
    pass


@operation("drop_role")
class DropRole:
    db: DbName | None = None
    role_name: str
    force_drop: bool = False


@shape
class RoleOfUser:
    db: DbName | None = None
    user_name: str
    role_name: str


@operation("grant_role")
class GrantRole(RoleOfUser):
    pass


@operation("revoke_role")
class RevokeRole(RoleOfUser):
    pass


# -- privileges -----------------------------------------------------------------------------
@shape
class PrivilegeGrant:
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


@operation("grant_privilege")
class GrantPrivilege(PrivilegeGrant):
    pass


@operation("revoke_privilege")
class RevokePrivilege(PrivilegeGrant):
    pass


@operation("list_roles")
class ListRoles:
    db: DbName | None = None


@operation("describe_role")
class DescribeRole(RoleNamed):
    pass


# -- privilege groups -----------------------------------------------------------------------
@shape
class GroupNamed:
    db: DbName | None = None
    group_name: str


@operation("create_privilege_group")
class CreatePrivilegeGroup(GroupNamed):
    pass


@operation("drop_privilege_group")
class DropPrivilegeGroup(GroupNamed):
    pass


def _check_privilege_names(privileges: list[Any]) -> None:
    """Each item a name; checked after the list, with the words the dict checker used."""
    if not all(isinstance(p, str) for p in privileges):
        raise invalid("privileges must be a list of privilege names")


@shape
class GroupPrivileges:
    db: DbName | None = None
    privileges: list[Any]
    """Privilege names (``check``: not ``list[str]``, whose per-item words differ); read
    before ``group_name``, as the dict checker did."""
    group_name: str

    def check(self) -> None:
        _check_privilege_names(self.privileges)


@operation("add_privileges_to_group")
class AddPrivilegesToGroup(GroupPrivileges):
    pass


@operation("remove_privileges_from_group")
class RemovePrivilegesFromGroup(GroupPrivileges):
    pass


@operation("list_privilege_groups")
class ListPrivilegeGroups:
    db: DbName | None = None
