"""Function-scoped stacks: a test starts as many as it needs, each with its own Settings
overrides and its own data dir, on the session's NATS server and loop thread; teardown
closes them all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, wait_for

from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread


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
