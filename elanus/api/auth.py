"""The coord's auth API (``meta/auth.py``): users, roles, privileges and password checks.

Names and reply shapes follow pymilvus's MilvusClient where the proxy hands a reply to
clients as it is (``describe_user``, ``describe_role``, the lists); the key names are the
wire format.
"""

from __future__ import annotations

from elanus.api.base import Stub, reply
from elanus.channels.bus import Bus
from elanus.channels.subjects import COORD
from elanus.requests import request

# -- identities -------------------------------------------------------------------------------


@request("auth.secret")
class GetSecret:
    pass


@reply
class Secret:
    """The token secret every proxy signs and checks bearer tokens with (hex)."""

    secret: str


@request("auth.verify")
class VerifyPassword:
    user: str
    password: str


@request("auth.identity")
class Identity:
    user: str


@reply
class UserIdentity:
    """What a proxy needs to authorise a user's calls; ``pw_version`` revokes the tokens
    issued before a password change."""

    user: str
    pw_version: int
    roles: list[str]
    superuser: bool
    grants: list[list[str]]
    """``[object_type, object_name, db_name, privilege]`` of each role's grants."""


# -- users ------------------------------------------------------------------------------------


@request("auth.user.create")
class CreateUser:
    user: str
    password: str


@reply
class UserChanged:
    user: str


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


@request("auth.user.list")
class ListUsers:
    pass


@reply
class Users:
    users: list[str]


@request("auth.user.describe")
class DescribeUser:
    user: str


@reply
class UserDescription:
    user_name: str
    roles: list[str]


# -- roles ------------------------------------------------------------------------------------


@request("auth.role.create")
class CreateRole:
    role: str


@reply
class RoleChanged:
    role: str


@request("auth.role.drop")
class DropRole:
    role: str
    force_drop: bool = False


@request("auth.role.list")
class ListRoles:
    pass


@reply
class Roles:
    roles: list[str]


@request("auth.role.describe")
class DescribeRole:
    role: str


@reply
class GrantEntry:
    role_name: str
    object_type: str
    object_name: str
    db_name: str
    privilege: str
    grantor_name: str


@reply
class RoleDescription:
    role: str
    privileges: list[GrantEntry]


@request("auth.role.bind")
class RoleBinding:
    """Grant or revoke ``role`` to ``user``."""

    user: str
    role: str


@reply
class RoleBound:
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


@reply
class PrivilegeChanged:
    """The grant as stored (``db_name`` is ``*`` where it does not apply)."""

    role: str
    object_type: str
    object_name: str
    db_name: str
    privilege: str


# -- privilege groups -------------------------------------------------------------------------


@request("auth.group.create")
class CreatePrivilegeGroup:
    group_name: str


@reply
class PrivilegeGroupChanged:
    group_name: str


@request("auth.group.drop")
class DropPrivilegeGroup:
    """Refused while a role is granted the group (revoke it first), as in Milvus."""

    group_name: str


@request("auth.group.operate")
class OperatePrivilegeGroup:
    """Add ``privileges`` to a custom group, or remove them."""

    group_name: str
    privileges: list[str]


@request("auth.group.list")
class ListPrivilegeGroups:
    pass


@reply
class PrivilegeGroupInfo:
    privilege_group: str
    privileges: list[str]


@reply
class PrivilegeGroups:
    """Custom groups, then Milvus's built-in ones."""

    groups: list[PrivilegeGroupInfo]


class AuthAPI(Stub):
    """The coord's ``auth.*`` calls."""

    def __init__(self, bus: Bus, timeout: float = 30.0) -> None:
        super().__init__(bus, COORD, timeout)

    async def secret(self, req: GetSecret) -> Secret:
        return await self._ask("auth.secret", req, Secret)

    async def verify(self, req: VerifyPassword) -> UserIdentity:
        return await self._ask("auth.verify", req, UserIdentity)

    async def identity(self, req: Identity) -> UserIdentity:
        return await self._ask("auth.identity", req, UserIdentity)

    async def create_user(self, req: CreateUser) -> UserChanged:
        return await self._ask("auth.user.create", req, UserChanged)

    async def drop_user(self, req: DropUser) -> UserChanged:
        return await self._ask("auth.user.drop", req, UserChanged)

    async def update_password(self, req: UpdatePassword) -> UserChanged:
        return await self._ask("auth.user.password", req, UserChanged)

    async def list_users(self, req: ListUsers) -> Users:
        return await self._ask("auth.user.list", req, Users)

    async def describe_user(self, req: DescribeUser) -> UserDescription:
        return await self._ask("auth.user.describe", req, UserDescription)

    async def create_role(self, req: CreateRole) -> RoleChanged:
        return await self._ask("auth.role.create", req, RoleChanged)

    async def drop_role(self, req: DropRole) -> RoleChanged:
        return await self._ask("auth.role.drop", req, RoleChanged)

    async def list_roles(self, req: ListRoles) -> Roles:
        return await self._ask("auth.role.list", req, Roles)

    async def describe_role(self, req: DescribeRole) -> RoleDescription:
        return await self._ask("auth.role.describe", req, RoleDescription)

    async def grant_role(self, req: RoleBinding) -> RoleBound:
        return await self._ask("auth.role.grant", req, RoleBound)

    async def revoke_role(self, req: RoleBinding) -> RoleBound:
        return await self._ask("auth.role.revoke", req, RoleBound)

    async def grant_privilege(self, req: PrivilegeChange) -> PrivilegeChanged:
        return await self._ask("auth.privilege.grant", req, PrivilegeChanged)

    async def revoke_privilege(self, req: PrivilegeChange) -> PrivilegeChanged:
        return await self._ask("auth.privilege.revoke", req, PrivilegeChanged)

    async def create_group(self, req: CreatePrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._ask("auth.group.create", req, PrivilegeGroupChanged)

    async def drop_group(self, req: DropPrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._ask("auth.group.drop", req, PrivilegeGroupChanged)

    async def add_to_group(self, req: OperatePrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._ask("auth.group.add", req, PrivilegeGroupChanged)

    async def remove_from_group(self, req: OperatePrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._ask("auth.group.remove", req, PrivilegeGroupChanged)

    async def list_groups(self, req: ListPrivilegeGroups) -> PrivilegeGroups:
        return await self._ask("auth.group.list", req, PrivilegeGroups)
