"""Object storage beside local storage: the same standalone with ``storage`` a local
directory and ``s3://bucket/prefix`` on a local S3-protocol server (moto_server), same data.

    .venv/bin/python bench/storage.py                      # 200k x 128-d, best of 2
    .venv/bin/python bench/storage.py --rows 20000 --repeat 1   # smoke run

Each configuration runs alone (its server started, measured, stopped; moto_server runs
only for the S3 case): insert to the last ack, insert+flush (every segment Flushed), a
release and a load of the collection (IVF_FLAT nlist 128, built before), single-query
searches (nprobe 8, Eventually) for ``--seconds``. moto keeps objects in memory: this is
what the S3 protocol and Lance's object store cost, not what a real network adds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.fs as pafs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce, print_table  # noqa: E402

from elanus.channels.nats_server import free_port, terminate  # noqa: E402
from elanus.client.client import Client  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402

NAME = "storage_bench"
KEY, SECRET = "bench-key", "bench-secret"
MOTO = str(Path(sys.executable).parent / "moto_server")


def start_moto(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([MOTO, "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    fs = pafs.S3FileSystem(access_key=KEY, secret_key=SECRET, region="us-east-1",
                           endpoint_override=f"127.0.0.1:{port}", scheme="http",
                           allow_bucket_creation=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            fs.create_dir("bench")
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                terminate(proc)
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)


def measure(uri: str, vectors: np.ndarray, queries: np.ndarray, seconds: float) -> dict[str, Any]:
    rows, dim = vectors.shape
    out: dict[str, Any] = {}
    with Client(uri, timeout=600) as c:
        c.create_collection(NAME, schema=quick_schema(dim), properties={"metric_type": "L2"})
        t = time.perf_counter()
        for lo in range(0, rows, 50_000):
            ids = np.arange(lo, min(lo + 50_000, rows))
            c.insert(NAME, {"id": ids, "vector": vectors[ids]})
        out["ack"] = rows / (time.perf_counter() - t)
        c.flush(NAME, timeout=600, poll_s=0.02)
        out["flush"] = rows / (time.perf_counter() - t)
        c.create_index(NAME, "vector", index_type="IVF_FLAT", metric_type="L2",
                       params={"nlist": 128})  # fmt: skip
        c.wait_for_index(NAME, timeout=600)
        t = time.perf_counter()
        c.load_collection(NAME, timeout=600)
        out["load"] = time.perf_counter() - t
        params = {"params": {"nprobe": 8}}
        for q in queries[:50]:
            c.search(NAME, [q], limit=10, search_params=params, consistency_level="Eventually")
        n, end = 0, time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < end:
            c.search(NAME, [queries[n % len(queries)]], limit=10, search_params=params,
                     consistency_level="Eventually")  # fmt: skip
            n += 1
        out["qps"] = n / (time.perf_counter() - started)
    return out


def run(kind: str, work: Path, vectors: np.ndarray, queries: np.ndarray, seconds: float) -> Any:
    env: dict[str, str] = {}
    moto = None
    if kind == "s3":
        moto, endpoint = start_moto(work / "moto.log")
        env = {"ELANUS_STORAGE": f"s3://bench/{os.getpid()}-{time.monotonic_ns()}",
               "ELANUS_S3_ENDPOINT": endpoint, "ELANUS_S3_REGION": "us-east-1",
               "ELANUS_S3_ACCESS_KEY_ID": KEY, "ELANUS_S3_SECRET_ACCESS_KEY": SECRET,
               "ELANUS_S3_ALLOW_HTTP": "true"}  # fmt: skip
    try:
        with Standalone(work / f"{kind}-{time.monotonic_ns()}", env=env) as server:
            return measure(server.uri, vectors, queries, seconds)
    finally:
        terminate(moto)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    announce("storage", f"{args.rows:,} x {args.dim}-d, IVF_FLAT nlist 128 nprobe 8")
    rng = np.random.default_rng(0)
    vectors = rng.random((args.rows, args.dim), dtype=np.float32)
    queries = rng.random((256, args.dim), dtype=np.float32)
    best: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for kind in ("local", "s3") if round_ % 2 == 0 else ("s3", "local"):
                got = run(kind, Path(tmp), vectors, queries, args.seconds)
                print(f"  {kind}: {got}", flush=True)
                old = best.get(kind)
                if old is None:
                    best[kind] = got
                else:
                    best[kind] = {k: (min if k == "load" else max)(old[k], got[k]) for k in got}
    local = best["local"]
    body = []
    for kind in ("local", "s3"):
        f = best[kind]
        body.append([
            kind, f"{f['ack']:,.0f}", f"{f['flush']:,.0f}", f"{f['load']:.2f}",
            f"{f['qps']:,.0f}", f"{f['qps'] / local['qps']:.2f}x",
        ])  # fmt: skip
    print_table(
        "storage: local directory vs S3 protocol (moto_server), best of each",
        ["storage", "insert rows/s (ack)", "insert+flush rows/s", "load s", "search q/s",
         "search vs local"],
        body,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
