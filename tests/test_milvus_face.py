"""pymilvus against the proxy's Milvus face: the connection, the frame of every RPC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path)


@pytest.fixture
def client(mstack: MilvusStack) -> Iterator[MilvusClient]:
    c = MilvusClient(uri=mstack.milvus_uri, timeout=30)
    try:
        yield c
    finally:
        c.close()


def test_connect_version_and_not_supported(client: MilvusClient) -> None:
    assert client.get_server_version().startswith("v2.")
    with pytest.raises(MilvusException) as info:
        client.list_resource_groups()
    assert info.value.code == 10
    assert "ListResourceGroups" in info.value.message


def test_port_zero_is_off(mstack: Any) -> None:
    from elanus.milvus.face import MilvusProxy

    proxy = MilvusProxy(mstack.settings.replace(milvus_port=0), mstack.bus)
    mstack.call(proxy.start())
    try:
        assert proxy.milvus_port is None
    finally:
        mstack.call(proxy.stop())
