"""``collection.ttl.seconds`` (Milvus's collection TTL): entities inserted longer ago than
the TTL are invisible to search, query, get and count, in sealed and growing segments, on
the Milvus port and the SDK (and SQL); a read at an older timestamp sees what was live
then; altering or dropping the property takes effect at the next read; compaction removes
expired rows from disk. One stack for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import lance
import numpy as np
import pytest
from conftest import own_stack, wait_for
from milvus_stack import MilvusStack
from pymilvus import MilvusClient

from elanus.client.client import Client

DIM = 4
TTL = "collection.ttl.seconds"
RETENTION_S = 10.0
"""Time travel reaches this far back; compaction removes rows expired that long ago."""
STRONG = "Strong"


@pytest.fixture(scope="module")
def mstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with own_stack(
        tmp_path_factory.mktemp("ttl"),
        "ttl-tests",
        kind=MilvusStack,
        compaction_interval_s=0,
        gc_delay_s=0,
        retention_s=RETENTION_S,
    ) as stack:
        stack.add_indexnode()
        yield stack


def rows(start: int, n: int) -> list[dict[str, Any]]:
    vectors = np.random.default_rng(start).random((n, DIM), dtype=np.float32)
    return [{"id": start + i, "vector": v.tolist()} for i, v in enumerate(vectors)]


def ids_of(hits: Any) -> list[int]:
    return sorted(int(h["id"]) for h in hits)


def count(mc: MilvusClient) -> int:
    return int(mc.query("t", "", output_fields=["count(*)"])[0]["count(*)"])


def stored_rows(sdk: Client, name: str) -> list[int]:
    flushed = [s for s in sdk.get_segment_info(name) if s["state"] == "Flushed"]
    ids: list[int] = []
    for s in flushed:
        ids += lance.dataset(s["path"]).to_table(columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def test_expired_entities_are_invisible_then_compacted_away(mstack: Any) -> None:
    mc = MilvusClient(uri=mstack.milvus_uri, timeout=30)
    sdk = mstack.client()
    # "k", for compaction: a TTL given at create time, rows that expire while "t" is read
    mc.create_collection("k", dimension=DIM, properties={TTL: 1})
    assert mc.describe_collection("k")["properties"][TTL] == "1"
    mc.insert("k", rows(0, 10))
    mc.flush("k")
    k_at = time.monotonic()

    mc.create_collection("t", dimension=DIM, consistency_level=STRONG)
    mc.insert("t", rows(0, 10))
    mc.flush("t")
    wait_for(lambda: sdk.list_loaded_segments("t"), what="the flushed rows served sealed")
    ts_b = sdk.insert("t", rows(10, 10))["ts"]  # growing
    b_at = time.monotonic()
    mc.alter_collection_properties("t", {TTL: 4})  # while loaded
    assert mc.describe_collection("t")["properties"][TTL] == "4"
    time.sleep(max(0.0, b_at + 4.3 - time.monotonic()))
    mc.insert("t", rows(20, 5))
    fresh = list(range(20, 25))

    # sealed (0-9) and growing (10-19) rows older than the TTL are gone from every read,
    # but a read at an older timestamp sees what was live then
    assert count(mc) == 5
    assert ids_of(sdk.query("t", "id >= 10", ["id"], as_of=ts_b)) == list(range(10, 20))
    assert ids_of(mc.query("t", "id >= 0", output_fields=["id"])) == fresh
    assert ids_of(mc.get("t", ids=[0, 10, 20])) == [20]
    (hits,) = mc.search("t", [[0.5] * DIM], limit=10, output_fields=["id"])
    assert sorted(int(h["id"]) for h in hits) == fresh
    assert ids_of(sdk.query("t", "id >= 0", ["id"], consistency_level=STRONG)) == fresh
    (hits,) = sdk.search("t", [[0.5] * DIM], limit=10, consistency_level=STRONG)
    assert sorted(int(h["id"]) for h in hits) == fresh
    table = sdk.sql("SELECT count(*) AS n FROM t", consistency_level=STRONG)
    assert table.column("n").to_pylist() == [5]

    # a longer TTL (SDK) brings them back; dropping it (Milvus port) ends it
    sdk.alter_collection_properties("t", {TTL: 3600})
    assert count(mc) == 25
    mc.drop_collection_properties("t", [TTL])
    assert TTL not in mc.describe_collection("t")["properties"]
    assert count(mc) == 25

    # compaction removes the rows expired before the time-travel window, and only those
    time.sleep(max(0.0, k_at + RETENTION_S + 1.5 - time.monotonic()))
    mc.insert("k", rows(30, 5))
    mc.flush("k")
    assert stored_rows(sdk, "k") == list(range(10)) + list(range(30, 35))
    job = sdk.compact("k")
    wait_for(lambda: sdk.get_compaction_state(job) == "Completed", what="compaction")
    assert stored_rows(sdk, "k") == list(range(30, 35))
    mc.close()
