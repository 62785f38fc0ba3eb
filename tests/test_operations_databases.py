"""Operation records of databases, schema changes and snapshots (``elanus/ops/databases.py``,
``schemachange.py``, ``snapshots.py``), as tests/test_operations.py holds partitions and
aliases: each action's keys come from its record, a bad body is refused with the words the
dict checkers used, a face's record is checked as a body, the SDK's wire bodies are what
they were, byte for byte, and a database action is still authorised in the default
database when the body names its database by ``name``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.flight.auth import Caller, need_for
from elanus.flight.registry import catalogue
from elanus.ops import body_of, checked, name_of
from elanus.ops import databases as dbs
from elanus.ops import schemachange as fields
from elanus.ops import snapshots as snaps
from elanus.privileges import Need
from elanus.wire.codec import encode_json

RECORDS = [
    dbs.CreateDatabase, dbs.DropDatabase, dbs.ListDatabases, dbs.DescribeDatabase,
    dbs.AlterDatabaseProperties,
    fields.AddCollectionField, fields.DropCollectionField, fields.AddFunctionField,
    fields.DropFunctionField,
    snaps.CreateSnapshot, snaps.ListSnapshots, snaps.DescribeSnapshot, snaps.DropSnapshot,
    snaps.RestoreSnapshot, snaps.GetRestoreSnapshotState, snaps.ListRestoreSnapshotJobs,
    snaps.PinSnapshotData, snaps.UnpinSnapshotData,
]  # fmt: skip


test_an_operations_action_is_declared_by_its_record = declaration_test(RECORDS)


def test_the_actions_keys_are_the_dict_checkers() -> None:
    keys = {name: set(spec.keys) for name, spec in catalogue().items()}
    assert keys["create_database"] == {"name", "properties"}
    assert keys["alter_database_properties"] == {"name", "properties", "delete_keys"}
    assert keys["list_databases"] == set()
    assert keys["drop_collection_field"] == {"collection", "field_name", "field_id"}
    assert keys["drop_function_field"] == {"collection", "function_name"}
    assert keys["restore_snapshot"] == {"collection", "name", "target_collection", "target_db"}
    assert keys["pin_snapshot_data"] == {"collection", "name", "ttl_seconds"}


def test_a_body_decodes_into_the_record_once() -> None:
    assert decoded("create_database", {"name": "d"}) == dbs.CreateDatabase(name="d")
    got = decoded("describe_database", {"db": "d"})  # "db" names it when "name" is absent
    assert got == dbs.DescribeDatabase(db="d") and dbs.database_of(got) == "d"
    assert dbs.database_of(decoded("drop_database", {"name": "d", "db": "d"})) == "d"
    got = decoded("restore_snapshot", {"collection": "c", "name": "s", "target_collection": "t"})
    assert got.into_db == "default"  # absent target_db: the source's database
    got = decoded("restore_snapshot", {
        "db": "d", "collection": "c", "name": "s", "target_collection": "t", "target_db": "",
    })  # fmt: skip
    assert got.into_db == "d"
    assert decoded("pin_snapshot_data", {"collection": "c", "name": "s"}).ttl_seconds == 0
    assert decoded("list_snapshots", {"collection": ""}).collection == ""
    assert decoded("create_snapshot", {"collection": "c", "name": "s"}).description is None
    got = decoded("drop_collection_field", {"collection": "c", "field_id": 3})
    assert got == fields.DropCollectionField(collection="c", field_id=3)


BAD_BODIES = [
        # databases
        ("create_database", {}, "create_database: missing required key 'name'"),
        ("create_database", {"name": "a", "db": "b"},
         "create_database: 'name' 'a' and 'db' 'b' disagree; give one"),
        ("create_database", {"name": 5}, "create_database: 'name' must be a string, got int"),
        ("create_database", {"name": "9d"}, "database name '9d' is invalid"),
        ("create_database", {"name": "d", "properties": []},
         "create_database: 'properties' must be a JSON object"),
        ("create_database", {"name": "d", "properties": {"k": [1]}},
         "create_database: property 'k' must be a string, got [1]"),
        ("create_database", {"name": "d", "properties": {"": "v"}},
         "create_database: property key '' must be text of 1 to"),
        ("create_database", {"name": "d", "properties": {f"k{i}": "v" for i in range(65)}},
         "create_database: 65 properties; the limit is 64"),
        ("create_database", {"name": "d", "properties": {"database.max.collections": "x"}},
         "property 'database.max.collections' must be a whole number of collections"),
        ("drop_database", {"name": "default"},
         "drop_database: the 'default' database cannot be dropped"),
        ("drop_database", {"db": "default"}, "the 'default' database cannot be dropped"),
        ("list_databases", {"db": "bad name"}, "database name 'bad name' is invalid"),
        ("list_databases", {"name": "d"},
         "list_databases: unknown key(s) 'name'; allowed keys are db"),
        ("describe_database", {"name": ""}, "database name must be a non-empty string"),
        ("alter_database_properties", {"name": "d"},
         "alter_database_properties: empty properties and delete keys, expected to set either "
         "properties or delete keys"),
        ("alter_database_properties", {"name": "d", "properties": {"a": "1"},
                                       "delete_keys": ["k"]},
         "alter_database_properties: cannot modify properties and delete keys at the same time"),
        ("alter_database_properties", {"name": "d", "delete_keys": [7]},
         "alter_database_properties: property key '7' must be text of 1 to"),
        ("alter_database_properties", {"name": "d", "delete_keys": "k"},
         "alter_database_properties: 'delete_keys' must be a JSON array"),
        # schema changes
        ("add_collection_field", {"collection": "c"},
         "add_collection_field: missing required key 'field'"),
        ("add_collection_field", {"collection": "c", "field": 3},
         "add_collection_field: 'field' must be a JSON object"),
        ("add_collection_field", {"collection": "c", "field": {"name": "f", "type": "Int64"}},
         "add_collection_field: field 'f' must be nullable (nullable=True)"),
        ("add_collection_field", {"collection": "c", "field": {
            "name": "v", "type": "FloatVector", "dim": 2, "nullable": True}},
         "only scalar fields can be added to an existing collection"),
        ("drop_collection_field", {"collection": "c"},
         "drop_collection_field: give exactly one of 'field_name' and 'field_id'"),
        ("drop_collection_field", {"collection": "c", "field_name": "f", "field_id": 2},
         "drop_collection_field: give exactly one of 'field_name' and 'field_id'"),
        ("drop_collection_field", {"collection": "c", "field_id": 0},
         "drop_collection_field: 'field_id' = 0 is out of range [1, None]"),
        ("drop_collection_field", {"collection": "c", "field_name": 1},
         "drop_collection_field: 'field_name' must be a string, got int"),
        ("add_function_field", {"collection": "c", "field": {"name": "s"}, "function": {}},
         "field 's' has no 'type'"),
        ("add_function_field", {"collection": "c", "field": {"name": "s", "type": "Int64"},
                                "function": {"name": "fn"}}, "function 'fn' has no 'type'"),
        ("add_function_field", {"collection": "c", "field": {}, "function": []},
         "add_function_field: 'function' must be a JSON object"),
        ("add_function_field", {"collection": "c", "field": {}, "function": {}},
         "a field has no 'name'"),
        ("drop_function_field", {"collection": "9c", "function_name": "f"},
         "collection name '9c' is invalid"),
        ("drop_function_field", {"collection": "c"},
         "drop_function_field: missing required key 'function_name'"),
        # snapshots
        ("create_snapshot", {"collection": "c"}, "create_snapshot: missing required key 'name'"),
        ("create_snapshot", {"collection": "c", "name": "9s"}, "snapshot name '9s' is invalid"),
        ("create_snapshot", {"collection": "c", "name": "s", "description": "x" * 1025},
         "create_snapshot: 'description' is longer than 1024 characters"),
        ("create_snapshot", {"collection": "c", "name": "s", "description": 5},
         "create_snapshot: 'description' must be a string, got int"),
        ("list_snapshots", {"collection": "bad name"}, "collection name 'bad name' is invalid"),
        ("list_snapshots", {"collection": 3}, "list_snapshots: 'collection' must be a string"),
        ("describe_snapshot", {"name": "s"}, "describe_snapshot: missing required key "
         "'collection'"),
        ("drop_snapshot", {"collection": "c", "name": ""}, "snapshot name must be a non-empty"),
        ("restore_snapshot", {"collection": "c", "name": "s", "target_collection": "t",
                              "target_db": "bad db"}, "database name 'bad db' is invalid"),
        ("restore_snapshot", {"collection": "c", "name": "s"},
         "restore_snapshot: missing required key 'target_collection'"),
        ("restore_snapshot", {"collection": "c", "name": "s", "target_collection": "9t"},
         "collection name '9t' is invalid"),
        ("get_restore_snapshot_state", {}, "get_restore_snapshot_state: missing required key "
         "'job_id'"),
        ("get_restore_snapshot_state", {"job_id": 0},
         "get_restore_snapshot_state: 'job_id' = 0 is out of range [1, None]"),
        ("list_restore_snapshot_jobs", {"collection": "9c"}, "collection name '9c' is invalid"),
        ("pin_snapshot_data", {"collection": "c", "name": "s", "ttl_seconds": 604801},
         "pin_snapshot_data: 'ttl_seconds' = 604801 is out of range [0, 604800]"),
        ("pin_snapshot_data", {"collection": "c", "name": "s", "ttl_seconds": 1.5},
         "pin_snapshot_data: 'ttl_seconds' must be an integer, got 1.5"),
        ("unpin_snapshot_data", {"pin_id": True},
         "unpin_snapshot_data: 'pin_id' must be an integer, got True"),
        ("unpin_snapshot_data", {"pin_id": 1, "collection": "c"},
         "unpin_snapshot_data: unknown key(s) 'collection'; allowed keys are db, pin_id"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(dbs.CreateDatabase(name="d", properties={"k": "v"})).name == "d"
    # CreateDatabase with no db_name: the call's database beside an empty name
    with pytest.raises(ElanusError, match="'name' '' and 'db' 'default' disagree"):
        checked(dbs.CreateDatabase(db="default", name=""))
    with pytest.raises(ElanusError, match="database name 'bad name' is invalid"):
        checked(dbs.ListDatabases(db="bad name"))  # a dbname header
    with pytest.raises(ElanusError, match="cannot modify properties and delete keys"):
        checked(dbs.AlterDatabaseProperties(name="d", properties={"a": "1"}, delete_keys=["b"]))
    with pytest.raises(ElanusError, match=r"'field_id' = 0 is out of range \[1, None\]"):
        checked(fields.DropCollectionField(collection="c", field_id=0))  # an unset proto id
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(snaps.DropSnapshot(collection="", name="s"))
    with pytest.raises(ElanusError, match="out of range"):
        checked(snaps.PinSnapshotData(collection="c", name="s", ttl_seconds=-1))
    with pytest.raises(ElanusError, match="'job_id' = 0 is out of range"):
        checked(snaps.GetRestoreSnapshotState(job_id=0))


def test_a_database_action_is_authorised_in_the_default_database() -> None:
    """The dict checkers kept no ``db`` for these: the privilege was checked in the default
    database whatever the body named; a body naming its database by ``name`` (the SDK's, a
    face's) still is."""
    caller = Caller("u", superuser=False)
    for op in (
        dbs.CreateDatabase(name="d1"),
        dbs.DropDatabase(name="d1"),
        dbs.DescribeDatabase(name="d1"),
        dbs.AlterDatabaseProperties(name="d1", properties={"k": "v"}),
        dbs.ListDatabases(),
    ):
        spec = catalogue()[name_of(op)]
        need = need_for(caller, spec, body_of(checked(op)))
        assert need == Need(spec.privilege, "default"), name_of(op)


REPLY = {"names": [], "name": "d", "properties": {}, "snapshots": [], "jobs": [],
         "job_id": 1, "pin_id": 2}  # fmt: skip


def _sent(call: Callable[[RecordingClient], object]) -> tuple[str, bytes]:
    client = RecordingClient({name: REPLY for name in catalogue()})
    call(client)
    (sent,) = client.sent
    return sent


@pytest.mark.parametrize(
    ("call", "name", "body"),
    [
        # each body as the dict-building SDK wrote it, in its key order
        (lambda c: c.create_database("d"), "create_database", {"name": "d"}),
        (lambda c: c.create_database("d", properties={}), "create_database", {"name": "d"}),
        (lambda c: c.create_database("d", properties={"k": 1}), "create_database",
         {"name": "d", "properties": {"k": 1}}),
        (lambda c: c.drop_database("d"), "drop_database", {"name": "d"}),
        (lambda c: c.describe_database("d"), "describe_database", {"name": "d"}),
        (lambda c: c.alter_database_properties("d", {"k": "v"}), "alter_database_properties",
         {"name": "d", "properties": {"k": "v"}}),
        (lambda c: c.alter_database_properties("d", {}), "alter_database_properties",
         {"name": "d", "properties": {}}),
        (lambda c: c.drop_database_properties("d", ("k",)), "alter_database_properties",
         {"name": "d", "delete_keys": ["k"]}),
        (lambda c: c.drop_database_properties("d", []), "alter_database_properties",
         {"name": "d", "delete_keys": []}),
        (lambda c: c.list_databases(), "list_databases", {}),
        (lambda c: c.add_collection_field("c", "f", "Int64", nullable=True),
         "add_collection_field", {"db": "own", "collection": "c", "field": {
             "name": "f", "type": "Int64", "nullable": True}}),
        (lambda c: c.drop_function_field("c", "fn", db="d"), "drop_function_field",
         {"db": "d", "collection": "c", "function_name": "fn"}),
        (lambda c: c.create_snapshot("s", "c"), "create_snapshot",
         {"db": "own", "collection": "c", "name": "s"}),
        (lambda c: c.create_snapshot("s", "c", db_name="d", description="x"), "create_snapshot",
         {"db": "d", "collection": "c", "name": "s", "description": "x"}),
        (lambda c: c.drop_snapshot("s", "c"), "drop_snapshot",
         {"db": "own", "collection": "c", "name": "s"}),
        (lambda c: c.list_snapshots(), "list_snapshots", {"db": "own"}),
        (lambda c: c.list_snapshots("c", db_name="d"), "list_snapshots",
         {"db": "d", "collection": "c"}),
        (lambda c: c.describe_snapshot("s", "c"), "describe_snapshot",
         {"db": "own", "collection": "c", "name": "s"}),
        (lambda c: c.restore_snapshot("s", "c", "t"), "restore_snapshot",
         {"db": "own", "collection": "c", "name": "s", "target_collection": "t",
          "target_db": "own"}),
        (lambda c: c.restore_snapshot("s", "c", "t", "d", "e"), "restore_snapshot",
         {"db": "d", "collection": "c", "name": "s", "target_collection": "t",
          "target_db": "e"}),
        (lambda c: c.get_restore_snapshot_state(5), "get_restore_snapshot_state",
         {"db": "own", "job_id": 5}),
        (lambda c: c.list_restore_snapshot_jobs(), "list_restore_snapshot_jobs", {"db": "own"}),
        (lambda c: c.list_restore_snapshot_jobs("c"), "list_restore_snapshot_jobs",
         {"db": "own", "collection": "c"}),
        (lambda c: c.pin_snapshot_data("s", "c"), "pin_snapshot_data",
         {"db": "own", "collection": "c", "name": "s", "ttl_seconds": 0}),
        (lambda c: c.unpin_snapshot_data(2), "unpin_snapshot_data", {"db": "own", "pin_id": 2}),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], name: str, body: dict[str, Any]
) -> None:
    assert _sent(call) == (name, encode_json(body))


def test_a_field_dropped_by_name_or_id_sends_that_key_alone() -> None:
    """The dict-building SDK wrote the other key as ``null``, which the server read as
    absent; the record leaves it out."""
    assert _sent(lambda c: c.drop_collection_field("c", "f")) == (
        "drop_collection_field",
        encode_json({"db": "own", "collection": "c", "field_name": "f"}),
    )
    assert _sent(lambda c: c.drop_collection_field("c", field_id=4, db="d")) == (
        "drop_collection_field",
        encode_json({"db": "d", "collection": "c", "field_id": 4}),
    )
