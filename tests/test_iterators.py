"""Search and query iterators on the real stack (issue 15, "Iterators").

Every walk is checked against an exact numpy ranking of the rows as they were when the walk
began: the k-th hit returned has the k-th best distance, each hit's distance is its row's
own, no key comes twice and none is missing. The data has ties on purpose (a block of 300
copies of one vector and 1000 duplicated pairs), the collections hold flushed and growing
rows at once, and the churn tests delete and insert rows (and flush) while a walk runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from conftest import Stack, own_stack, wait_for

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.client.client import Client
from elanus.client.compat import SearchIterator

DIM = 8
BITS = 32
N = 10_000
TIE = slice(9000, 9300)  # 300 copies of one vector
STRONG = "Strong"
LARGER = {"IP", "COSINE"}


@dataclass
class Rows:
    """What a collection holds, by primary key."""

    pks: np.ndarray
    vectors: np.ndarray
    tags: np.ndarray


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("iterators")
    with own_stack(tmp, "iter-loop", compaction_interval_s=0) as s:
        wait_for(lambda: s.coord and s.coord.sessions.of_role("querynode"), what="a query node")
        yield s


@pytest.fixture(scope="module")
def client(stack: Stack) -> Client:
    return stack.client()


def query_vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def float_rows(seed: int, q: np.ndarray, metric: str) -> Rows:
    """Random vectors with ties: rows 5000..5999 repeat rows 0..999, and the TIE block holds
    one vector that ranks first for ``q`` (so page boundaries fall inside the block)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    x[5000:6000] = x[0:1000]
    x[TIE] = q * np.float32(10.0 if metric == "IP" else 1.0)
    pks = np.arange(N, dtype=np.int64)
    return Rows(pks, x, (pks % 7).astype(np.int32))


def make_collection(client: Client, name: str, rows: Rows, field: str = "vector") -> None:
    """Rows 0..5999 flushed, the rest left growing; loaded."""
    schema = Schema().add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("tag", DataType.INT32)
    if field == "vector":
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    else:
        schema.add_field(field, DataType.BINARY_VECTOR, dim=BITS)
    client.create_collection(name, schema=schema, num_shards=2)
    cut = 6000 if len(rows.pks) > 6000 else len(rows.pks) // 2
    for lo, hi in ((0, cut), (cut, len(rows.pks))):
        client.insert(
            name, {"id": rows.pks[lo:hi], "tag": rows.tags[lo:hi], field: rows.vectors[lo:hi]}
        )
        if lo == 0:
            client.flush(name, timeout=60)
    client.load_collection(name)


def distances(metric: str, x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Milvus's distance of every row of ``x`` to ``q``, in float64."""
    if metric == "L2":
        return ((x.astype(np.float64) - q) ** 2).sum(axis=1)
    if metric == "IP":
        return x.astype(np.float64) @ q.astype(np.float64)
    if metric == "COSINE":
        a = x.astype(np.float64)
        return (a @ q) / (np.linalg.norm(a, axis=1) * np.linalg.norm(q))
    assert metric == "HAMMING"
    xb = np.unpackbits(x, axis=1)
    return (xb != np.unpackbits(q)).sum(axis=1).astype(np.float64)


def check_walk(
    pages: list[list[dict[str, Any]]],
    pks: np.ndarray,
    dist: np.ndarray,
    metric: str,
    limit: int = -1,
) -> list[Any]:
    """The walk is the exact ranking of ``pks`` by ``dist`` (ties in any order): returns
    the keys walked."""
    ids = [h["id"] for page in pages for h in page]
    got = np.array([h["distance"] for page in pages for h in page], np.float64)
    assert len(ids) == len(set(ids)), "a key came twice"
    total = len(pks) if limit < 0 else min(limit, len(pks))
    assert len(ids) == total
    key = -dist if metric in LARGER else dist
    ranked = np.argsort(key, kind="stable")[:total]
    # The k-th hit has the k-th best distance: in order and without gaps.
    np.testing.assert_allclose(got, dist[ranked], rtol=1e-4, atol=1e-4)
    own = dict(zip(pks.tolist(), dist.tolist(), strict=True))
    np.testing.assert_allclose(got, [own[i] for i in ids], rtol=1e-4, atol=1e-4)
    if total == len(pks):
        assert set(ids) == set(pks.tolist())
    else:  # every row clearly better than the last one walked is in
        cut = key[ranked[-1]]
        assert set(pks[key < cut - 1e-3].tolist()) <= set(ids)
    return ids


def walk(it: SearchIterator) -> list[list[dict[str, Any]]]:
    pages = list(it)
    assert it.next() == [] and it.next() == []  # done stays done
    return pages


def page_sizes(total: int, batch: int) -> list[int]:
    return [batch] * (total // batch) + ([total % batch] if total % batch else [])


# -- whole walks, every metric --------------------------------------------------------------


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_search_iterator_walks_every_row_in_distance_order(client: Client, metric: str) -> None:
    q = query_vector(1)
    rows = float_rows(2, q, metric)
    name = f"walk_{metric.lower()}"
    make_collection(client, name, rows)
    dist = distances(metric, rows.vectors, q)
    params = {"metric_type": metric}
    for batch in (1000, 777):  # divides the total, and does not
        it = client.search_iterator(
            name, [q], batch_size=batch, search_params=params, consistency_level=STRONG
        )
        pages = walk(it)
        assert [len(p) for p in pages] == page_sizes(N, batch)
        check_walk(pages, rows.pks, dist, metric)
    # Small pages cut through the 300-way tie at the top: no copy repeated or lost.
    it = client.search_iterator(
        name, q.reshape(1, -1), batch_size=128, limit=1000, search_params=params
    )
    pages = walk(it)
    assert [len(p) for p in pages] == page_sizes(1000, 128)
    ids = check_walk(pages, rows.pks, dist, metric, limit=1000)
    assert set(range(TIE.start, TIE.stop)) <= set(ids[:300])


def test_filter_output_fields_limit_and_rounding(client: Client) -> None:
    q = query_vector(3)
    rows = float_rows(4, q, "L2")
    make_collection(client, "filtered", rows)
    keep = np.isin(rows.tags, [1, 2, 3])
    it = client.search_iterator(
        "filtered",
        [q],
        batch_size=1000,
        filter="tag in {tags}",
        filter_params={"tags": [1, 2, 3]},
        limit=2500,
        output_fields=["tag"],
        search_params={"metric_type": "L2"},
        consistency_level=STRONG,
    )
    pages = walk(it)
    assert [len(p) for p in pages] == [1000, 1000, 500]
    dist = distances("L2", rows.vectors[keep], q)
    ids = check_walk(pages, rows.pks[keep], dist, "L2", limit=2500)
    assert all(h["entity"] == {"tag": h["id"] % 7} for p in pages for h in p)
    assert all(i % 7 in (1, 2, 3) for i in ids)
    # limit 0 walks nothing; round_decimal rounds what is shown, not what is paged on.
    assert list(client.search_iterator("filtered", [q], limit=0)) == []
    rounded = client.search_iterator("filtered", [q], batch_size=50, limit=120, round_decimal=2)
    shown = [h for p in rounded for h in p]
    assert len({h["id"] for h in shown}) == 120
    assert all(h["distance"] == round(h["distance"], 2) for h in shown)


def test_hamming_walk_through_integer_ties(client: Client) -> None:
    """Binary vectors: 3000 rows over 33 possible distances, so every page boundary
    splits a run of equal distances."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (3000, BITS // 8), dtype=np.uint8)
    pks = np.arange(3000, dtype=np.int64)
    rows = Rows(pks, x, (pks % 7).astype(np.int32))
    make_collection(client, "bits", rows, field="bits")
    q = rng.integers(0, 256, BITS // 8, dtype=np.uint8)
    pages = walk(client.search_iterator("bits", [q], batch_size=250, consistency_level=STRONG))
    assert [len(p) for p in pages] == page_sizes(3000, 250)
    check_walk(pages, pks, distances("HAMMING", x, q), "HAMMING")


def test_walk_with_an_hnsw_index(stack: Stack, client: Client) -> None:
    q = query_vector(6)
    rows = float_rows(7, q, "L2")
    make_collection(client, "hnsw", rows)
    client.flush("hnsw", timeout=60)  # every row sealed, so every row is indexed
    client.create_index(
        "hnsw", "vector", index_type="HNSW", metric_type="L2", params={"M": 8, "efConstruction": 40}
    )
    stack.add_indexnode()
    client.wait_for_index("hnsw", timeout=120)

    def indexed_segments() -> int:
        return sum(
            1
            for qn in stack.querynodes
            for seg in list(qn.worker.segments.values())
            if seg.index_of("vector") is not None
        )

    wait_for(indexed_segments, what="the query node to serve the HNSW index")
    it = client.search_iterator(
        "hnsw", [q], batch_size=1000, search_params={"params": {"ef": 16}}, consistency_level=STRONG
    )
    pages = walk(it)
    check_walk(pages, rows.pks, distances("L2", rows.vectors, q), "L2")


def test_varchar_keys_many_ties_and_a_partition(client: Client) -> None:
    """40 distinct vectors, each held by 10 rows with string keys, in two partitions: pages
    of 7 break nearly every run of ties."""
    rng = np.random.default_rng(12)
    base = rng.standard_normal((40, DIM)).astype(np.float32)
    x = np.repeat(base, 10, axis=0)
    keys = [f"k{i:03d}" for i in range(len(x))]
    in_p1 = np.arange(len(x)) % 3 == 0
    schema = Schema().add_field("key", DataType.VARCHAR, is_primary=True, max_length=8)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("ties", schema=schema, num_shards=2)
    client.create_partition("ties", "p1")
    for part, mask in (("_default", ~in_p1), ("p1", in_p1)):
        chosen = np.nonzero(mask)[0]
        rows = {"key": [keys[i] for i in chosen], "vector": x[chosen]}
        client.insert("ties", rows, partition_name=part)
    client.load_collection("ties")
    q = rng.standard_normal(DIM).astype(np.float32)
    params = {"metric_type": "L2"}
    pages = walk(
        client.search_iterator("ties", [q], 7, search_params=params, consistency_level=STRONG)
    )
    assert [len(p) for p in pages] == page_sizes(400, 7)
    check_walk(pages, np.array(keys), distances("L2", x, q), "L2")
    only = walk(
        client.search_iterator("ties", [q], 7, partition_names=["p1"], search_params=params)
    )
    check_walk(only, np.array(keys)[in_p1], distances("L2", x[in_p1], q), "L2")


# -- walks while rows change ----------------------------------------------------------------


class Churn:
    """Deletes and inserts rows from its own thread, one step each time the walker asks
    (so steps interleave with pages deterministically), and flushes once midway."""

    def __init__(self, client: Client, name: str, alive: set[int], near: np.ndarray) -> None:
        self.client, self.name, self.alive, self.near = client, name, set(alive), near
        self.next_pk = 1_000_000
        self.asked = threading.Semaphore(0)
        self.done_steps = 0
        self.stepped = threading.Condition()
        self.stop = False
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = np.random.default_rng(9)

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop = True
        self.asked.release()
        self.thread.join(60)
        assert not self.thread.is_alive()
        assert not self.errors, self.errors

    def step(self) -> None:
        """Ask for one step and wait until it is acknowledged."""
        with self.stepped:
            want = self.done_steps + 1
            self.asked.release()
            assert self.stepped.wait_for(lambda: self.done_steps >= want or self.errors, 60)

    def _run(self) -> None:
        try:
            while True:
                self.asked.acquire()
                if self.stop:
                    return
                gone = self.rng.choice(sorted(self.alive), 150, replace=False).tolist()
                self.client.delete(self.name, gone)
                self.alive -= set(gone)
                new = list(range(self.next_pk, self.next_pk + 100))
                self.next_pk += 100
                # new rows sit right on the query: visible, they would rank first
                vecs = np.repeat(self.near[None, :], len(new), axis=0)
                self.client.insert(self.name, {"id": new, "tag": [0] * len(new), "vector": vecs})
                self.alive |= set(new)
                if self.done_steps == 3:
                    self.client.flush(self.name, timeout=60)  # growing rows become sealed
                with self.stepped:
                    self.done_steps += 1
                    self.stepped.notify_all()
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__ / step
            with self.stepped:
                self.errors.append(exc)
                self.stepped.notify_all()


def test_walks_see_one_snapshot_while_rows_are_deleted_and_inserted(client: Client) -> None:
    q = query_vector(8)
    rows = float_rows(10, q, "COSINE")
    make_collection(client, "churn", rows)
    dist = distances("COSINE", rows.vectors, q)  # no index, no metric asked: COSINE
    with Churn(client, "churn", set(rows.pks.tolist()), q) as churn:
        it = client.search_iterator("churn", [q], batch_size=600, consistency_level=STRONG)
        pages: list[list[dict[str, Any]]] = []
        while page := it.next():
            pages.append(page)
            churn.step()
        assert churn.done_steps == len(pages) == 17
        check_walk(pages, rows.pks, dist, "COSINE")
        # The changes are real: a fresh read sees them.
        now = client.query("churn", "", ["count(*)"], consistency_level=STRONG)
        assert now == [{"count(*)": len(churn.alive)}]
        assert len(churn.alive) == N - 17 * 50

        # The query iterator, over the rows as they are now, while the churn goes on.
        before = sorted(churn.alive)
        qit = client.query_iterator(
            "churn", batch_size=700, output_fields=["tag"], consistency_level=STRONG
        )
        row_pages = []
        while page := qit.next():
            row_pages.append(page)
            churn.step()
        keys = [r["id"] for p in row_pages for r in p]
        assert keys == before  # in key order, no duplicates, no gaps
        assert [len(p) for p in row_pages] == page_sizes(len(before), 700)
        assert all(r["tag"] == (r["id"] % 7 if r["id"] < N else 0) for p in row_pages for r in p)
        assert set(churn.alive) != set(before)


# -- bad inputs -----------------------------------------------------------------------------


def test_bad_inputs_get_clear_errors(client: Client) -> None:
    q = query_vector(11)
    if not client.has_collection("walk_l2"):
        make_collection(client, "walk_l2", float_rows(2, q, "L2"))

    def refused(code: ErrorCode, words: str, **kwargs: Any) -> None:
        args = {"collection_name": "walk_l2", "data": [q], **kwargs}
        with pytest.raises(ElanusError) as exc:
            client.search_iterator(**args)
        assert exc.value.code is code and words in exc.value.message, exc.value

    bad = ErrorCode.INVALID_ARGUMENT
    refused(bad, "exactly one query vector, got 2", data=[q, q])
    refused(bad, "one query vector", data=q)  # a bare vector, not a list of one
    refused(bad, "batch_size must lie in [1, 16384], got 0", batch_size=0)
    refused(bad, "batch_size must lie in [1, 16384], got 16385", batch_size=16385)
    refused(bad, "limit must be -1", limit=-2)
    refused(bad, "round_decimal", round_decimal=9)
    refused(bad, "'offset'", offset=10)
    with pytest.raises(ElanusError) as exc:
        client.search_iterator("walk_l2", [q], output_fields=["nope"])
    assert "nope" in exc.value.message
    with pytest.raises(ElanusError) as exc:
        client.search_iterator("walk_l2", [q], anns_field="nope")
    assert exc.value.code is bad and "nope" in exc.value.message
    with pytest.raises(ElanusError) as exc:
        client.search_iterator("walk_l2", [q], filter="tag >")
    assert exc.value.code is ErrorCode.BAD_EXPRESSION
    with pytest.raises(ElanusError) as exc:
        client.search_iterator("no_such_collection", [q])
    assert exc.value.code is ErrorCode.COLLECTION_NOT_FOUND
    for kwargs in ({"batch_size": 0}, {"limit": -5}, {"output_fields": ["nope"]}):
        with pytest.raises(ElanusError) as exc:  # at the call, not at the first next()
            client.query_iterator("walk_l2", **kwargs)
        assert exc.value.code is bad
    with pytest.raises(ElanusError) as exc:
        client.query_iterator("no_such_collection")
    assert exc.value.code is ErrorCode.COLLECTION_NOT_FOUND
