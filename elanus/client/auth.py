"""The users-and-roles half of the SDK (mixed into ``Client``), named and shaped as
pymilvus's MilvusClient names them (``create_user``, ``grant_privilege``, ...)."""

from __future__ import annotations

from typing import Any, TypeVar

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.client.replies import PrivilegeGroup
from elanus.ops import auth as ops
from elanus.ops.replies import PrivilegeGroups, RoleDescription, UserDescription, WhoAmI
from elanus.privileges import ANY, PRIVILEGES, ObjectType, check_privilege

Grant = TypeVar("Grant", ops.GrantPrivilege, ops.RevokePrivilege)


class AuthAPI(ClientBase):
    def whoami(self) -> WhoAmI:
        """``{"user", "roles", "superuser"}`` of this connection's credentials."""
        return self._reply(ops.Whoami(), WhoAmI)

    # -- users ------------------------------------------------------------------------------
    def create_user(
        self,
        user_name: str,
        password: str,
        timeout: float | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        _refuse_extras("create_user", description, kwargs)
        self._op(ops.CreateUser(user_name=user_name, password=password), timeout=timeout)

    def drop_user(self, user_name: str, timeout: float | None = None, **kwargs: Any) -> None:
        reject_unknown("drop_user", kwargs)
        self._op(ops.DropUser(user_name=user_name), timeout=timeout)

    def update_password(
        self,
        user_name: str,
        old_password: str | None,
        new_password: str,
        reset_connection: bool = False,
        timeout: float | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        """A new password; tokens issued before it stop working. ``reset_connection``
        (this client's own user) logs in again with the new password."""
        _refuse_extras("update_password", description, kwargs)
        op = ops.UpdatePassword(
            user_name=user_name, old_password=old_password, new_password=new_password
        )
        self._op(op, timeout=timeout)  # old_password, when given, now comes before new
        login = self._login
        if reset_connection and login is not None and login.user == user_name:
            login.password = new_password
            self._authenticate()

    def list_users(self, timeout: float | None = None, **kwargs: Any) -> list[str]:
        reject_unknown("list_users", kwargs)
        return list(self._op(ops.ListUsers(), timeout=timeout)["users"])

    def describe_user(
        self, user_name: str, timeout: float | None = None, **kwargs: Any
    ) -> UserDescription:
        """``{"user_name", "roles"}``."""
        reject_unknown("describe_user", kwargs)
        op = ops.DescribeUser(user_name=user_name)
        return self._reply(op, UserDescription, timeout=timeout)

    # -- roles ------------------------------------------------------------------------------
    def create_role(
        self, role_name: str, timeout: float | None = None, description: str = "", **kwargs: Any
    ) -> None:
        _refuse_extras("create_role", description, kwargs)
        self._op(ops.CreateRole(role_name=role_name), timeout=timeout)

    def drop_role(
        self,
        role_name: str,
        force_drop: bool = False,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_role", kwargs)
        self._op(ops.DropRole(role_name=role_name, force_drop=force_drop), timeout=timeout)

    def grant_role(
        self, user_name: str, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("grant_role", kwargs)
        self._op(ops.GrantRole(user_name=user_name, role_name=role_name), timeout=timeout)

    def revoke_role(
        self, user_name: str, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("revoke_role", kwargs)
        self._op(ops.RevokeRole(user_name=user_name, role_name=role_name), timeout=timeout)

    def list_roles(self, timeout: float | None = None, **kwargs: Any) -> list[str]:
        reject_unknown("list_roles", kwargs)
        return list(self._op(ops.ListRoles(), timeout=timeout)["roles"])

    def describe_role(
        self, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> RoleDescription:
        """``{"role", "privileges": [{object_type, object_name, db_name, privilege, ...}]}``."""
        reject_unknown("describe_role", kwargs)
        op = ops.DescribeRole(role_name=role_name)
        return self._reply(op, RoleDescription, timeout=timeout)

    # -- privileges -------------------------------------------------------------------------
    def grant_privilege(
        self,
        role_name: str,
        object_type: str,
        privilege: str,
        object_name: str,
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Grant ``privilege`` (a name, a group or ``All``) on an object: ``Global`` /
        ``*``, ``Database`` / a database, ``Collection`` / a collection of ``db_name``
        (this client's database if empty), ``User`` / a user."""
        reject_unknown("grant_privilege", kwargs)
        op = _grant(
            ops.GrantPrivilege, role_name, object_type, privilege, object_name, db_name or self.db
        )
        self._op(op, timeout=timeout)

    def revoke_privilege(
        self,
        role_name: str,
        object_type: str,
        privilege: str,
        object_name: str,
        db_name: str = "",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Take back what ``grant_privilege`` with the same arguments gave."""
        reject_unknown("revoke_privilege", kwargs)
        op = _grant(
            ops.RevokePrivilege, role_name, object_type, privilege, object_name, db_name or self.db
        )
        self._op(op, timeout=timeout)

    def grant_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Milvus 2.5's form: on a collection (``*``: every collection) of a database; a
        Global privilege (CreateCollection, ...) applies to the whole database."""
        reject_unknown("grant_privilege_v2", kwargs)
        op = _grant_v2(
            ops.GrantPrivilege, role_name, privilege, collection_name, db_name or self.db
        )
        self._op(op, timeout=timeout)

    def revoke_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("revoke_privilege_v2", kwargs)
        op = _grant_v2(
            ops.RevokePrivilege, role_name, privilege, collection_name, db_name or self.db
        )
        self._op(op, timeout=timeout)

    # -- privilege groups -------------------------------------------------------------------
    def create_privilege_group(
        self, group_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """A custom privilege group, empty; ``add_privileges_to_group`` fills it."""
        reject_unknown("create_privilege_group", kwargs)
        self._op(ops.CreatePrivilegeGroup(group_name=group_name), timeout=timeout)

    def drop_privilege_group(
        self, group_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Refused while a role is granted the group: revoke it first."""
        reject_unknown("drop_privilege_group", kwargs)
        self._op(ops.DropPrivilegeGroup(group_name=group_name), timeout=timeout)

    def list_privilege_groups(
        self, timeout: float | None = None, **kwargs: Any
    ) -> list[PrivilegeGroup]:
        """``[{"privilege_group", "privileges": (names...)}]``: custom groups, then the
        built-in ones."""
        reject_unknown("list_privilege_groups", kwargs)
        groups = self._reply(ops.ListPrivilegeGroups(), PrivilegeGroups, timeout=timeout)
        return [
            PrivilegeGroup(privilege_group=g["privilege_group"], privileges=tuple(g["privileges"]))
            for g in groups["groups"]
        ]

    def add_privileges_to_group(
        self, group_name: str, privileges: list[str], timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Privileges (or built-in groups) of one level: all Collection, all Global, ..."""
        reject_unknown("add_privileges_to_group", kwargs)
        op = ops.AddPrivilegesToGroup(group_name=group_name, privileges=list(privileges))
        self._op(op, timeout=timeout)

    def remove_privileges_from_group(
        self, group_name: str, privileges: list[str], timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("remove_privileges_from_group", kwargs)
        op = ops.RemovePrivilegesFromGroup(group_name=group_name, privileges=list(privileges))
        self._op(op, timeout=timeout)


def _refuse_extras(method: str, description: str | None, kwargs: dict[str, Any]) -> None:
    """pymilvus 2.6 takes a description for users and roles; Elanus stores none, so one
    given is refused by name rather than dropped."""
    if description:
        kwargs = {**kwargs, "description": description}
    reject_unknown(method, kwargs)


def _grant(
    op: type[Grant], role: str, object_type: str, privilege: str, object_name: str, db_name: str
) -> Grant:
    return op(
        role_name=role,
        object_type=object_type,
        privilege=privilege,
        object_name=object_name,
        db_name=db_name,
    )


def _grant_v2(op: type[Grant], role: str, privilege: str, collection: str, db_name: str) -> Grant:
    """A name Elanus does not know may be a custom group: the object type is left empty
    for the server to derive from the group's level."""
    if PRIVILEGES.get(privilege) == ObjectType.GLOBAL:
        return _grant(op, role, "Global", privilege, ANY, db_name)
    try:
        check_privilege(privilege)
    except ValueError:
        return _grant(op, role, "", privilege, collection, db_name)
    return _grant(op, role, "Collection", privilege, collection, db_name)
