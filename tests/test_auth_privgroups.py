"""Custom privilege groups through the SDK on a stack with ``auth_enabled``: made, filled,
granted with ``grant_privilege_v2`` and honoured by the proxy's check, emptied and dropped.

Milvus Lite serves no RBAC, so the rules (names, one level per group, no drop while granted)
and messages follow Milvus's rootcoord source (``meta_table.go``) and docs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, bare_collection, own_stack

from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.meta import privgroups
from elanus.meta.db import Database

ROOT_PASSWORD = "root-secret-pg"
DIM = 4
DENIED = ErrorCode.PERMISSION_DENIED


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with own_stack(
        tmp_path_factory.mktemp("privgroups"), "privgroups", auth_enabled=True,
        root_password=ROOT_PASSWORD,
    ) as stack:  # fmt: skip
        yield stack


@pytest.fixture
def root(secured: Stack) -> Iterator[Client]:
    with Client(secured.uri, token=f"root:{ROOT_PASSWORD}") as client:
        yield client


def _custom(root: Client) -> dict[str, tuple[str, ...]]:
    builtin = {"CollectionReadOnly", "CollectionReadWrite", "DatabaseReadOnly", "DatabaseReadWrite"}
    groups = root.list_privilege_groups()
    return {
        g["privilege_group"]: g["privileges"] for g in groups if g["privilege_group"] not in builtin
    }


def _refused(call: object, *words: str) -> None:
    with pytest.raises(ElanusError) as refused:
        call()  # type: ignore[operator]
    assert refused.value.code == ErrorCode.INVALID_ARGUMENT, refused.value
    for word in words:
        assert word in refused.value.message, refused.value.message


def _group_granted(
    root: Client, group: str, privileges: list[str], role: str, object_name: str
) -> list[dict[str, Any]]:
    """A new group of ``privileges`` granted to a new ``role`` on ``object_name``; the
    role's grants as ``describe_role`` lists them."""
    root.create_privilege_group(group)
    root.add_privileges_to_group(group, privileges)
    root.create_role(role)
    root.grant_privilege_v2(role, group, object_name)
    return list(root.describe_role(role)["privileges"])


def _member(secured: Stack, root: Client, user: str, password: str, role: str) -> Client:
    """A client of a new ``user`` that has ``role``."""
    root.create_user(user, password)
    root.grant_role(user, role)
    return Client(secured.uri, user=user, password=password)


def test_groups_are_made_filled_and_dropped_by_milvus_rules(root: Client) -> None:
    root.create_privilege_group("readers")
    listed = root.list_privilege_groups()
    assert listed[0] == {"privilege_group": "readers", "privileges": ()}  # custom first
    assert {"privilege_group": "CollectionReadOnly", "privileges": (
        "Query", "Search", "IndexDetail", "GetLoadState", "GetStatistics", "HasPartition",
        "ShowPartitions")} in listed  # fmt: skip
    root.add_privileges_to_group("readers", ["Search", "query"])  # spelt as Milvus spells it
    root.add_privileges_to_group("readers", ["Search", "CollectionReadOnly"])
    assert _custom(root) == {"readers": ("CollectionReadOnly", "Query", "Search")}
    before = _custom(root)
    for call, words in [
        (lambda: root.create_privilege_group(""), ["should not be empty"]),
        (lambda: root.create_privilege_group("1st"), ["first character"]),
        (lambda: root.create_privilege_group("bad-name"), ["only contain"]),
        (lambda: root.create_privilege_group("x" * 256), ["length"]),
        (lambda: root.create_privilege_group("Search"), ["built in privileges"]),
        (lambda: root.create_privilege_group("collectionreadonly"), ["built in"]),
        (lambda: root.create_privilege_group("ClusterAdmin"), ["built in"]),  # Milvus's
        (lambda: root.create_privilege_group("readers"), ["[readers] is defined by users"]),
        (lambda: root.add_privileges_to_group("readers", ["CreateCollection"]),
         ["not the same privilege level"]),
        (lambda: root.add_privileges_to_group("readers", ["Fly"]), ["[Fly]"]),
        (lambda: root.add_privileges_to_group("readers", []), ["privileges is empty"]),
        (lambda: root.add_privileges_to_group("nope", ["Search"]), ["[nope]"]),
        (lambda: root.remove_privileges_from_group("nope", ["Search"]), ["[nope]"]),
        (lambda: root.drop_privilege_group("nope"), ["not a custom privilege group"]),
    ]:  # fmt: skip
        _refused(call, *words)
    root.create_privilege_group("other_g")
    _refused(lambda: root.add_privileges_to_group("readers", ["other_g"]), "custom group")
    root.drop_privilege_group("other_g")
    assert _custom(root) == before  # every refusal changed nothing
    root.remove_privileges_from_group("readers", ["CollectionReadOnly", "Insert"])
    assert _custom(root) == {"readers": ("Query", "Search")}
    root.drop_privilege_group("readers")
    assert _custom(root) == {}


def test_a_granted_group_allows_its_privileges_and_follows_its_changes(
    secured: Stack, root: Client
) -> None:
    for name in ("books", "secret"):
        root.create_collection(name, dimension=DIM)
        root.load_collection(name)
    root.insert("books", [{"id": 1, "vector": [0.1, 0.2, 0.3, 0.4]}])
    grant = _group_granted(root, "book_readers", ["Search", "Query"], "librarian", "books")
    assert [(g["object_type"], g["object_name"], g["privilege"]) for g in grant] == [
        ("Collection", "books", "book_readers")
    ]
    with _member(secured, root, "lena", "lena-pw-1", "librarian") as lena:
        assert lena.query("books", "id >= 0", consistency_level="Strong")
        assert lena.search("books", [[0.1, 0.2, 0.3, 0.4]], limit=1)
        for refused in (
            lambda: lena.insert("books", [{"id": 2, "vector": [0.1] * DIM}]),  # not in it
            lambda: lena.query("secret", "id >= 0"),  # another collection
        ):
            with pytest.raises(ElanusError) as denied:
                refused()
            assert denied.value.code == DENIED, denied.value
        _refused(
            lambda: root.drop_privilege_group("book_readers"),
            "privilege group [book_readers] is used by role [librarian]",
        )
        root.remove_privileges_from_group("book_readers", ["Search"])  # takes effect at once
        with pytest.raises(ElanusError) as denied:
            lena.search("books", [[0.1, 0.2, 0.3, 0.4]], limit=1)
        assert denied.value.code == DENIED
        assert lena.query("books", "id >= 0", consistency_level="Strong")
        root.add_privileges_to_group("book_readers", ["Insert"])
        lena.insert("books", [{"id": 3, "vector": [0.1] * DIM}])
        root.revoke_privilege_v2("librarian", "book_readers", "books")
        with pytest.raises(ElanusError) as denied:
            lena.query("books", "id >= 0")
        assert denied.value.code == DENIED
    root.drop_privilege_group("book_readers")
    assert "book_readers" not in _custom(root)


def test_a_group_of_global_privileges_applies_to_the_database(secured: Stack, root: Client) -> None:
    grant = _group_granted(root, "makers", ["CreateCollection", "ShowCollections"], "maker", "*")
    assert [(g["object_type"], g["object_name"], g["db_name"]) for g in grant] == [
        ("Global", "*", "default")
    ]
    with _member(secured, root, "mo", "mo-pw-123", "maker") as mo:
        bare_collection(mo, "made_by_mo", DIM)
        assert "made_by_mo" in mo.list_collections()
        with pytest.raises(ElanusError) as denied:
            mo.drop_collection("made_by_mo")
        assert denied.value.code == DENIED
    # an empty group granted on a collection takes no Global privileges afterwards
    root.create_privilege_group("late")
    root.grant_privilege_v2("maker", "late", "books")
    _refused(
        lambda: root.add_privileges_to_group("late", ["DropCollection"]),
        "granted to role [maker] on a Collection object",
    )
    root.add_privileges_to_group("late", ["Query"])
    # v1 with an explicit object: a Global group on one collection could never apply
    _refused(
        lambda: root.grant_privilege("maker", "Collection", "makers", "books"),
        "Global (or Database) objects",
    )


def test_groups_and_their_grants_survive_a_reopened_catalog(tmp_path: Path) -> None:
    db = Database(tmp_path / "coord.duckdb")
    db.call(privgroups.create_group, "keepers")
    db.call(privgroups.operate_group, "keepers", ["Query", "Search"], True)
    db.call(privgroups.operate_group, "keepers", ["Search"], False)
    db.close()
    db = Database(tmp_path / "coord.duckdb")
    try:
        assert db.call(privgroups.custom_groups) == {"keepers": ["Query"]}
        grants = [("Collection", "c", "default", "keepers"), ("Global", "*", "*", "Insert")]
        assert db.call(privgroups.expand, grants) == [
            ["Collection", "c", "default", "Query"],
            ["Global", "*", "*", "Insert"],
        ]
    finally:
        db.close()
