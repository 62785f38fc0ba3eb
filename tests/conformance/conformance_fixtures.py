"""Two servers with the same seeded collection: Milvus Lite (through pymilvus) and an
Elanus standalone (through the Elanus SDK), one of each per test module.

Imported by the test modules rather than kept in a conftest.py: other suites import the
top-level ``conftest`` by name, and a second conftest module would shadow it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_data import COLLECTION, FIELDS, VECTOR_FIELDS, rows

from elanus.client.client import Client

pymilvus = pytest.importorskip("pymilvus", reason="the dev extra pins pymilvus and milvus-lite")


def milvus_schema(client: Any) -> Any:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    for name, dtype, kwargs in FIELDS:
        kw = dict(kwargs)
        if "element_type" in kw:
            kw["element_type"] = pymilvus.DataType[kw["element_type"]]
        schema.add_field(name, pymilvus.DataType[dtype], **kw)
    return schema


def create_milvus_collection(client: Any) -> None:
    """The seeded collection, empty, through pymilvus: FLAT indexes, one per metric (the
    same code for Milvus Lite and for Elanus's Milvus port)."""
    index_params = client.prepare_index_params()
    for name, metric in VECTOR_FIELDS.items():
        index_params.add_index(name, index_type="FLAT", metric_type=metric)
    client.create_collection(
        COLLECTION,
        schema=milvus_schema(client),
        index_params=index_params,
        consistency_level="Strong",
    )


def elanus_schema() -> Any:
    from elanus.schema import Schema

    schema = Schema(enable_dynamic_field=True)
    for name, dtype, kwargs in FIELDS:
        schema.add_field(name, dtype, **kwargs)
    return schema


@pytest.fixture(scope="module", name="lite")
def lite_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Milvus Lite with the seeded collection: FLAT indexes, one per metric."""
    path = Path(tmp_path_factory.mktemp("milvus-lite")) / "lite.db"
    client = pymilvus.MilvusClient(str(path))
    create_milvus_collection(client)
    client.insert(COLLECTION, rows())
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module", name="ela")
def ela_fixture(server: Any) -> Iterator[Client]:
    """Elanus with the same collection: half the rows flushed into a sealed segment, half
    growing, so both kinds of segment answer every case."""
    client = Client(server.uri, timeout=60)
    client.create_collection(COLLECTION, schema=elanus_schema(), consistency_level="Strong")
    for name, metric in VECTOR_FIELDS.items():
        client.create_index(COLLECTION, name, index_type="FLAT", metric_type=metric)
    data = rows()
    half = len(data) // 2
    client.insert(COLLECTION, data[:half])
    client.flush(COLLECTION)
    client.insert(COLLECTION, data[half:])
    client.load_collection(COLLECTION)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module", name="face")
def face_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """pymilvus against an Elanus standalone's Milvus port, the collection made with the
    same pymilvus code as Milvus Lite's (half flushed into a sealed segment, half growing)."""
    from conftest import StandaloneProcess

    from elanus.channels.nats_server import free_port

    port = free_port()
    sp = StandaloneProcess(
        tmp_path_factory.mktemp("face") / "data",
        "--milvus-port",
        str(port),
        env={"ELANUS_MILVUS_PORT": str(port)},
    )
    try:
        sp.start().wait_ready()
        client = pymilvus.MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=60)
        create_milvus_collection(client)
        data = rows()
        half = len(data) // 2
        client.insert(COLLECTION, data[:half])
        client.flush(COLLECTION)
        client.insert(COLLECTION, data[half:])
        try:
            yield client
        finally:
            client.close()
    finally:
        sp.stop()
