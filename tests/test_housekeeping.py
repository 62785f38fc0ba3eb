"""Housekeeping: a dead node's JetStream consumers are deleted (meta/housekeeping.py), and
orphan files older than ``orphan_grace_s`` are collected while referenced ones stay
(meta/gc.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Stack, wait_for
from nats.js.api import AckPolicy, ConsumerConfig
from stack_factory import stack_factory_fixture  # noqa: F401  (the stack_factory fixture)

from elanus.channels.consumer import datanode_durable, durable_owner, querynode_durable
from elanus.channels.dml import pchannel_of, stream_name
from elanus.client.client import Client
from elanus.meta.coord import Coordinator
from elanus.segments.querynode.node import QueryNode
from elanus.states import IndexTaskState

DIM = 8


@pytest.fixture
def stack_settings() -> dict[str, Any]:
    """``stack_factory``'s base: four pchannels, no background compaction, no GC delay."""
    return {"num_pchannels": 4, "gc_delay_s": 0, "compaction_interval_s": 0}


def consumers(stack: Stack) -> dict[str, str]:
    """Every consumer on the DML streams, as nats-py lists them: name -> stream."""
    assert stack.coord is not None
    found = {}
    for p in stack.coord.pchannels:
        stream = stream_name(p)
        for info in stack.call(stack.bus.js.consumers_info(stream)):
            found[info.name] = stream
    return found


def count(client: Client) -> int:
    rows = client.query("c", "id >= 0", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"]) if isinstance(rows, list) else int(rows.column(0)[0].as_py())


def crash(stack: Stack, node: QueryNode) -> None:
    """Stop a query node as a crash would look to the others: its session is left to
    expire (not purged), its consumers stay on the streams."""
    session, node._session = node._session, None
    assert session is not None
    stack.call(session._keepalive.stop())
    stack.call(node.stop())
    stack.querynodes.remove(node)


def test_consumer_names_say_whose_they_are() -> None:
    v = "dml_3_1001v0"
    assert durable_owner(querynode_durable("a_b", v), "dml_3") == ("querynode", "a_b", v)
    assert durable_owner(datanode_durable(v), "dml_3") == ("datanode", None, v)
    assert durable_owner(querynode_durable("a", v), "dml_1") is None  # another stream's
    assert durable_owner("test-durable", "dml_3") is None


def test_a_dead_query_nodes_consumers_are_deleted(stack_factory: Any) -> None:
    stack = stack_factory()
    second = stack.add_querynode()
    first = stack.querynodes[0]
    assert stack.coord is not None
    wait_for(lambda: len(stack.coord.sessions.of_role("querynode")) == 2, what="two query nodes")
    client = stack.client()
    client.create_collection("c", dimension=DIM, num_shards=2)
    rng = np.random.default_rng(0)
    client.insert("c", {"id": np.arange(100), "vector": rng.random((100, DIM), np.float32)})
    assert count(client) == 100
    (replica,) = stack.coord.query.loaded[next(iter(stack.coord.query.loaded))].replicas
    vchannels = sorted(replica.channels)
    names = consumers(stack)
    mine = {n for n in names if n.startswith(f"qn_{first.node_id}_")}
    theirs = {n for n in names if n.startswith(f"qn_{second.node_id}_")}
    assert mine and theirs, names  # one channel each

    crash(stack, first)
    started = time.monotonic()
    wait_for(lambda: not mine & set(consumers(stack)), timeout=30, what="the dead's consumers")
    assert time.monotonic() - started < 20
    took_over = {querynode_durable(second.node_id, v) for v in vchannels}
    # the coord deletes the dead node's consumers as it moves its channels: the live node's
    # consumer for a moved channel may come a moment after
    wait_for(lambda: took_over <= set(consumers(stack)), timeout=30, what="the take-over")
    left = set(consumers(stack))
    assert theirs <= left  # the live node keeps its own
    assert {datanode_durable(v) for v in vchannels} <= left
    assert {n.partition("/")[2] for n in stack.coord.housekeeping.deleted} == mine
    assert count(client) == 100


def add_consumer(stack: Stack, name: str, vchannel: str) -> None:
    config = ConsumerConfig(durable_name=name, ack_policy=AckPolicy.NONE)
    stack.call(stack.bus.js.add_consumer(stream_name(pchannel_of(vchannel)), config))


def test_consumers_of_nodes_gone_while_the_coord_was_away(stack_factory: Any) -> None:
    stack = stack_factory()
    assert stack.coord is not None
    live = stack.querynodes[0].node_id
    v = f"{stack.coord.pchannels[1]}_424242v0"  # no collection has it
    add_consumer(stack, querynode_durable("gone_node", v), v)
    add_consumer(stack, datanode_durable(v), v)
    add_consumer(stack, querynode_durable(live, v), v)
    add_consumer(stack, "someone-elses", v)

    stack.call(stack.coord.stop())
    stack.coord = Coordinator(stack.settings, stack.bus)
    stack.call(stack.coord.start())
    gone = {querynode_durable("gone_node", v), datanode_durable(v)}
    wait_for(lambda: not gone & set(consumers(stack)), timeout=30, what="the stale consumers")
    assert {querynode_durable(live, v), "someone-elses"} <= set(consumers(stack))


def make_old(path: Path, age_s: float) -> None:
    """Back-date ``path`` and everything under it."""
    past = time.time() - age_s
    for p in [path, *path.rglob("*")]:
        os.utime(p, (past, past))


def orphan(path: Path, age_s: float) -> Path:
    path.mkdir(parents=True)
    (path / "file").write_bytes(b"x")
    make_old(path, age_s)
    return path


def test_gc_removes_orphans_older_than_the_grace_only(stack_factory: Any) -> None:
    grace = 60.0
    stack = stack_factory(orphan_grace_s=grace)
    stack.add_indexnode()
    assert stack.coord is not None
    client = stack.client()
    client.create_collection("c", dimension=DIM)
    rng = np.random.default_rng(0)
    client.insert("c", {"id": np.arange(50), "vector": rng.random((50, DIM), np.float32)})
    client.flush("c", timeout=30)
    (seg,) = [s for s in client.get_segment_info("c") if s["state"] == "Flushed"]
    seg_dir = Path(seg["path"]).parent
    (task,) = stack.coord.index.tasks.values()
    wait_for(lambda: task.state is IndexTaskState.FINISHED, timeout=60, what="the index")
    stack.call(stack.coord.index.recycle())  # older versions of finished builds: its job
    storage = stack.settings.storage_path
    build = storage / "indexes" / str(task.build_id)
    make_old(seg_dir, 2 * grace)  # old, but referenced: they stay
    make_old(build, 2 * grace)

    old_segment = orphan(seg_dir.parent / "987654321", 2 * grace)  # a flush never reported
    new_segment = orphan(seg_dir.parent / "987654322", grace / 2)
    old_build = orphan(storage / "indexes" / "987654323" / "1" / "0" / "1", 0).parents[2]
    make_old(old_build, 2 * grace)  # a build no task has (its task forgotten)
    new_build = orphan(storage / "indexes" / "987654324" / "1", grace / 2).parent
    stale_version = orphan(build / str(task.version + 7), 2 * grace)  # an attempt given up
    removed = stack.call(stack.coord.gc.collect())

    assert {str(p) for p in (old_segment, old_build, stale_version)} <= set(removed)
    assert not old_segment.exists() and not old_build.exists() and not stale_version.exists()
    assert new_segment.exists() and new_build.exists()
    assert seg_dir.exists() and task.file_paths
    assert all(Path(f).exists() for f in task.file_paths)
    assert count(client) == 50
