"""pymilvus against the proxy's Milvus face: the connection, the frame of every RPC."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import own_stack
from milvus_stack import (  # noqa: F401  (fixtures)
    MilvusStack,
    milvus_client,
    milvus_stack,
    mstack_client_fixture,
    mstack_fixture,
)
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusStack]:
    """One stack for the tests that neither list every collection nor look at what this
    process maps; the others get their own."""
    with own_stack(tmp_path_factory.mktemp("face"), "milvus-face", kind=MilvusStack) as stack:
        stack.add_indexnode()  # as ``milvus_stack`` gives
        yield stack


@pytest.fixture
def shared_client(shared: MilvusStack) -> Iterator[MilvusClient]:
    yield from milvus_client(shared, timeout=30)


def test_connect_version_and_not_supported(shared_client: MilvusClient) -> None:
    client = shared_client
    assert client.get_server_version().startswith("v2.")
    with pytest.raises(MilvusException) as info:
        client.list_resource_groups()
    assert info.value.code == 10
    assert "ListResourceGroups" in info.value.message


def test_session_names_the_milvus_port(shared: Any) -> None:
    mstack = shared
    from elanus.channels.runtime.sessions import list_sessions

    sessions = mstack.call(list_sessions(mstack.bus))
    proxies = [x for x in sessions if x.role == "proxy"]
    assert proxies and proxies[0].meta["milvus_port"] == mstack.proxy.milvus_port


def test_port_zero_is_off(shared: Any) -> None:
    mstack = shared
    from elanus.milvus.face import MilvusProxy

    proxy = MilvusProxy(mstack.settings.replace(milvus_port=0), mstack.bus)
    mstack.call(proxy.start())
    try:
        assert proxy.milvus_port is None
    finally:
        mstack.call(proxy.stop())


def test_proxy_import_is_light() -> None:
    """What ``elanus run proxy`` imports before it serves (its start time, issue 22): not
    pymilvus (only with the Milvus port on, and then off the loop), DuckDB, the SDK or the
    client commands."""
    code = (
        "import sys, elanus.cli.main, elanus.cli.host, elanus.webui.face; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pymilvus', 'pandas', 'grpc', 'duckdb', 'lance') "
        "or m in ('elanus.client.client', 'elanus.cli.admin'));"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_collections_databases_partitions_aliases(client: MilvusClient) -> None:
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("title", DataType.VARCHAR, max_length=64, nullable=True)
    client.create_collection("books", schema=schema)
    assert client.has_collection("books")
    assert "books" in client.list_collections()
    desc = client.describe_collection("books")
    names = [f["name"] for f in desc["fields"]]
    assert names[:3] == ["id", "v", "title"] and desc["enable_dynamic_field"]
    client.create_partition("books", "p1")
    assert client.has_partition("books", "p1")
    assert set(client.list_partitions("books")) == {"_default", "p1"}
    client.create_alias("books", "novels")
    assert client.describe_alias("novels")["collection_name"] == "books"
    assert client.list_aliases("books")["aliases"] == ["novels"]
    client.drop_alias("novels")
    client.create_database("lib")
    assert "lib" in client.list_databases()
    assert client.describe_database("lib")["name"] == "lib"
    client.rename_collection("books", "tomes")
    assert client.list_collections() == ["tomes"]
    client.drop_collection("tomes")
    assert not client.has_collection("tomes")
    with pytest.raises(MilvusException) as info:
        client.describe_collection("nope")
    assert info.value.code == 100


def test_alter_properties_and_index(shared_client: MilvusClient) -> None:
    client = shared_client
    client.create_collection("alt", dimension=4)  # loaded: mmap.enabled waits for a release
    with pytest.raises(MilvusException, match="can not alter mmap properties if collection"):
        client.alter_collection_properties("alt", {"mmap.enabled": True})
    with pytest.raises(MilvusException, match="can not alter mmap properties if collection"):
        client.drop_collection_properties("alt", ["mmap.enabled"])
    client.alter_collection_properties("alt", {"collection.ttl.seconds": 60})  # loaded: fine
    client.release_collection("alt")
    client.alter_collection_properties("alt", {"mmap.enabled": True, "app.owner": "me"})
    props = client.describe_collection("alt")["properties"]
    assert {k: props[k] for k in ("mmap.enabled", "app.owner", "collection.ttl.seconds")} == {
        "mmap.enabled": "True",
        "app.owner": "me",
        "collection.ttl.seconds": "60",
    }
    client.drop_collection_properties("alt", ["mmap.enabled", "collection.ttl.seconds", "none"])
    props = client.describe_collection("alt")["properties"]
    assert "mmap.enabled" not in props and "collection.ttl.seconds" not in props
    with pytest.raises(MilvusException, match="field nope does not exist"):
        client.alter_collection_field("alt", "nope", {"mmap.enabled": True})
    with pytest.raises(MilvusException) as info:  # Milvus acts on it; Elanus would not
        client.alter_collection_properties("alt", {"collection.insertRate.max.mb": 5})
    assert "collection.insertRate.max.mb" in info.value.message
    assert "collection.insertRate.max.mb" not in client.describe_collection("alt")["properties"]
    with pytest.raises(MilvusException) as info:
        client.alter_collection_properties("nope", {"mmap.enabled": True})
    assert info.value.code == 100
    client.alter_index_properties("alt", "vector", {"mmap.enabled": True})
    with pytest.raises(MilvusException) as info:
        client.alter_index_properties("alt", "vector", {"ef": 8})
    assert info.value.code == 1100 and "ef is not configable index param" in info.value.message


def _mapped_files(suffix: str = "/index.faiss") -> set[str]:
    """Files this process maps (the stack's roles run in it), by the end of their name."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "/" in line}
    return {
        p.removesuffix(" (deleted)") for p in paths if p.removesuffix(" (deleted)").endswith(suffix)
    }


def test_mmap_loads_indexes_mapped_with_the_same_results(client: MilvusClient) -> None:
    """mmap.enabled at the collection and at the index: the same hits, the files mapped
    (IVF's lists through IO_FLAG_MMAP, HNSW's vectors through IO_FLAG_MMAP_IFC), the
    index's setting over the collection's, and no change while loaded."""
    import numpy as np

    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("ivf", DataType.FLOAT_VECTOR, dim=8)
    schema.add_field("hnsw", DataType.FLOAT_VECTOR, dim=8)
    schema.add_field("tag", DataType.VARCHAR, max_length=16)
    client.create_collection("mm", schema=schema)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((3000, 16)).astype("float32")
    rows = [{"id": i, "ivf": v[:8], "hnsw": v[8:], "tag": f"t{i}"} for i, v in enumerate(vectors)]
    client.insert("mm", rows)
    client.flush("mm")
    params = client.prepare_index_params()
    params.add_index("ivf", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 16})
    params.add_index("hnsw", index_type="HNSW", metric_type="L2", params={"M": 8})
    client.create_index("mm", params)
    deadline = time.monotonic() + 60
    while any(client.describe_index("mm", n)["state"] != "Finished" for n in ("ivf", "hnsw")):
        assert time.monotonic() < deadline, "the indexes were not built in 60 s"
        time.sleep(0.1)

    def hits() -> list[Any]:
        client.load_collection("mm")
        out = [
            [
                [(h["id"], h["distance"], h["entity"]["tag"]) for h in q]
                for q in client.search(
                    "mm",
                    vectors[:5, cols],
                    limit=10,
                    anns_field=field,
                    search_params=sp,
                    filter='tag != "t3"',
                    output_fields=["tag"],
                )
            ]
            for field, cols, sp in (
                ("ivf", slice(0, 8), {"params": {"nprobe": 4}}),
                ("hnsw", slice(8, 16), {"params": {"ef": 16}}),
            )
        ]
        return [out, _mapped_files()]

    before = _mapped_files()
    plain, mapped_plain = hits()
    assert mapped_plain == before and not _mapped_files(".arrow")
    client.release_collection("mm")
    client.alter_collection_properties("mm", {"mmap.enabled": True})
    mapped, files = hits()
    assert mapped == plain
    assert len(files - before) == 2  # one segment, two indexes
    assert len(_mapped_files(".arrow")) == 1  # its tag column (the key stays in memory)
    with pytest.raises(MilvusException, match="can't alter index on loaded collection"):
        client.alter_index_properties("mm", "ivf", {"mmap.enabled": False})
    client.release_collection("mm")
    client.alter_index_properties("mm", "ivf", {"mmap.enabled": False})
    again, files = hits()
    assert again == plain
    assert len(files - before) == 1  # HNSW's, from the collection's setting
    client.release_collection("mm")
    client.alter_collection_field("mm", "hnsw", {"mmap.enabled": False})  # field over collection
    client.drop_index_properties("mm", "ivf", ["mmap.enabled"])  # back to the collection's
    again, files = hits()
    assert again == plain
    assert len(files - before) == 1  # IVF's


def test_a_load_past_the_memory_budget_is_refused_until_mapped(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A query node with a small memory budget refuses the load, saying to enable mmap,
    instead of being killed; mapped, the index's vectors no longer count."""
    import numpy as np

    stacks = milvus_stack(request, tmp_path, query_memory_limit_bytes=200_000)
    stack = next(stacks)
    client = MilvusClient(uri=stack.milvus_uri, timeout=30)
    try:
        client.create_collection("big", dimension=16, auto_id=False)
        client.release_collection("big")
        vectors = np.random.default_rng(3).standard_normal((3000, 16)).astype("float32")
        client.insert("big", [{"id": i, "vector": v} for i, v in enumerate(vectors)])
        client.flush("big")
        client.drop_index("big", "vector")
        params = client.prepare_index_params()
        params.add_index("vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 16})
        client.create_index("big", params)
        deadline = time.monotonic() + 60
        while client.describe_index("big", "vector")["state"] != "Finished":
            assert time.monotonic() < deadline, "the index was not built in 60 s"
            time.sleep(0.1)
        with pytest.raises(MilvusException, match="set mmap.enabled") as info:
            client.load_collection("big")
        assert "LIMIT_EXCEEDED" in info.value.message
        assert client.get_load_state("big")["state"].name == "NotLoad"
        client.alter_collection_properties("big", {"mmap.enabled": True})
        client.load_collection("big")
        hits = client.search("big", vectors[:1], limit=1, search_params={"params": {"nprobe": 16}})
        assert hits[0][0]["id"] == 0
        own = stack.client()  # Elanus's load state counts what is mapped apart
        while (state := own.get_load_state("big"))["mapped_bytes"] == 0:
            assert time.monotonic() < deadline, f"no mapped bytes reported: {state}"
            time.sleep(0.1)
        assert state["mapped_bytes"] >= vectors.nbytes
    finally:
        client.close()
        stacks.close()
