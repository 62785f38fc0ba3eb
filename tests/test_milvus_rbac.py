"""Users, roles and privileges through pymilvus against the Milvus face (auth on): the
same users and grants Elanus's own actions manage, enforced on Milvus's calls."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from milvus_stack import milvus_stack
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

ROOT = "root:root-pw-1"


def test_users_roles_privileges(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    for s in milvus_stack(request, tmp_path, auth_enabled=True, root_password="root-pw-1"):
        root = MilvusClient(uri=s.milvus_uri, token=ROOT, timeout=30)
        root.create_collection("books", dimension=4, consistency_level="Strong")
        root.create_collection("secret", dimension=4, consistency_level="Strong")
        root.create_user("alice", "alice-pw-1")
        assert "alice" in root.list_users()
        root.create_role("reader")
        assert "reader" in root.list_roles()
        root.grant_role("alice", "reader")
        assert root.describe_user("alice")["roles"] == ("reader",)
        root.grant_privilege("reader", "Collection", "Search", "books")
        root.grant_privilege_v2("reader", "Query", "books", db_name="default")
        granted = {
            (p["object_name"], p["privilege"]) for p in root.describe_role("reader")["privileges"]
        }
        assert granted == {("books", "Search"), ("books", "Query")}
        assert any(
            g["privilege_group"] == "CollectionReadOnly" for g in root.list_privilege_groups()
        )

        alice = MilvusClient(uri=s.milvus_uri, token="alice:alice-pw-1", timeout=30)
        try:
            assert alice.search("books", data=[[0.1, 0.2, 0.3, 0.4]], limit=1) == [[]]
            assert alice.query("books", filter="id >= 0") == []
            with pytest.raises(MilvusException) as info:
                alice.query("secret", filter="id >= 0")
            assert info.value.code == 1401
            with pytest.raises(MilvusException):
                alice.insert("books", [{"id": 1, "vector": [0.1] * 4}])
            root.revoke_privilege("reader", "Collection", "Search", "books")
            with pytest.raises(MilvusException) as info:
                alice.search("books", data=[[0.1, 0.2, 0.3, 0.4]], limit=1)
            assert info.value.code == 1401
            root.update_password("alice", "alice-pw-1", "alice-pw-2")
        finally:
            alice.close()
        # pymilvus reuses the channel of an earlier client with the same token, so the
        # refusal (gRPC UNAUTHENTICATED, as Milvus's) may surface at the first call
        with pytest.raises((MilvusException, grpc.RpcError)):
            stale = MilvusClient(uri=s.milvus_uri, token="alice:alice-pw-1", timeout=10)
            stale.list_collections()
        renewed = MilvusClient(uri=s.milvus_uri, token="alice:alice-pw-2", timeout=10)
        assert renewed.query("books", filter="id >= 0") == []
        renewed.close()
        root.revoke_role("alice", "reader")
        assert root.describe_user("alice")["roles"] == ()
        root.revoke_privilege_v2("reader", "Query", "books", db_name="default")
        root.drop_role("reader")
        assert "reader" not in root.list_roles()
        root.drop_user("alice")
        assert "alice" not in root.list_users()
        root.close()


def test_custom_privilege_groups(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """CreatePrivilegeGroup, OperatePrivilegeGroup, ListPrivilegeGroups, DropPrivilegeGroup
    and a group granted with OperatePrivilegeV2. Milvus Lite serves no RBAC: the rules and
    messages follow Milvus's rootcoord source (``meta_table.go``) and its docs."""
    for s in milvus_stack(request, tmp_path, auth_enabled=True, root_password="root-pw-1"):
        _privilege_groups(s.milvus_uri)


def _privilege_groups(uri: str) -> None:
    root = MilvusClient(uri=uri, token=ROOT, timeout=30)
    root.create_collection("books", dimension=4, consistency_level="Strong")
    root.create_collection("secret", dimension=4, consistency_level="Strong")
    root.create_privilege_group("book_readers")
    root.add_privileges_to_group("book_readers", ["Search", "Query"])
    groups = root.list_privilege_groups()
    assert groups[0] == {"privilege_group": "book_readers", "privileges": ("Query", "Search")}
    assert any(g["privilege_group"] == "CollectionReadWrite" for g in groups)
    for call, words in [
        (lambda: root.create_privilege_group("bad-name"), "only contain"),
        (lambda: root.create_privilege_group("Search"), "built in privileges"),
        (lambda: root.create_privilege_group("book_readers"), "is defined by users"),
        (lambda: root.add_privileges_to_group("book_readers", ["CreateCollection"]),
         "not the same privilege level"),
        (lambda: root.add_privileges_to_group("book_readers", ["Fly"]), "[Fly]"),
        (lambda: root.drop_privilege_group("nope"), "not a custom privilege group"),
    ]:  # fmt: skip
        with pytest.raises(MilvusException) as info:
            call()
        assert info.value.code == 1100 and words in info.value.message, info.value
    assert root.list_privilege_groups() == groups  # the refusals changed nothing

    root.create_user("bob", "bob-pw-123")
    root.create_role("librarian")
    root.grant_role("bob", "librarian")
    root.grant_privilege_v2("librarian", "book_readers", "books", db_name="default")
    granted = root.describe_role("librarian")["privileges"]
    assert [(p["object_name"], p["privilege"]) for p in granted] == [("books", "book_readers")]
    bob = MilvusClient(uri=uri, token="bob:bob-pw-123", timeout=30)
    try:
        assert bob.search("books", data=[[0.1, 0.2, 0.3, 0.4]], limit=1) == [[]]
        assert bob.query("books", filter="id >= 0") == []
        for refused in (
            lambda: bob.insert("books", [{"id": 1, "vector": [0.1] * 4}]),
            lambda: bob.query("secret", filter="id >= 0"),
        ):
            with pytest.raises(MilvusException) as info:
                refused()
            assert info.value.code == 1401
        with pytest.raises(MilvusException) as info:
            root.drop_privilege_group("book_readers")
        assert "is used by role [librarian]" in info.value.message
        root.remove_privileges_from_group("book_readers", ["Search"])
        with pytest.raises(MilvusException) as info:
            bob.search("books", data=[[0.1, 0.2, 0.3, 0.4]], limit=1)
        assert info.value.code == 1401
        assert bob.query("books", filter="id >= 0") == []
    finally:
        bob.close()
    root.revoke_privilege_v2("librarian", "book_readers", "books", db_name="default")
    root.drop_privilege_group("book_readers")
    assert all(g["privilege_group"] != "book_readers" for g in root.list_privilege_groups())
    root.close()
