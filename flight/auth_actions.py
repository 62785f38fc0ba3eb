"""DoAction entries for users, roles and privileges (Milvus's RBAC calls), and ``whoami``.

Names and result shapes follow pymilvus's MilvusClient: ``list_users`` gives names,
``describe_user`` ``{user_name, roles}``, ``describe_role`` ``{role, privileges}``. The
proxy checks the caller's privilege first (``flight/auth.py``); the coord keeps the tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elanus.flight.actions import _action, _db
from elanus.flight.auth import Caller
from elanus.requests import Body

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

AUTH_ACTIONS = (
    "whoami",
    "create_user",
    "drop_user",
    "update_password",
    "list_users",
    "describe_user",
    "create_role",
    "drop_role",
    "grant_role",
    "revoke_role",
    "grant_privilege",
    "revoke_privilege",
    "list_roles",
    "describe_role",
)


def _user(b: Body) -> str:
    return str(b.str("user_name"))


def _role(b: Body) -> str:
    return str(b.str("role_name"))


@_action("whoami", "The calling user, their roles and whether they hold every privilege.")
def _whoami(b: Body) -> dict[str, Any]:
    return {"db": _db(b)}


@_action("create_user", "Create a user. Body: user_name, password.", ("user_name", "password"))
def _create_user(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "user_name": _user(b), "password": b.str("password")}


@_action("drop_user", "Drop a user (not root). Body: user_name.", ("user_name",))
def _drop_user(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "user_name": _user(b)}


@_action(
    "update_password",
    "Change a password; tokens issued before it stop working. A user changing their own "
    "gives old_password; a user with UpdateUser on another may omit it. Body: user_name, "
    "old_password, new_password.",
    ("user_name", "old_password", "new_password"),
)
def _update_password(b: Body) -> dict[str, Any]:
    return {
        "db": _db(b),
        "user_name": _user(b),
        "old_password": b.str("old_password", None),
        "new_password": b.str("new_password"),
    }


@_action("list_users", "Names of every user. Result: users.")
def _list_users(b: Body) -> dict[str, Any]:
    return {"db": _db(b)}


@_action(
    "describe_user", "A user's roles. Body: user_name. Result: user_name, roles.", ("user_name",)
)
def _describe_user(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "user_name": _user(b)}


@_action("create_role", "Create a role. Body: role_name.", ("role_name",))
def _create_role(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "role_name": _role(b)}


@_action(
    "drop_role",
    "Drop a role (not admin or public); one still bound or granted needs force_drop. "
    "Body: role_name, force_drop.",
    ("role_name", "force_drop"),
)
def _drop_role(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "role_name": _role(b), "force_drop": b.bool("force_drop", False)}


@_action(
    "grant_role", "Bind a role to a user. Body: user_name, role_name.", ("user_name", "role_name")
)
def _grant_role(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "user_name": _user(b), "role_name": _role(b)}


@_action(
    "revoke_role",
    "Unbind a role from a user. Body: user_name, role_name.",
    ("user_name", "role_name"),
)
def _revoke_role(b: Body) -> dict[str, Any]:
    return _grant_role(b)


_GRANT_KEYS = ("role_name", "object_type", "privilege", "object_name", "db_name")


@_action(
    "grant_privilege",
    "Grant a privilege (or privilege group, or All) on an object to a role. Body: role_name, "
    "object_type (Global, Database, Collection, User), privilege, object_name ('*': all), "
    "db_name (default: the request's database).",
    _GRANT_KEYS,
)
def _grant_privilege(b: Body) -> dict[str, Any]:
    db = _db(b)
    return {
        "db": db,
        "role_name": _role(b),
        "object_type": b.str("object_type"),
        "privilege": b.str("privilege"),
        "object_name": b.str("object_name", "*"),
        "db_name": b.str("db_name", "") or db,
    }


@_action("revoke_privilege", "Revoke a grant. Body: as grant_privilege.", _GRANT_KEYS)
def _revoke_privilege(b: Body) -> dict[str, Any]:
    return _grant_privilege(b)


@_action("list_roles", "Names of every role. Result: roles.")
def _list_roles(b: Body) -> dict[str, Any]:
    return {"db": _db(b)}


@_action(
    "describe_role",
    "A role's grants. Body: role_name. Result: role, privileges (object_type, object_name, "
    "db_name, privilege, grantor_name).",
    ("role_name",),
)
def _describe_role(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "role_name": _role(b)}


def execute(proxy: ProxyServer, name: str, request: dict[str, Any], caller: Caller) -> Any:
    """Run one checked (and authorised) RBAC action against the coord."""

    user, role = request.get("user_name"), request.get("role_name")
    if name == "whoami":
        if caller.user == "anonymous":
            return {"user": caller.user, "roles": [], "superuser": True}
        described = proxy.coord_call("auth.user.describe", {"user": caller.user})
        return {"user": caller.user, "roles": described["roles"], "superuser": caller.superuser}
    if name == "create_user":
        return proxy.coord_call("auth.user.create", {"user": user, "password": request["password"]})
    if name == "drop_user":
        return proxy.coord_call("auth.user.drop", {"user": user})
    if name == "update_password":
        body: dict[str, Any] = {"user": user, "new_password": request["new_password"]}
        if user == caller.user or request["old_password"] is not None:
            body["old_password"] = request["old_password"] or ""
        else:  # another user's password, by someone holding UpdateUser on them
            body["reset"] = True
        return proxy.coord_call("auth.user.password", body)
    if name == "list_users":
        return proxy.coord_call("auth.user.list", {})
    if name == "describe_user":
        return proxy.coord_call("auth.user.describe", {"user": user})
    if name == "create_role":
        return proxy.coord_call("auth.role.create", {"role": role})
    if name == "drop_role":
        return proxy.coord_call(
            "auth.role.drop", {"role": role, "force_drop": request["force_drop"]}
        )
    if name in ("grant_role", "revoke_role"):
        method = "auth.role.grant" if name == "grant_role" else "auth.role.revoke"
        return proxy.coord_call(method, {"user": user, "role": role})
    if name in ("grant_privilege", "revoke_privilege"):
        method = "auth.privilege.grant" if name == "grant_privilege" else "auth.privilege.revoke"
        return proxy.coord_call(
            method,
            {
                "role": role,
                "grantor": caller.user,
                **{k: request[k] for k in ("object_type", "object_name", "db_name", "privilege")},
            },
        )
    if name == "list_roles":
        return proxy.coord_call("auth.role.list", {})
    return proxy.coord_call("auth.role.describe", {"role": role})
