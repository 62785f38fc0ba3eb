"""The SDK at parity with pymilvus's ``MilvusClient`` (issue 23): the quick setup indexes
and loads, results have pymilvus's shapes (compared live with Milvus Lite), the methods
pymilvus has exist, and ``connect`` fails at once, saying why, when nothing (or not
Elanus) answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import own_stack, run_elanus

import elanus
from elanus import ElanusError, ErrorCode
from elanus.channels.nats_server import free_port

if TYPE_CHECKING:
    from conftest import Stack

pymilvus = pytest.importorskip("pymilvus")

ROWS = [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0], "x": i} for i in range(5)]


def quick_start(client: Any) -> dict[str, Any]:
    """Milvus's quick start, verbatim: create, insert, search (no index, no load)."""
    client.create_collection("qs", dimension=4)
    client.insert("qs", ROWS)
    found = client.search(
        "qs", [[1.0, 1.0, 0.0, 0.0], [2.0, 1.0, 0.0, 0.0]], limit=2, output_fields=["x"],
        consistency_level="Strong",
    )  # fmt: skip
    return {
        "search": found,
        "load_state": client.get_load_state("qs"),
        "indexes": client.list_indexes("qs"),
        "index": client.describe_index("qs", "vector"),
        "describe": client.describe_collection("qs"),
        "database": client.describe_database("default"),
        "version": client.get_server_version(),
    }


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The quick start's answers from Milvus Lite and from a stack, once for the tests
    below (each only reads them)."""
    tmp_path = tmp_path_factory.mktemp("parity")
    with own_stack(tmp_path, "sdk-parity") as stack:
        lite = pymilvus.MilvusClient(str(tmp_path / "lite.db"))
        try:
            milvus = quick_start(lite)
        finally:
            lite.close()
        yield milvus, quick_start(stack.client())


def test_quick_start_searches_without_an_explicit_index_or_load(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    milvus, ours = both
    assert ours["indexes"] == milvus["indexes"] == ["vector"]
    assert str(ours["load_state"]["state"]) == str(milvus["load_state"]["state"]) == "Loaded"
    assert [[h["id"] for h in q] for q in ours["search"]] == [
        [h["id"] for h in q] for q in milvus["search"]
    ]


def test_hits_have_pymilvus_attributes_and_stay_dicts(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    milvus, ours = both
    for result in (milvus["search"], ours["search"]):
        assert isinstance(result, list) and str(result).startswith("data: [[")
        hits = result[0]
        hit = hits[0]
        assert isinstance(hit, dict) and sorted(hit) == ["distance", "entity", "id"]
        assert hit.id == hit["id"] == hit.pk == hits.ids[0] == 1
        assert hit.distance == hit["distance"] == hit.score == hits.distances[0]
        assert hit["entity"] == hit.fields == {"x": 1}
        assert hit["x"] == hit.get("x") == hit.x == 1  # into the entity, as pymilvus reaches
        assert hit.get("missing", "default") == "default"
        with pytest.raises(AttributeError):
            _ = hit.missing
        assert hit.to_dict() == hit


def test_load_state_equals_pymilvus_load_state(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    milvus, ours = both
    theirs, mine = milvus["load_state"]["state"], ours["load_state"]["state"]
    assert mine == theirs and theirs == mine and mine == elanus.LoadState.Loaded
    assert mine == "Loaded" and mine.name == theirs.name and str(mine) == str(theirs)
    assert repr(mine) == repr(theirs) == "<LoadState: Loaded>"


def test_describe_index_and_collection_have_every_pymilvus_key(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    milvus, ours = both
    assert set(milvus["index"]) <= set(ours["index"]), set(milvus["index"]) - set(ours["index"])
    for key in ("metric_type", "field_name", "index_name"):
        assert ours["index"][key] == milvus["index"][key], key
    # Milvus hides what AUTOINDEX chose; Elanus shows it (docs/milvus-compat.md).
    assert (milvus["index"]["index_type"], ours["index"]["index_type"]) == ("AUTOINDEX", "HNSW")
    assert set(milvus["describe"]) <= set(ours["describe"]), set(milvus["describe"]) - set(
        ours["describe"]
    )
    for key in ("collection_name", "auto_id", "num_shards", "description", "aliases"):
        assert ours["describe"][key] == milvus["describe"][key], key
    assert ours["describe"]["enable_dynamic_field"] is True
    for mine, theirs in zip(ours["describe"]["fields"], milvus["describe"]["fields"], strict=True):
        assert set(theirs) <= set(mine)
        assert (mine["name"], mine["type"].name, mine["params"]) == (
            theirs["name"],
            theirs["type"].name,
            theirs["params"],
        )
    assert ours["database"] == milvus["database"] == {"name": "default"}
    assert isinstance(ours["version"], str) and ours["version"] == elanus.__version__


def test_describe_index_lists_build_params_at_the_top(stack: Stack) -> None:
    client = stack.client()
    schema = client.create_schema()
    schema.add_field("id", elanus.DataType.INT64, is_primary=True)
    schema.add_field("v", elanus.DataType.FLOAT_VECTOR, dim=4)
    index_params = client.prepare_index_params()
    index_params.add_index("v", "HNSW", "v_idx", metric_type="L2", M=8, efConstruction=64)
    client.create_collection("h", schema=schema, index_params=index_params)
    info = client.describe_index("h", "v_idx")
    assert (info["M"], info["efConstruction"]) == (8, 64)
    assert info["index_type"] == "HNSW" and info["metric_type"] == "L2"
    assert info["field_name"] == "v" and info["index_name"] == "v_idx"
    assert info["params"] == {"M": 8, "efConstruction": 64}  # Elanus's own key stays
    assert {"state", "indexed_rows", "total_rows", "pending_index_rows"} <= set(info)


def test_partitions_segments_and_properties(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("p", dimension=4, consistency_level="Strong")
    client.create_partition("p", "hot")
    client.insert("p", ROWS[:3], partition_name="hot")
    client.insert("p", ROWS[3:])
    client.flush("p")
    assert client.get_partition_stats("p", "hot") == {"row_count": 3}
    assert client.get_partition_stats("p", "_default") == {"row_count": 2}
    persistent = client.list_persistent_segments("p")
    assert sum(s.num_rows for s in persistent) == 5
    assert {s.state for s in persistent} == {"Flushed"}
    assert {(s.level, s.is_sorted) for s in persistent} == {(2, True)}  # L1, in key order
    assert all(s.collection_name == "p" for s in persistent)
    loaded = client.list_loaded_segments("p")
    assert {s.segment_id for s in loaded} == {s.segment_id for s in persistent}

    client.release_partitions("p", ["hot"])
    state = client.get_load_state("p")
    assert state["state"] == elanus.LoadState.Loaded and len(state["partition_ids"]) == 1
    assert client.query("p", "id >= 0", ["id"]) == [{"id": 3}, {"id": 4}]
    assert sum(s.num_rows for s in client.list_loaded_segments("p")) == 2
    client.release_partitions("p", "_default")  # the last one: the collection is released
    assert client.get_load_state("p")["state"] == "NotLoad"
    assert client.list_loaded_segments("p") == []
    with pytest.raises(ElanusError) as err:
        client.get_partition_stats("p", "nope")
    assert err.value.code == ErrorCode.PARTITION_NOT_FOUND

    client.alter_collection_properties("p", {"mmap.enabled": True})  # released: allowed
    assert client.describe_collection("p")["properties"]["mmap.enabled"] == "true"
    client.drop_collection_properties("p", ["mmap.enabled"])
    assert "mmap.enabled" not in client.describe_collection("p")["properties"]
    client.alter_collection_field("p", "vector", {"mmap.enabled": False})
    client.alter_index_properties("p", "vector", {"mmap.enabled": True})
    assert "mmap.enabled" not in client.describe_collection("p")["properties"]  # its own keys
    with pytest.raises(ElanusError) as err:
        client.alter_index_properties("p", "vector", {"nlist": 8})
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert "nlist is not configable index param" in err.value.message
    with pytest.raises(ElanusError) as err:
        client.describe_database("nope")
    assert err.value.code == ErrorCode.DATABASE_NOT_FOUND


# -- connecting -------------------------------------------------------------------------------
def test_connect_with_nothing_listening_fails_fast() -> None:
    started = time.monotonic()
    with pytest.raises(ElanusError) as err:
        elanus.connect(f"grpc://127.0.0.1:{free_port()}")
    assert err.value.code == ErrorCode.UNAVAILABLE
    assert time.monotonic() - started < 5


@pytest.fixture
def plain_grpc() -> Iterator[str]:
    """A gRPC server with no Flight service (as Milvus's port is, to a Flight client)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        server.stop(None)


@pytest.mark.slow  # runs the elanus command against it
def test_a_grpc_server_without_flight_is_named(plain_grpc: str) -> None:
    for make in (
        lambda: elanus.connect(plain_grpc),
        lambda: elanus.connect(plain_grpc, token="root:Milvus"),
    ):
        with pytest.raises(ElanusError) as err:
            make()
        assert err.value.code == ErrorCode.UNAVAILABLE
        assert f"{plain_grpc} is not an Elanus Flight endpoint" in err.value.message
        assert "Milvus" in err.value.message and "pymilvus" in err.value.message
    result = run_elanus("collection", "list", "--uri", plain_grpc)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: [UNAVAILABLE] ") and "not an Elanus Flight endpoint" in line
