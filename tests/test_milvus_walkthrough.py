"""pymilvus's quick start, as Milvus's docs run it, against the proxy's Milvus face."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from milvus_stack import MilvusStack, milvus_client, milvus_stack
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

DIM = 8


@pytest.fixture
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusClient]:
    for s in milvus_stack(request, tmp_path):
        assert isinstance(s, MilvusStack)
        yield from milvus_client(s)


def _rows(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    vecs = rng.random((n, DIM), dtype=np.float32)
    return [
        {"id": i, "vector": vecs[i].tolist(), "color": ["red", "blue"][i % 2], "n": i * 10}
        for i in range(n)
    ]


def test_pymilvus_reads_its_own_writes_at_the_default_level(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Ticks every 2 s and Milvus's 5 s Bounded staleness: a default-level read would run
    up to 2 s behind. pymilvus sends its newest write to the collection with every read at
    the default level, and the Milvus face waits for it (a Bounded read may be fresher than
    its bound; Milvus itself heeds it only for a Session default), so a script sees what
    it just wrote."""
    slow = {"timetick_interval_ms": 2000, "session_ttl_s": 10, "bounded_staleness_ms": 5000}
    for s in milvus_stack(request, tmp_path, **slow):
        c = MilvusClient(uri=s.milvus_uri, timeout=60)
        try:
            c.create_collection("own", dimension=DIM)
            for round_ in range(2):
                rows = [{**r, "id": r["id"] + 10 * round_} for r in _rows(10, seed=round_)]
                c.insert("own", rows)
                assert c.query("own", output_fields=["count(*)"])[0]["count(*)"] == 10 * (
                    round_ + 1
                )
                assert (
                    c.search("own", data=[rows[4]["vector"]], limit=1)[0][0]["id"] == rows[4]["id"]
                )
        finally:
            c.close()


def test_quick_setup_insert_search_query(client: MilvusClient) -> None:
    client.create_collection("quick", dimension=DIM)  # Milvus's default level: Bounded
    assert client.get_load_state("quick")["state"].name == "Loaded"
    rows = _rows(20)
    res = client.insert("quick", rows)
    assert res["insert_count"] == 20 and list(res["ids"]) == list(range(20))
    hits = client.search("quick", data=[rows[3]["vector"]], limit=3, output_fields=["color", "n"])[
        0
    ]
    assert hits[0]["id"] == 3
    assert hits[0]["entity"]["color"] == "blue" and hits[0]["entity"]["n"] == 30
    filtered = client.search(
        "quick", data=[rows[3]["vector"]], limit=5, filter='color == "red"', output_fields=["n"]
    )[0]
    assert filtered and all(h["id"] % 2 == 0 for h in filtered)
    got = client.query("quick", filter="id in [1, 2]", output_fields=["color", "vector"])
    assert sorted(r["id"] for r in got) == [1, 2]
    assert np.allclose(sorted(got, key=lambda r: r["id"])[0]["vector"], rows[1]["vector"])
    assert client.get("quick", ids=[5])[0]["n"] == 50
    assert client.query("quick", output_fields=["count(*)"])[0]["count(*)"] == 20
    templated = client.query(
        "quick", filter="n > {low}", filter_params={"low": 150}, output_fields=["n"]
    )
    assert sorted(r["n"] for r in templated) == [160, 170, 180, 190]
    client.upsert("quick", [{**rows[0], "n": -1}])
    assert client.get("quick", ids=[0])[0]["n"] == -1
    assert client.delete("quick", ids=[0, 1])["delete_count"] == 2
    client.delete("quick", filter="id >= 18")
    assert client.query("quick", output_fields=["count(*)"])[0]["count(*)"] == 16
    client.drop_collection("quick")
    assert not client.has_collection("quick")


def test_schema_index_load_flush(client: MilvusClient) -> None:
    schema = client.create_schema(auto_id=True, enable_dynamic_field=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("emb", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("score", DataType.DOUBLE, nullable=True)
    schema.add_field("tags", DataType.ARRAY, element_type=DataType.INT32, max_capacity=4)
    client.create_collection("docs", schema=schema, consistency_level="Strong")
    vecs = np.random.default_rng(1).random((30, DIM), dtype=np.float32)
    data = [
        {"emb": vecs[i], "score": None if i % 3 == 0 else i / 2, "tags": [i, i + 1]}
        for i in range(30)
    ]
    ids = client.insert("docs", data)["ids"]
    assert len(ids) == 30
    client.flush("docs")
    assert client.get_collection_stats("docs")["row_count"] == 30
    params = client.prepare_index_params()
    params.add_index("emb", index_type="HNSW", metric_type="L2", params={"M": 8})
    client.create_index("docs", params)
    desc = client.describe_index("docs", "emb")
    assert desc["index_type"] == "HNSW" and desc["metric_type"] == "L2"
    assert "emb" in client.list_indexes("docs")
    client.load_collection("docs")
    assert client.get_load_state("docs")["state"].name == "Loaded"
    hits = client.search(
        "docs", data=[vecs[4]], limit=2, output_fields=["score", "tags"],
        search_params={"metric_type": "L2", "params": {"ef": 32}},
    )[0]  # fmt: skip
    assert hits[0]["pk"] == ids[4] and hits[0]["entity"]["tags"] == [4, 5]
    nulls = client.query("docs", filter="score is null", output_fields=["score"])
    assert len(nulls) == 10 and all(r["score"] is None for r in nulls)
    segments = client.list_persistent_segments("docs")
    assert sum(s.num_rows for s in segments) == 30
    client.release_collection("docs")
    assert client.get_load_state("docs")["state"].name == "NotLoad"
    with pytest.raises(MilvusException) as info:
        client.search("docs", data=[vecs[0]], limit=1)
    assert info.value.code == 101
    client.drop_index("docs", "emb")
    assert not client.describe_index("docs", "emb")  # pymilvus: code 700 reads as "none"
    assert client.list_indexes("docs") == []
