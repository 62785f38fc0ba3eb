"""Concurrent unfiltered searches of one index share one FAISS call (index/merged.py), and
each caller still gets exactly its own answer."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from elanus.index.build import build_index
from elanus.index.merged import MAX_QUERIES, MergedSearches
from elanus.indexparams import make_index_spec


def test_queries_that_arrive_while_one_runs_go_in_one_call_and_get_their_rows() -> None:
    merged = MergedSearches(parallel=1)
    started, release = threading.Event(), threading.Event()
    stacks: list[int] = []

    def run(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stacks.append(len(queries))
        if len(stacks) == 1:  # the first caller's call holds the index for a while
            started.set()
            release.wait(5)
        return queries * 2.0, queries.astype(np.int64)

    def ask(i: int, nq: int = 1) -> tuple[np.ndarray, np.ndarray]:
        return merged.search("k", np.full((nq, 1), float(i)), run)

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(ask, 0)
        assert started.wait(5)
        later = [pool.submit(ask, i, i) for i in (1, 2, 3)]
        while sum(len(w.queries) for w in merged._queues.get("k", [])) < 6:  # queued behind it
            threading.Event().wait(0.001)
        release.set()
        answers = [f.result(5) for f in (first, *later)]
    assert stacks == [1, 6]  # the three waiting callers' six queries: one call
    assert (merged.calls, merged.searches) == (2, 4)
    for i, (distances, rows) in enumerate(answers):
        assert len(rows) == max(i, 1) and (rows == i).all() and (distances == 2.0 * i).all()
    assert merged._queues == {} and merged._running == {}  # free for the next one


def test_a_failed_call_fails_its_callers_only_and_the_next_batch_runs() -> None:
    merged = MergedSearches(parallel=1)
    calls = iter([RuntimeError("faiss said no"), None])

    def run(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        failure = next(calls)
        if failure is not None:
            raise failure
        return queries, queries.astype(np.int64)

    with pytest.raises(RuntimeError, match="faiss said no"):
        merged.search("k", np.zeros((1, 1)), run)
    _, rows = merged.search("k", np.ones((1, 1)), run)
    assert rows.tolist() == [[1]]


def test_a_batch_stops_at_max_queries() -> None:
    merged = MergedSearches(parallel=1)
    stacks: list[int] = []
    gate = threading.Event()

    def run(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stacks.append(len(queries))
        gate.wait(5)
        return queries, queries.astype(np.int64)

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(merged.search, "k", np.zeros((MAX_QUERIES // 2 + 1, 1)), run)]
        while not stacks:
            threading.Event().wait(0.001)
        futures += [
            pool.submit(merged.search, "k", np.zeros((MAX_QUERIES // 2 + 1, 1)), run)
            for _ in range(2)
        ]
        while sum(len(w.queries) for w in merged._queues.get("k", [])) < MAX_QUERIES + 2:
            threading.Event().wait(0.001)
        gate.set()
        for f in futures:
            f.result(5)
    assert stacks == [MAX_QUERIES // 2 + 1] * 3  # two of them would pass MAX_QUERIES


def test_as_many_calls_as_cores_run_side_by_side_before_any_queues() -> None:
    merged = MergedSearches(parallel=2)
    both, release = threading.Barrier(2, timeout=5), threading.Event()
    stacks: list[int] = []

    def run(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stacks.append(len(queries))
        if len(stacks) <= 2:
            both.wait()  # the two first calls run at the same time, neither queued
            release.wait(5)
        return queries, queries.astype(np.int64)

    with ThreadPoolExecutor(5) as pool:
        futures = [pool.submit(merged.search, "k", np.zeros((1, 1)), run) for _ in range(2)]
        while len(stacks) < 2:
            threading.Event().wait(0.001)
        futures += [pool.submit(merged.search, "k", np.zeros((1, 1)), run) for _ in range(3)]
        while sum(len(w.queries) for w in merged._queues.get("k", [])) < 3:
            threading.Event().wait(0.001)
        release.set()
        for f in futures:
            f.result(5)
    assert stacks[:2] == [1, 1] and sum(stacks) == 5 and len(stacks) <= 4
    assert merged._running == {}


@pytest.mark.parametrize("itype", ["HNSW", "IVF_FLAT"])
def test_concurrent_searches_of_an_index_answer_as_one_alone(itype: str) -> None:
    rng = np.random.default_rng(7)
    X = rng.standard_normal((4000, 16), dtype=np.float32)
    Q = rng.standard_normal((64, 16), dtype=np.float32)
    params = {"M": 8, "efConstruction": 32} if itype == "HNSW" else {"nlist": 32}
    ix = build_index(make_index_spec("FloatVector", 16, itype, "L2", params), X)
    sp = {"ef": 32} if itype == "HNSW" else {"nprobe": 4}
    alone = [ix.search(Q[i : i + 1], 5, sp) for i in range(len(Q))]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            together = list(pool.map(lambda i: ix.search(Q[i : i + 1], 5, sp), range(len(Q))))
            for (d1, r1), (d2, r2) in zip(alone, together, strict=True):
                assert (r1 == r2).all() and np.allclose(d1, d2)
    assert ix._merged.searches == 4 * len(Q)  # every unfiltered one went through the merge
    filtered = ix.search(Q[:1], 5, sp, np.arange(4000) % 2 == 0)  # a mask: runs alone
    assert ix._merged.searches == 4 * len(Q)
    assert (filtered[1] % 2 == 0).all()
