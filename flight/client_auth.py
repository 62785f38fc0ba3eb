"""The users-and-roles half of the SDK (mixed into ``Client``), named and shaped as
pymilvus's MilvusClient names them (``create_user``, ``grant_privilege``, ...)."""

from __future__ import annotations

from typing import Any

from elanus.flight.client_base import ClientBase
from elanus.privileges import ANY, PRIVILEGES, ObjectType


class AuthAPI(ClientBase):
    def whoami(self) -> dict[str, Any]:
        """``{"user", "roles", "superuser"}`` of this connection's credentials."""
        return self._action("whoami")

    # -- users ------------------------------------------------------------------------------
    def create_user(self, user_name: str, password: str, timeout: float | None = None) -> None:
        self._action("create_user", {"user_name": user_name, "password": password}, timeout=timeout)

    def drop_user(self, user_name: str, timeout: float | None = None) -> None:
        self._action("drop_user", {"user_name": user_name}, timeout=timeout)

    def update_password(
        self,
        user_name: str,
        old_password: str | None,
        new_password: str,
        reset_connection: bool = False,
        timeout: float | None = None,
    ) -> None:
        """A new password; tokens issued before it stop working. ``reset_connection``
        (this client's own user) logs in again with the new password."""
        body: dict[str, Any] = {"user_name": user_name, "new_password": new_password}
        if old_password is not None:
            body["old_password"] = old_password
        self._action("update_password", body, timeout=timeout)
        login = self._login
        if reset_connection and login is not None and login.user == user_name:
            login.password = new_password
            self._authenticate()

    def list_users(self, timeout: float | None = None) -> list[str]:
        return list(self._action("list_users", timeout=timeout)["users"])

    def describe_user(self, user_name: str, timeout: float | None = None) -> dict[str, Any]:
        """``{"user_name", "roles"}``."""
        return self._action("describe_user", {"user_name": user_name}, timeout=timeout)

    # -- roles ------------------------------------------------------------------------------
    def create_role(self, role_name: str, timeout: float | None = None) -> None:
        self._action("create_role", {"role_name": role_name}, timeout=timeout)

    def drop_role(
        self, role_name: str, force_drop: bool = False, timeout: float | None = None
    ) -> None:
        body = {"role_name": role_name, "force_drop": force_drop}
        self._action("drop_role", body, timeout=timeout)

    def grant_role(self, user_name: str, role_name: str, timeout: float | None = None) -> None:
        self._action(
            "grant_role", {"user_name": user_name, "role_name": role_name}, timeout=timeout
        )

    def revoke_role(self, user_name: str, role_name: str, timeout: float | None = None) -> None:
        body = {"user_name": user_name, "role_name": role_name}
        self._action("revoke_role", body, timeout=timeout)

    def list_roles(self, timeout: float | None = None) -> list[str]:
        return list(self._action("list_roles", timeout=timeout)["roles"])

    def describe_role(self, role_name: str, timeout: float | None = None) -> dict[str, Any]:
        """``{"role", "privileges": [{object_type, object_name, db_name, privilege, ...}]}``."""
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
    ) -> None:
        """Grant ``privilege`` (a name, a group or ``All``) on an object: ``Global`` /
        ``*``, ``Database`` / a database, ``Collection`` / a collection of ``db_name``
        (this client's database if empty), ``User`` / a user."""
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
    ) -> None:
        """Take back what ``grant_privilege`` with the same arguments gave."""
        body = _grant(role_name, object_type, privilege, object_name, db_name or self.db)
        self._action("revoke_privilege", body, timeout=timeout)

    def grant_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Milvus 2.5's form: on a collection (``*``: every collection) of a database; a
        Global privilege (CreateCollection, ...) applies to the whole database."""
        body = _grant_v2(role_name, privilege, collection_name, db_name or self.db)
        self._action("grant_privilege", body, timeout=timeout)

    def revoke_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        timeout: float | None = None,
    ) -> None:
        body = _grant_v2(role_name, privilege, collection_name, db_name or self.db)
        self._action("revoke_privilege", body, timeout=timeout)


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
    if PRIVILEGES.get(privilege) == ObjectType.GLOBAL:
        return _grant(role, "Global", privilege, ANY, db_name)
    return _grant(role, "Collection", privilege, collection, db_name)
