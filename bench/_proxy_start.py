"""How long a restarted proxy takes to serve (issue 22: within 2 s of its process start).

A small ``LocalCluster`` (one nats-server, coord, data node, query node and proxy; the
Milvus port off, as the chaos harness runs it) with a loaded collection; then, N times:
SIGKILL the proxy, start it again with the same command line (``elanus run proxy ...``)
and time, from the spawn, the first answered ``health()`` and the first answered Strong
search, each polled every 10 ms with a fresh client. Also the imports ``elanus run proxy``
does before it serves, in a fresh interpreter (best of 7). Not a benchmark of ``make bench``
(``bench/_*.py`` is skipped)::

    .venv/bin/python bench/_proxy_start.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from elanus.cli.cluster import LocalCluster
from elanus.client.client import Client
from elanus.errors import ElanusError
from elanus.schema import quick_schema

IMPORTS = (
    "import time; t = time.perf_counter(); import elanus.cli.main, elanus.cli.host; "
    "from elanus.cli.roles import role_class; role_class('proxy'); "
    "print(time.perf_counter() - t)"
)


def import_time(runs: int = 7) -> float:
    """The imports of ``elanus run proxy`` before it serves, best of ``runs``."""
    out = (
        subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True)
        for _ in range(runs)
    )
    return min(float(r.stdout) for r in out)


def first_success(call: Callable[[], object], t0: float, cap_s: float = 60.0) -> float:
    """Seconds from ``t0`` until ``call`` first succeeds."""
    while True:
        try:
            call()
            return time.monotonic() - t0
        except ElanusError:
            if time.monotonic() - t0 > cap_s:
                raise
            time.sleep(0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"imports of elanus run proxy (best of 7): {import_time():.3f} s", flush=True)
    root = Path(tempfile.mkdtemp(prefix="elanus-proxy-start-"))
    cluster = LocalCluster(
        root, nats=1, proxies=1, datanodes=1, querynodes=1, indexnodes=0, standby=False,
        env={"ELANUS_MILVUS_PORT": "0"},
    )  # fmt: skip
    cluster.start(180)
    try:
        uri = cluster.uris[0]
        with Client(uri, timeout=120) as c:
            c.create_collection("start", schema=quick_schema(8), num_shards=1)
            c.insert("start", [{"id": i, "vector": [0.1 * i] * 8} for i in range(10)])
            c.load_collection("start")

        def health() -> None:
            with Client(uri, timeout=2, retry_deadline_s=0) as c:
                c.health()

        def strong_search() -> None:
            with Client(uri, timeout=5, retry_deadline_s=0) as c:
                c.search("start", [[0.5] * 8], limit=3, consistency_level="Strong")

        proxy = next(child for child in cluster.children if child.role == "proxy")
        answered, searched = [], []
        for _ in range(args.runs):
            assert proxy.proc is not None
            os.killpg(proxy.proc.pid, signal.SIGKILL)
            proxy.proc.wait(10)
            time.sleep(0.5)
            t0 = time.monotonic()
            cluster.launch(proxy)
            answered.append(first_success(health, t0))
            searched.append(first_success(strong_search, t0))
            print(f"health {answered[-1]:.3f} s  Strong search {searched[-1]:.3f} s", flush=True)
            time.sleep(1.0)
        print(f"best: health {min(answered):.3f} s  Strong search {min(searched):.3f} s")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
