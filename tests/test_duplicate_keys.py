"""A primary key inserted twice (``insert``, not ``upsert``): a query answers one row per
key, the newest insert of those its filter passes, as Milvus's query reduce does
(milvus-io/milvus#33883), in whichever segments the copies lie and through limits.

Milvus Lite 3.2 goes further than Milvus: its newer insert hides the older row from
every read (a filter on the old value finds nothing) and ``count(*)`` counts keys. Milvus
keeps both rows (its docs: "it will create a new, separate entity with the same primary
key"): ``count(*)`` counts both (milvus-io/milvus#32117) and a filter that only the old
row passes finds it. Elanus follows Milvus there, and Lite where the two agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lite_oracle import lite_answers
from milvus_stack import MilvusStack, milvus_client, milvus_stack
from pymilvus import DataType, MilvusClient

FIELDS: list[dict[str, Any]] = [
    {"name": "pk", "type": "INT64", "is_primary": True},
    {"name": "v", "type": "FLOAT_VECTOR", "dim": 2},
    {"name": "tag", "type": "VARCHAR", "max_length": 16},
]
FIRST = [{"pk": i, "v": [float(i), 1.0], "tag": f"old{i}"} for i in range(6)]
AGAIN = [{"pk": i, "v": [float(i), 2.0], "tag": f"new{i}"} for i in (0, 2, 5)]
LATER = [{"pk": 2, "v": [2.0, 3.0], "tag": "newest2"}, {"pk": 9, "v": [9.0, 1.0], "tag": "x"}]


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path)


@pytest.fixture
def client(mstack: MilvusStack) -> Iterator[MilvusClient]:
    yield from milvus_client(mstack)


def _collection(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("tag", DataType.VARCHAR, max_length=16)
    index = client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")


READS: list[tuple[str, Any]] = [
    ("query", ["tag"]),
    ("page", (["tag"], 2)),
    ("page", (["tag"], 4)),
    ("filter", "tag like 'new%'"),
]


def test_query_answers_each_key_once_newest_first_as_milvus_lite(
    client: MilvusClient, tmp_path: Path
) -> None:
    """The copies lie in a sealed segment, a growing one, and the same growing one."""
    _collection(client, "dups")
    client.insert("dups", FIRST)
    client.flush("dups")  # the old rows sealed
    client.insert("dups", AGAIN)
    client.insert("dups", LATER)  # key 2 twice in the growing segment

    def ours() -> list[Any]:
        out: list[Any] = []
        for kind, arg in READS:
            if kind == "query":
                rows = client.query("dups", filter="pk >= 0", output_fields=arg)
                out.append(sorted(rows, key=lambda r: r["pk"]))
            elif kind == "page":
                rows = client.query("dups", filter="pk >= 0", output_fields=arg[0], limit=arg[1])
                out.append([dict(r) for r in rows])
            else:
                out.append(sorted(r["pk"] for r in client.query("dups", filter=arg)))
        return out

    lite = lite_answers(tmp_path, FIELDS, FIRST, [("insert", AGAIN), ("insert", LATER), *READS])[2:]
    got = ours()
    assert got == lite, (got, lite)
    assert [r["tag"] for r in got[0]] == ["new0", "old1", "newest2", "old3", "old4", "new5", "x"]
    assert got[1] == [{"pk": 0, "tag": "new0"}, {"pk": 1, "tag": "old1"}]
    got_ids = client.get("dups", ids=[2, 5], output_fields=["tag"])
    assert [r["tag"] for r in got_ids] == ["newest2", "new5"]
    # Where Milvus and Lite part (module docstring): Milvus counts rows, and a filter
    # only an old row passes finds that row.
    assert client.query("dups", filter="", output_fields=["count(*)"])[0]["count(*)"] == 11
    assert [
        r["tag"] for r in client.query("dups", filter="tag == 'old2'", output_fields=["tag"])
    ] == ["old2"]
    # Sealed again (the growing copies flushed), the answers stay.
    client.flush("dups")
    assert ours() == got


def test_iterator_and_offset_pages_see_each_key_once(client: MilvusClient) -> None:
    _collection(client, "pages")
    client.insert("pages", FIRST)
    client.flush("pages")
    client.insert("pages", AGAIN)
    keys = []
    it = client.query_iterator("pages", batch_size=2, filter="pk >= 0", output_fields=["tag"])
    while page := it.next():
        keys += [(r["pk"], r["tag"]) for r in page]
    it.close()
    assert keys == [(0, "new0"), (1, "old1"), (2, "new2"), (3, "old3"), (4, "old4"), (5, "new5")]
    rows = client.query("pages", filter="pk >= 0", output_fields=["tag"], offset=2, limit=3)
    assert [r["tag"] for r in rows] == ["new2", "old3", "old4"]
