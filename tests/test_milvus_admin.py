"""Milvus's admin and state RPCs through pymilvus (issue 36): index state and progress,
the proxy's component state and system metrics, flush-all and its state, compaction
plans, truncate. One standalone serves the module; each answer is Milvus's documented
shape, bad input Milvus's code. Milvus Lite 3.2 serves only TruncateCollection of these
(it empties the collection and answers 100 for an unknown one, as here); the others it
answers gRPC UNIMPLEMENTED, so their shapes follow Milvus's proxy and pymilvus."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import StandaloneProcess
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import common_pb2, feder_pb2, milvus_pb2

from elanus.channels.nats_server import free_port
from elanus.tsutil import compose

DIM = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    port = free_port()
    proc = StandaloneProcess(tmp_path_factory.mktemp("admin") / "data", "--milvus-port", str(port))
    proc.env = {"ELANUS_MILVUS_PORT": str(port)}
    try:
        proc.start().wait_ready()
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def uri(server: StandaloneProcess) -> str:
    return f"http://127.0.0.1:{server.env['ELANUS_MILVUS_PORT']}"


@pytest.fixture(scope="module")
def client(uri: str) -> Iterator[MilvusClient]:
    c = MilvusClient(uri=uri, timeout=30)
    try:
        yield c
    finally:
        c.close()


def _stub(client: MilvusClient) -> Any:
    return client._get_connection()._stub


def _wait(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.2)


def _collection(client: MilvusClient, name: str, batches: int, **kw: Any) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("n", DataType.INT64)
    client.create_collection(name, schema=schema, consistency_level="Strong", **kw)
    for b in range(batches):
        rows = [{"id": b * 10 + i, "v": [float(i)] * DIM, "n": i} for i in range(10)]
        client.insert(name, rows, **kw)
        client.flush(name, **kw)


def _fails(code: int, call: Callable[[], Any], *words: str) -> None:
    with pytest.raises(MilvusException) as info:
        call()
    assert info.value.code == code, info.value
    for w in words:
        assert w in str(info.value), info.value


def _status(reply: Any, code: int, *words: str) -> None:
    assert reply.status.code == code, reply.status
    for w in words:
        assert w in reply.status.reason, reply.status.reason


def test_index_state_progress_statistics_and_indexed_segments(client: MilvusClient) -> None:
    _collection(client, "idx", batches=2)
    params = client.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2", index_name="v_idx")
    client.create_index("idx", params)
    stub = _stub(client)
    ask = milvus_pb2.GetIndexStateRequest(collection_name="idx")
    _wait("the build", lambda: stub.GetIndexState(ask).state == common_pb2.Finished)

    progress = stub.GetIndexBuildProgress(
        milvus_pb2.GetIndexBuildProgressRequest(collection_name="idx", index_name="v_idx")
    )
    assert (progress.status.code, progress.indexed_rows, progress.total_rows) == (0, 20, 20)
    stats = stub.GetIndexStatistics(milvus_pb2.GetIndexStatisticsRequest(collection_name="idx"))
    [d] = stats.index_descriptions
    assert (d.index_name, d.field_name, d.indexed_rows, d.state) == (
        "v_idx",
        "v",
        20,
        common_pb2.Finished,
    )
    flushed = {s.segment_id for s in client.list_persistent_segments("idx")}
    assert len(flushed) == 2
    listed = stub.ListIndexedSegment(feder_pb2.ListIndexedSegmentRequest(collection_name="idx"))
    assert set(listed.segmentIDs) == flushed

    # bad input: Milvus's codes
    unknown = milvus_pb2.GetIndexStateRequest(collection_name="nope")
    _status(stub.GetIndexState(unknown), 100)
    named = milvus_pb2.GetIndexStateRequest(collection_name="idx", index_name="other")
    _status(stub.GetIndexState(named), 700)
    params = client.prepare_index_params()
    params.add_index("n", index_type="STL_SORT", index_name="n_idx")
    client.create_index("idx", params)
    _status(
        stub.GetIndexBuildProgress(milvus_pb2.GetIndexBuildProgressRequest(collection_name="idx")),
        702,
        "give index_name",
    )
    by_field = milvus_pb2.GetIndexStateRequest(collection_name="idx", field_name="v")
    assert stub.GetIndexState(by_field).status.code == 0
    both = stub.GetIndexStatistics(milvus_pb2.GetIndexStatisticsRequest(collection_name="idx"))
    assert {d.index_name for d in both.index_descriptions} == {"v_idx", "n_idx"}
    _collection(client, "bare", batches=0)
    _status(
        stub.GetIndexStatistics(milvus_pb2.GetIndexStatisticsRequest(collection_name="bare")), 700
    )


def test_component_states_and_system_info(client: MilvusClient) -> None:
    stub = _stub(client)
    states = stub.GetComponentStates(milvus_pb2.GetComponentStatesRequest())
    assert states.status.code == 0
    assert (states.state.role, states.state.state_code) == ("proxy", common_pb2.Healthy)
    assert states.state.nodeID > 0

    ask = milvus_pb2.GetMetricsRequest(request=json.dumps({"metric_type": "system_info"}))
    reply = stub.GetMetrics(ask)
    assert reply.status.code == 0 and reply.component_name.startswith("proxy")
    nodes = json.loads(reply.response)["nodes_info"]
    types = {n["infos"]["type"] for n in nodes}
    assert {"proxy", "mixcoord", "datanode", "querynode"} <= types, types
    first = nodes[0]
    assert first["infos"]["name"] == reply.component_name and first["identifier"] == 1
    coord = next(n for n in nodes if n["infos"]["type"] == "mixcoord")
    assert {
        "connected_identifier": coord["identifier"],
        "type": "forward",
        "target_type": "mixcoord",
    } in first["connected"]
    managed = {e["target_type"] for e in coord["connected"]}
    assert {"datanode", "querynode"} <= managed
    for n in nodes:
        infos = n["infos"]
        assert infos["has_error"] is False and infos["id"] > 0
        assert infos["name"] == f"{infos['type']}{infos['id']}"

    other = milvus_pb2.GetMetricsRequest(request=json.dumps({"metric_type": "system_metrics"}))
    _status(stub.GetMetrics(other), 1200, "system_metrics")
    _status(stub.GetMetrics(milvus_pb2.GetMetricsRequest(request="{oops")), 1100, "JSON")
    extra = json.dumps({"metric_type": "system_info", "node": 3})
    _status(stub.GetMetrics(milvus_pb2.GetMetricsRequest(request=extra)), 1100, "'node'")


def _row_count(client: MilvusClient, name: str, **kw: Any) -> int:
    return int(client.get_collection_stats(name, **kw)["row_count"])


def test_flush_all_flushes_every_database(client: MilvusClient, uri: str) -> None:
    client.create_database("other")
    other = MilvusClient(uri=uri, db_name="other", timeout=30)
    try:
        for c, name in ((client, "fa"), (other, "fb")):
            _collection(c, name, batches=0)
            c.insert(name, [{"id": i, "v": [0.5] * DIM, "n": i} for i in range(7)])
            assert _row_count(c, name) == 0  # growing, not flushed

        stub = _stub(client)
        done = stub.FlushAll(milvus_pb2.FlushAllRequest())
        assert done.status.code == 0 and done.flush_all_ts > 0
        dbs = {
            r.db_name: {c.collection_name for c in r.collection_results} for r in done.flush_results
        }
        assert "fa" in dbs["default"] and dbs["other"] == {"fb"}
        state = milvus_pb2.GetFlushAllStateRequest(flush_all_ts=done.flush_all_ts)
        _wait("flush all", lambda: stub.GetFlushAllState(state).flushed)
        states = {
            s.db_name: dict(s.collection_flush_states)
            for s in stub.GetFlushAllState(state).flush_states
        }
        assert states["other"] == {"fb": True} and states["default"]["fa"] is True
        assert _row_count(client, "fa") == 7 and _row_count(other, "fb") == 7

        # one database, by pymilvus: nothing left to write, so done at the first poll
        other.insert("fb", [{"id": 100, "v": [0.5] * DIM, "n": 0}])
        one = stub.FlushAll(milvus_pb2.FlushAllRequest(db_name="other"))
        assert [r.db_name for r in one.flush_results] == ["other"]
        scoped = milvus_pb2.GetFlushAllStateRequest(flush_all_ts=one.flush_all_ts, db_name="other")
        _wait("flush of other", lambda: stub.GetFlushAllState(scoped).flushed)
        assert _row_count(other, "fb") == 8
        other.flush_all(timeout=30)
        # pymilvus 3.0.2's MilvusClient.get_flush_all_state needs flush_all_ts by keyword
        assert other.get_flush_all_state(flush_all_ts=one.flush_all_ts) is True

        # Milvus's datacoord answers a timestamp by its channel checkpoints: one no
        # checkpoint reached (here 2.5 s ahead: the three asks below take milliseconds) is
        # not flushed, until the channels pass it
        ahead = compose(int(time.time() * 1000) + 2500)
        future = milvus_pb2.GetFlushAllStateRequest(flush_all_ts=ahead, db_name="other")
        early = stub.GetFlushAllState(future)
        assert early.status.code == 0 and early.flushed is False
        assert dict(early.flush_states[0].collection_flush_states) == {"fb": False}
        assert other.get_flush_all_state(flush_all_ts=ahead) is False
        _wait(
            "the channels passing the future timestamp",
            lambda: stub.GetFlushAllState(future).flushed,
        )

        _status(stub.GetFlushAllState(milvus_pb2.GetFlushAllStateRequest()), 1100, "flush_all_ts")
        refused = milvus_pb2.GetFlushAllStateRequest(flush_all_ts=1)
        refused.flush_all_tss["ch"] = 1
        _status(stub.GetFlushAllState(refused), 1100, "flush_all_tss")
        unknown = milvus_pb2.FlushAllRequest(
            flush_targets=[milvus_pb2.FlushAllTarget(collection_names=["nope"])]
        )
        _status(stub.FlushAll(unknown), 100)
    finally:
        other.close()


def test_compaction_plans(client: MilvusClient) -> None:
    _collection(client, "comp", batches=2)
    listed = client.list_persistent_segments("comp")
    sources = {s.segment_id for s in listed}
    assert len(sources) == 2
    # as Milvus 2.6 reports a flushed segment: L1, sorted (what VectorDBBench waits for)
    assert {(s.level, s.is_sorted, tuple(s.compaction_from)) for s in listed} == {
        (common_pb2.SegmentLevel.Value("L1"), True, ())
    }
    job = client.compact("comp")
    plans = client.get_compaction_plans(job)
    [plan] = plans.plans
    assert set(plan.sources) == sources and plan.target not in sources
    _wait("the compaction", lambda: client.get_compaction_state(job) == "Completed")
    done = client.get_compaction_plans(job)
    assert done.state == common_pb2.Completed
    assert [(set(p.sources), p.target) for p in done.plans] == [(sources, plan.target)]
    [target] = client.list_persistent_segments("comp")
    assert target.segment_id == plan.target and target.is_sorted
    assert target.level == common_pb2.SegmentLevel.Value("L1")
    assert set(target.compaction_from) == sources and target.insert_channel
    listed = client.list_compaction_tasks("comp")
    assert [(set(p.sources), p.target) for p in listed.plans] == [(sources, plan.target)]
    index = client.prepare_index_params()  # Milvus loads only what an index covers
    index.add_index("v", index_type="FLAT", metric_type="L2")
    client.create_index("comp", index)
    _fails(101, lambda: client.refresh_load("comp"), "not loaded")
    client.load_collection("comp")
    client.refresh_load("comp")  # VectorDBBench's last optimize step: nothing to pull
    # VectorDBBench's force merge: every flushed segment is in a plan, one alone too
    forced = client.compact("comp", target_size=((1 << 63) - 1) >> 20)
    _wait("the force merge", lambda: client.get_compaction_state(forced) == "Completed")
    [merged] = client.get_compaction_plans(forced).plans
    assert list(merged.sources) == [plan.target]
    [after] = client.list_persistent_segments("comp")
    assert after.segment_id == merged.target and after.num_rows == 20 and after.is_sorted

    _fails(1100, lambda: client.get_compaction_plans(123456789), "123456789")
    stub = _stub(client)
    by_id = milvus_pb2.GetCompactionPlansRequest(collection_id=5)
    _status(stub.GetCompactionStateWithPlans(by_id), 1100, "collection_id")


def _count(client: MilvusClient, name: str) -> int:
    rows = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def _ids(client: MilvusClient, name: str) -> set[int]:
    rows = client.query(name, "id >= 0", output_fields=["id"], consistency_level="Strong")
    return {int(r["id"]) for r in rows}


def test_truncate_removes_every_entity_for_good(
    client: MilvusClient, server: StandaloneProcess
) -> None:
    """Flushed, growing and compacted-away rows all go; schema, partitions, indexes and
    the load state stay; new rows (old keys too) are read, and only they after a
    restart replays the log."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("n", DataType.INT64)
    params = client.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2", index_name="v_idx")
    client.create_collection("tr", schema=schema, index_params=params, consistency_level="Strong")
    client.create_partition("tr", "p1")
    row = lambda i: {"id": i, "v": [float(i)] * DIM, "n": i}  # noqa: E731
    client.insert("tr", [row(i) for i in range(10)])
    client.flush("tr")
    client.insert("tr", [row(i) for i in range(10, 15)], partition_name="p1")  # growing
    client.delete("tr", ids=[3])
    assert _count(client, "tr") == 14
    described = client.describe_collection("tr")

    client.truncate_collection("tr")
    assert _count(client, "tr") == 0
    assert client.search("tr", [[1.0] * DIM], limit=5)[0] == []
    assert client.describe_collection("tr")["fields"] == described["fields"]
    assert set(client.list_partitions("tr")) == {"_default", "p1"}
    assert client.list_indexes("tr") == ["v_idx"]
    assert client.get_load_state("tr")["state"].name == "Loaded"
    assert client.list_persistent_segments("tr") == []

    client.insert("tr", [row(i) for i in (1, 3, 20)])  # 3 was deleted before: back now
    assert _ids(client, "tr") == {1, 3, 20}
    hits = client.search("tr", [[20.0] * DIM], limit=1, output_fields=["n"])[0]
    assert hits[0]["id"] == 20 and hits[0]["entity"]["n"] == 20

    _fails(100, lambda: client.truncate_collection("nope"))

    server.stop()  # the log still holds every row: replayed, none before the truncate
    server.start().wait_ready()
    _wait("loaded again", lambda: client.get_load_state("tr")["state"].name == "Loaded")
    assert _ids(client, "tr") == {1, 3, 20}
