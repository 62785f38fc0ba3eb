"""Ceiling benchmark: how close a Python Flight server that searches can come to the empty
one, measured beside Elanus, each configuration alone.

    .venv/bin/python bench/ceiling.py                 # 20k x 64-d IVF_FLAT, 1 and 4 clients
    .venv/bin/python bench/ceiling.py --clients 1 --repeat 5 --seconds 2
    .venv/bin/python bench/ceiling.py --clients 1,4,8 --processes 1,2 --no-elanus

Issue 24 asks single-query search to reach 0.65x an empty Python Flight server. This
benchmark asks what that leaves for the search itself. Three servers answer the same
single-query ``search`` actions (``quick.py``'s bodies: 20k x 64-d clustered vectors,
IVF_FLAT nlist 512, nprobe 8, k 10), one client process with 1..N threads, each server
measured alone (no other server alive), best of ``--repeat`` runs:

* **empty Flight**: ``search.py``'s do-nothing server (parses the body, answers a constant);
* **FAISS only**: the least a search server does: parse the body, one FAISS
  ``IndexIVFFlat.search`` of the same vectors on one OpenMP thread (the index Elanus
  builds), the hits as JSON in Elanus's reply shape;
* **Elanus**: a standalone holding the same vectors (``transport.py``'s stack).

``--processes 1,2`` runs the empty and the FAISS-only server as that many processes, each
on its own port, client thread ``t`` calling process ``t mod P``: what one interpreter per
node costs against one per core (issue 35 item 1; ``docs/process-model.md``).

Besides queries/s it prints each server process's CPU per query (``psutil``). The gap
between "FAISS only" and the empty server is what the search kernel costs on this machine
when the server sleeps between requests (its caches go cold: the same ``search_c`` takes
~12 us in a tight loop and ~45 us in a Flight handler here); the gap between Elanus and
"FAISS only" is everything Elanus adds (checks, consistency, delegator, worker, reduce).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow.flight as flight

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quick  # noqa: E402
import transport  # noqa: E402
from _common import announce  # noqa: E402
from search import EmptyFlight, print_table, run_loop  # noqa: E402

from index import flight_loop  # noqa: E402

FAISS_SERVER = textwrap.dedent(
    """
    import json, sys
    import faiss, numpy as np, pyarrow.flight as flight

    vectors = np.load(sys.argv[2])
    nlist, nprobe = int(sys.argv[3]), int(sys.argv[4])
    faiss.omp_set_num_threads(1)
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(vectors.shape[1]), vectors.shape[1], nlist)
    index.train(vectors)
    index.add(vectors)
    params = faiss.SearchParametersIVF(nprobe=nprobe)

    class FaissOnly(flight.FlightServerBase):
        def do_action(self, context, action):
            if action.type != "search":
                return [flight.Result(b"{}")]
            body = json.loads(action.body.to_pybytes())
            queries = np.asarray(body["data"], dtype=np.float32)
            faiss.omp_set_num_threads(1)  # per thread: each Flight thread sets its own
            distances, ids = index.search(queries, body["limit"], params=params)
            hits = [
                [{"id": i, "distance": d, "entity": {}} for i, d in zip(irow, drow) if i >= 0]
                for irow, drow in zip(ids.tolist(), distances.tolist())
            ]
            return [flight.Result(json.dumps({"results": hits, "metric_type": "L2"}).encode())]

    FaissOnly(f"grpc://127.0.0.1:{sys.argv[1]}").serve()
    """
)


def spread_loop(uris: list[str], bodies: list[bytes], threads: int, seconds: float) -> Any:
    """``flight_loop`` over several servers: thread ``t`` calls ``uris[t % len(uris)]``."""
    if len(uris) == 1:
        return flight_loop("run", uris[0], bodies, threads, seconds, quiet=True)
    options = flight.FlightCallOptions(timeout=30)

    def make(t: int) -> Any:
        conn = flight.FlightClient(uris[t % len(uris)])

        def call(i: int) -> None:
            for _ in conn.do_action(flight.Action("search", bodies[i % len(bodies)]), options):
                pass

        return call

    return run_loop("run", "flight", threads, 1, seconds, make, quiet=True)


def measure(uris: list[str], pids: list[int], bodies: list[bytes], threads: int,
            args: argparse.Namespace) -> tuple[float, float]:  # fmt: skip
    """Best q/s of ``--repeat`` runs, and the servers' CPU microseconds per query in it."""
    procs = [psutil.Process(p) for p in pids]
    spread_loop(uris, bodies, threads, 0.5)
    best = (0.0, float("nan"))
    for _ in range(args.repeat):
        before = sum(sum(p.cpu_times()[:2]) for p in procs)
        stat = spread_loop(uris, bodies, threads, args.seconds)
        cpu = sum(sum(p.cpu_times()[:2]) for p in procs) - before
        if stat.qps > best[0]:
            best = (stat.qps, cpu / max(1, stat.calls) * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--clients", default="1,4")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--processes", default="1", help="server processes of the baselines, e.g. 1,2")
    p.add_argument("--no-elanus", action="store_true", help="the baselines only")
    args = p.parse_args(argv)
    clients = [int(c) for c in args.clients.split(",")]
    counts = [int(c) for c in args.processes.split(",")]
    announce("ceiling benchmark", f"each server alone, best of {args.repeat}")
    work = transport.Workload.make(args.rows, 64, nprobe=8)
    bodies = quick.action_bodies(work)
    results: dict[tuple[str, int, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="elanus-bench-ceiling-") as tmp_dir:
        tmp = Path(tmp_dir)
        vectors_path = tmp / "vectors.npy"
        np.save(vectors_path, work.vectors)
        faiss_args = (str(vectors_path), str(work.nlist), str(work.nprobe))
        for case, script, extra in (
            ("empty Flight", None, ()),
            ("FAISS only", FAISS_SERVER, faiss_args),
        ):
            for count in counts:
                with contextlib.ExitStack() as servers:
                    started = [
                        servers.enter_context(
                            EmptyFlight() if script is None else EmptyFlight(script, extra)
                        )
                        for _ in range(count)
                    ]
                    uris = [s.uri for s in started]
                    pids = [s.proc.pid for s in started if s.proc is not None]
                    for n in clients:
                        results[(case, count, n)] = measure(uris, pids, bodies, n, args)
        if not args.no_elanus:
            stack = transport.loaded_stack(transport.IN_PROCESS, tmp / "elanus", work)
            with stack as uri:
                pids = [c.pid for c in psutil.Process().children(recursive=True)]
                for n in clients:
                    results[("Elanus", 1, n)] = measure([uri], pids, bodies, n, args)
    rows = []
    for (case, count, n), (qps, cpu) in results.items():
        empty = results[("empty Flight", 1, n)][0]
        rows.append([case, str(count), str(n), f"{qps:,.0f}", f"{qps / empty:.2f}x", f"{cpu:,.0f}"])
    print_table(
        f"single-query search, {work.rows:,} x 64-d clustered, IVF_FLAT nlist={work.nlist} "
        f"nprobe={work.nprobe}, k=10",
        ["server", "processes", "clients", "q/s", "vs empty (1 process)", "server CPU us/query"],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
