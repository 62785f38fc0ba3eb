"""DoAction entries for users, roles and privileges (Milvus's RBAC calls), and ``whoami``.

Names and result shapes follow pymilvus's MilvusClient: ``list_users`` gives names,
``describe_user`` ``{user_name, roles}``, ``describe_role`` ``{role, privileges}``. The
proxy checks the caller's privilege first (``flight/auth.py``); the coord keeps the tables.
Each action is declared by its operation record (``elanus/ops/auth.py``); its executor
builds the coord's request (``elanus/api/auth.py``) from the record's attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from elanus.api.auth import (
    AuthAPI,
    CreatePrivilegeGroup,
    CreateRole,
    CreateUser,
    DescribeRole,
    DescribeUser,
    DropPrivilegeGroup,
    DropRole,
    DropUser,
    ListPrivilegeGroups,
    ListRoles,
    ListUsers,
    OperatePrivilegeGroup,
    PrivilegeChange,
    PrivilegeChanged,
    PrivilegeGroupChanged,
    PrivilegeGroups,
    RoleBinding,
    RoleBound,
    RoleChanged,
    RoleDescription,
    Roles,
    UpdatePassword,
    UserChanged,
    UserDescription,
    Users,
)
from elanus.flight.executors import Call, OpCall
from elanus.flight.registry import operation
from elanus.ops import auth as ops
from elanus.ops.replies import WhoAmI
from elanus.privileges import OPEN

R = TypeVar("R")
P = TypeVar("P")
AuthCall = Callable[[AuthAPI, R], Coroutine[Any, Any, P]]
"""One of the auth stub's methods, unbound: ``AuthAPI.drop_user``."""


def _ask(c: Call, call: AuthCall[R, P], req: R) -> P:
    """One auth call from the Flight thread; the coord's reply record, the action's reply."""
    return c.proxy.run(call(c.proxy.coord.auth, req))


def _run_whoami(c: OpCall[ops.Whoami]) -> WhoAmI:
    caller = c.caller
    if caller.user == "anonymous":
        return {"user": caller.user, "roles": [], "superuser": True}
    described = c.proxy.run(c.proxy.coord.auth.describe_user(DescribeUser(user=caller.user)))
    return {"user": caller.user, "roles": described.roles, "superuser": caller.superuser}


def _run_create_user(c: OpCall[ops.CreateUser]) -> UserChanged:
    req = CreateUser(user=c.request.user_name, password=c.request.password)
    return _ask(c, AuthAPI.create_user, req)


def _run_drop_user(c: OpCall[ops.DropUser]) -> UserChanged:
    return _ask(c, AuthAPI.drop_user, DropUser(user=c.request.user_name))


def _run_update_password(c: OpCall[ops.UpdatePassword]) -> UserChanged:
    r = c.request
    if r.user_name == c.caller.user or r.old_password is not None:
        req = UpdatePassword(
            user=r.user_name, new_password=r.new_password, old_password=r.old_password or ""
        )
    else:  # another user's password, by someone holding UpdateUser on them
        req = UpdatePassword(user=r.user_name, new_password=r.new_password, reset=True)
    return _ask(c, AuthAPI.update_password, req)


def _run_list_users(c: OpCall[ops.ListUsers]) -> Users:
    return _ask(c, AuthAPI.list_users, ListUsers())


def _run_describe_user(c: OpCall[ops.DescribeUser]) -> UserDescription:
    return _ask(c, AuthAPI.describe_user, DescribeUser(user=c.request.user_name))


def _run_create_role(c: OpCall[ops.CreateRole]) -> RoleChanged:
    return _ask(c, AuthAPI.create_role, CreateRole(role=c.request.role_name))


def _run_drop_role(c: OpCall[ops.DropRole]) -> RoleChanged:
    req = DropRole(role=c.request.role_name, force_drop=c.request.force_drop)
    return _ask(c, AuthAPI.drop_role, req)


def _binding(r: ops.GrantRole | ops.RevokeRole) -> RoleBinding:
    return RoleBinding(user=r.user_name, role=r.role_name)


def _run_grant_role(c: OpCall[ops.GrantRole]) -> RoleBound:
    return _ask(c, AuthAPI.grant_role, _binding(c.request))


def _run_revoke_role(c: OpCall[ops.RevokeRole]) -> RoleBound:
    return _ask(c, AuthAPI.revoke_role, _binding(c.request))


def _change(c: Call, r: ops.GrantPrivilege | ops.RevokePrivilege) -> PrivilegeChange:
    """The coord's grant (or revoke) of ``r``, in the caller's name."""
    return PrivilegeChange(
        role=r.role_name,
        grantor=c.caller.user,
        object_type=r.object_type,
        object_name=r.object_name,
        db_name=r.on_db(),
        privilege=r.privilege,
    )


def _run_grant_privilege(c: OpCall[ops.GrantPrivilege]) -> PrivilegeChanged:
    return _ask(c, AuthAPI.grant_privilege, _change(c, c.request))


def _run_revoke_privilege(c: OpCall[ops.RevokePrivilege]) -> PrivilegeChanged:
    return _ask(c, AuthAPI.revoke_privilege, _change(c, c.request))


def _run_list_roles(c: OpCall[ops.ListRoles]) -> Roles:
    return _ask(c, AuthAPI.list_roles, ListRoles())


def _run_describe_role(c: OpCall[ops.DescribeRole]) -> RoleDescription:
    return _ask(c, AuthAPI.describe_role, DescribeRole(role=c.request.role_name))


def _run_create_privilege_group(c: OpCall[ops.CreatePrivilegeGroup]) -> PrivilegeGroupChanged:
    req = CreatePrivilegeGroup(group_name=c.request.group_name)
    return _ask(c, AuthAPI.create_group, req)


def _run_drop_privilege_group(c: OpCall[ops.DropPrivilegeGroup]) -> PrivilegeGroupChanged:
    return _ask(c, AuthAPI.drop_group, DropPrivilegeGroup(group_name=c.request.group_name))


def _group_change(
    r: ops.AddPrivilegesToGroup | ops.RemovePrivilegesFromGroup,
) -> OperatePrivilegeGroup:
    return OperatePrivilegeGroup(group_name=r.group_name, privileges=r.privileges)


def _run_add_privileges_to_group(c: OpCall[ops.AddPrivilegesToGroup]) -> PrivilegeGroupChanged:
    return _ask(c, AuthAPI.add_to_group, _group_change(c.request))


def _run_remove_privileges_from_group(
    c: OpCall[ops.RemovePrivilegesFromGroup],
) -> PrivilegeGroupChanged:
    return _ask(c, AuthAPI.remove_from_group, _group_change(c.request))


def _run_list_privilege_groups(c: OpCall[ops.ListPrivilegeGroups]) -> PrivilegeGroups:
    return _ask(c, AuthAPI.list_groups, ListPrivilegeGroups())


operation(
    ops.Whoami,
    "The calling user, their roles and whether they hold every privilege.",
    privilege=OPEN,
    run=_run_whoami,
)
operation(
    ops.CreateUser,
    "Create a user. Body: user_name, password.",
    privilege="CreateOwnership",
    run=_run_create_user,
)
operation(
    ops.DropUser,
    "Drop a user (not root). Body: user_name.",
    privilege="DropOwnership",
    run=_run_drop_user,
)


operation(
    ops.UpdatePassword,
    "Change a password; tokens issued before it stop working. A user changing their own "
    "gives old_password; a user with UpdateUser on another may omit it. Body: user_name, "
    "old_password, new_password.",
    privilege="UpdateUser",
    self_service=True,
    run=_run_update_password,
)
operation(
    ops.ListUsers,
    "Names of every user. Result: users.",
    privilege="SelectOwnership",
    run=_run_list_users,
)


operation(
    ops.DescribeUser,
    "A user's roles. Body: user_name. Result: user_name, roles.",
    privilege="SelectUser",
    self_service=True,
    run=_run_describe_user,
)
operation(
    ops.CreateRole,
    "Create a role. Body: role_name.",
    privilege="CreateOwnership",
    run=_run_create_role,
)
operation(
    ops.DropRole,
    "Drop a role (not admin or public); one still bound or granted needs force_drop. "
    "Body: role_name, force_drop.",
    privilege="DropOwnership",
    run=_run_drop_role,
)
operation(
    ops.GrantRole,
    "Bind a role to a user. Body: user_name, role_name.",
    privilege="ManageOwnership",
    run=_run_grant_role,
)
operation(
    ops.RevokeRole,
    "Unbind a role from a user. Body: user_name, role_name.",
    privilege="ManageOwnership",
    run=_run_revoke_role,
)
operation(
    ops.GrantPrivilege,
    "Grant a privilege (or privilege group, or All) on an object to a role. Body: role_name, "
    "object_type (Global, Database, Collection, User), privilege, object_name ('*': all), "
    "db_name (default: the request's database).",
    privilege="ManageOwnership",
    run=_run_grant_privilege,
)
operation(
    ops.RevokePrivilege,
    "Revoke a grant. Body: as grant_privilege.",
    privilege="ManageOwnership",
    run=_run_revoke_privilege,
)
operation(
    ops.ListRoles,
    "Names of every role. Result: roles.",
    privilege="SelectOwnership",
    run=_run_list_roles,
)
operation(
    ops.DescribeRole,
    "A role's grants. Body: role_name. Result: role, privileges (object_type, object_name, "
    "db_name, privilege, grantor_name).",
    privilege="SelectOwnership",
    run=_run_describe_role,
)


# -- privilege groups -----------------------------------------------------------------------
operation(
    ops.CreatePrivilegeGroup,
    "Create a custom privilege group, empty. Body: group_name.",
    privilege="CreatePrivilegeGroup",
    run=_run_create_privilege_group,
)
operation(
    ops.DropPrivilegeGroup,
    "Drop a custom privilege group; refused while a role is granted it. Body: group_name.",
    privilege="DropPrivilegeGroup",
    run=_run_drop_privilege_group,
)
operation(
    ops.AddPrivilegesToGroup,
    "Add privileges (or built-in groups) of one level to a custom group. Body: group_name, "
    "privileges.",
    privilege="OperatePrivilegeGroup",
    run=_run_add_privileges_to_group,
)
operation(
    ops.RemovePrivilegesFromGroup,
    "Remove privileges from a custom group. Body: group_name, privileges.",
    privilege="OperatePrivilegeGroup",
    run=_run_remove_privileges_from_group,
)
operation(
    ops.ListPrivilegeGroups,
    "Custom privilege groups, then the built-in ones. Result: groups ([{privilege_group, "
    "privileges}]).",
    privilege="ListPrivilegeGroups",
    run=_run_list_privilege_groups,
)
