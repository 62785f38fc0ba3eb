"""Stack fixtures a test module imports. ``stack_factory`` starts stacks in the test, with
settings of its own over the module's ``stack_settings`` (conftest's fixture, which a module
overrides), each closed after the test; ``on_storage`` is one on each storage root the suite
covers; ``shared_stack`` makes a module's ``shared`` fixture, one stack for the module, and
``client`` is a client of it; ``stack_fixture`` makes a module's ``make_stack``, stacks with
a data dir each and the module's own defaults."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, own_stack, wait_for

from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client


@pytest.fixture(name="stack_factory")
def stack_factory_fixture(
    nats_server: EmbeddedNats,
    loop_thread: LoopThread,
    tmp_path: Path,
    stack_settings: dict[str, Any],
) -> Iterator[Callable[..., Stack]]:
    """``make(**settings)``: a started stack on the test's data dir, ``settings`` over
    ``stack_settings``."""
    stacks: list[Stack] = []

    def make(**settings: Any) -> Stack:
        stacks.append(
            Stack(loop_thread, nats_server, tmp_path / "data", **stack_settings | settings)
        )
        return stacks[-1].start()

    try:
        yield make
    finally:
        for s in stacks:
            s.close()


@pytest.fixture(name="on_storage")
def on_storage_fixture(
    stack_factory: Callable[..., Stack], storage_settings: dict[str, Any]
) -> Stack:
    """A stack on a local storage and on an S3 one (a bucket prefix on ``moto_server``),
    for the tests of what lands on the storage itself (uploads, staged writes)."""
    return stack_factory(**storage_settings)


def shared_stack(name: str, fixture: str = "shared", **settings: Any) -> Any:
    """A module's ``shared`` fixture (or one named ``fixture``; assign it to that name): one
    stack (``own_stack``, loop thread ``<name>-tests``) with ``settings``, for every test of
    the module."""

    @pytest.fixture(scope="module", name=fixture)
    def shared_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
        with own_stack(tmp_path_factory.mktemp(name), f"{name}-tests", **settings) as stack:
            yield stack

    return shared_fixture


@pytest.fixture(scope="module", name="client")
def shared_client_fixture(shared: Stack) -> Client:
    """A client of the module's ``shared`` stack (a module-scoped fixture it defines)."""
    return shared.client()


def wait_querynodes(stack: Stack, n: int = 1) -> None:
    """The coord learns of query nodes through their sessions, a moment after they start."""
    assert stack.coord is not None
    wait_for(
        lambda: len(stack.coord.sessions.of_role("querynode")) >= n,  # type: ignore[union-attr]
        what=f"{n} query node session(s)",
    )


def stack_fixture(*, serves_reads: bool = False, **defaults: Any) -> object:
    """A ``make_stack`` fixture for a test module: ``make_stack(**settings)`` is a started
    Stack with ``settings`` over the module's ``defaults``, in a data dir of its own; with
    ``serves_reads`` it returns once the coord knows a query node. Closed last first."""

    @pytest.fixture
    def make_stack(
        nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path
    ) -> Iterator[Callable[..., Stack]]:
        stacks: list[Stack] = []

        def make(**settings: Any) -> Stack:
            data_dir = tmp_path / f"data{len(stacks)}"
            s = Stack(loop_thread, nats_server, data_dir, **{**defaults, **settings})
            stacks.append(s)
            s.start()
            if serves_reads:
                wait_querynodes(s)
            return s

        try:
            yield make
        finally:
            for s in reversed(stacks):
                s.close()

    return make_stack
