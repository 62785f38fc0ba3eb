"""The delegator's one fan-out to its workers (``Delegator._ask_workers``): a query and a
count ask every worker holding the shard's sealed segments at once, and a failing worker
fails the read with its own error. Real engines; only a gate is put in front of them."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from conftest import Stack, both_transports, raises_code, wait_for

from elanus.errors import ErrorCode
from elanus.segments.querynode.node import QueryNode

DIM = 4
WORKERS = 3
STRONG = "Strong"


def _spread(stack: Stack) -> tuple[Any, dict[int, QueryNode]]:
    """A one-shard collection with one flushed segment on each of ``WORKERS`` query nodes
    (each handed off before the next is written: a handoff picks the least-loaded node)."""
    while len(stack.querynodes) < WORKERS:
        stack.add_querynode()
    client = stack.client()
    client.create_collection("f", dimension=DIM, num_shards=1)
    client.load_collection("f")
    (d,) = [d for qn in stack.querynodes for d in qn.delegators.values()]
    rng = np.random.default_rng(0)
    for i in range(WORKERS):
        ids = np.arange(i * 10, i * 10 + 10)
        client.insert("f", {"id": ids, "vector": rng.random((10, DIM), np.float32)})
        client.flush("f", timeout=30)
        wait_for(lambda n=i + 1: len(d.distribution.sealed) == n, what="handoff")
    by_node = {qn.node_id: qn for qn in stack.querynodes}
    holders = {sid: by_node[seg.node_id] for sid, seg in d.distribution.sealed.items()}
    assert len({qn.node_id for qn in holders.values()}) == WORKERS
    return client, holders


@both_transports
def test_a_query_and_a_count_ask_every_worker_at_once(stack: Stack) -> None:
    client, holders = _spread(stack)
    entered = threading.Barrier(WORKERS, timeout=20)
    """Every worker waits here until all have started: a fan-out that asked them one
    after the other would break the barrier (and the read) instead of passing it."""
    for qn in holders.values():
        worker = qn.worker
        plain_count, plain_query = worker.count, worker.query

        def gated_count(*args: Any, _plain: Any = plain_count) -> int:
            entered.wait()
            return int(_plain(*args))

        def gated_query(*args: Any, _plain: Any = plain_query) -> Any:
            entered.wait()
            return _plain(*args)

        worker.count = gated_count  # type: ignore[method-assign]
        worker.query = gated_query  # type: ignore[method-assign]

    (row,) = client.query("f", "", output_fields=["count(*)"], consistency_level=STRONG)
    assert row["count(*)"] == 10 * WORKERS
    rows = client.query("f", "id >= 0", output_fields=["id"], consistency_level=STRONG)
    assert sorted(r["id"] for r in rows) == list(range(10 * WORKERS))


@pytest.mark.parametrize("read", ["query", "count"])
def test_a_failing_worker_fails_the_fan_out_with_its_error(stack: Stack, read: str) -> None:
    client, holders = _spread(stack)
    sid, qn = sorted(holders.items())[1]
    qn.worker.release([sid])  # the delegator still routes to it: the worker refuses
    wait_for(lambda: sid not in qn.worker.segments, what="release")
    outputs, text = (["count(*)"], "") if read == "count" else (["id"], "id >= 0")

    def call() -> Any:
        return client.query("f", text, output_fields=outputs, consistency_level=STRONG)

    raises_code(ErrorCode.SEGMENT_NOT_FOUND, call, f"segments [{sid}]", "not loaded")
