"""Search benchmark: exact-search QPS and latency over Flight, and the cost of Strong reads.

    .venv/bin/python bench/search.py                  # 200k x 128-d, L2, k=10, 5 s per case
    .venv/bin/python bench/search.py --quick          # 20k rows, 2 s per case: a smoke run
    .venv/bin/python bench/search.py --rows 100000 --dim 768 --seconds 10

One ``elanus standalone`` child process (own data dir and embedded nats-server) holds a
collection of random float32 vectors (ids 0..N-1), inserted, flushed and loaded. Then, in
the same run and on the same vectors:

Table 1, throughput (queries/s and per-call p50/p99 latency):

* **elanus search, 1 / 4 clients**: threads, each with its own SDK ``Client``, looping
  ``client.search(..., limit=10, consistency_level="Eventually")`` with one query per call.
* **elanus search, batch 100 (SDK)**: one thread, 100 query vectors per ``search`` call.
* **elanus DoExchange, batch 100**: one open DoExchange stream, one 100-query record batch
  written at a time and its hits read back before the next.
* **raw VectorIndexExact**: the in-process kernel (numpy BLAS + faiss heap) on the same
  vectors, 1 query and 100 queries per call: what the search itself costs.
* **empty Flight server**: a do-nothing ``pyarrow.flight.FlightServerBase`` in a child
  process whose ``do_action`` returns a small JSON body; 1 and 4 client threads send
  ``search`` actions with a body of the same size as the SDK's (1- and 100-query): what the
  RPC alone costs.

"vs kernel" and "vs empty Flight" divide Elanus's queries/s by the matching baseline's
(same queries per call; same thread count for the empty server).

Table 2, freshness (what a Strong read pays over an Eventually one):

* **idle**: ~50 pairs of single-query searches, Eventually then Strong (alternating order),
  no writes; the extra wait is Strong minus Eventually of each pair.
* **under load**: a thread inserts 1,000-row batches back to back; a prober takes the newest
  acknowledged batch, issues Strong ``query(ids=[its last id])`` until it returns the row,
  and records (time the row was seen) - (time of the insert's ack). A first query that does
  not see an acknowledged row is a consistency bug and is counted.

Targets (from the issue): Strong extra wait p50 <= 20 ms idle; <= one time-tick interval
(200 ms) under load.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MB, Standalone, print_table, timed  # noqa: E402

from elanus.channels.nats_server import die_with_parent, free_port  # noqa: E402
from elanus.client.client import Client  # noqa: E402
from elanus.index.kernels import VectorIndexExact  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402

COLLECTION = "bench_search"
K = 10
METRIC = "L2"
BATCH = 100
TICK_MS = 200


# -- data ---------------------------------------------------------------------------------------
def make_data(rows: int, dim: int, seed: int = 42) -> tuple[np.ndarray, pa.Table]:
    rng = np.random.default_rng(seed)
    vectors = rng.random((rows, dim), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
        }
    )
    return vectors, table


def make_queries(n: int, dim: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim), dtype=np.float32)


# -- measurement helpers -------------------------------------------------------------------------
class Stat:
    """One throughput row: calls, queries per call, wall seconds, per-call latencies."""

    def __init__(
        self,
        case: str,
        kind: str,
        threads: int,
        per_call: int,
        seconds: float,
        lat: list[float],
        errors: int = 0,
    ) -> None:
        self.case, self.kind, self.threads, self.per_call = case, kind, threads, per_call
        self.seconds, self.lat, self.errors = seconds, lat, errors

    @property
    def calls(self) -> int:
        return len(self.lat)

    @property
    def qps(self) -> float:
        return self.calls * self.per_call / self.seconds if self.seconds > 0 else float("nan")

    def pct(self, p: float) -> float:
        return float(np.percentile(self.lat, p)) * 1e3 if self.lat else float("nan")


def run_loop(
    case: str,
    kind: str,
    threads: int,
    per_call: int,
    seconds: float,
    make_call: Callable[[int], Callable[[int], Any]],
    quiet: bool = False,
) -> Stat:
    """``threads`` threads, each calling ``make_call(thread)(i)`` for ``seconds``."""
    calls = [make_call(t) for t in range(threads)]
    lats: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def work(t: int) -> None:
        call, out, i = calls[t], lats[t], t * 1_000_003
        try:
            call(i)  # warm up this thread's connection
            barrier.wait()
            while True:
                s = time.perf_counter()
                if s >= stop_at[0]:
                    return
                call(i)
                out.append(time.perf_counter() - s)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            if not barrier.broken:
                barrier.abort()

    ts = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    for t in ts:
        t.start()
    stop_at[0] = float("inf")
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    stop_at[0] = t0 + seconds
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    all_lat = [x for lt in lats for x in lt]
    st = Stat(case, kind, threads, per_call, wall, all_lat)
    if quiet:
        return st
    print(
        f"  {case}: {st.qps:,.0f} q/s, p50 {st.pct(50):.2f} ms, p99 {st.pct(99):.2f} ms", flush=True
    )
    return st


def sdk_searches(
    uri: str,
    collection: str,
    lists: list[Any],
    search_params: dict[str, Any],
    consistency_level: str,
    **client_options: Any,
) -> Callable[[int], Callable[[int], Any]]:
    """``run_loop``'s maker for SDK searches: a client per thread, searching the query
    lists in turn, top ``K``."""

    def make(t: int) -> Callable[[int], Any]:
        client = Client(uri, **client_options)
        return lambda i: client.search(
            collection,
            lists[i % len(lists)],
            limit=K,
            search_params=search_params,
            consistency_level=consistency_level,
        )

    return make


def pcts(xs: list[float]) -> tuple[float, float]:
    if not xs:
        return float("nan"), float("nan")
    return float(np.percentile(xs, 50)) * 1e3, float(np.percentile(xs, 99)) * 1e3


# -- the empty Flight server -----------------------------------------------------------------------
EMPTY_SERVER = textwrap.dedent(
    """
    import json, sys, pyarrow.flight as flight

    class Empty(flight.FlightServerBase):
        def do_action(self, context, action):
            body = action.body.to_pybytes()
            if action.type == "search":
                json.loads(body)  # what any server must do at least (parse the body)
            return [flight.Result(b'{"results": [[]], "ts": 470613089312571393}')]

    server = Empty(f"grpc://127.0.0.1:{sys.argv[1]}")
    server.serve()
    """
)


class EmptyFlight:
    """A Flight server in a child process: ``EMPTY_SERVER``, or another ``script`` that
    takes its port (and ``args``) on its command line."""

    def __init__(self, script: str = EMPTY_SERVER, args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.uri = f"grpc://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.script, self.args = script, args

    def __enter__(self) -> EmptyFlight:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.script, str(self.port), *self.args],
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                c = flight.FlightClient(self.uri)
                list(c.do_action(flight.Action("ping", b"{}"), flight.FlightCallOptions(timeout=2)))
                c.close()
                return self
            except Exception:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.__exit__()
                    raise RuntimeError("the empty Flight server did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def search_body(queries: np.ndarray) -> bytes:
    """The JSON body the SDK sends for ``search`` (same keys, same number formatting)."""
    body = {
        "db": "default",
        "collection": COLLECTION,
        "data": queries.tolist(),
        "limit": K,
        "offset": 0,
        "output_fields": [],
        "search_params": {"metric_type": METRIC},
        "consistency_level": "Eventually",
    }
    return json.dumps(body, separators=(",", ":")).encode()


# -- cases -----------------------------------------------------------------------------------------
STREAM_N = 1024
"""Queries per ``search_stream`` call (one stream) in the stream cases."""


def throughput(uri: str, vectors: np.ndarray, dim: int, seconds: float) -> list[Stat]:
    nq = 4096
    Q = make_queries(nq, dim)
    singles = [Q[i : i + 1].tolist() for i in range(nq)]
    batches = [Q[(j * BATCH) % (nq - BATCH) :][:BATCH] for j in range(nq // BATCH)]
    batch_lists = [b.tolist() for b in batches]
    params = {"metric_type": METRIC}
    stats: list[Stat] = []

    # raw kernel
    index = VectorIndexExact(vectors, metric=METRIC)
    stats.append(
        run_loop(
            "raw VectorIndexExact, 1 query",
            "kernel",
            1,
            1,
            seconds,
            lambda t: lambda i: index.search(Q[i % nq : i % nq + 1], K, METRIC),
        )
    )
    stats.append(
        run_loop(
            f"raw VectorIndexExact, batch {BATCH}",
            "kernel",
            1,
            BATCH,
            seconds,
            lambda t: lambda i: index.search(batches[i % len(batches)], K, METRIC),
        )
    )

    # empty Flight server
    single_bodies = [search_body(Q[i : i + 1]) for i in range(64)]
    batch_bodies = [search_body(b) for b in batches[:16]]
    with EmptyFlight() as empty:

        def empty_call(bodies: list[bytes]) -> Callable[[int], Callable[[int], Any]]:
            def make(t: int) -> Callable[[int], Any]:
                fc = flight.FlightClient(empty.uri)
                return lambda i: list(
                    fc.do_action(flight.Action("search", bodies[i % len(bodies)]))
                )

            return make

        for threads in (1, 4):
            stats.append(
                run_loop(
                    f"empty Flight do_action, {threads} client(s), 1 query",
                    "empty",
                    threads,
                    1,
                    seconds,
                    empty_call(single_bodies),
                )
            )
        stats.append(
            run_loop(
                f"empty Flight do_action, 1 client, batch {BATCH} body",
                "empty",
                1,
                BATCH,
                seconds,
                empty_call(batch_bodies),
            )
        )

    # Elanus
    def sdk(lists: list[Any]) -> Callable[[int], Callable[[int], Any]]:
        return sdk_searches(uri, COLLECTION, lists, params, "Eventually", timeout=60)

    for threads in (1, 4):
        stats.append(
            run_loop(
                f"elanus search, {threads} client(s), 1 query",
                "elanus",
                threads,
                1,
                seconds,
                sdk(singles),
            )
        )
    stats.append(
        run_loop(
            f"elanus search (SDK), 1 client, batch {BATCH}",
            "elanus",
            1,
            BATCH,
            seconds,
            sdk(batch_lists),
        )
    )

    cmd = {
        "collection": COLLECTION,
        "limit": K,
        "search_params": params,
        "consistency_level": "Eventually",
    }
    stats.append(
        exchange_loop(
            f"elanus DoExchange stream, 1 client, batch {BATCH}",
            "elanus",
            uri,
            cmd,
            batches,
            seconds,
            expect_rows=BATCH * K,
        )
    )

    # the SDK's search_stream: single queries over one DoExchange, ready ones batched
    def stream(max_batch: int) -> Callable[[int], Callable[[int], Any]]:
        def make(t: int) -> Callable[[int], Any]:
            c = Client(uri, timeout=60)
            rows = list(Q[:STREAM_N])

            def call(i: int) -> int:
                answers = c.search_stream(
                    COLLECTION,
                    rows,
                    limit=K,
                    search_params=params,
                    consistency_level="Eventually",
                    max_batch=max_batch,
                )
                got = sum(len(h) == K for h in answers)
                assert got == STREAM_N, got
                return got

            return call

        return make

    for max_batch in (1, 32):
        stats.append(
            run_loop(
                f"elanus search_stream (SDK), {STREAM_N} single queries, batches <= {max_batch}",
                "elanus",
                1,
                STREAM_N,
                seconds,
                stream(max_batch),
            )
        )
    return stats


def exchange_loop(
    case: str,
    kind: str,
    uri: str,
    command: dict[str, Any],
    batches: list[np.ndarray],
    seconds: float,
    expect_rows: int | None = None,
) -> Stat:
    """One open DoExchange search stream: a batch of query vectors (Arrow) in, its hits
    (Arrow) out, for ``seconds``; ``expect_rows`` checks each answer's size."""
    dim = batches[0].shape[1]
    schema = pa.schema([pa.field("vector", pa.list_(pa.float32(), dim))])
    rbs = [
        pa.record_batch(
            [pa.FixedSizeListArray.from_arrays(pa.array(b.reshape(-1)), dim)], schema=schema
        )
        for b in batches
    ]
    streams: list[Any] = []

    def exchange(t: int) -> Callable[[int], Any]:
        fc = flight.FlightClient(uri)
        desc = flight.FlightDescriptor.for_command(json.dumps(command).encode())
        writer, reader = fc.do_exchange(desc)
        writer.begin(schema)
        streams.append((fc, writer, reader))

        def call(i: int) -> Any:
            writer.write_batch(rbs[i % len(rbs)])
            chunk = reader.read_chunk()
            if expect_rows is not None:
                assert chunk.data.num_rows == expect_rows, chunk.data.num_rows
            return chunk

        return call

    try:
        return run_loop(case, kind, 1, len(batches[0]), seconds, exchange)
    finally:
        for fc, writer, reader in streams:
            try:
                writer.done_writing()
                reader.read_all()
                writer.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
            fc.close()


def freshness_idle(uri: str, dim: int, samples: int) -> dict[str, Any]:
    Q = make_queries(samples * 2 + 8, dim, seed=11)
    params = {"metric_type": METRIC}
    ev: list[float] = []
    st: list[float] = []
    diffs: list[float] = []
    with Client(uri, timeout=60) as c:
        for level in ("Eventually", "Strong"):  # warm up
            c.search(COLLECTION, Q[:1], limit=K, search_params=params, consistency_level=level)
        for i in range(samples):
            times = {}
            order = ("Eventually", "Strong") if i % 2 == 0 else ("Strong", "Eventually")
            for level in order:
                q = Q[2 * i + (level == "Strong") :][:1]
                s = time.perf_counter()
                c.search(COLLECTION, q, limit=K, search_params=params, consistency_level=level)
                times[level] = time.perf_counter() - s
            ev.append(times["Eventually"])
            st.append(times["Strong"])
            diffs.append(times["Strong"] - times["Eventually"])
            time.sleep(0.013)  # spread the samples over the tick phases
    return {"eventually": ev, "strong": st, "extra": diffs}


def freshness_load(
    uri: str, dim: int, start_id: int, seconds: float, min_samples: int = 50
) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    rows = 1000
    acks: queue.Queue[tuple[float, int]] = queue.Queue()
    stop = threading.Event()
    errors: list[BaseException] = []
    inserted = [0]

    def writer() -> None:
        next_id = start_id
        try:
            with Client(uri, timeout=60) as w:
                while not stop.is_set():
                    v = rng.random((rows, dim), dtype=np.float32)
                    tbl = pa.table(
                        {
                            "id": pa.array(np.arange(next_id, next_id + rows, dtype=np.int64)),
                            "vector": pa.FixedSizeListArray.from_arrays(
                                pa.array(v.reshape(-1)), dim
                            ),
                        }
                    )
                    w.insert(COLLECTION, tbl)
                    acks.put((time.perf_counter(), next_id + rows - 1))
                    next_id += rows
                    inserted[0] += rows
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    visible: list[float] = []
    first_query: list[float] = []
    missed = 0
    th = threading.Thread(target=writer, daemon=True)
    t0 = time.perf_counter()
    th.start()
    try:
        with Client(uri, timeout=60) as p:
            p.query(COLLECTION, ids=[0], consistency_level="Strong")  # warm up
            deadline = t0 + max(seconds, 1.0)
            hard = t0 + max(4 * seconds, 30.0)
            while (
                (time.perf_counter() < deadline or len(visible) < min_samples)
                and time.perf_counter() < hard
                and not errors
            ):
                try:
                    item = acks.get(timeout=5)
                except queue.Empty:
                    continue
                while True:  # the newest ack
                    try:
                        item = acks.get_nowait()
                    except queue.Empty:
                        break
                t_ack, last_id = item
                attempt = 0
                while True:
                    s = time.perf_counter()
                    got = p.query(COLLECTION, ids=[last_id], consistency_level="Strong")
                    e = time.perf_counter()
                    if attempt == 0:
                        first_query.append(e - s)
                    if got:
                        visible.append(e - t_ack)
                        break
                    attempt += 1
                    if attempt == 1:
                        missed += 1
                    if e - t_ack > 10:
                        raise RuntimeError(f"row {last_id} not visible 10 s after its ack")
    finally:
        stop.set()
        th.join(60)
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return {
        "visible": visible,
        "first_query": first_query,
        "missed": missed,
        "insert_rows_s": inserted[0] / wall,
        "inserted": inserted[0],
    }


# -- printing --------------------------------------------------------------------------------------


def print_throughput(stats: list[Stat], rows: int, dim: int) -> None:
    def base(kind: str, per_call: int, threads: int | None = None) -> Stat | None:
        return next(
            (
                s
                for s in stats
                if s.kind == kind
                and s.per_call == per_call
                and (threads is None or s.threads == threads)
            ),
            None,
        )

    def ratio(s: Stat, b: Stat | None) -> str:
        return f"{s.qps / b.qps:.2f}x" if b is not None and b.qps > 0 else "-"

    body = []
    for s in stats:
        kern = ratio(s, base("kernel", s.per_call)) if s.kind == "elanus" else "-"
        empty = (
            ratio(s, base("empty", s.per_call, s.threads if s.per_call == 1 else 1))
            if s.kind == "elanus"
            else "-"
        )
        body.append(
            [
                s.case,
                str(s.threads),
                str(s.per_call),
                f"{s.calls:,}",
                f"{s.qps:,.0f}",
                f"{s.pct(50):.2f}",
                f"{s.pct(99):.2f}",
                kern,
                empty,
            ]
        )
    print_table(
        f"Search {rows:,} x {dim}-d float32, {METRIC}, k={K}, exact (queries/s; latency per call)",
        [
            "case",
            "threads",
            "q/call",
            "calls",
            "queries/s",
            "p50 ms",
            "p99 ms",
            "vs kernel",
            "vs empty Flight",
        ],
        body,
    )


def print_freshness(idle: dict[str, Any], load: dict[str, Any]) -> None:
    def row(name: str, xs: list[float], target: str, limit_ms: float | None) -> list[str]:
        p50, p99 = pcts(xs)
        ok = "-" if limit_ms is None else ("yes" if p50 <= limit_ms else "NO")
        return [name, str(len(xs)), f"{p50:.1f}", f"{p99:.1f}", target, ok]

    body = [
        row("idle: Eventually search latency", idle["eventually"], "", None),
        row("idle: Strong search latency", idle["strong"], "", None),
        row("idle: Strong extra wait (Strong - Eventually)", idle["extra"], "p50 <= 20 ms", 20),
        row("load: first Strong query latency", load["first_query"], "", None),
        row(
            "load: insert ack -> seen by a Strong query",
            load["visible"],
            f"<= {TICK_MS} ms (1 tick)",
            TICK_MS,
        ),
    ]
    print_table(
        "Freshness: what a Strong read waits for",
        ["case", "samples", "p50 ms", "p99 ms", "target", "p50 met"],
        body,
    )
    p99_ok = pcts(load["visible"])[1] <= TICK_MS
    print(
        f"  under load: {load['insert_rows_s']:,.0f} rows/s inserted in 1,000-row batches "
        f"({load['inserted']:,} rows); p99 within one tick: {'yes' if p99_ok else 'NO'}; "
        f"first Strong queries that missed an acknowledged row: {load['missed']}"
    )


# -- main ------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=None, help="rows in the collection (200,000)")
    p.add_argument("--dim", type=int, default=128, help="vector dimension (128)")
    p.add_argument("--seconds", type=float, default=None, help="seconds per case (5)")
    p.add_argument("--samples", type=int, default=50, help="idle Strong/Eventually pairs (50)")
    p.add_argument("--quick", action="store_true", help="20k rows, 2 s per case: a smoke run")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write results here")
    p.add_argument("--workdir", type=Path, default=None, help="server data (a temp dir)")
    args = p.parse_args(argv)
    args.rows = args.rows or (20_000 if args.quick else 200_000)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    own = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="elanus-bench-search-")) if own else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load = os.getloadavg()
    print(
        f"elanus search benchmark: {os.cpu_count()} CPUs, load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}, {args.rows:,} x {args.dim}-d, {args.seconds:g} s per "
        "case",
        flush=True,
    )
    if load[0] > 0.5 * (os.cpu_count() or 1):
        print("  !! the machine is busy: numbers will be low and noisy", file=sys.stderr)
    vectors, table = make_data(args.rows, args.dim)
    server = Standalone(workdir / "standalone")
    try:
        server.start()
        with Client(server.uri, timeout=600) as admin:
            # Quick setup's schema without its AUTOINDEX: exact search is what is measured.
            admin.create_collection(
                COLLECTION, schema=quick_schema(args.dim), properties={"metric_type": METRIC}
            )
            with timed() as t_ins:
                admin.insert(COLLECTION, table)
            with timed() as t_fl:
                admin.flush(COLLECTION, timeout=600, poll_s=0.02)
            with timed() as t_ld:
                admin.load_collection(COLLECTION, timeout=600)
                while admin.get_load_state(COLLECTION)["state"] != "Loaded":
                    time.sleep(0.05)
            print(
                f"  data: {table.nbytes / MB:,.0f} MB; insert {t_ins[0]:.1f}s, flush "
                f"{t_fl[0]:.1f}s, load {t_ld[0]:.1f}s",
                flush=True,
            )
            # sanity: the nearest neighbour of a stored vector is itself
            hit = admin.search(COLLECTION, vectors[123:124], limit=1, consistency_level="Strong")[
                0
            ][0]
            assert hit["id"] == 123 and hit["distance"] < 1e-3, hit
        stats = throughput(server.uri, vectors, args.dim, args.seconds)
        print("  freshness (idle) ...", flush=True)
        idle = freshness_idle(server.uri, args.dim, args.samples)
        print("  freshness (under insert load) ...", flush=True)
        under = freshness_load(server.uri, args.dim, args.rows, args.seconds * 2)
    finally:
        server.stop()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    print_throughput(stats, args.rows, args.dim)
    print_freshness(idle, under)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    if args.json is not None:
        out = {
            "rows": args.rows,
            "dim": args.dim,
            "throughput": [
                {
                    "case": s.case,
                    "threads": s.threads,
                    "per_call": s.per_call,
                    "calls": s.calls,
                    "qps": round(s.qps, 1),
                    "p50_ms": round(s.pct(50), 3),
                    "p99_ms": round(s.pct(99), 3),
                }
                for s in stats
            ],
            "freshness": {
                k: [round(p, 2) for p in pcts(v)]
                for k, v in [
                    *idle.items(),
                    ("ack_to_visible", under["visible"]),
                    ("load_first_query", under["first_query"]),
                ]
            },
            "missed": under["missed"],
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if under["missed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
