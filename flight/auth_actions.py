"""DoAction entries for users, roles and privileges (Milvus's RBAC calls), and ``whoami``.

Names and result shapes follow pymilvus's MilvusClient: ``list_users`` gives names,
``describe_user`` ``{user_name, roles}``, ``describe_role`` ``{role, privileges}``. The
proxy checks the caller's privilege first (``flight/auth.py``); the coord keeps the tables.
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
    RoleBinding,
    UpdatePassword,
)
from elanus.api.base import as_body
from elanus.errors import invalid
from elanus.flight.actions import action, check_db
from elanus.flight.executors import Call, Executor
from elanus.privileges import OPEN
from elanus.requests import Body, decode

R = TypeVar("R")
AuthCall = Callable[[AuthAPI, R], Coroutine[Any, Any, Any]]
"""One of the auth stub's methods, unbound: ``AuthAPI.drop_user``."""


def _ask(c: Call, call: AuthCall[R], req: R) -> Any:
    """One auth call from the Flight thread; the reply's JSON."""
    return as_body(c.proxy.run(call(c.proxy.coord.auth, req)))


def _coord(call: AuthCall[R], kind: type[R], *keys: str) -> Executor:
    """An executor sending the request's ``keys`` to the coord as a ``kind`` (``user_name``
    as ``user``, ``role_name`` as ``role``)."""
    names = {"user_name": "user", "role_name": "role"}
    return lambda c: _ask(c, call, decode(kind, {names.get(k, k): c.request[k] for k in keys}))


def _run_whoami(c: Call) -> dict[str, Any]:
    caller = c.caller
    if caller.user == "anonymous":
        return {"user": caller.user, "roles": [], "superuser": True}
    described = c.proxy.run(c.proxy.coord.auth.describe_user(DescribeUser(user=caller.user)))
    return {"user": caller.user, "roles": described.roles, "superuser": caller.superuser}


def _run_update_password(c: Call) -> Any:
    request, user = c.request, c.request["user_name"]
    if user == c.caller.user or request["old_password"] is not None:
        req = UpdatePassword(
            user=user,
            new_password=request["new_password"],
            old_password=request["old_password"] or "",
        )
    else:  # another user's password, by someone holding UpdateUser on them
        req = UpdatePassword(user=user, new_password=request["new_password"], reset=True)
    return _ask(c, AuthAPI.update_password, req)


def _grants(call: AuthCall[PrivilegeChange]) -> Executor:
    def run(c: Call) -> Any:
        req = PrivilegeChange(
            role=c.request["role_name"],
            grantor=c.caller.user,
            object_type=c.request["object_type"],
            object_name=c.request["object_name"],
            db_name=c.request["db_name"],
            privilege=c.request["privilege"],
        )
        return _ask(c, call, req)

    return run


def _user(b: Body) -> str:
    return str(b.str("user_name"))


def _role(b: Body) -> str:
    return str(b.str("role_name"))


@action(
    "whoami",
    "The calling user, their roles and whether they hold every privilege.",
    privilege=OPEN,
    run=_run_whoami,
)
def _whoami(b: Body) -> dict[str, Any]:
    return {"db": check_db(b)}


@action(
    "create_user",
    "Create a user. Body: user_name, password.",
    ("user_name", "password"),
    privilege="CreateOwnership",
    run=_coord(AuthAPI.create_user, CreateUser, "user_name", "password"),
)
def _create_user(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "user_name": _user(b), "password": b.str("password")}


@action(
    "drop_user",
    "Drop a user (not root). Body: user_name.",
    ("user_name",),
    privilege="DropOwnership",
    run=_coord(AuthAPI.drop_user, DropUser, "user_name"),
)
def _drop_user(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "user_name": _user(b)}


@action(
    "update_password",
    "Change a password; tokens issued before it stop working. A user changing their own "
    "gives old_password; a user with UpdateUser on another may omit it. Body: user_name, "
    "old_password, new_password.",
    ("user_name", "old_password", "new_password"),
    privilege="UpdateUser",
    self_service=True,
    run=_run_update_password,
)
def _update_password(b: Body) -> dict[str, Any]:
    return {
        "db": check_db(b),
        "user_name": _user(b),
        "old_password": b.str("old_password", None),
        "new_password": b.str("new_password"),
    }


@action(
    "list_users",
    "Names of every user. Result: users.",
    privilege="SelectOwnership",
    run=_coord(AuthAPI.list_users, ListUsers),
)
def _list_users(b: Body) -> dict[str, Any]:
    return {"db": check_db(b)}


@action(
    "describe_user",
    "A user's roles. Body: user_name. Result: user_name, roles.",
    ("user_name",),
    privilege="SelectUser",
    self_service=True,
    run=_coord(AuthAPI.describe_user, DescribeUser, "user_name"),
)
def _describe_user(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "user_name": _user(b)}


@action(
    "create_role",
    "Create a role. Body: role_name.",
    ("role_name",),
    privilege="CreateOwnership",
    run=_coord(AuthAPI.create_role, CreateRole, "role_name"),
)
def _create_role(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "role_name": _role(b)}


@action(
    "drop_role",
    "Drop a role (not admin or public); one still bound or granted needs force_drop. "
    "Body: role_name, force_drop.",
    ("role_name", "force_drop"),
    privilege="DropOwnership",
    run=_coord(AuthAPI.drop_role, DropRole, "role_name", "force_drop"),
)
def _drop_role(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "role_name": _role(b), "force_drop": b.bool("force_drop", False)}


@action(
    "grant_role",
    "Bind a role to a user. Body: user_name, role_name.",
    ("user_name", "role_name"),
    privilege="ManageOwnership",
    run=_coord(AuthAPI.grant_role, RoleBinding, "user_name", "role_name"),
)
def _grant_role(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "user_name": _user(b), "role_name": _role(b)}


@action(
    "revoke_role",
    "Unbind a role from a user. Body: user_name, role_name.",
    ("user_name", "role_name"),
    privilege="ManageOwnership",
    run=_coord(AuthAPI.revoke_role, RoleBinding, "user_name", "role_name"),
)
def _revoke_role(b: Body) -> dict[str, Any]:
    return _grant_role(b)


_GRANT_KEYS = ("role_name", "object_type", "privilege", "object_name", "db_name")


@action(
    "grant_privilege",
    "Grant a privilege (or privilege group, or All) on an object to a role. Body: role_name, "
    "object_type (Global, Database, Collection, User), privilege, object_name ('*': all), "
    "db_name (default: the request's database).",
    _GRANT_KEYS,
    privilege="ManageOwnership",
    run=_grants(AuthAPI.grant_privilege),
)
def _grant_privilege(b: Body) -> dict[str, Any]:
    db = check_db(b)
    return {
        "db": db,
        "role_name": _role(b),
        "object_type": b.str("object_type"),
        "privilege": b.str("privilege"),
        "object_name": b.str("object_name", "*"),
        "db_name": b.str("db_name", "") or db,
    }


@action(
    "revoke_privilege",
    "Revoke a grant. Body: as grant_privilege.",
    _GRANT_KEYS,
    privilege="ManageOwnership",
    run=_grants(AuthAPI.revoke_privilege),
)
def _revoke_privilege(b: Body) -> dict[str, Any]:
    return _grant_privilege(b)


@action(
    "list_roles",
    "Names of every role. Result: roles.",
    privilege="SelectOwnership",
    run=_coord(AuthAPI.list_roles, ListRoles),
)
def _list_roles(b: Body) -> dict[str, Any]:
    return {"db": check_db(b)}


@action(
    "describe_role",
    "A role's grants. Body: role_name. Result: role, privileges (object_type, object_name, "
    "db_name, privilege, grantor_name).",
    ("role_name",),
    privilege="SelectOwnership",
    run=_coord(AuthAPI.describe_role, DescribeRole, "role_name"),
)
def _describe_role(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "role_name": _role(b)}


# -- privilege groups -----------------------------------------------------------------------
def _group(b: Body) -> dict[str, Any]:
    return {"db": check_db(b), "group_name": b.str("group_name")}


def _group_privileges(b: Body) -> dict[str, Any]:
    privileges = b.list("privileges")
    if not all(isinstance(p, str) for p in privileges):
        raise invalid("privileges must be a list of privilege names")
    return {**_group(b), "privileges": privileges}


@action(
    "create_privilege_group",
    "Create a custom privilege group, empty. Body: group_name.",
    ("group_name",),
    privilege="CreatePrivilegeGroup",
    run=_coord(AuthAPI.create_group, CreatePrivilegeGroup, "group_name"),
)
def _create_privilege_group(b: Body) -> dict[str, Any]:
    return _group(b)


@action(
    "drop_privilege_group",
    "Drop a custom privilege group; refused while a role is granted it. Body: group_name.",
    ("group_name",),
    privilege="DropPrivilegeGroup",
    run=_coord(AuthAPI.drop_group, DropPrivilegeGroup, "group_name"),
)
def _drop_privilege_group(b: Body) -> dict[str, Any]:
    return _group(b)


@action(
    "add_privileges_to_group",
    "Add privileges (or built-in groups) of one level to a custom group. Body: group_name, "
    "privileges.",
    ("group_name", "privileges"),
    privilege="OperatePrivilegeGroup",
    run=_coord(AuthAPI.add_to_group, OperatePrivilegeGroup, "group_name", "privileges"),
)
def _add_privileges_to_group(b: Body) -> dict[str, Any]:
    return _group_privileges(b)


@action(
    "remove_privileges_from_group",
    "Remove privileges from a custom group. Body: group_name, privileges.",
    ("group_name", "privileges"),
    privilege="OperatePrivilegeGroup",
    run=_coord(AuthAPI.remove_from_group, OperatePrivilegeGroup, "group_name", "privileges"),
)
def _remove_privileges_from_group(b: Body) -> dict[str, Any]:
    return _group_privileges(b)


@action(
    "list_privilege_groups",
    "Custom privilege groups, then the built-in ones. Result: groups ([{privilege_group, "
    "privileges}]).",
    privilege="ListPrivilegeGroups",
    run=_coord(AuthAPI.list_groups, ListPrivilegeGroups),
)
def _list_privilege_groups(b: Body) -> dict[str, Any]:
    return {"db": check_db(b)}
