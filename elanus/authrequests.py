"""Request types of the coordinator's users, roles and privileges (``auth.*``).

See ``elanus.coordrequests`` for how they are used; the key names are the wire format.
"""

from __future__ import annotations

from elanus.requests import request


@request("auth.verify")
class VerifyPassword:
    user: str
    password: str


@request("auth.identity")
class Identity:
    user: str


@request("auth.user.create")
class CreateUser:
    user: str
    password: str


@request("auth.user.drop")
class DropUser:
    user: str


@request("auth.user.password")
class UpdatePassword:
    """``old_password`` must match unless ``reset`` (the proxy says the caller may manage
    users)."""

    user: str
    new_password: str
    old_password: str | None = None
    reset: bool = False


@request("auth.user.describe")
class DescribeUser:
    user: str


@request("auth.role.create")
class CreateRole:
    role: str


@request("auth.role.drop")
class DropRole:
    role: str
    force_drop: bool = False


@request("auth.role.describe")
class DescribeRole:
    role: str


@request("auth.role.bind")
class RoleBinding:
    """Grant or revoke ``role`` to ``user``."""

    user: str
    role: str


@request("auth.privilege")
class PrivilegeChange:
    """Grant or revoke a privilege on an object to ``role``."""

    role: str
    grantor: str = ""
    object_type: str
    object_name: str
    db_name: str
    privilege: str
