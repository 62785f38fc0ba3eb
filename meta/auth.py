"""Users, roles and grants in the catalog (Milvus's RBAC), and password checks.

Passwords are kept as argon2id hashes (argon2-cffi); checking one costs tens of
milliseconds by design, so it runs off the event loop and only at a handshake: calls after
it carry a bearer token the proxy checks by itself. Each user has a ``pw_version`` that a
password change bumps, which revokes every token issued before it. After any change the
coord tells every proxy to forget what it cached of that user (or of everyone).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import argon2
import duckdb

from elanus.api.auth import (
    CreatePrivilegeGroup,
    CreateRole,
    CreateUser,
    DescribeRole,
    DescribeUser,
    DropPrivilegeGroup,
    DropRole,
    DropUser,
    GetSecret,
    GrantEntry,
    Identity,
    ListPrivilegeGroups,
    ListRoles,
    ListUsers,
    OperatePrivilegeGroup,
    PrivilegeChange,
    PrivilegeChanged,
    PrivilegeGroupChanged,
    PrivilegeGroupInfo,
    PrivilegeGroups,
    RoleBinding,
    RoleBound,
    RoleChanged,
    RoleDescription,
    Roles,
    Secret,
    UpdatePassword,
    UserChanged,
    UserDescription,
    UserIdentity,
    Users,
    VerifyPassword,
)
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.meta import privgroups
from elanus.meta.privgroups import follow_level
from elanus.privileges import (
    ADMIN_ROLE,
    ANY,
    BUILTIN_ROLES,
    PRIVILEGE_GROUPS,
    PRIVILEGES,
    PUBLIC_GRANTS,
    PUBLIC_ROLE,
    ROOT_USER,
    ObjectType,
    check_privilege,
)

if TYPE_CHECKING:
    from elanus.channels.runtime.role import RoleHandler
    from elanus.meta.context import CoordContext
    from elanus.meta.interfaces import ProxyNotices

log = logging.getLogger(__name__)

ROOT_PASSWORD_FILE = "root_password"
MIN_PASSWORD, MAX_PASSWORD = 6, 256
MAX_USER_NAME = 32
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HASHER = argon2.PasswordHasher(time_cost=2, memory_cost=19_456, parallelism=1)
"""argon2id at OWASP's suggested floor (19 MiB, 2 passes): ~20 ms a check on this machine."""


def check_user_name(name: Any, what: str = "user") -> str:
    if not isinstance(name, str) or not name:
        raise invalid(f"the {what} name must be a non-empty string")
    if len(name) > MAX_USER_NAME or not _NAME.match(name):
        raise invalid(
            f"invalid {what} name {name!r}: start with a letter or underscore, then letters, "
            f"digits or underscores, at most {MAX_USER_NAME} characters"
        )
    return name


def check_password(password: Any) -> str:
    if not isinstance(password, str):
        raise invalid("the password must be a string")
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise invalid(
            f"the password must have {MIN_PASSWORD} to {MAX_PASSWORD} characters, "
            f"not {len(password)}"
        )
    return password


def root_password(data_dir: Path, configured: str | None, auth_enabled: bool = True) -> str:
    """The root password for a first start: the setting, else one generated into an
    owner-only file under the data dir (printed nowhere). With authentication off the
    file is made all the same (turning it on later needs root's password) but said only
    at INFO: nothing asks for it yet."""
    if configured:
        return check_password(configured)
    path = data_dir / ROOT_PASSWORD_FILE
    if path.is_file():
        return path.read_text().strip()
    password = secrets.token_urlsafe(18)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(password + "\n")
    (log.warning if auth_enabled else log.info)(
        "generated the root password into %s (readable by its owner only)", path
    )
    return password


class AuthCoord:
    """The coord's ``auth.*`` handlers over the catalog's RBAC tables."""

    def __init__(self, ctx: CoordContext, proxies: ProxyNotices) -> None:
        self.ctx, self.proxies = ctx, proxies
        self.secret = ""

    def handlers(self) -> dict[str, RoleHandler]:
        return {
            "auth.secret": self.get_secret,
            "auth.verify": self.verify,
            "auth.identity": self.identity,
            "auth.user.create": self.create_user,
            "auth.user.drop": self.drop_user,
            "auth.user.password": self.update_password,
            "auth.user.list": self.list_users,
            "auth.user.describe": self.describe_user,
            "auth.role.create": self.create_role,
            "auth.role.drop": self.drop_role,
            "auth.role.list": self.list_roles,
            "auth.role.describe": self.describe_role,
            "auth.role.grant": self.grant_role,
            "auth.role.revoke": self.revoke_role,
            "auth.privilege.grant": self.grant_privilege,
            "auth.privilege.revoke": self.revoke_privilege,
            "auth.group.create": self.create_group,
            "auth.group.drop": self.drop_group,
            "auth.group.add": self.add_to_group,
            "auth.group.remove": self.remove_from_group,
            "auth.group.list": self.list_groups,
        }

    async def start(self) -> None:
        """Bootstrap RBAC; a root password is made (or read) only when the catalog has no
        root yet, so a standby or a rebuilt coord leaves no stray password file behind."""
        hashed = None
        if await self._db(_user_row, ROOT_USER) is None:
            settings = self.ctx.settings
            password = await asyncio.to_thread(
                root_password, settings.data_path, settings.root_password, settings.auth_enabled
            )
            hashed = await asyncio.to_thread(_HASHER.hash, password)
        self.secret = await self._db(_bootstrap, hashed)

    async def _db(self, fn: Any, *args: Any) -> Any:
        return await self.ctx.db.run(fn, *args)

    async def _changed(self, user: str | None) -> None:
        """Every proxy drops what it cached of ``user`` (``None``: of every user)."""
        await self.proxies.broadcast({"kind": "auth", "user": user})

    # -- identities -------------------------------------------------------------------------
    async def get_secret(self, req: GetSecret) -> Secret:
        return Secret(secret=self.secret)

    async def verify(self, req: VerifyPassword) -> UserIdentity:
        user, password = req.user, req.password
        row = await self._db(_user_row, user)
        refused = ElanusError(ErrorCode.UNAUTHENTICATED, "wrong user name or password")
        if row is None:
            await asyncio.to_thread(_burn_time, password)  # same cost as a wrong password
            raise refused
        try:
            await asyncio.to_thread(_HASHER.verify, row[0], password)
        except argon2.exceptions.VerificationError:
            raise refused from None
        except argon2.exceptions.InvalidHashError:
            log.error("the stored password hash of %r is unreadable", user)
            raise refused from None
        return await self._db(_identity, user)

    async def identity(self, req: Identity) -> UserIdentity:
        return await self._db(_identity, req.user)

    # -- users ------------------------------------------------------------------------------
    async def create_user(self, req: CreateUser) -> UserChanged:
        user, password = check_user_name(req.user), check_password(req.password)
        hashed = await asyncio.to_thread(_HASHER.hash, password)
        await self._db(_create_user, user, hashed)
        return UserChanged(user=user)

    async def drop_user(self, req: DropUser) -> UserChanged:
        user = req.user
        if user == ROOT_USER:
            raise invalid("the root user cannot be dropped")
        await self._db(_drop_user, user)
        await self._changed(user)
        return UserChanged(user=user)

    async def update_password(self, req: UpdatePassword) -> UserChanged:
        """A new password for ``user``; ``old_password`` must match unless the caller may
        manage users (the proxy decides and says so with ``reset``)."""
        user, new = req.user, check_password(req.new_password)
        old, reset = req.old_password, req.reset
        row = await self._db(_user_row, user)
        if row is None:
            raise ElanusError(ErrorCode.USER_NOT_FOUND, f"user {user!r} does not exist")
        if not reset:
            try:
                await asyncio.to_thread(_HASHER.verify, row[0], old or "")
            except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
                raise ElanusError(
                    ErrorCode.UNAUTHENTICATED, "the old password does not match"
                ) from None
        hashed = await asyncio.to_thread(_HASHER.hash, new)
        await self._db(_set_password, user, hashed)
        await self._changed(user)
        return UserChanged(user=user)

    async def list_users(self, req: ListUsers) -> Users:
        return Users(users=await self._db(_list, "SELECT name FROM users ORDER BY name"))

    async def describe_user(self, req: DescribeUser) -> UserDescription:
        identity = await self._db(_identity, req.user)
        return UserDescription(user_name=req.user, roles=identity.roles)

    # -- roles ------------------------------------------------------------------------------
    async def create_role(self, req: CreateRole) -> RoleChanged:
        role = check_user_name(req.role, "role")
        await self._db(_create_role, role)
        return RoleChanged(role=role)

    async def drop_role(self, req: DropRole) -> RoleChanged:
        role, force = req.role, req.force_drop
        if role in BUILTIN_ROLES:
            raise invalid(f"the built-in role {role!r} cannot be dropped")
        await self._db(_drop_role, role, force)
        await self._changed(None)
        return RoleChanged(role=role)

    async def list_roles(self, req: ListRoles) -> Roles:
        return Roles(roles=await self._db(_list, "SELECT name FROM roles ORDER BY name"))

    async def describe_role(self, req: DescribeRole) -> RoleDescription:
        return RoleDescription(role=req.role, privileges=await self._db(_role_grants, req.role))

    async def grant_role(self, req: RoleBinding) -> RoleBound:
        return await self._bind(req, True)

    async def revoke_role(self, req: RoleBinding) -> RoleBound:
        return await self._bind(req, False)

    async def _bind(self, req: RoleBinding, add: bool) -> RoleBound:
        user, role = req.user, req.role
        if not add and user == ROOT_USER and role == ADMIN_ROLE:
            raise invalid("the root user keeps the admin role")
        await self._db(_bind_role, user, role, add)
        await self._changed(user)
        return RoleBound(user=user, role=role)

    async def grant_privilege(self, req: PrivilegeChange) -> PrivilegeChanged:
        return await self._grant(req, True)

    async def revoke_privilege(self, req: PrivilegeChange) -> PrivilegeChanged:
        return await self._grant(req, False)

    async def _grant(self, req: PrivilegeChange, add: bool) -> PrivilegeChanged:
        grant = await self._db(_change_grant, req, add)
        role = req.role
        await self._changed(None)
        object_type, object_name, db_name, privilege = grant
        return PrivilegeChanged(
            role=role,
            object_type=object_type,
            object_name=object_name,
            db_name=db_name,
            privilege=privilege,
        )

    # -- privilege groups (meta/privgroups.py) ------------------------------------------------
    async def create_group(self, req: CreatePrivilegeGroup) -> PrivilegeGroupChanged:
        name = privgroups.check_group_name(req.group_name)
        await self._db(privgroups.create_group, name)
        return PrivilegeGroupChanged(group_name=name)

    async def drop_group(self, req: DropPrivilegeGroup) -> PrivilegeGroupChanged:
        await self._db(privgroups.drop_group, req.group_name)
        return PrivilegeGroupChanged(group_name=req.group_name)

    async def add_to_group(self, req: OperatePrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._operate_group(req, True)

    async def remove_from_group(self, req: OperatePrivilegeGroup) -> PrivilegeGroupChanged:
        return await self._operate_group(req, False)

    async def _operate_group(self, req: OperatePrivilegeGroup, add: bool) -> PrivilegeGroupChanged:
        await self._db(privgroups.operate_group, req.group_name, req.privileges, add)
        await self._changed(None)  # roles granted the group now hold other privileges
        return PrivilegeGroupChanged(group_name=req.group_name)

    async def list_groups(self, req: ListPrivilegeGroups) -> PrivilegeGroups:
        """Custom groups, then the built-in ones, as Milvus lists them."""
        custom = await self._db(privgroups.custom_groups)
        return PrivilegeGroups(
            groups=[
                PrivilegeGroupInfo(privilege_group=name, privileges=list(members))
                for name, members in [*custom.items(), *PRIVILEGE_GROUPS.items()]
            ]
        )


def check_grant(
    object_type: str,
    object_name: str,
    db_name: str,
    privilege: str,
    custom: tuple[bool, ObjectType | None] = (False, None),
) -> tuple[str, str, str, str]:
    """A grant spelt as stored; refuses one that could never apply. ``custom``: whether
    ``privilege`` is a custom group, and its level; such a group with no object type (pymilvus's
    ``grant_privilege_v2``) takes its level's object (``privgroups.follow_level``)."""
    is_custom, level = custom
    try:
        name = privilege if is_custom else check_privilege(privilege)
        if is_custom and not object_type:
            object_type, object_name, db_name = follow_level(level, object_name, db_name)
        kind = ObjectType.parse(object_type)
    except ValueError as exc:
        raise invalid(str(exc)) from None
    if kind == ObjectType.GLOBAL and object_name != ANY:
        raise invalid("a Global object is named '*'")
    own = level if is_custom else PRIVILEGES.get(name)
    if own == ObjectType.GLOBAL and kind not in (ObjectType.GLOBAL, ObjectType.DATABASE):
        raise invalid(f"{name} is granted on Global (or Database) objects, not {kind.value}")
    if own == ObjectType.USER and kind not in (ObjectType.USER, ObjectType.GLOBAL):
        raise invalid(f"{name} is granted on User (or Global) objects, not {kind.value}")
    if not object_name:
        raise invalid("object_name must not be empty (use '*' for every object)")
    db = db_name if kind in (ObjectType.GLOBAL, ObjectType.COLLECTION) else ANY
    if not db:
        raise invalid("db_name must not be empty (use '*' for every database)")
    return kind.value, object_name, db, name


# -- on the database thread ----------------------------------------------------------------
def _bootstrap(con: duckdb.DuckDBPyConnection, root_hash: str | None) -> str:
    """Built-in roles, the root user (first start only) and the token secret."""
    for role in BUILTIN_ROLES:
        con.execute("INSERT INTO roles VALUES (?) ON CONFLICT DO NOTHING", [role])
    for grant in PUBLIC_GRANTS:
        con.execute(
            "INSERT INTO grants VALUES (?, ?, ?, ?, ?, '') ON CONFLICT DO NOTHING",
            [PUBLIC_ROLE, *grant],
        )
    if root_hash is not None:
        con.execute(
            "INSERT INTO users VALUES (?, ?, 1) ON CONFLICT DO NOTHING", [ROOT_USER, root_hash]
        )
        con.execute("INSERT INTO user_roles VALUES (?, ?)", [ROOT_USER, ADMIN_ROLE])
    row = con.execute("SELECT value FROM auth_secret").fetchone()
    if row is None:
        secret = secrets.token_hex(32)
        con.execute("INSERT INTO auth_secret VALUES (?)", [secret])
        return secret
    return str(row[0])


def _burn_time(password: str) -> None:
    _HASHER.hash(password)


def _user_row(con: duckdb.DuckDBPyConnection, user: str) -> tuple[str, int] | None:
    row = con.execute("SELECT hash, pw_version FROM users WHERE name = ?", [user]).fetchone()
    return (str(row[0]), int(row[1])) if row else None


def _identity(con: duckdb.DuckDBPyConnection, user: str) -> UserIdentity:
    row = _user_row(con, user)
    if row is None:
        raise ElanusError(ErrorCode.USER_NOT_FOUND, f"user {user!r} does not exist")
    roles = [r for (r,) in con.execute(
        "SELECT role FROM user_roles WHERE user_name = ? ORDER BY role", [user]
    ).fetchall()]  # fmt: skip
    grants = con.execute(
        f"""SELECT object_type, object_name, db_name, privilege FROM grants
            WHERE role IN (SELECT unnest(?::VARCHAR[])) OR role = '{PUBLIC_ROLE}'""",
        [roles],
    ).fetchall()
    return UserIdentity(
        user=user,
        pw_version=row[1],
        roles=roles,
        superuser=user == ROOT_USER or ADMIN_ROLE in roles,
        grants=privgroups.expand(con, grants),
    )


def _create_user(con: duckdb.DuckDBPyConnection, user: str, hashed: str) -> None:
    if con.execute("SELECT 1 FROM users WHERE name = ?", [user]).fetchone():
        raise ElanusError(ErrorCode.USER_ALREADY_EXISTS, f"user {user!r} already exists")
    con.execute("INSERT INTO users VALUES (?, ?, 1)", [user, hashed])


def _drop_user(con: duckdb.DuckDBPyConnection, user: str) -> None:
    if not con.execute("SELECT 1 FROM users WHERE name = ?", [user]).fetchone():
        raise ElanusError(ErrorCode.USER_NOT_FOUND, f"user {user!r} does not exist")
    con.execute("DELETE FROM user_roles WHERE user_name = ?", [user])
    con.execute("DELETE FROM users WHERE name = ?", [user])


def _set_password(con: duckdb.DuckDBPyConnection, user: str, hashed: str) -> None:
    con.execute(
        "UPDATE users SET hash = ?, pw_version = pw_version + 1 WHERE name = ?", [hashed, user]
    )


def _list(con: duckdb.DuckDBPyConnection, sql: str, *args: str) -> list[str]:
    return [str(r[0]) for r in con.execute(sql, list(args)).fetchall()]


def _require_role(con: duckdb.DuckDBPyConnection, role: str) -> None:
    if not con.execute("SELECT 1 FROM roles WHERE name = ?", [role]).fetchone():
        raise ElanusError(ErrorCode.ROLE_NOT_FOUND, f"role {role!r} does not exist")


def _create_role(con: duckdb.DuckDBPyConnection, role: str) -> None:
    if con.execute("SELECT 1 FROM roles WHERE name = ?", [role]).fetchone():
        raise ElanusError(ErrorCode.ROLE_ALREADY_EXISTS, f"role {role!r} already exists")
    con.execute("INSERT INTO roles VALUES (?)", [role])


def _drop_role(con: duckdb.DuckDBPyConnection, role: str, force: bool) -> None:
    _require_role(con, role)
    users = _list(con, "SELECT user_name FROM user_roles WHERE role = ?", role)
    grants = con.execute("SELECT count(*) FROM grants WHERE role = ?", [role]).fetchone()
    if not force and (users or (grants and grants[0])):
        raise invalid(
            f"role {role!r} is still bound to {len(users)} user(s) and holds "
            f"{grants[0] if grants else 0} grant(s); revoke them first or pass force_drop"
        )
    con.execute("DELETE FROM user_roles WHERE role = ?", [role])
    con.execute("DELETE FROM grants WHERE role = ?", [role])
    con.execute("DELETE FROM roles WHERE name = ?", [role])


def _bind_role(con: duckdb.DuckDBPyConnection, user: str, role: str, add: bool) -> None:
    if not con.execute("SELECT 1 FROM users WHERE name = ?", [user]).fetchone():
        raise ElanusError(ErrorCode.USER_NOT_FOUND, f"user {user!r} does not exist")
    _require_role(con, role)
    if add:
        con.execute("INSERT INTO user_roles VALUES (?, ?) ON CONFLICT DO NOTHING", [user, role])
    else:
        con.execute("DELETE FROM user_roles WHERE user_name = ? AND role = ?", [user, role])


def _change_grant(
    con: duckdb.DuckDBPyConnection, req: PrivilegeChange, add: bool
) -> tuple[str, str, str, str]:
    """Grant or revoke; the grant as stored."""
    custom = privgroups.custom_level(con, req.privilege)
    grant = check_grant(req.object_type, req.object_name, req.db_name, req.privilege, custom)
    role = req.role
    if role == ADMIN_ROLE:
        raise invalid("the admin role holds every privilege; its grants cannot change")
    _require_role(con, role)
    if add:
        con.execute(
            "INSERT INTO grants VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [role, *grant, req.grantor],
        )
    else:
        con.execute(
            """DELETE FROM grants WHERE role = ? AND object_type = ? AND object_name = ?
               AND db_name = ? AND privilege = ?""",
            [role, *grant],
        )
    return grant


def _role_grants(con: duckdb.DuckDBPyConnection, role: str) -> list[GrantEntry]:
    _require_role(con, role)
    rows = con.execute(
        """SELECT object_type, object_name, db_name, privilege, grantor FROM grants
           WHERE role = ? ORDER BY object_type, db_name, object_name, privilege""",
        [role],
    ).fetchall()
    return [
        GrantEntry(
            role_name=role,
            object_type=r[0],
            object_name=r[1],
            db_name=r[2],
            privilege=r[3],
            grantor_name=r[4],
        )
        for r in rows
    ]
