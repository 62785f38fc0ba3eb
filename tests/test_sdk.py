"""The Python SDK against a real stack: DDL round trips, databases, errors, control calls."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import Stack, own_stack

import elanus
from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.channels.nats_server import free_port
from elanus.client.client import Client
from elanus.flight.actions import catalogue


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the tests that need no empty catalog (each names its own collection);
    those that list every collection or database, or stop the coord, get their own."""
    with own_stack(tmp_path_factory.mktemp("sdk"), "sdk-shared") as stack:
        yield stack


def test_quick_setup_round_trip(stack: Stack) -> None:
    c = stack.client()
    created = c.create_collection("quick", dimension=8, metric_type="L2", num_shards=2)
    assert created["name"] == "quick" and created["db"] == "default"
    described = c.describe_collection("quick")
    assert described == created
    fields = {f["name"]: f for f in described["schema"]["fields"]}
    assert fields["id"]["type"] == "Int64" and fields["id"]["is_primary"]
    assert fields["vector"] == {
        "name": "vector",
        "type": "FloatVector",
        "dim": 8,
        "field_id": fields["vector"]["field_id"],
    }
    assert len({f["field_id"] for f in fields.values()}) == 2
    assert described["num_shards"] == 2 and len(described["vchannels"]) == 2
    assert len(described["pchannels"]) == 2
    assert described["properties"] == {"metric_type": "L2"}
    assert described["consistency_level"] == "Bounded"
    assert [p["name"] for p in described["partitions"]] == ["_default"]
    assert c.has_collection("quick") and not c.has_collection("other")
    assert c.list_collections() == ["quick"]
    c.drop_collection("quick")
    assert not c.has_collection("quick")
    assert c.list_collections() == []


def test_quick_setup_varchar_auto_names(shared: Stack) -> None:
    c = shared.client()
    d = c.create_collection(
        "docs",
        4,
        primary_field_name="doc_id",
        vector_field_name="emb",
        id_type="varchar",
        max_length=64,
    )
    pk = d["schema"]["fields"][0]
    assert pk == {
        "name": "doc_id",
        "type": "VarChar",
        "is_primary": True,
        "max_length": 64,
        "field_id": pk["field_id"],
    }
    assert d["schema"]["fields"][1]["name"] == "emb"


def full_schema() -> Schema:
    return (
        Schema(enable_dynamic_field=False, description="articles")
        .add_field("pk", DataType.INT64, is_primary=True, auto_id=True)
        .add_field("title", DataType.VARCHAR, max_length=200)
        .add_field(
            "tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_length=32, max_capacity=8
        )
        .add_field("meta", DataType.JSON, nullable=True)
        .add_field("score", DataType.FLOAT, default_value=0.5)
        .add_field("dense", DataType.FLOAT_VECTOR, dim=16)
        .add_field("bits", DataType.BINARY_VECTOR, dim=64)
    )


def test_schema_builder_round_trip(shared: Stack) -> None:
    c = shared.client()
    schema = full_schema()
    c.create_collection(
        "articles",
        schema=schema,
        num_shards=3,
        consistency_level=elanus.ConsistencyLevel.STRONG,
        properties={"ttl_seconds": "3600"},
        description="news articles",
    )
    d = c.describe_collection("articles")
    got = Schema.from_dict(d["schema"])
    assert [f.field_id for f in got.fields] == sorted({f.field_id for f in got.fields})
    for f in got.fields:
        f.field_id = None
    assert got == schema
    assert d["consistency_level"] == "Strong"
    assert d["properties"] == {"ttl_seconds": "3600"}
    assert d["description"] == "news articles"
    assert d["num_shards"] == 3 and len(set(d["vchannels"])) == 3


def test_partitions(shared: Stack) -> None:
    c = shared.client()
    c.create_collection("books", dimension=4)
    assert c.list_partitions("books") == ["_default"]
    c.create_partition("books", "y2024")
    c.create_partition("books", "y2025")
    assert c.has_partition("books", "y2024") and not c.has_partition("books", "y1999")
    assert c.list_partitions("books") == ["_default", "y2024", "y2025"]
    c.release_collection("books")  # quick setup loads, as pymilvus's: release to drop
    c.drop_partition("books", "y2024")
    assert c.list_partitions("books") == ["_default", "y2025"]
    ids = [p["partition_id"] for p in c.describe_collection("books")["partitions"]]
    assert len(set(ids)) == 2


def test_rename_within_and_across_databases(stack: Stack) -> None:
    c = stack.client()
    cid = c.create_collection("old", dimension=4)["collection_id"]
    c.rename_collection("old", "new")
    assert c.list_collections() == ["new"]
    assert c.describe_collection("new")["collection_id"] == cid
    c.create_database("archive")
    c.rename_collection("new", "kept", target_db="archive")
    assert c.list_collections() == []
    assert c.list_collections(db="archive") == ["kept"]
    assert c.describe_collection("kept", db="archive")["collection_id"] == cid


def test_databases_and_using_database(stack: Stack) -> None:
    c = stack.client()
    assert c.list_databases() == ["default"]
    c.create_database("sales")
    assert c.list_databases() == ["default", "sales"]
    c.create_collection("shared_name", dimension=4)
    c.using_database("sales")
    assert c.db == "sales" and c.list_collections() == []
    c.create_collection("shared_name", dimension=8)
    assert c.describe_collection("shared_name")["db"] == "sales"
    with pytest.raises(ElanusError) as err:
        c.drop_database("sales")
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "still has collections" in str(
        err.value
    )
    c.drop_collection("shared_name")
    c.using_database("default")
    c.drop_database("sales")
    assert c.list_databases() == ["default"]
    assert c.list_collections() == ["shared_name"]
    with pytest.raises(ElanusError) as err:
        c.list_collections(db="sales")
    assert err.value.code == ErrorCode.DATABASE_NOT_FOUND


def test_server_errors_become_elanus_errors(shared: Stack) -> None:
    c = shared.client()
    with pytest.raises(ElanusError) as err:
        c.describe_collection("missing")
    assert err.value.code == ErrorCode.COLLECTION_NOT_FOUND
    assert "'missing'" in err.value.message and "Detail" not in err.value.message
    with pytest.raises(ElanusError) as err:
        c.create_collection("nothing")
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "dimension" in err.value.message
    with pytest.raises(ElanusError) as err:
        c.using_database("not a name")
    assert err.value.code == ErrorCode.INVALID_ARGUMENT


def test_unreachable_and_closed_client_are_unavailable(shared: Stack) -> None:
    with pytest.raises(ElanusError) as err:
        Client(f"grpc://127.0.0.1:{free_port()}", timeout=5)  # connect asks at once
    assert err.value.code == ErrorCode.UNAVAILABLE
    with Client(shared.uri, timeout=5) as c:
        c.list_collections()
    with pytest.raises(ElanusError) as err:
        c.health()
    assert err.value.code == ErrorCode.UNAVAILABLE and "closed" in err.value.message


def test_coord_down_is_unavailable_without_traceback(stack: Stack) -> None:
    c = stack.client()
    assert c.health()["status"] == "ok"
    stack.call(stack.coord.stop())  # type: ignore[union-attr]
    stack.coord = None
    with pytest.raises(ElanusError) as err:
        c.list_collections()
    assert err.value.code == ErrorCode.UNAVAILABLE
    assert "Traceback" not in str(err.value)
    health = c.health()
    assert health["status"] == "degraded" and health["coord"]["status"] == "unavailable"


def test_control_calls(shared: Stack) -> None:
    with elanus.connect(shared.uri) as c:
        health = c.health()
        assert health["status"] == "ok" and health["coord"]["status"] == "ok"
        assert health["proxy"]["node_id"] == shared.proxy.node_id
        sessions = {s["role"]: s for s in c.list_sessions()}
        assert sessions["proxy"]["address"] == shared.uri
        assert sessions["coord"]["node_id"] == shared.coord.node_id  # type: ignore[union-attr]
        first, second = c.get_timestamp(), c.get_timestamp()
        assert 0 < first < second
        assert set(c.list_actions()) == set(catalogue())


def test_sdk_import_is_light() -> None:
    code = (
        "import sys, elanus; elanus.Client; import elanus.client.client; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('nats', 'duckdb', 'lance'));"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
