"""pymilvus's schema changes on the Milvus port, through ``AlterCollectionSchema``:
``add_collection_field`` on its first call (no fallback to ``AddCollectionField``),
``drop_collection_field`` by name and by id, with Milvus's refusals, codes and words.

Milvus Lite 3.2 does not serve ``AlterCollectionSchema`` (gRPC UNIMPLEMENTED; its
``add_collection_field`` falls back), so the answers follow Milvus 2.6's source instead:
rootcoord's ``buildSchemaForDropField`` and the proxy's drop checks, and the messages its
own client tests expect (code 1100, ``cannot drop primary key field: id``, ...)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from milvus_stack import MilvusStack, mstack_client_fixture, mstack_fixture  # noqa: F401  (fixtures)
from pymilvus import AsyncMilvusClient, DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException

STRONG = "Strong"
ANSWER_S = 5.0


def _fields(client: MilvusClient, name: str) -> dict[str, Any]:
    return {f["name"]: f for f in client.describe_collection(name)["fields"]}


def _refused(call: Any, code: int, words: str) -> None:
    with pytest.raises(MilvusException) as err:
        call()
    assert err.value.code == code, err.value
    assert words in err.value.message, err.value.message


def _schema(client: MilvusClient) -> Any:
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("part", DataType.INT64, is_partition_key=True)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("tag", DataType.VARCHAR, max_length=8)
    s.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))
    return s


def _index(client: MilvusClient, name: str) -> None:
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_index(name, params)


def test_add_and_drop_fields_through_alter_collection_schema(client: MilvusClient) -> None:
    client.create_collection("shelf", schema=_schema(client), num_partitions=2)
    _index(client, "shelf")
    rows = [
        {"id": i, "vector": [float(i), 1.0], "part": i, "text": f"word{i}", "tag": f"t{i}"}
        for i in range(6)
    ]
    client.insert("shelf", rows[:3])
    client.flush("shelf")
    client.load_collection("shelf")
    client.insert("shelf", rows[3:])  # growing

    start = time.monotonic()
    client.add_collection_field("shelf", "note", DataType.VARCHAR, max_length=8, nullable=True)
    assert time.monotonic() - start < ANSWER_S  # one call, no fallback
    assert _fields(client, "shelf")["note"]["nullable"]

    client.drop_collection_field("shelf", "tag")
    assert "tag" not in _fields(client, "shelf")
    got = client.query("shelf", "id >= 0", ["*"], consistency_level=STRONG)
    assert len(got) == 6 and all("tag" not in r and r["note"] is None for r in got)
    _refused(
        lambda: client.query("shelf", 'tag == "t1"', ["id"], consistency_level=STRONG),
        1100,
        "tag",
    )
    hits = client.search("shelf", [[1.0, 1.0]], anns_field="vector", limit=2,
                          output_fields=["*"], consistency_level=STRONG)[0]  # fmt: skip
    assert len(hits) == 2 and all("tag" not in h["entity"] for h in hits)

    client.drop_collection_field("shelf", field_id=_fields(client, "shelf")["note"]["field_id"])
    assert set(_fields(client, "shelf")) == {"id", "vector", "part", "text", "sparse"}
    asyncio.run(_async_add_and_drop(client, "shelf"))


async def _async_add_and_drop(sync: MilvusClient, name: str) -> None:
    uri = sync._get_connection().server_address
    client = AsyncMilvusClient(uri=f"http://{uri}", timeout=30)
    try:
        await client.add_collection_field(name, "rank", DataType.INT32, nullable=True)
        assert "rank" in _fields(sync, name)
        await client.drop_collection_field(name, "rank")
        assert "rank" not in _fields(sync, name)
    finally:
        await client.close()


def test_refusals_carry_milvus_codes_and_words(client: MilvusClient) -> None:
    client.create_collection("shelf", schema=_schema(client), num_partitions=2)
    before = client.describe_collection("shelf")["fields"]
    drop = client.drop_collection_field
    for field, words in [
        ("missing_field", "field not found: missing_field"),
        ("id", "cannot drop primary key field: id"),
        ("part", "cannot drop partition key field: part"),
        ("$meta", "field not found: $meta"),
        ("text", "field is referenced by function bm25 as input, drop function first"),
        ("sparse", "field is referenced by function bm25 as output, drop function first"),
    ]:
        _refused(lambda f=field: drop("shelf", f), 1100, words)  # type: ignore[misc]
    _refused(lambda: drop("shelf", field_id=999), 1100, "field not found with id: 999")
    _refused(lambda: drop("nope", "tag"), 100, "nope")
    assert client.describe_collection("shelf")["fields"] == before

    client.create_collection("lone", dimension=2)
    _refused(lambda: drop("lone", "vector"), 1100, "cannot drop the last vector field: vector")

    _refused(lambda: client.drop_function_field("shelf", "nope"), 1100, "function not found: nope")
    assert client.describe_collection("shelf")["fields"] == before

    only = client.create_schema()
    only.add_field("id", DataType.INT64, is_primary=True)
    only.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    only.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    only.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))
    client.create_collection("words", schema=only)
    _refused(
        lambda: client.drop_function_field("words", "bm25"),
        1100,
        "cannot drop function bm25: it would leave no vector field in the collection",
    )


def test_drop_function_field_drops_its_output_and_index(client: MilvusClient) -> None:
    client.create_collection("shelf", schema=_schema(client), num_partitions=2)
    _index(client, "shelf")
    rows = [{"id": i, "vector": [float(i), 1.0], "part": i, "text": f"word{i} common",
             "tag": "t"} for i in range(4)]  # fmt: skip
    client.insert("shelf", rows)
    client.load_collection("shelf")
    assert len(client.search("shelf", ["common"], anns_field="sparse", limit=4,
                             consistency_level=STRONG)[0]) == 4  # fmt: skip

    client.drop_function_field("shelf", "bm25")
    described = client.describe_collection("shelf")
    assert described["functions"] == []
    assert {f["name"] for f in described["fields"]} == {"id", "vector", "part", "text", "tag"}
    assert client.list_indexes("shelf") == ["vector"]
    _refused(
        lambda: client.search("shelf", ["common"], anns_field="sparse", limit=4), 1100, "sparse"
    )
    got = client.query("shelf", "id >= 0", ["*"], consistency_level=STRONG)
    assert sorted(r["id"] for r in got) == [0, 1, 2, 3] and all("sparse" not in r for r in got)
    client.drop_collection_field("shelf", "text")  # no function holds it any more
    assert "text" not in _fields(client, "shelf")


def test_an_empty_action_is_refused(mstack: MilvusStack) -> None:
    from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

    with grpc.insecure_channel(mstack.milvus_uri.removeprefix("http://")) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        reply = stub.AlterCollectionSchema(
            milvus_pb2.AlterCollectionSchemaRequest(collection_name="shelf"), timeout=10
        )
    assert reply.alter_status.code == 1100 and "no action" in reply.alter_status.reason


def test_add_function_field_before_the_first_insert(client: MilvusClient) -> None:
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    client.create_collection("docs", schema=s)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_index("docs", params)

    def add(name: str) -> None:
        bound = client.prepare_index_params()
        bound.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        client.add_function_field(
            name,
            client.create_schema().add_field("sparse", DataType.SPARSE_FLOAT_VECTOR).fields[-1],
            Function("bm25", FunctionType.BM25, ["text"], ["sparse"]),
            bound,
        )

    add("docs")
    described = client.describe_collection("docs")
    assert [f["name"] for f in described["functions"]] == ["bm25"]
    assert _fields(client, "docs")["sparse"]["type"] == DataType.SPARSE_FLOAT_VECTOR
    assert sorted(client.list_indexes("docs")) == ["sparse", "vector"]

    rows = [{"id": i, "vector": [float(i), 1.0], "text": f"apple {'pear ' * i}"} for i in range(4)]
    client.insert("docs", rows)
    client.load_collection("docs")
    hits = client.search("docs", ["pear"], anns_field="sparse", limit=4,
                         consistency_level=STRONG)[0]  # fmt: skip
    assert [h["id"] for h in hits] == [3, 2, 1]


def test_add_function_field_backfills_rows_already_written(client: MilvusClient) -> None:
    """As Milvus 2.6: rows in a flushed segment and in a growing one, on a loaded
    collection, get the new function's output; BM25 finds them before and after a reload
    (the sealed segments' files then carry the column the index is built on)."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    client.create_collection("full", schema=s, consistency_level=STRONG)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_index("full", params)
    client.load_collection("full")
    rows = [{"id": i, "vector": [float(i), 1.0], "text": f"apple {'pear ' * i}"} for i in range(8)]
    client.insert("full", rows[:4])
    client.flush("full")  # sealed
    client.insert("full", rows[4:6])  # growing
    bound = client.prepare_index_params()
    bound.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.add_function_field(
        "full",
        client.create_schema().add_field("sparse", DataType.SPARSE_FLOAT_VECTOR).fields[-1],
        Function("bm25", FunctionType.BM25, ["text"], ["sparse"]),
        bound,
    )
    client.insert("full", rows[6:])  # after it

    def pears() -> list[int]:
        hits = client.search("full", ["pear"], anns_field="sparse", limit=8,
                             consistency_level=STRONG)[0]  # fmt: skip
        return [h["id"] for h in hits]

    assert pears() == [7, 6, 5, 4, 3, 2, 1]
    client.flush("full")
    client.release_collection("full")
    client.load_collection("full")
    assert pears() == [7, 6, 5, 4, 3, 2, 1]


def test_a_snapshot_restores_a_reused_name_without_the_dropped_values(
    client: MilvusClient,
) -> None:
    """The restored collection keeps the field ids its segments' columns carry: the field
    added under a dropped field's name still reads only its own values."""
    client.create_collection("src", dimension=2, consistency_level=STRONG)
    client.add_collection_field("src", "tag", DataType.VARCHAR, max_length=8, nullable=True)
    client.insert("src", [{"id": i, "vector": [1.0, 0.0], "tag": "old"} for i in range(3)])
    client.flush("src")
    client.drop_collection_field("src", "tag")
    client.add_collection_field("src", "tag", DataType.VARCHAR, max_length=8, nullable=True)
    client.insert("src", [{"id": i, "vector": [1.0, 0.0], "tag": "new"} for i in (3, 4)])
    client.flush("src")
    client.create_snapshot("s1", "src")

    job = client.restore_snapshot("s1", "src", "dst")
    deadline = time.monotonic() + 60
    while (state := client.get_restore_snapshot_state(job)).state != "RestoreSnapshotCompleted":
        assert state.state != "RestoreSnapshotFailed" and time.monotonic() < deadline, state
        time.sleep(0.2)
    assert _fields(client, "dst")["tag"]["field_id"] == _fields(client, "src")["tag"]["field_id"]
    client.load_collection("dst")
    got = client.query("dst", "id >= 0", ["tag"], consistency_level=STRONG)
    assert {r["id"]: r["tag"] for r in got} == {0: None, 1: None, 2: None, 3: "new", 4: "new"}
