"""Operation records (``elanus/ops``, issue 34 item 2): one typed request per operation,
built by every face. The registry derives an action's keys from its record, a DoAction body
decodes into it once with the words the dict checkers used, and a record a face built from
its own values is checked the same way (the Milvus port's path, no JSON between)."""

from __future__ import annotations

import dataclasses

import pytest
from opcheck import declared_by, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.ops import body_of, checked
from elanus.ops import collections as colls
from elanus.ops import partitions as ops

RECORDS = [
    ops.CreatePartition, ops.DropPartition, ops.HasPartition, ops.ListPartitions,
    ops.CreateAlias, ops.AlterAlias, ops.DropAlias, ops.DescribeAlias, ops.ListAliases,
    colls.DropCollection, colls.HasCollection, colls.DescribeCollection, colls.ListCollections,
    colls.RenameCollection,
]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_an_operations_action_is_declared_by_its_record(record: type) -> None:
    declared_by(record)
    assert [f.name for f in dataclasses.fields(record)][0] == "db"  # checked first


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("create_partition", {"db": "d1", "collection": "c", "partition": "p"})
    assert got == ops.CreatePartition(db="d1", collection="c", partition="p")
    assert decoded("drop_alias", {"alias": "a"}) == ops.DropAlias(alias="a")  # db defaults
    assert decoded("list_aliases", {"collection": ""}) == ops.ListAliases(collection="")
    moved = decoded("rename_collection", {"name": "a", "new_name": "a", "new_db": "d2"})
    assert moved == colls.RenameCollection(name="a", new_name="a", new_db="d2")  # another db


BAD_BODIES = [
        ("create_partition", {"collection": "c"}, "create_partition: missing required key "
         "'partition'"),
        ("create_partition", {"collection": 7, "partition": "p"},
         "create_partition: 'collection' must be a string, got int"),
        ("has_partition", {"collection": "c", "partition": "9x"}, "partition name '9x' is "
         "invalid"),
        ("create_alias", {"collection": "c", "alias": ""}, "alias name must be a non-empty"),
        ("drop_partition", {"collection": "c", "partition": "_default"},
         "the default partition '_default' cannot be dropped"),
        ("list_aliases", {"collection": "bad name"}, "collection name 'bad name' is invalid"),
        ("drop_alias", {"alias": "a", "db": ""}, "database name must be a non-empty string"),
        ("list_partitions", {"collection": "c", "partition": "p"},
         "list_partitions: unknown key(s) 'partition'; allowed keys are collection, db"),
        ("drop_collection", {}, "drop_collection: missing required key 'name'"),
        ("rename_collection", {"name": "a", "new_name": "a"},
         "rename_collection: 'new_name' 'a' is the current name"),
        ("rename_collection", {"name": "a", "new_name": "a", "new_db": "default"},
         "'new_name' 'a' is the current name"),
        ("rename_collection", {"name": "a", "new_name": "b", "new_db": ""},
         "database name must be a non-empty string"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(ops.HasPartition(collection="c", partition="p")).partition == "p"
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(ops.CreateAlias(collection="", alias="a"))  # an unset proto field
    with pytest.raises(ElanusError, match="cannot be dropped"):
        checked(ops.DropPartition(collection="c", partition="_default"))


def test_the_wire_body_is_the_fields_by_name_without_none() -> None:
    assert body_of(ops.ListAliases(db="d")) == {"db": "d"}
    assert body_of(ops.CreatePartition(collection="c", partition="p")) == {
        "db": "default", "collection": "c", "partition": "p",
    }  # fmt: skip


def test_the_privilege_check_reads_what_the_old_request_held() -> None:
    """A database action is checked in the default database, as its dict checker kept no
    ``db``; any other record shows the check its body (``flight/auth.py`` ``need_for``)."""
    from elanus.ops import databases, scope_of

    assert scope_of(databases.ListDatabases(db="sales")) == {}
    assert scope_of(databases.DescribeDatabase(db="sales")) == {"name": "sales"}
    assert scope_of(ops.HasPartition(db="sales", collection="c", partition="p")) == {
        "db": "sales", "collection": "c", "partition": "p",
    }  # fmt: skip
