"""A flushed segment's handoff that no delegator takes leaves no copy on the worker.

Seen under load: a collection released while a flush's handoff was loading a segment kept
that copy on the worker (loaded, then refused by the gone delegator); the next load reused
it as it was, without the deletes that came after, and a deleted key came back."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from conftest import Stack, wait_for
from test_read_plan import DIM, make_stack, rows  # noqa: F401 - make_stack is a fixture

from elanus.api.querynode import ReleaseOnNode


def test_a_handoff_no_delegator_takes_releases_the_workers_copy(
    make_stack: Callable[..., Stack],  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    stack = make_stack()
    c = stack.client()
    c.create_collection("c", dimension=DIM)  # loaded by quick setup
    c.insert("c", rows(0, 100))
    cid = c.describe_collection("c")["collection_id"]
    (qn,) = stack.querynodes
    # The query node drops the collection's delegators behind the coord's back, as a
    # release racing the handoff leaves them: the worker still takes the segment.
    stack.call(qn.release_collection(ReleaseOnNode(collection_id=cid)))
    with caplog.at_level(logging.WARNING, logger="elanus.meta.querycoord"):
        (segment,) = c.flush("c", timeout=30)
        wait_for(lambda: "did not take segment" in caplog.text, what="the refused handoff")
    assert segment not in qn.worker.segments
