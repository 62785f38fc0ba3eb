"""The users-and-roles half of the SDK (mixed into ``Client``), named and shaped as
pymilvus's MilvusClient names them (``create_user``, ``grant_privilege``, ...)."""

from __future__ import annotations

from typing import Any

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.privileges import ANY, PRIVILEGES, ObjectType, check_privilege


class AuthAPI(ClientBase):
    def whoami(self) -> dict[str, Any]:
        """``{"user", "roles", "superuser"}`` of this connection's credentials."""
        return self._action("whoami")

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
        self._action("create_user", {"user_name": user_name, "password": password}, timeout=timeout)

    def drop_user(self, user_name: str, timeout: float | None = None, **kwargs: Any) -> None:
        reject_unknown("drop_user", kwargs)
        self._action("drop_user", {"user_name": user_name}, timeout=timeout)

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
        body: dict[str, Any] = {"user_name": user_name, "new_password": new_password}
        if old_password is not None:
            body["old_password"] = old_password
        self._action("update_password", body, timeout=timeout)
        login = self._login
        if reset_connection and login is not None and login.user == user_name:
            login.password = new_password
            self._authenticate()

    def list_users(self, timeout: float | None = None, **kwargs: Any) -> list[str]:
        reject_unknown("list_users", kwargs)
        return list(self._action("list_users", timeout=timeout)["users"])

    def describe_user(
        self, user_name: str, timeout: float | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """``{"user_name", "roles"}``."""
        reject_unknown("describe_user", kwargs)
        return self._action("describe_user", {"user_name": user_name}, timeout=timeout)

    # -- roles ------------------------------------------------------------------------------
    def create_role(
        self, role_name: str, timeout: float | None = None, description: str = "", **kwargs: Any
    ) -> None:
        _refuse_extras("create_role", description, kwargs)
        self._action("create_role", {"role_name": role_name}, timeout=timeout)

    def drop_role(
        self,
        role_name: str,
        force_drop: bool = False,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown("drop_role", kwargs)
        body = {"role_name": role_name, "force_drop": force_drop}
        self._action("drop_role", body, timeout=timeout)

    def grant_role(
        self, user_name: str, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("grant_role", kwargs)
        self._action(
            "grant_role", {"user_name": user_name, "role_name": role_name}, timeout=timeout
        )

    def revoke_role(
        self, user_name: str, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("revoke_role", kwargs)
        body = {"user_name": user_name, "role_name": role_name}
        self._action("revoke_role", body, timeout=timeout)

    def list_roles(self, timeout: float | None = None, **kwargs: Any) -> list[str]:
        reject_unknown("list_roles", kwargs)
        return list(self._action("list_roles", timeout=timeout)["roles"])

    def describe_role(
        self, role_name: str, timeout: float | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """``{"role", "privileges": [{object_type, object_name, db_name, privilege, ...}]}``."""
        reject_unknown("describe_role", kwargs)
        return self._action("describe_role", {"role_name": role_name}, timeout=timeout)

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
        body = _grant(role_name, object_type, privilege, object_name, db_name or self.db)
        self._action("grant_privilege", body, timeout=timeout)

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
        body = _grant(role_name, object_type, privilege, object_name, db_name or self.db)
        self._action("revoke_privilege", body, timeout=timeout)

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
        body = _grant_v2(role_name, privilege, collection_name, db_name or self.db)
        self._action("grant_privilege", body, timeout=timeout)

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
        body = _grant_v2(role_name, privilege, collection_name, db_name or self.db)
        self._action("revoke_privilege", body, timeout=timeout)

    # -- privilege groups -------------------------------------------------------------------
    def create_privilege_group(
        self, group_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """A custom privilege group, empty; ``add_privileges_to_group`` fills it."""
        reject_unknown("create_privilege_group", kwargs)
        self._action("create_privilege_group", {"group_name": group_name}, timeout=timeout)

    def drop_privilege_group(
        self, group_name: str, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Refused while a role is granted the group: revoke it first."""
        reject_unknown("drop_privilege_group", kwargs)
        self._action("drop_privilege_group", {"group_name": group_name}, timeout=timeout)

    def list_privilege_groups(
        self, timeout: float | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """``[{"privilege_group", "privileges": (names...)}]``: custom groups, then the
        built-in ones."""
        reject_unknown("list_privilege_groups", kwargs)
        groups = self._action("list_privilege_groups", timeout=timeout)["groups"]
        return [
            {"privilege_group": g["privilege_group"], "privileges": tuple(g["privileges"])}
            for g in groups
        ]

    def add_privileges_to_group(
        self, group_name: str, privileges: list[str], timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Privileges (or built-in groups) of one level: all Collection, all Global, ..."""
        reject_unknown("add_privileges_to_group", kwargs)
        body = {"group_name": group_name, "privileges": list(privileges)}
        self._action("add_privileges_to_group", body, timeout=timeout)

    def remove_privileges_from_group(
        self, group_name: str, privileges: list[str], timeout: float | None = None, **kwargs: Any
    ) -> None:
        reject_unknown("remove_privileges_from_group", kwargs)
        body = {"group_name": group_name, "privileges": list(privileges)}
        self._action("remove_privileges_from_group", body, timeout=timeout)


def _refuse_extras(method: str, description: str | None, kwargs: dict[str, Any]) -> None:
    """pymilvus 2.6 takes a description for users and roles; Elanus stores none, so one
    given is refused by name rather than dropped."""
    if description:
        kwargs = {**kwargs, "description": description}
    reject_unknown(method, kwargs)


def _grant(
    role: str, object_type: str, privilege: str, object_name: str, db_name: str
) -> dict[str, Any]:
    return {
        "role_name": role,
        "object_type": object_type,
        "privilege": privilege,
        "object_name": object_name,
        "db_name": db_name,
    }


def _grant_v2(role: str, privilege: str, collection: str, db_name: str) -> dict[str, Any]:
    """A name Elanus does not know may be a custom group: the object type is left empty
    for the server to derive from the group's level."""
    if PRIVILEGES.get(privilege) == ObjectType.GLOBAL:
        return _grant(role, "Global", privilege, ANY, db_name)
    try:
        check_privilege(privilege)
    except ValueError:
        return _grant(role, "", privilege, collection, db_name)
    return _grant(role, "Collection", privilege, collection, db_name)
