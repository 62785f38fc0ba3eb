"""A query node that is stopping says so, and the coord's handoff to a node that is leaving
is no warning: a standalone flushed just before its Ctrl-C logged one when the handoff met
its query node between the stop of its delegators and its last answer (a clean stop must
log nothing, ``test_standalone``)."""

from __future__ import annotations

import logging

import pytest
from conftest import Stack, wait_for

from elanus.api.querynode import SyncDistribution
from elanus.errors import ElanusError, ErrorCode


def test_a_stopping_query_node_is_unavailable_and_a_handoff_to_it_is_no_warning(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    client = stack.client()
    client.create_collection("c", dimension=4)  # quick setup: indexed and loaded
    client.insert("c", [{"id": 1, "vector": [0.1] * 4}])
    node = stack.querynodes[0]
    (vchannel,) = node.delegators
    with pytest.raises(ElanusError) as unknown:
        stack.call(node.sync(SyncDistribution(vchannel="dml_0_9v0")))
    assert unknown.value.code is ErrorCode.COLLECTION_NOT_LOADED

    stack.call(node.stop())
    stack.querynodes.remove(node)
    with pytest.raises(ElanusError) as stopping:
        stack.call(node.sync(SyncDistribution(vchannel=vchannel)))
    assert stopping.value.code is ErrorCode.UNAVAILABLE
    assert "stopping" in str(stopping.value)

    caplog.set_level(logging.INFO, logger="elanus.meta.querycoord")
    client.flush("c")  # the coord hands the flushed segment to the node that left

    def handoffs() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "did not take segments" in r.getMessage()]

    wait_for(handoffs, timeout=15, what="the handoff to the stopped node")
    assert {r.levelno for r in handoffs()} == {logging.INFO}, [r.getMessage() for r in handoffs()]
