"""Operation records of users, roles, grants and privilege groups (``elanus/ops/auth.py``),
as tests/test_operations.py holds partitions and aliases: each action's keys come from its
record, a bad body is refused with the words the dict checkers used, a face's record is
checked as a body, and the SDK's wire bodies are what they were (no ``db``: the SDK never
sent one for these)."""

from __future__ import annotations

import pytest
from opcheck import declared_by, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.ops import auth as ops
from elanus.ops import body_of, checked

RECORDS = [
    ops.Whoami, ops.CreateUser, ops.DropUser, ops.UpdatePassword, ops.ListUsers,
    ops.DescribeUser,
    ops.CreateRole, ops.DropRole, ops.GrantRole, ops.RevokeRole,
    ops.GrantPrivilege, ops.RevokePrivilege, ops.ListRoles, ops.DescribeRole,
    ops.CreatePrivilegeGroup, ops.DropPrivilegeGroup, ops.AddPrivilegesToGroup,
    ops.RemovePrivilegesFromGroup, ops.ListPrivilegeGroups,
]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_an_operations_action_is_declared_by_its_record(record: type) -> None:
    spec = declared_by(record)
    assert spec.self_service is (record in (ops.UpdatePassword, ops.DescribeUser))


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("create_user", {"user_name": "u", "password": "p"})
    assert got == ops.CreateUser(user_name="u", password="p")
    assert got.db is None  # the SDK sends none: the privilege is checked in the default
    assert decoded("drop_role", {"role_name": "r"}).force_drop is False
    grant = decoded("grant_privilege", {"role_name": "r", "object_type": "Global",
                                       "privilege": "All", "db": "d1"})  # fmt: skip
    assert (grant.object_name, grant.db_name, grant.on_db()) == ("*", None, "d1")
    assert (
        decoded(
            "revoke_privilege",
            {"role_name": "r", "object_type": "Global", "privilege": "All", "db_name": ""},
        ).on_db()
        == "default"
    )
    assert ops.GrantPrivilege(role_name="r", object_type="Collection", privilege="Insert",
                              db_name="d2", db="d1").on_db() == "d2"  # fmt: skip
    assert decoded("whoami", {}) == ops.Whoami()


BAD_BODIES = [
        ("create_user", {"user_name": "u"}, "create_user: missing required key 'password'"),
        ("create_user", {"user_name": 5, "password": "p"},
         "create_user: 'user_name' must be a string, got int"),
        ("drop_user", {}, "drop_user: missing required key 'user_name'"),
        ("update_password", {"user_name": "u", "old_password": 1},
         "update_password: 'old_password' must be a string, got int"),
        ("update_password", {"user_name": "u"},
         "update_password: missing required key 'new_password'"),
        ("describe_user", {"user_name": None}, "describe_user: missing required key 'user_name'"),
        ("drop_role", {"role_name": "r", "force_drop": "yes"},
         "drop_role: 'force_drop' must be true or false, got 'yes'"),
        ("grant_role", {"role_name": "r"}, "grant_role: missing required key 'user_name'"),
        ("grant_privilege", {"role_name": "r", "privilege": "All"},
         "grant_privilege: missing required key 'object_type'"),
        ("grant_privilege", {"role_name": "r", "object_type": "Global", "privilege": "All",
                             "db_name": 3}, "grant_privilege: 'db_name' must be a string, got int"),
        ("describe_role", {"role_name": "r", "user_name": "u"},
         "describe_role: unknown key(s) 'user_name'; allowed keys are db, role_name"),
        ("list_users", {"db": ""}, "database name must be a non-empty string"),
        ("create_privilege_group", {"group_name": ["g"]},
         "create_privilege_group: 'group_name' must be a string, got list"),
        ("add_privileges_to_group", {"group_name": "g", "privileges": "Insert"},
         "add_privileges_to_group: 'privileges' must be a JSON array"),
        ("add_privileges_to_group", {"group_name": "g", "privileges": ["Insert", 7]},
         "privileges must be a list of privilege names"),
        ("remove_privileges_from_group", {"group_name": "g"},
         "remove_privileges_from_group: missing required key 'privileges'"),
        # the dict checker read privileges before group_name: its error comes first
        ("remove_privileges_from_group", {"privileges": {}},
         "remove_privileges_from_group: 'privileges' must be a JSON array"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(ops.CreateRole(db="d1", role_name="r")).role_name == "r"
    with pytest.raises(ElanusError, match="privileges must be a list of privilege names"):
        checked(ops.AddPrivilegesToGroup(db="d1", group_name="g", privileges=["Insert", None]))
    with pytest.raises(ElanusError, match="database name 'bad db' is invalid"):
        checked(ops.ListRoles(db="bad db"))  # a Milvus call's dbname header


def test_the_wire_body_is_what_the_sdk_sent() -> None:
    assert body_of(ops.Whoami()) == {}
    assert body_of(ops.UpdatePassword(user_name="u", new_password="n")) == {
        "user_name": "u", "new_password": "n",
    }  # fmt: skip
    assert body_of(ops.DropRole(role_name="r")) == {"role_name": "r", "force_drop": False}
    grant = ops.GrantPrivilege(role_name="r", object_type="Collection", privilege="Insert",
                               object_name="c", db_name="d1")  # fmt: skip
    assert list(body_of(grant)) == ["role_name", "object_type", "privilege", "object_name",
                                    "db_name"]  # fmt: skip
    assert body_of(ops.AddPrivilegesToGroup(group_name="g", privileges=["Insert"])) == {
        "group_name": "g", "privileges": ["Insert"],
    }  # fmt: skip
