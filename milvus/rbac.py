"""Users, roles and privileges over Milvus's protocol: each RPC the Elanus action of the
same meaning (``flight/auth_actions.py``), so both faces share one set of users, roles
and grants. Passwords arrive base64-encoded, as pymilvus sends them. Privilege groups are
Milvus's built-in ones (``elanus.privileges.PRIVILEGE_GROUPS``) and custom ones
(``meta/privgroups.py``)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import auth as ops
from elanus.ops.replies import GrantEntry, RoleDescription
from elanus.privileges import ALL_PRIVILEGES, ANY, PRIVILEGES, ObjectType, check_privilege


def _password(raw: Any, what: str) -> str:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    try:
        return base64.b64decode(text, validate=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise invalid(f"{what} must be base64 text, as pymilvus sends it") from None


def grant_object(privilege: str, db_name: str, collection_name: str) -> tuple[str, str]:
    """(object type, object name) of an ``OperatePrivilegeV2`` grant: the level the
    privilege (or group) applies at, as Milvus derives it. A name Elanus does not know may
    be a custom group: its object type is left empty for the coord to derive."""
    try:
        check_privilege(privilege)
    except ValueError:
        return "", collection_name or ANY
    own = PRIVILEGES.get(privilege)
    if privilege == ALL_PRIVILEGES or own == ObjectType.GLOBAL or privilege.startswith("Cluster"):
        return ObjectType.GLOBAL.value, ANY
    if own == ObjectType.USER:
        return ObjectType.USER.value, ANY
    if privilege.startswith("Database"):
        return ObjectType.DATABASE.value, db_name or ANY
    return ObjectType.COLLECTION.value, collection_name or ANY


def _grant_entity(g: GrantEntry) -> Any:
    return milvus_pb2.GrantEntity(
        role=milvus_pb2.RoleEntity(name=g["role_name"]),
        object=milvus_pb2.ObjectEntity(name=g["object_type"]),
        object_name=g["object_name"],
        db_name=g["db_name"],
        grantor=milvus_pb2.GrantorEntity(
            user=milvus_pb2.UserEntity(name=g.get("grantor_name") or ""),
            privilege=milvus_pb2.PrivilegeEntity(name=g["privilege"]),
        ),
    )


class RbacRpcs(Servicer):
    def _forget(self, user: str | None) -> None:
        """Drop this proxy's cached identity of ``user`` (None: everyone's) at once: the
        coord's broadcast reaches every proxy soon, this one must not lag its own change."""
        if self.proxy.auth is not None:
            self.proxy.auth.forget(user)

    # -- users ------------------------------------------------------------------------------
    @served()
    def CreateCredential(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        password = _password(request.password, "password")
        self.run_op(ctx, ops.CreateUser(db=ctx.db, user_name=request.username, password=password))
        return ok()

    @served()
    def UpdateCredential(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.UpdatePassword(
            db=ctx.db,
            user_name=request.username,
            old_password=_password(request.oldPassword, "oldPassword")
            if request.oldPassword
            else None,
            new_password=_password(request.newPassword, "newPassword"),
        )
        self.run_op(ctx, op)
        self._forget(request.username)
        return ok()

    @served()
    def DeleteCredential(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.DropUser(db=ctx.db, user_name=request.username))
        self._forget(request.username)
        return ok()

    @served()
    def ListCredUsers(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        users = self.run_op(ctx, ops.ListUsers(db=ctx.db))["users"]
        return milvus_pb2.ListCredUsersResponse(status=ok(), usernames=users)

    @served()
    def SelectUser(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        name = request.user.name if request.HasField("user") else ""
        names = [name] if name else list(self.run_op(ctx, ops.ListUsers(db=ctx.db))["users"])
        results = []
        for user in names:
            try:
                roles = self.run_op(ctx, ops.DescribeUser(db=ctx.db, user_name=user))["roles"]
            except ElanusError as exc:
                if exc.code == ErrorCode.USER_NOT_FOUND and name:
                    return milvus_pb2.SelectUserResponse(status=ok())  # Milvus: none
                raise
            results.append(
                milvus_pb2.UserResult(
                    user=milvus_pb2.UserEntity(name=user),
                    roles=[milvus_pb2.RoleEntity(name=r) for r in roles]
                    if request.include_role_info
                    else [],
                )
            )
        return milvus_pb2.SelectUserResponse(status=ok(), results=results)

    # -- roles ------------------------------------------------------------------------------
    @served()
    def CreateRole(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.CreateRole(db=ctx.db, role_name=request.entity.name))
        return ok()

    @served()
    def DropRole(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = ops.DropRole(db=ctx.db, role_name=request.role_name, force_drop=request.force_drop)
        self.run_op(ctx, op)
        self._forget(None)
        return ok()

    @served()
    def OperateUserRole(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        kinds: dict[int, type[ops.GrantRole | ops.RevokeRole]] = {
            milvus_pb2.AddUserToRole: ops.GrantRole,
            milvus_pb2.RemoveUserFromRole: ops.RevokeRole,
        }
        kind = kinds.get(request.type)
        if kind is None:
            raise invalid(f"OperateUserRole: unknown operation type {request.type}")
        self.run_op(ctx, kind(db=ctx.db, user_name=request.username, role_name=request.role_name))
        self._forget(request.username)
        return ok()

    @served()
    def SelectRole(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        roles = list(self.run_op(ctx, ops.ListRoles(db=ctx.db))["roles"])
        wanted = request.role.name if request.HasField("role") else ""
        if wanted:
            roles = [r for r in roles if r == wanted]  # Milvus: none for an unknown role
        members: dict[str, list[str]] = {r: [] for r in roles}
        if request.include_user_info and roles:
            for user in self.run_op(ctx, ops.ListUsers(db=ctx.db))["users"]:
                for role in self.run_op(ctx, ops.DescribeUser(db=ctx.db, user_name=user))["roles"]:
                    members.setdefault(role, []).append(user)
        results = [
            milvus_pb2.RoleResult(
                role=milvus_pb2.RoleEntity(name=r),
                users=[milvus_pb2.UserEntity(name=u) for u in members.get(r, [])],
            )
            for r in roles
        ]
        return milvus_pb2.SelectRoleResponse(status=ok(), results=results)

    # -- privileges -------------------------------------------------------------------------
    @served()
    def OperatePrivilege(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        e = request.entity
        grant = _grant_kind(request.type)
        op = grant(
            db=ctx.db,
            role_name=e.role.name,
            object_type=e.object.name,
            object_name=e.object_name or ANY,
            privilege=e.grantor.privilege.name,
            db_name=e.db_name or None,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def OperatePrivilegeV2(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        privilege = request.grantor.privilege.name
        kind, name = grant_object(privilege, request.db_name, request.collection_name)
        grant = _grant_kind(request.type)
        op = grant(
            db=ctx.db,
            role_name=request.role.name,
            object_type=kind,
            object_name=name,
            privilege=privilege,
            db_name=request.db_name or None,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def SelectGrant(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        e = request.entity
        role: RoleDescription = self.run_op(ctx, ops.DescribeRole(db=ctx.db, role_name=e.role.name))
        grants = role["privileges"]
        if e.HasField("object") and e.object.name:
            grants = [g for g in grants if g["object_type"] == e.object.name]
        if e.object_name:
            grants = [g for g in grants if g["object_name"] == e.object_name]
        if e.db_name:
            grants = [g for g in grants if g["db_name"] in (e.db_name, ANY)]
        return milvus_pb2.SelectGrantResponse(
            status=ok(), entities=[_grant_entity(g) for g in grants]
        )

    # -- privilege groups -------------------------------------------------------------------
    @served()
    def CreatePrivilegeGroup(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.CreatePrivilegeGroup(db=ctx.db, group_name=request.group_name))
        return ok()

    @served()
    def DropPrivilegeGroup(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.run_op(ctx, ops.DropPrivilegeGroup(db=ctx.db, group_name=request.group_name))
        return ok()

    @served()
    def OperatePrivilegeGroup(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        kinds: dict[int, type[ops.AddPrivilegesToGroup | ops.RemovePrivilegesFromGroup]] = {
            milvus_pb2.AddPrivilegesToGroup: ops.AddPrivilegesToGroup,
            milvus_pb2.RemovePrivilegesFromGroup: ops.RemovePrivilegesFromGroup,
        }
        if request.type not in kinds:
            raise invalid(f"unsupported operate type: {request.type}")
        privileges = [p.name for p in request.privileges]
        kind = kinds[request.type]
        self.run_op(ctx, kind(db=ctx.db, group_name=request.group_name, privileges=privileges))
        self._forget(None)
        return ok()

    @served()
    def ListPrivilegeGroups(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        groups = [
            milvus_pb2.PrivilegeGroupInfo(
                group_name=g["privilege_group"],
                privileges=[milvus_pb2.PrivilegeEntity(name=p) for p in g["privileges"]],
            )
            for g in self.run_op(ctx, ops.ListPrivilegeGroups(db=ctx.db))["groups"]
        ]
        return milvus_pb2.ListPrivilegeGroupsResponse(status=ok(), privilege_groups=groups)


def _grant_kind(kind: int) -> type[ops.GrantPrivilege | ops.RevokePrivilege]:
    """The operation of an ``OperatePrivilege`` (V2) request's type: grant or revoke."""
    if kind not in (milvus_pb2.Grant, milvus_pb2.Revoke):
        raise invalid(f"OperatePrivilege: unknown operation type {kind}")
    return ops.GrantPrivilege if kind == milvus_pb2.Grant else ops.RevokePrivilege
