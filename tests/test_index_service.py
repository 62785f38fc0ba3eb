"""The index service end to end (seed 002, issue 5): real nats-server, coord, datanode,
query node, index nodes (in process and as an OS process killed with -9) and proxy.

- create / describe / list / drop through the SDK, with progress and parameter errors;
- one task per flushed segment, automatic tasks for later flushes and compactions;
- files at ``indexes/<build_id>/<version>/<partition>/<segment>/``, recycled after a drop;
- workers swap a finished index in, searches use it (recall against exact answers);
- filters and deletes reach the index (only matching, live rows come back);
- a builder killed mid-task: re-issued with version + 1, the stale report ignored.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import ElanusProcess, Stack, both_transports
from role_processes import role_process
from stack_factory import stack_fixture, wait_querynodes
from test_read_path import wait_for

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client

DIM = 32
make_stack = stack_fixture(compaction_interval_s=0)


def clustered(n: int, dim: int, seed: int, centers: int = 64) -> np.ndarray:
    """Gaussian blobs: the shape real embeddings have, where IVF/HNSW recall means something."""
    rng = np.random.default_rng(seed)
    middle = rng.normal(size=(centers, dim)).astype(np.float32) * 4
    which = rng.integers(0, centers, n)
    return (middle[which] + rng.normal(size=(n, dim)).astype(np.float32)).astype(np.float32)


def rows(ids: np.ndarray, vectors: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "bucket": pa.array(ids % 10, pa.int64()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


def create_bucketed(client: Client, name: str, vector: dict[str, Any], metric: str) -> None:
    """``name`` with an int64 primary ``id``, an int64 ``bucket`` and the vector field
    ``vector``, searched by ``metric``: the filters of these tests are on ``bucket``."""
    fields = [
        {"name": "id", "type": "Int64", "is_primary": True},
        {"name": "bucket", "type": "Int64"},
        vector,
    ]
    client.create_collection(name, schema={"fields": fields}, properties={"metric_type": metric})


def make_collection(
    client: Client, name: str, parts: list[tuple[int, int]], seed: int = 1
) -> np.ndarray:
    """A collection with an int64 ``bucket`` (id % 10); each (lo, hi) part is one flush."""
    create_bucketed(client, name, {"name": "vector", "type": "FloatVector", "dim": DIM}, "L2")
    vectors = clustered(parts[-1][1], DIM, seed)
    for lo, hi in parts:
        client.insert(name, rows(np.arange(lo, hi), vectors[lo:hi]))
        client.flush(name, timeout=60)
    return vectors


def tasks(stack: Stack, collection_id: int | None = None) -> list[dict[str, Any]]:
    assert stack.coord is not None
    return [
        t.to_dict()
        for t in list(stack.coord.index.tasks.values())
        if collection_id is None or t.collection_id == collection_id
    ]


def collection_id(client: Client, name: str) -> int:
    return int(client.describe_collection(name)["collection_id"])


def served_indexes(stack: Stack, field: str = "vector") -> dict[int, Any]:
    return {
        sid: seg.index_of(field)
        for qn in stack.querynodes
        for sid, seg in list(qn.worker.segments.items())
        if seg.index_of(field) is not None
    }


def exact_topk(
    vectors: np.ndarray, alive: np.ndarray, queries: np.ndarray, k: int
) -> list[set[int]]:
    ids = np.nonzero(alive)[0]
    d = ((queries[:, None, :] - vectors[None, ids, :]) ** 2).sum(-1)
    return [set(ids[np.argsort(row, kind="stable")[:k]].tolist()) for row in d]


# -- 1. lifecycle -------------------------------------------------------------------------------


@both_transports
def test_index_lifecycle_progress_drop_and_recycle(stack: Stack) -> None:
    client = stack.client()
    vectors = make_collection(client, "books", [(0, 1500), (1500, 3000)])
    cid = collection_id(client, "books")
    index_id = client.create_index(
        "books",
        "vector",
        index_type="HNSW",
        metric_type="L2",
        params={"M": 8, "efConstruction": 40},
    )
    (info,) = client.describe_index("books")
    # No index node runs yet: one Unissued task per flushed segment, nothing indexed.
    assert info["state"] == "Unissued" and info["pending_tasks"] == 2
    assert (info["indexed_rows"], info["total_rows"]) == (0, 3000)
    assert info["index_type"] == "HNSW" and info["params"]["M"] == 8
    assert {t["segment_id"] for t in tasks(stack, cid)} == {
        s["segment_id"] for s in client.get_segment_info("books") if s["state"] == "Flushed"
    }
    # An identical request returns the same index; a different one on the field is refused.
    assert (
        client.create_index(
            "books",
            "vector",
            index_type="HNSW",
            metric_type="L2",
            params={"M": 8, "efConstruction": 40},
        )
        == index_id
    )
    with pytest.raises(ElanusError) as exc:
        client.create_index(
            "books", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 16}
        )
    assert exc.value.code == ErrorCode.INDEX_ALREADY_EXISTS and "drop it first" in exc.value.message
    with pytest.raises(ElanusError) as exc:
        client.create_index("books", "bucket", index_type="HNSW")
    assert (
        exc.value.code == ErrorCode.INVALID_ARGUMENT and "only vector fields" in exc.value.message
    )
    assert len(tasks(stack, cid)) == 2

    stack.add_indexnode()
    client.load_collection("books")
    info = client.wait_for_index("books", timeout=60)
    assert (info["indexed_rows"], info["total_rows"], info["pending_tasks"]) == (3000, 3000, 0)
    storage = stack.settings.storage_path
    for t in tasks(stack, cid):
        assert t["state"] == "Finished" and t["version"] == 1 and t["file_paths"]
        folder = (
            storage
            / "indexes"
            / str(t["build_id"])
            / "1"
            / str(t["partition_id"])
            / str(t["segment_id"])
        )
        assert all(Path(f).parent == folder and Path(f).exists() for f in t["file_paths"])
    # The query node swaps each index in as its build finishes.
    wait_for(lambda: len(served_indexes(stack)) == 2, what="indexes served")
    queries = vectors[[3, 1600, 2999]] + np.float32(0.01)
    hits = client.search("books", queries, limit=5, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [3, 1600, 2999]

    # A later flush gets its own task automatically.
    more = clustered(3500, DIM, 1)[3000:]
    client.insert("books", rows(np.arange(3000, 3500), more))
    client.flush("books", timeout=60)
    info = wait_for(
        lambda: (
            (i := client.describe_index("books")[0])["total_rows"] == 3500
            and i["state"] == "Finished"
            and i["indexed_rows"] == 3500  # the new segment's task may come a moment later
            and i
        ),
        what="the new segment indexed",
    )
    assert len(tasks(stack, cid)) == 3
    wait_for(lambda: len(served_indexes(stack)) == 3, what="three indexes served")

    # Drop: gone at once for describe and searches; files gone after the recycling loop.
    files = [f for t in tasks(stack, cid) for f in t["file_paths"]]
    client.drop_index("books", "vector")
    assert client.list_indexes("books") == []
    with pytest.raises(ElanusError) as exc:
        client.describe_index("books", "vector")
    assert exc.value.code == ErrorCode.INDEX_NOT_FOUND
    wait_for(lambda: not served_indexes(stack), what="workers to drop the index")
    assert stack.coord is not None
    stack.call(stack.coord.index.recycle())
    assert not any(Path(f).exists() for f in files)
    assert tasks(stack, cid) == []
    left = stack.call(
        stack.coord.db.run(lambda con: con.execute("SELECT count(*) FROM index_tasks").fetchone())
    )
    assert left == (0,)
    hits = client.search("books", queries, limit=5, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [3, 1600, 2999]  # exact search again


def test_bad_index_requests_change_nothing(stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "bad", [(0, 100)])
    cases: list[tuple[dict[str, Any], str]] = [
        ({"index_type": "NOPE"}, "NOPE"),
        ({"index_type": "HNSW", "params": {"M": 1}}, "M"),
        ({"index_type": "HNSW", "params": {"efConstruction": "x"}}, "efConstruction"),
        ({"index_type": "IVF_FLAT", "params": {"nlist": 0}}, "nlist"),
        ({"index_type": "IVF_PQ", "params": {"nlist": 8, "m": 5}}, "m"),
        ({"index_type": "IVF_FLAT", "params": {"nlist": 8, "colour": 1}}, "colour"),
        ({"index_type": "BIN_FLAT"}, "BIN_FLAT"),
        ({"index_type": "HNSW", "metric_type": "HAMMING"}, "HAMMING"),
    ]
    for kwargs, word in cases:
        with pytest.raises(ElanusError) as exc:
            client.create_index("bad", "vector", **kwargs)
        assert exc.value.code == ErrorCode.INVALID_ARGUMENT, kwargs
        assert word in exc.value.message, (kwargs, exc.value.message)
    with pytest.raises(ElanusError) as exc:
        client.create_index("bad", "nope", index_type="HNSW")
    assert "nope" in exc.value.message
    with pytest.raises(ElanusError) as exc:
        client.create_index("missing", "vector", index_type="HNSW")
    assert exc.value.code == ErrorCode.COLLECTION_NOT_FOUND
    with pytest.raises(ElanusError) as exc:
        client.drop_index("bad", "vector")
    assert exc.value.code == ErrorCode.INDEX_NOT_FOUND
    assert client.list_indexes("bad") == [] and tasks(stack) == []


# -- 2. serving: recall, search params, filters and deletes -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index_type", "build", "search"),
    [
        ("HNSW", {"M": 16, "efConstruction": 64}, {"ef": 64}),
        ("IVF_FLAT", {"nlist": 128}, {"nprobe": 16}),
    ],
)
def test_recall_filters_and_deletes_through_the_index(
    stack: Stack, index_type: str, build: dict[str, Any], search: dict[str, Any]
) -> None:
    n = 50_000
    client = stack.client()
    vectors = make_collection(client, "r", [(0, 25_000), (25_000, n)], seed=5)
    client.create_index("r", "vector", index_type=index_type, metric_type="L2", params=build)
    stack.add_indexnode()
    client.load_collection("r")
    client.wait_for_index("r", timeout=120)
    wait_for(lambda: len(served_indexes(stack)) == 2, what="both indexes served")
    rng = np.random.default_rng(9)
    queries = (
        vectors[rng.integers(0, n, 100)] + rng.normal(size=(100, DIM)).astype(np.float32) * 0.5
    )
    alive = np.ones(n, bool)
    ids = np.arange(n)

    def found(flt: str | None = None, k: int = 10) -> list[set[int]]:
        hits = client.search(
            "r", queries, limit=k, filter=flt, search_params={"params": search},
            consistency_level="Strong",
        )  # fmt: skip
        return [{h["id"] for h in q} for q in hits]

    def recall(got: list[set[int]], want: list[set[int]]) -> float:
        return sum(len(g & w) for g, w in zip(got, want, strict=True)) / sum(map(len, want))

    assert recall(found(), exact_topk(vectors, alive, queries, 10)) >= 0.95
    for share in (1, 5, 9):  # 10%, 50% and 90% of the rows pass the filter
        keep = alive & (ids % 10 < share)
        got = found(f"bucket < {share}")
        assert all(all(i % 10 < share for i in q) for q in got)
        assert recall(got, exact_topk(vectors, keep, queries, 10)) >= 0.9, share
    # Deletes reach the index through the visibility bitset.
    gone = sorted({i for q in exact_topk(vectors, alive, queries[:10], 3) for i in q})
    client.delete("r", gone)
    alive[gone] = False
    got = found()
    assert not set().union(*got) & set(gone)
    assert recall(got, exact_topk(vectors, alive, queries, 10)) >= 0.95
    with pytest.raises(ElanusError) as exc:
        client.search("r", queries[:1], search_params={"params": {"nprobe": 0, "ef": 0}})
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT


# -- 3. a builder killed with -9 mid-task -------------------------------------------------------


@pytest.mark.chaos
def test_builder_killed_mid_task_is_replaced(
    make_stack: Callable[..., Stack],
    tmp_path: Path,
    elanus_processes: Callable[[ElanusProcess], ElanusProcess],
) -> None:
    stack = make_stack()
    client = stack.client()
    make_collection(client, "k", [(0, 2000)])
    cid = collection_id(client, "k")
    env = stack.role_env(ELANUS_SESSION_TTL_S="2", ELANUS_INDEX_BUILD_DELAY_S="600")
    settings = stack.settings
    slow = role_process(
        "indexnode", settings.nats_url or "", settings.data_dir, tmp_path / "indexnode.log", env
    )
    elanus_processes(slow).start()
    assert stack.coord is not None
    wait_for(
        lambda: slow.check_alive() or stack.coord.sessions.of_role("indexnode"),  # type: ignore[union-attr]
        what="the index node process's session",
    )
    client.create_index("k", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 8})
    (task,) = wait_for(
        lambda: [t for t in tasks(stack, cid) if t["state"] == "InProgress"] or None,
        what="the task issued to the slow builder",
    )
    assert task["version"] == 1
    slow_node = task["node_id"]
    slow.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    slow.proc.wait(10)  # type: ignore[union-attr]
    stack.add_indexnode()
    info = client.wait_for_index("k", timeout=60)
    assert info["indexed_rows"] == 2000
    (done,) = tasks(stack, cid)
    # Each issue bumps the version (a dispatch to the dead builder before its session
    # expired counts too), so only "newer than the lost one" is certain.
    assert done["version"] >= 2 and done["node_id"] != slow_node
    # The lost builder's late report (version 1) is ignored and changes nothing.
    stale = {"build_id": done["build_id"], "version": 1, "ok": False, "fail_reason": "stale"}
    reply = client.report_index_task(slow_node, stale)
    assert reply["accepted"] is False and "stale" in reply["reason"]
    assert tasks(stack, cid)[0] == done
    assert client.describe_index("k")[0]["state"] == "Finished"


# -- 4. compaction makes a new segment, which gets its own task ----------------------------------


@both_transports
def test_compacted_segment_gets_indexed(stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "c", [(0, 300), (300, 600), (600, 900)])
    cid = collection_id(client, "c")
    client.create_index("c", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 4})
    stack.add_indexnode()
    wait_querynodes(stack)
    client.load_collection("c")
    client.wait_for_index("c", timeout=60)
    job = client.compact("c")
    wait_for(lambda: client.get_compaction_state(job) == "Completed", what="compaction")
    flushed = {s["segment_id"] for s in client.get_segment_info("c") if s["state"] == "Flushed"}
    assert len(flushed) == 1
    wait_for(
        lambda: (
            client.describe_index("c")[0]["state"] == "Finished"
            and any(
                t["segment_id"] in flushed and t["state"] == "Finished" for t in tasks(stack, cid)
            )
        ),
        what="the compacted segment indexed",
    )
    assert client.describe_index("c")[0]["indexed_rows"] == 900
    assert stack.coord is not None
    stack.call(stack.coord.index.recycle())  # the sources' tasks go with their segments
    assert {t["segment_id"] for t in tasks(stack, cid)} == flushed
    wait_for(lambda: set(served_indexes(stack)) == flushed, what="the new index served")
