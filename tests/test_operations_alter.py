"""Operation records of property changes and memory mapping (``elanus/ops/alter.py``) and of
the cluster's own calls (``elanus/ops/control.py``: sessions, health, timestamps, backup),
as tests/test_operations.py holds partitions and aliases: each action's keys come from its
record, a bad body is refused with the words the dict checkers used, a face's record is
checked as a body, a cluster call's privilege is checked in the default database, and the
SDK's bodies hold what they held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test, sent_bodies

from elanus.errors import ElanusError
from elanus.flight.auth import Caller, need_for
from elanus.flight.registry import catalogue
from elanus.ops import alter, checked, control, name_of, scope_of
from elanus.privileges import OPEN, Need

RECORDS = [
    alter.AlterCollectionProperties, alter.AlterCollectionField, alter.AlterIndexProperties,
    alter.AlterMmap, control.ListSessions, control.Health, control.GetTimestamp,
    control.CreateBackup,
]  # fmt: skip


test_an_operations_action_is_declared_by_its_record = declaration_test(RECORDS)


def test_the_list_actions_order_is_unchanged() -> None:
    names = list(catalogue())
    at = names.index("alter_collection_properties")
    assert names[at : at + 4] == [
        "alter_collection_properties", "alter_collection_field", "alter_index_properties",
        "alter_mmap",
    ]  # fmt: skip
    at = names.index("list_sessions")
    assert names[at : at + 3] == ["list_sessions", "health", "get_timestamp"]


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("alter_collection_properties", {"name": "c", "properties": {"k": 1}})
    assert got == alter.AlterCollectionProperties(name="c", properties={"k": 1})
    assert got.changes() == ({"k": "1"}, [])  # stored as text, as the dict checker did
    got = decoded("alter_collection_field", {
        "collection": "c", "field_name": "f", "properties": {"mmap.enabled": True},
    })  # fmt: skip
    assert got.changes() == ({"mmap.enabled": "true"}, [])
    got = decoded("alter_index_properties", {
        "db": "d", "collection": "c", "index_name": "i", "delete_keys": ["mmap.enabled"],
    })  # fmt: skip
    assert (got.db, got.index_name, got.changes()) == ("d", "i", ({}, ["mmap.enabled"]))
    got = decoded("alter_mmap", {"collection": "c", "field_name": "f"})
    assert got == alter.AlterMmap(collection="c", field_name="f") and got.enabled is None
    assert decoded("get_timestamp", {}) == control.GetTimestamp()  # count absent: one
    assert decoded("get_timestamp", {"count": 10_000}).count == 10_000
    assert decoded("health", {"db": "d"}) == control.Health(db="d")
    got = decoded("backup_create", {"target": "/b", "timeout_s": 60})
    assert (got.target, got.name, got.timeout_s) == ("/b", None, 60.0)
    assert decoded("backup_create", {"target": "/b"}).timeout_s == 3600.0


BAD_BODIES = [
        ("alter_collection_properties", {"name": "c"},
         "alter_collection_properties: give 'properties' to set or 'delete_keys' to remove"),
        ("alter_collection_properties", {"name": "c", "properties": {}, "delete_keys": []},
         "give 'properties' to set or 'delete_keys' to remove"),
        ("alter_collection_properties", {"name": "c", "properties": {"a": "1"},
                                         "delete_keys": ["b"]},
         "alter_collection_properties: give either 'properties' or 'delete_keys', not both"),
        ("alter_collection_properties",
         {"name": "c", "properties": {"collection.ttl.seconds": "x"}},
         "alter_collection_properties: property 'collection.ttl.seconds' must be a whole "
         "number of seconds"),
        ("alter_collection_properties", {"name": "c", "properties": {"k": None}},
         "alter_collection_properties: property 'k' must be a string, got None"),
        ("alter_collection_properties", {"name": "c", "delete_keys": [""]},
         "alter_collection_properties: property key '' must be text of 1 to 255 characters"),
        ("alter_collection_properties", {"name": "c", "delete_keys": "k"},
         "alter_collection_properties: 'delete_keys' must be a JSON array"),
        ("alter_collection_properties", {"name": "c", "properties": []},
         "alter_collection_properties: 'properties' must be a JSON object"),
        ("alter_collection_properties", {"properties": {"a": "1"}},
         "alter_collection_properties: missing required key 'name'"),
        ("alter_collection_field", {"collection": "c", "field_name": "9f",
                                    "properties": {"max_length": 9}},
         "field name '9f' is invalid"),
        ("alter_collection_field", {"collection": "c", "field_name": "f",
                                    "properties": {"collection.ttl.seconds": 5}},
         "collection.ttl.seconds does not allow update in collection field param"),
        ("alter_collection_field", {"collection": "c", "field_name": "f",
                                    "properties": {"mmap.enabled": "maybe"}},
         "alter_collection_field: mmap.enabled must be true or false, got 'maybe'"),
        ("alter_collection_field", {"collection": "", "field_name": "f",
                                    "properties": {"max_length": 9}},
         "collection name must be a non-empty string"),
        ("alter_index_properties", {"collection": "c", "index_name": "i",
                                    "properties": {"max_length": 9}},
         "max_length is not configable index param"),
        ("alter_index_properties", {"collection": "c", "index_name": "i",
                                    "properties": {"indexoffsetcache.enabled": "yes"}},
         "alter_index_properties: indexoffsetcache.enabled must be true or false, got 'yes'"),
        ("alter_index_properties", {"collection": "c", "index_name": 2,
                                    "properties": {"mmap.enabled": True}},
         "alter_index_properties: 'index_name' must be a string, got int"),
        ("alter_index_properties", {"collection": "c", "properties": {"mmap.enabled": True}},
         "alter_index_properties: missing required key 'index_name'"),
        ("alter_mmap", {"collection": "c", "field_name": "f", "index_name": "i"},
         "alter_mmap: give 'field_name' or 'index_name', not both"),
        ("alter_mmap", {"collection": "c", "field_name": ""},
         "field name must be a non-empty string"),
        ("alter_mmap", {"collection": "c", "index_name": "9i"}, "index name '9i' is invalid"),
        ("alter_mmap", {"collection": "c", "enabled": "true"},
         "alter_mmap: 'enabled' must be true or false, got 'true'"),
        ("list_sessions", {"all": True},
         "list_sessions: unknown key(s) 'all'; allowed keys are db"),
        ("health", {"db": "9d"}, "database name '9d' is invalid"),
        ("get_timestamp", {"count": 0}, "get_timestamp: 'count' = 0 is out of range [1, 10000]"),
        ("get_timestamp", {"count": 10_001},
         "get_timestamp: 'count' = 10001 is out of range [1, 10000]"),
        ("get_timestamp", {"count": True}, "get_timestamp: 'count' must be an integer, got True"),
        ("backup_create", {}, "backup_create: missing required key 'target'"),
        ("backup_create", {"target": "  "}, "backup_create: 'target' is empty"),
        ("backup_create", {"target": "/b", "name": "a b"},
         "backup name 'a b' must be 1 to 128 letters, digits, underscores or hyphens"),
        ("backup_create", {"target": "/b", "timeout_s": 0.5},
         "backup_create: 'timeout_s' must be at least 1, got 0.5"),
        ("backup_create", {"target": "/b", "timeout_s": 0},
         "backup_create: 'timeout_s' must be at least 1, got 0.0"),
        ("backup_create", {"target": "/b", "timeout_s": "60"},
         "backup_create: 'timeout_s' must be a number, got '60'"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(control.GetTimestamp(db="d")).count is None
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(alter.AlterCollectionProperties(name="", properties={"a": "1"}))  # unset field
    with pytest.raises(ElanusError, match="give 'properties' to set or 'delete_keys'"):
        checked(alter.AlterCollectionProperties(name="c"))  # both proto lists empty
    with pytest.raises(ElanusError, match="field name must be a non-empty string"):
        checked(alter.AlterCollectionField(collection="c", field_name="", delete_keys=["x"]))
    with pytest.raises(ElanusError, match="warm is not configable index param"):
        checked(alter.AlterIndexProperties(collection="c", index_name="i", properties={"warm": 1}))
    with pytest.raises(ElanusError, match="database name 'bad name' is invalid"):
        checked(control.ListSessions(db="bad name"))  # a dbname header


def test_a_cluster_call_is_authorised_in_the_default_database() -> None:
    """The dict checkers' requests held no ``db``: the privilege was checked in the default
    database, whatever database the body (or a face's call) named."""
    caller = Caller("u", superuser=False)
    for op in (
        control.ListSessions(db="d1"),
        control.Health(db="d1"),
        control.GetTimestamp(db="d1", count=2),
        control.CreateBackup(db="d1", target="/b"),
    ):
        spec = catalogue()[name_of(op)]
        need = need_for(caller, spec, scope_of(checked(op)))
        assert need == (None if spec.privilege == OPEN else Need(spec.privilege, "default"))
    op = alter.AlterIndexProperties(db="d1", collection="c", index_name="i", delete_keys=["k"])
    need = need_for(caller, catalogue()["alter_index_properties"], scope_of(op))
    assert need == Need("CreateIndex", "d1", "c")  # a collection's, in its database


REPLIES = {
    "list_sessions": {"sessions": []},
    "health": {"status": "ok", "proxy": {"version": "v"}},
    "get_timestamp": {"ts": 5, "count": 1},
    "backup_create": {"name": "b"},
}


@pytest.mark.parametrize(
    ("call", "bodies"),
    [
        (lambda c: c.alter_collection_properties("c", {"k": 1}),
         [("alter_collection_properties", {"db": "own", "name": "c", "properties": {"k": 1}})]),
        (lambda c: c.alter_collection_properties("c", {}, db="d"),
         [("alter_collection_properties", {"db": "d", "name": "c", "properties": {}})]),
        (lambda c: c.drop_collection_properties("c", ("k",)),
         [("alter_collection_properties", {"db": "own", "name": "c", "delete_keys": ["k"]})]),
        (lambda c: c.drop_collection_properties("c", []),
         [("alter_collection_properties", {"db": "own", "name": "c", "delete_keys": []})]),
        (lambda c: c.alter_collection_field("c", "f", {"max_length": 9}, db="d"),
         [("alter_collection_field", {"db": "d", "collection": "c", "field_name": "f",
                                      "properties": {"max_length": 9}})]),
        (lambda c: c.drop_collection_field_properties("c", "f", ["mmap.enabled"]),
         [("alter_collection_field", {"db": "own", "collection": "c", "field_name": "f",
                                      "delete_keys": ["mmap.enabled"]})]),
        (lambda c: c.list_sessions(), [("list_sessions", {})]),
        (lambda c: c.health(), [("health", {})]),
        (lambda c: c.get_server_version(), [("health", {})]),
        (lambda c: c.get_timestamp(), [("get_timestamp", {})]),
        (lambda c: c.create_backup("/b"),
         [("backup_create", {"target": "/b", "timeout_s": 3600.0})]),
        (lambda c: c.create_backup("/b", "n", 60),
         [("backup_create", {"target": "/b", "name": "n", "timeout_s": 60})]),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], bodies: list[tuple[str, dict[str, Any]]]
) -> None:
    """The keys and values of the SDK's bodies before its records (``None`` left out)."""
    assert sent_bodies(RecordingClient(REPLIES), call) == bodies


def test_the_sdk_reads_the_replies_as_before() -> None:
    client = RecordingClient(REPLIES)
    assert client.get_timestamp() == 5
    assert client.get_server_version(detail=True) == {"version": "v", "deploy_mode": "elanus"}
    assert client.list_sessions() == []
    assert client.create_backup("/b") == {"name": "b"}
