"""A stack whose proxy also serves Milvus's protocol on a free port, for pymilvus tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import Stack

from elanus.channels.nats_server import free_port
from elanus.milvus.face import MilvusProxy

if TYPE_CHECKING:
    from pymilvus import MilvusClient


class MilvusStack(Stack):
    """``Stack`` with ``MilvusProxy`` proxies; ``milvus_uri`` is the first one's."""

    def add_proxy(self, own_bus: bool = False) -> MilvusProxy:
        proxy = MilvusProxy(self.settings.replace(milvus_port=free_port()), self.bus)
        self.call(proxy.start())
        self.proxies.append(proxy)
        return proxy

    @property
    def milvus_uri(self) -> str:
        proxy = self.proxy
        assert isinstance(proxy, MilvusProxy) and proxy.milvus_port
        return f"http://127.0.0.1:{proxy.milvus_port}"


def milvus_stack(request: pytest.FixtureRequest, tmp_path: Path, **settings: Any) -> Iterator[Any]:
    nats = request.getfixturevalue("nats_server")
    loop = request.getfixturevalue("loop_thread")
    s = MilvusStack(loop, nats, tmp_path / "data", **settings)
    try:
        s.start()
        s.add_indexnode()
        yield s
    finally:
        s.close()


def milvus_client(stack: MilvusStack, timeout: float = 60) -> Iterator[MilvusClient]:
    """A pymilvus ``MilvusClient`` on the stack's Milvus port, closed after the test."""
    from pymilvus import MilvusClient

    c = MilvusClient(uri=stack.milvus_uri, timeout=timeout)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(name="mstack")
def mstack_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    """A test's own ``milvus_stack``; import it into a test module to use it."""
    yield from milvus_stack(request, tmp_path)


@pytest.fixture(name="client")
def mstack_client_fixture(mstack: MilvusStack) -> Iterator[MilvusClient]:
    """A pymilvus client on the test's ``mstack`` (30 s calls)."""
    yield from milvus_client(mstack, timeout=30)
