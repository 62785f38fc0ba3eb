"""End-to-end ingest benchmark: Flight DoPut -> JetStream -> datanode -> flushed Lance.

    .venv/bin/python bench/ingest.py                       # 1M x 128-d, 1 client, 1 shard
    .venv/bin/python bench/ingest.py --also-768            # + 200k x 768-d (what `make bench` runs)
    .venv/bin/python bench/ingest.py --clients 1,2 --shards 1,2
    .venv/bin/python bench/ingest.py --quick               # 100k rows, a smoke run
    .venv/bin/python bench/ingest.py --profile prof/       # + py-spy of the server process

For each data set (random float32 vectors, generated once) it measures, in the same run and
on the same Arrow table:

* **elanus insert**: a fresh ``elanus standalone`` child process (its own data dir and
  embedded nats-server); each client thread inserts its slice through the SDK; the time is
  from the first byte sent to the last ack (every row acknowledged by JetStream).
* **elanus +flush**: the same plus ``flush`` until every segment is Flushed (rows durable in
  Lance). The row count is checked against ``get_segment_info``; the "last ack -> flushed"
  seconds are reported on their own.
* **raw JetStream**: the same rows cut into ~1 MB Arrow IPC messages (encoded beforehand),
  published with nats-py ``publish_async`` to a fresh file-backed stream on a separate
  embedded nats-server, waiting for every ack.
* **raw Lance**: ``lance.write_dataset`` of the table into an empty dir.
* **LanceDB** (if ``import lancedb`` works): ``create_table`` of the table.

Ratios are rows/s over the raw baselines' rows/s. CPU seconds of the client, the server
process and its nats-server during each Elanus insert are printed too (this box has few
cores: they all compete for them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    MB,
    CpuMeter,
    PySpy,
    Result,
    Standalone,
    print_results,
    summarize_collapsed,
    timed,
)

from elanus.channels.dml import DEFAULT_MAX_MESSAGE_BYTES  # noqa: E402
from elanus.channels.nats_server import EmbeddedNats  # noqa: E402
from elanus.channels.publisher import encode_pieces  # noqa: E402
from elanus.client.client import Client  # noqa: E402
from elanus.schema import DataType, Field, Schema  # noqa: E402

COLLECTION = "bench_ingest"

# lance and lancedb warn on every fork once imported; our forks (the servers) exec at once.
warnings.filterwarnings("ignore", message=".*fork.*")


# -- data -------------------------------------------------------------------------------------
def bench_schema(dim: int) -> Schema:
    return Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("vector", DataType.FLOAT_VECTOR, dim=dim),
        ],
        enable_dynamic_field=False,
    )


def make_table(rows: int, dim: int, seed: int = 42) -> pa.Table:
    """Random float32 vectors and ids 0..rows-1, typed exactly as the collection's fields."""
    rng = np.random.default_rng(seed)
    vectors = rng.random((rows, dim), dtype=np.float32)
    schema = bench_schema(dim)
    arrays = [
        pa.array(np.arange(rows, dtype=np.int64)),
        pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.arrow_field() for f in schema.fields]))


def slices(table: pa.Table, parts: int) -> list[pa.Table]:
    step = -(-table.num_rows // parts)
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


# -- Elanus -----------------------------------------------------------------------------------
def profile_path(root: Path | None, dim: int, shards: int, clients: int, phase: str) -> Path:
    assert root is not None
    return root / f"server-d{dim}-s{shards}-c{clients}-{phase}.txt"


def run_elanus(
    table: pa.Table,
    dim: int,
    shards: int,
    clients: int,
    workdir: Path,
    profile_dir: Path | None,
    verbose: bool,
    profile_gil: bool = False,
    keep: bool = False,
) -> list[Result]:
    label = (
        f"{clients} client{'s' if clients > 1 else ''}, {shards} shard{'s' if shards > 1 else ''}"
    )
    rows, nbytes = table.num_rows, table.nbytes
    data_dir = Path(tempfile.mkdtemp(prefix=f"elanus-d{dim}-s{shards}-c{clients}-", dir=workdir))
    server = Standalone(data_dir)
    started = time.perf_counter()
    server.start()
    if verbose:
        print(f"  standalone pid {server.pid} up in {time.perf_counter() - started:.1f}s")
    spy: PySpy | None = None
    server_warnings: list[str] = []  # filled from the server's log once it stopped
    try:
        with Client(server.uri, timeout=600) as admin:
            admin.create_collection(COLLECTION, schema=bench_schema(dim), num_shards=shards)
            parts = slices(table, clients)
            conns = [Client(server.uri, timeout=600) for _ in parts]
            for c in conns:  # open the gRPC channels before the clock starts
                c.describe_collection(COLLECTION)
            acked: list[int] = [0] * len(parts)
            ends: list[float] = [0.0] * len(parts)
            errors: list[BaseException] = []
            barrier = threading.Barrier(len(parts) + 1)

            def work(i: int) -> None:
                try:
                    barrier.wait()
                    reply = conns[i].insert(COLLECTION, parts[i])
                    acked[i] = int(reply["insert_count"])
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                finally:
                    ends[i] = time.perf_counter()

            threads = [threading.Thread(target=work, args=(i,)) for i in range(len(parts))]
            for t in threads:
                t.start()
            if profile_dir is not None:
                spy = PySpy(
                    server.pid,
                    profile_path(profile_dir, dim, shards, clients, "insert"),
                    gil=profile_gil,
                )
                spy.start()
            meter = CpuMeter(
                {"client": os.getpid(), "server": server.pid, "nats": server.nats_pid()}
            ).start()
            t0 = time.perf_counter()
            barrier.wait()
            for t in threads:
                t.join()
            t_ack = max(ends) - t0
            cpu_insert = meter.stop()
            if errors:
                raise errors[0]
            if spy is not None:  # one profile per phase (this delays the flush call)
                spy.stop()
                spy = PySpy(
                    server.pid,
                    profile_path(profile_dir, dim, shards, clients, "flush"),
                    gil=profile_gil,
                )
                spy.start()
            meter.start()
            t1 = time.perf_counter()
            admin.flush(COLLECTION, timeout=900, poll_s=0.02)
            t_flush = time.perf_counter() - t1
            cpu_flush = meter.stop()
            if spy is not None:
                spy.stop()
            segs = admin.get_segment_info(COLLECTION)
            flushed = [s for s in segs if s["state"] == "Flushed"]
            flushed_rows = sum(int(s["num_rows"]) for s in flushed)
            for c in conns:
                c.close()
        ok = sum(acked) == rows and flushed_rows == rows
        if not ok:
            print(
                f"  !! {label}: acked {sum(acked)}, flushed {flushed_rows} of {rows} rows "
                f"({len(flushed)} Flushed of {len(segs)} segments)",
                file=sys.stderr,
            )
        extra = {
            "clients": clients,
            "shards": shards,
            "ack_s": round(t_ack, 3),
            "ack_to_flushed_s": round(t_flush, 3),
            "segments": len(flushed),
            "flushed_rows": flushed_rows,
            "cpu_insert_s": {k: round(v, 2) for k, v in cpu_insert.items()},
            "cpu_flush_s": {k: round(v, 2) for k, v in cpu_flush.items()},
            "server_warnings": server_warnings,
        }
        return [
            Result(f"elanus insert, {label} (to last ack)", rows, dim, t_ack, nbytes,
                   ok=ok, extra=extra),
            Result(f"elanus insert+flush, {label}", rows, dim, t_ack + t_flush, nbytes,
                   ok=ok, extra=extra),
        ]  # fmt: skip
    finally:
        if spy is not None:
            spy.stop()
        server.stop()
        log_text = server.log_tail(10_000_000)
        server_warnings.extend(
            line.split(" WARNING ", 1)[1][:300]
            for line in log_text.splitlines()
            if " WARNING " in line
        )
        if "Traceback" in log_text:
            start = max(0, log_text.index("Traceback") - 1000)
            print(
                f"  !! the server logged a traceback ({server.log_path}):\n"
                f"{log_text[start : start + 8000]}",
                file=sys.stderr,
            )
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


# -- baselines --------------------------------------------------------------------------------
def ipc_messages(table: pa.Table, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[bytes]:
    """The table as ~1 MB Arrow IPC stream messages, cut as the proxy cuts them."""
    return [
        bytes(payload)
        for rb in table.combine_chunks().to_batches()
        for _, payload in encode_pieces(rb, max_bytes, max_bytes)
    ]


RAW_WINDOW = 64
"""Messages the raw baseline keeps unacknowledged (~64 MB). nats-server (2.11 and later)
drops a stream's inbound messages past its ingest queue's limit (logged "IPQ size limit
reached") and publishing all of a million rows at once left acks that never came: the
baseline hung. Windows of 8-100 messages measured alike (0.63-0.89 s for 1M x 128-d)."""
RAW_ACK_S = 30.0
"""An ack later than this fails the baseline instead of hanging the benchmark."""


async def _publish_all(server: EmbeddedNats, messages: list[bytes]) -> float:
    import nats
    from nats.js.api import StorageType, StreamConfig

    creds = server.credentials  # the embedded server requires them, as in production
    nc = await nats.connect(server.url, user=creds.user, password=creds.password)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="RAW", subjects=["raw.>"], storage=StorageType.FILE))
        start = time.perf_counter()
        acks, window = [], []
        for m in messages:
            window.append(await js.publish_async("raw.data", m))
            if len(window) >= RAW_WINDOW:
                acks.append(await asyncio.wait_for(window.pop(0), RAW_ACK_S))
        acks += [await asyncio.wait_for(f, RAW_ACK_S) for f in window]
        seconds = time.perf_counter() - start
        if len(acks) != len(messages) or acks[-1].seq != len(messages):
            raise RuntimeError(f"raw JetStream: {len(acks)} acks for {len(messages)} messages")
        return seconds
    finally:
        await nc.close()


def run_raw_jetstream(table: pa.Table, dim: int, workdir: Path) -> Result:
    with timed() as enc:
        messages = ipc_messages(table)
    store = workdir / f"raw-nats-d{dim}"
    server = EmbeddedNats(store).start()
    try:
        meter = CpuMeter({"client": os.getpid(), "nats": server.pid}).start()
        seconds = asyncio.run(_publish_all(server, messages))
        cpu = meter.stop()
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)
    return Result(
        "raw JetStream publish_async (~1 MB IPC msgs)",
        table.num_rows,
        dim,
        seconds,
        table.nbytes,
        kind="raw-js",
        extra={
            "messages": len(messages),
            "ipc_encode_s": round(enc[0], 3),
            "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        },
    )


def run_raw_lance(table: pa.Table, dim: int, workdir: Path) -> Result:
    import lance

    path = workdir / f"raw-d{dim}.lance"
    try:
        meter = CpuMeter({"client": os.getpid()}).start()
        with timed() as t:
            lance.write_dataset(table, str(path), mode="create")
        cpu = meter.stop()
        count = lance.dataset(str(path)).count_rows()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return Result("raw lance.write_dataset", count, dim, t[0], table.nbytes, kind="raw-lance",
                  extra={"cpu_s": {k: round(v, 2) for k, v in cpu.items()}})  # fmt: skip


def run_lancedb(table: pa.Table, dim: int, workdir: Path) -> Result | None:
    try:
        import lancedb
    except ImportError:
        return None
    path = workdir / f"lancedb-d{dim}"
    try:
        db = lancedb.connect(str(path))
        meter = CpuMeter({"client": os.getpid()}).start()
        with timed() as t:
            tbl = db.create_table("bench", data=table)
        cpu = meter.stop()
        count = tbl.count_rows()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return Result("LanceDB create_table", count, dim, t[0], table.nbytes, kind="other",
                  extra={"cpu_s": {k: round(v, 2) for k, v in cpu.items()}})  # fmt: skip


# -- main -------------------------------------------------------------------------------------
def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1 or 1,2: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=None, help="rows of the main case (1,000,000)")
    p.add_argument("--dim", type=int, default=128, help="dimension of the main case (128)")
    p.add_argument("--also-768", action="store_true", help="add the 200k x 768-d case")
    p.add_argument("--rows-768", type=int, default=None, help="rows of the 768-d case (200,000)")
    p.add_argument("--clients", type=int_list, default=[1], help="concurrent clients, e.g. 1,2")
    p.add_argument("--shards", type=int_list, default=[1], help="num_shards, e.g. 1,2")
    p.add_argument("--quick", action="store_true", help="100k rows (20k at 768-d): smoke run")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every measurement N times and keep the fastest (noisy machines)",
    )
    p.add_argument("--no-baselines", action="store_true", help="only the Elanus cases")
    p.add_argument("--no-lancedb", action="store_true", help="skip the LanceDB baseline")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy the server during each Elanus case; collapsed stacks in DIR",
    )
    p.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: sample only the thread holding the GIL",
    )
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write results here")
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where servers and baselines write (a fresh temp dir by default)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the servers' data dirs and logs (needs --workdir, else they go with it)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)  # fmt: skip
    args.rows = args.rows or (100_000 if args.quick else 1_000_000)
    args.rows_768 = args.rows_768 or (20_000 if args.quick else 200_000)
    return args


def _warning_kind(line: str) -> str:
    """A server warning without its numbers, so that repeats group together."""
    return re.sub(r"\d+", "N", line)[:160]


def _cpu_text(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}s" for k, v in cpu.items())


def print_notes(results: list[Result]) -> None:
    ncpu = os.cpu_count() or 1
    for r in results:
        x = r.extra
        if r.kind == "elanus" and "+flush" in r.case:
            print(
                f"  {x['clients']} client(s), {x['shards']} shard(s): last ack -> flushed "
                f"{x['ack_to_flushed_s']:.2f}s ({x['segments']} segments, "
                f"{x['flushed_rows']:,} rows verified)\n"
                f"      CPU during insert ({x['ack_s']:.2f}s wall): {_cpu_text(x['cpu_insert_s'])}"
                f"\n      CPU during flush ({x['ack_to_flushed_s']:.2f}s wall): "
                f"{_cpu_text(x['cpu_flush_s'])}"
            )
            others = x["cpu_insert_s"].get("others", 0) + x["cpu_flush_s"].get("others", 0)
            if x.get("server_warnings"):
                kinds = Counter(_warning_kind(w) for w in x["server_warnings"])
                top = "; ".join(f"{n} x {k}" for k, n in kinds.most_common(3))
                print(f"      server logged {len(x['server_warnings'])} warning(s): {top}")
        elif r.kind == "raw-js":
            print(
                f"  raw JetStream: {x['messages']} messages; IPC encoding beforehand "
                f"{x['ipc_encode_s']:.2f}s (not timed); CPU: {_cpu_text(x['cpu_s'])}"
            )
            others = x["cpu_s"].get("others", 0)
        elif "cpu_s" in x:
            print(f"  {r.case}: CPU: {_cpu_text(x['cpu_s'])}")
            others = x["cpu_s"].get("others", 0)
        else:
            continue
        if others > 0.15 * r.seconds * ncpu:
            print(
                f"      !! other processes used {others:.1f} CPU-s during this case: the machine "
                "is not quiet, this number is suspect"
            )


def print_profile(path: Path, top: int = 15) -> None:
    s = summarize_collapsed(path, top)
    if not s["total"]:
        print(f"  (no samples in {path})")
        return
    total = s["total"]
    print(f"\n  py-spy {path.name}: {total} samples (active threads only)")
    print("  samples per thread:")
    for name, n in s["threads"]:
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  top self time:")
    for name, n in s["self"]:
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  top inclusive:")
    for name, n in s["inclusive"]:
        print(f"    {100 * n / total:5.1f}%  {name}")


def best_of(repeat: int, run: Any, label: str) -> Any:
    """Run ``repeat`` times and keep the fastest (the last Result of what ``run`` returns).

    On a shared box the slowest runs measure the neighbours; every run's seconds are kept
    in ``extra["runs_s"]`` of the kept result.
    """
    runs = []
    for i in range(repeat):
        out = run()
        if out is None:
            return None
        results = out if isinstance(out, list) else [out]
        runs.append(results)
        if repeat > 1:
            secs = " / ".join(f"{r.seconds:.2f}s" for r in results)
            print(f"  {label} run {i + 1}/{repeat}: {secs}", flush=True)
    best = min(runs, key=lambda rs: rs[-1].seconds)
    for r in best:
        r.extra["runs_s"] = [round(rs[best.index(r)].seconds, 3) for rs in runs]
        if repeat > 1:
            r.case += f" [best of {repeat}]"
    return best if len(best) > 1 else best[0]


def run_case(args: argparse.Namespace, rows: int, dim: int, workdir: Path) -> list[Result]:
    print(f"\n== {rows:,} x {dim}-d float32", flush=True)
    with timed() as gen:
        table = make_table(rows, dim)
    print(f"  data: {table.nbytes / MB:,.0f} MB generated in {gen[0]:.1f}s", flush=True)
    results: list[Result] = []
    n = args.repeat
    if not args.no_baselines:
        r = best_of(n, lambda: run_raw_jetstream(table, dim, workdir), "raw JetStream")
        results.append(r)
        print(f"  raw JetStream: {r.seconds:.2f}s", flush=True)
        r = best_of(n, lambda: run_raw_lance(table, dim, workdir), "raw Lance")
        results.append(r)
        print(f"  raw Lance: {r.seconds:.2f}s", flush=True)
        if not args.no_lancedb:
            r = best_of(n, lambda: run_lancedb(table, dim, workdir), "LanceDB")
            if r is None:
                print("  LanceDB: not importable, skipped")
            else:
                results.append(r)
                print(f"  LanceDB: {r.seconds:.2f}s", flush=True)
    for shards in args.shards:
        for clients in args.clients:
            label = f"elanus {clients} client(s) {shards} shard(s)"
            pair = best_of(
                n,
                lambda s=shards, c=clients: run_elanus(
                    table,
                    dim,
                    s,
                    c,
                    workdir,
                    args.profile,
                    args.verbose,
                    args.profile_gil,
                    args.keep,
                ),
                label,
            )
            results.extend(pair)
            print(
                f"  {label}: ack {pair[0].seconds:.2f}s, +flush {pair[1].seconds:.2f}s",
                flush=True,
            )
    print_results(f"Ingest {rows:,} x {dim}-d float32", results)
    print_notes(results)
    if args.profile is not None:
        print(
            "\n  (profiled runs: py-spy costs CPU and attaching between the phases delays the "
            "flush call, so their timings are not the benchmark's)"
        )
        for shards in args.shards:
            for clients in args.clients:
                for phase in ("insert", "flush"):
                    print_profile(profile_path(args.profile, dim, shards, clients, phase))
    return results


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: servers stopped, temp dirs removed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    cases = [(args.rows, args.dim)]
    if args.also_768:
        cases.append((args.rows_768, 768))
    own_workdir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="elanus-bench-")) if own_workdir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    all_results: list[Result] = []
    try:
        load = os.getloadavg()
        print(
            f"elanus ingest benchmark: {os.cpu_count()} CPUs, load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, workdir {workdir}"
        )
        if load[0] > 0.5 * (os.cpu_count() or 1):
            print("  !! the machine is busy: numbers will be low and noisy", file=sys.stderr)
        for rows, dim in cases:
            all_results += run_case(args, rows, dim, workdir)
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_dict() for r in all_results], indent=2) + "\n")
    return 0 if all(r.ok for r in all_results) else 1


if __name__ == "__main__":
    sys.exit(main())
