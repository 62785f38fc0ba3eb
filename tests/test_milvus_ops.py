"""pymilvus's operations against the Milvus face: partitions loaded and released,
statistics, segments, compaction, loading progress, bulk import."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import DataType, MilvusClient, connections, utility
from pymilvus.exceptions import MilvusException

DIM = 4


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    (tmp_path / "files").mkdir()
    yield from milvus_stack(request, tmp_path, import_roots=str(tmp_path / "files"))


@pytest.fixture
def client(mstack: MilvusStack) -> Iterator[MilvusClient]:
    c = MilvusClient(uri=mstack.milvus_uri, timeout=60)
    try:
        yield c
    finally:
        c.close()


def _collection(client: MilvusClient) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    params = client.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_collection(
        "parts", schema=schema, index_params=params, consistency_level="Strong"
    )
    client.create_partition("parts", "p1")
    vecs = np.random.default_rng(0).random((30, DIM), dtype=np.float32)
    client.insert("parts", [{"id": i, "v": vecs[i]} for i in range(20)])
    client.insert("parts", [{"id": i, "v": vecs[i]} for i in range(20, 30)], partition_name="p1")
    client.flush("parts")


def test_partitions_release_statistics_segments_compaction(
    client: MilvusClient, mstack: MilvusStack
) -> None:
    _collection(client)
    assert client.get_partition_stats("parts", "p1")["row_count"] == 10
    assert client.get_partition_stats("parts", "_default")["row_count"] == 20
    assert client.get_load_state("parts")["state"].name == "Loaded"
    client.release_partitions("parts", ["p1"])
    assert client.get_load_state("parts", partition_name="p1")["state"].name == "NotLoad"
    assert client.get_load_state("parts", partition_name="_default")["state"].name == "Loaded"
    assert client.query("parts", output_fields=["count(*)"])[0]["count(*)"] == 20
    client.release_partitions("parts", ["_default"])
    assert client.get_load_state("parts")["state"].name == "NotLoad"
    client.release_partitions("parts", ["p1"])  # releasing what is not loaded is fine
    client.load_partitions("parts", ["p1"])
    assert client.query("parts", output_fields=["count(*)"])[0]["count(*)"] == 10
    client.load_collection("parts")
    assert client.query("parts", output_fields=["count(*)"])[0]["count(*)"] == 30
    assert sum(s.num_rows for s in client.list_persistent_segments("parts")) == 30
    assert sum(s.num_rows for s in client.list_loaded_segments("parts")) == 30
    job = client.compact("parts")
    assert job > 0
    assert client.get_compaction_state(job) in ("Executing", "Completed")
    connections.connect("ops", uri=mstack.milvus_uri, timeout=30)
    try:
        assert utility.loading_progress("parts", using="ops")["loading_progress"] == "100%"
    finally:
        connections.disconnect("ops")


def test_bulk_insert(client: MilvusClient, mstack: MilvusStack, tmp_path: Path) -> None:
    _collection(client)
    vecs = np.random.default_rng(1).random((50, DIM), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(range(100, 150), pa.int64()),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM),
        }
    )
    pq.write_table(table, tmp_path / "files" / "rows.parquet")
    connections.connect("bulk", uri=mstack.milvus_uri, timeout=30)
    try:
        task = utility.do_bulk_insert("parts", files=["rows.parquet"], using="bulk")
        deadline = time.monotonic() + 120
        state = utility.get_bulk_insert_state(task, using="bulk")
        while state.state_name not in ("Completed", "Failed") and time.monotonic() < deadline:
            time.sleep(0.3)
            state = utility.get_bulk_insert_state(task, using="bulk")
        assert state.state_name == "Completed", state.failed_reason
        assert state.row_count == 50
        tasks = utility.list_bulk_insert_tasks(collection_name="parts", using="bulk")
        assert [t.task_id for t in tasks] == [task]
    finally:
        connections.disconnect("bulk")
    got = client.query("parts", filter="id >= 100", output_fields=["count(*)"])
    assert got[0]["count(*)"] == 50


def test_load_needs_an_index_on_every_vector_field(
    client: MilvusClient, mstack: MilvusStack
) -> None:
    """Milvus's proxy (loadCollectionTask / loadPartitionsTask) refuses to load a
    collection whose vector fields are not all indexed: no index at all is IndexNotExist
    700, "index not found[collection=...]"; some vector field unindexed is Milvus 2.6's
    unclassified 65535 naming the fields. Milvus Lite 3.2 loads such a collection (and
    searches it), departing from Milvus's source: this follows Milvus. Elanus's own face
    still loads it, its searches exact."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("w", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("n", DataType.INT64)
    client.create_collection("two", schema=schema, consistency_level="Strong")
    client.insert(
        "two", [{"id": i, "v": [float(i)] * DIM, "w": [1.0] * DIM, "n": i} for i in range(5)]
    )

    def refused(code: int, *words: str) -> None:
        for load in (
            lambda: client.load_collection("two"),
            lambda: client.load_partitions("two", ["_default"]),
        ):
            with pytest.raises(MilvusException) as info:
                load()
            assert info.value.code == code, info.value
            for w in words:
                assert w in str(info.value), info.value
        assert client.get_load_state("two")["state"].name == "NotLoad"

    refused(700, "index not found[collection=two]")
    # a collection that does not exist: the state NotExist, no error (Milvus; Lite agrees)
    assert client.get_load_state("absent")["state"].name == "NotExist"
    params = client.prepare_index_params()
    params.add_index("n", index_type="INVERTED")
    client.create_index("two", params)  # a scalar index is not a vector index
    refused(65535, "there is no vector index on field: [v w], please create index firstly")
    params = client.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_index("two", params)
    refused(65535, "there is no vector index on field: [w]")
    params = client.prepare_index_params()
    params.add_index("w", index_type="FLAT", metric_type="L2")
    client.create_index("two", params)
    client.load_collection("two")
    hits = client.search("two", [[4.0] * DIM], anns_field="v", limit=1)
    assert hits[0][0]["id"] == 4

    client.create_collection("bare", schema=schema, consistency_level="Strong")
    client.insert("bare", [{"id": 1, "v": [1.0] * DIM, "w": [1.0] * DIM, "n": 1}])
    with pytest.raises(MilvusException) as info:
        client.load_collection("bare")
    assert info.value.code == 700
    own = mstack.client()  # Elanus's own face loads it: no index, exact search
    own.load_collection("bare")
    assert client.get_load_state("bare")["state"].name == "Loaded"
    found = own.search("bare", [[1.0] * DIM], anns_field="v", limit=1)
    assert found[0][0]["id"] == 1
