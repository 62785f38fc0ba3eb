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
