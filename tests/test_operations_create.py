"""The ``create_collection`` record (``elanus/ops/collections.py``): a body is checked whole
once, with the dict checker's words, and the executor reads what the check made; the SDK
and the Milvus face build the record (the wire body as before, null keys left out)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.ops import checked
from elanus.ops.collections import CreateCollection
from elanus.schema import quick_schema

test_an_operations_action_is_declared_by_its_record = declaration_test([CreateCollection])


def test_a_quick_setup_body_decodes_into_its_schema_and_properties() -> None:
    op = decoded("create_collection", {"name": "c", "dimension": 4, "metric_type": "l2"})
    made = op.created
    assert [f.name for f in made.schema.fields] == ["id", "vector"]
    assert made.schema.field("vector").dim == 4
    assert made.properties == {"metric_type": "L2"}  # quick setup's metric, as stored
    assert (made.num_partitions, made.consistency_level) == (None, "Bounded")
    assert op.created is made  # checked once: the executor reads what the check made


def test_a_schema_body_keeps_its_fields_and_drops_their_ids() -> None:
    schema = quick_schema(2, primary_field="pk", vector_field="v").to_dict()
    schema["fields"][0]["field_id"] = 100
    op = decoded(
        "create_collection",
        {"name": "c", "schema": schema, "consistency_level": "strong", "properties": {"a": 1}},
    )
    assert [f.field_id for f in op.created.schema.fields] == [None, None]
    assert (op.created.consistency_level, op.created.properties) == ("Strong", {"a": "1"})


BAD_BODIES = [
        ("create_collection", {"name": "c"},
         "create_collection: needs a 'schema' or a 'dimension' (quick setup)"),
        ("create_collection", {"name": "c", "dimension": 4, "schema": {}},
         "create_collection: give either 'schema' or 'dimension', not both"),
        ("create_collection", {"name": "c", "schema": {"fields": []}, "metric_type": "L2"},
         "create_collection: 'metric_type' only apply to quick setup with 'dimension'"),
        ("create_collection", {"name": "c", "schema": {"fields": 3}},
         "schema must have a 'fields' list"),
        ("create_collection", {"name": "c", "dimension": 4, "metric_type": "HAMMING"},
         "create_collection: metric_type 'HAMMING' is not one of L2, IP, COSINE"),
        ("create_collection", {"name": "c", "dimension": "4"},
         "create_collection: 'dimension' must be an integer, got '4'"),
        ("create_collection", {"name": "c", "dimension": 4, "num_shards": 0},
         "create_collection: 'num_shards' = 0 is out of range [1, 16]"),
        ("create_collection", {"name": "c", "dimension": 4, "num_partitions": 4},
         "num_partitions only applies to a collection with a partition key field"),
        ("create_collection", {"name": "c", "dimension": 4, "consistency_level": "Never"},
         "create_collection: unknown consistency level 'Never'"),
        ("create_collection", {"name": "c", "dimension": 4, "description": "x" * 70_000},
         "create_collection: 'description' is longer than"),
        ("create_collection", {"name": "c", "dimension": 4, "auto_id": True, "id_type": "str"},
         "auto_id needs an Int64 primary key; 'id' is VarChar"),
        ("create_collection", {"name": "9c", "dimension": 4}, "collection name '9c' is invalid"),
        ("create_collection", {"name": "c", "dimension": 4, "properties": []},
         "create_collection: 'properties' must be a JSON object"),
        ("create_collection", {"name": "c", "dimension": 4,
                               "properties": {"collection.ttl.seconds": "soon"}},
         "collection.ttl.seconds"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(CreateCollection(name="c", dimension=2)).created.schema.primary.name == "id"
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(CreateCollection(name="", dimension=2))  # an unset proto field
    with pytest.raises(ElanusError, match="needs a 'schema' or a 'dimension'"):
        checked(CreateCollection(name="c"))


def _sent_body(**kwargs: Any) -> dict[str, Any]:
    client = RecordingClient(
        {
            "create_collection": {
                "name": "c",
                "schema": {"fields": []},
                "consistency_level": "Bounded",
            }
        }
    )
    client.create_collection("c", **kwargs)
    name, raw = client.sent[0]
    assert name == "create_collection"
    return dict(orjson.loads(raw))


def test_the_sdk_sends_the_bodies_it_always_sent() -> None:
    schema = quick_schema(2).to_dict()
    assert _sent_body(schema=schema, index_params=None) == {
        "db": "own", "name": "c", "schema": schema, "num_shards": 1,
        "consistency_level": "Bounded", "properties": {}, "description": "",
    }  # fmt: skip
    # quick setup: its keys, every one the SDK has a default for (max_length: only given);
    # then the SDK indexes and loads, as pymilvus does
    client = RecordingClient(
        {
            "create_collection": {
                "name": "c",
                "schema": {"fields": []},
                "consistency_level": "Bounded",
            },
            "create_index": {"index_id": 1},
        }
    )
    client.create_collection("c", dimension=8, num_shards=2, max_length=64)
    assert [name for name, _ in client.sent] == [
        "create_collection",
        "create_index",
        "load_collection",
    ]
    body = orjson.loads(client.sent[0][1])
    assert body == {
        "db": "own", "name": "c", "dimension": 8, "num_shards": 2,
        "consistency_level": "Bounded", "properties": {}, "description": "",
        "primary_field": "id", "vector_field": "vector", "id_type": "int",
        "auto_id": False, "metric_type": "COSINE", "max_length": 64,
    }  # fmt: skip
