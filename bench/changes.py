"""The change stream's rows/s (``Client.watch``, reading the log) against the write rate,
on one standalone that keeps its log (``log_retention_s``).

    .venv/bin/python bench/changes.py                       # 200k x 64-d, 10k rows a write
    .venv/bin/python bench/changes.py --rows 20000          # smoke run

Cases: inserts alone (the write rate); a catch-up read of all of them from ``earliest``
(``follow=False``); inserts again with a watcher following them in another thread (the
write rate beside a watcher, and how far behind the watcher ended); and an upsert pass
read back (each upsert is a delete and an insert on the log, shown as one row).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce, print_table  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402

NAME = "changes"


def write(client: Client, rows: int, dim: int, batch: int, start: int, upsert: bool) -> float:
    """rows/s of inserts (or upserts) of ``batch`` rows each."""
    rng = np.random.default_rng(start)
    t = time.perf_counter()
    for lo in range(start, start + rows, batch):
        ids = np.arange(lo, min(lo + batch, start + rows))
        data = {"id": ids, "vector": rng.random((len(ids), dim), dtype=np.float32)}
        (client.upsert if upsert else client.insert)(NAME, data)
    return rows / (time.perf_counter() - t)


def read_all(client: Client, login: dict[str, str], since: str | int) -> tuple[int, float]:
    t = time.perf_counter()
    n = sum(b.num_rows for b in client.watch(NAME, since, follow=False, **login))
    return n, n / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=10_000)
    args = p.parse_args()
    announce("changes", f"{args.rows:,} x {args.dim}-d rows, {args.batch:,} a write")
    body = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Standalone(Path(tmp) / "data", env={"ELANUS_LOG_RETENTION_S": "3600"}).start()
        try:
            creds = json.loads(next(server.data_dir.rglob("credentials.json")).read_text())
            login = {"nats_user": creds["user"], "nats_password": creds["password"]}
            with Client(server.uri, timeout=600) as client:
                client.create_collection(NAME, schema=quick_schema(args.dim))
                start_ts = client.insert(NAME, {"id": [-1], "vector": [[0.0] * args.dim]})["ts"]
                w = write(client, args.rows, args.dim, args.batch, 0, False)
                body.append(["insert (no watcher)", f"{w:,.0f}", ""])
                n, r = read_all(client, login, start_ts)
                body.append([f"watch catch-up ({n:,} rows)", f"{r:,.0f}", f"{r / w:.2f}x"])

                seen = [0]
                done = threading.Event()

                def follow() -> None:
                    with Client(server.uri) as c:
                        for t in c.watch(NAME, "latest", poll_s=0.05, **login):
                            seen[0] += t.num_rows
                            if done.is_set() and seen[0] >= args.rows:
                                return

                watcher = threading.Thread(target=follow, daemon=True)
                watcher.start()
                time.sleep(1.0)
                w2 = write(client, args.rows, args.dim, args.batch, args.rows, False)
                t = time.perf_counter()
                done.set()
                watcher.join(timeout=120)
                lag = time.perf_counter() - t
                body.append(["insert beside a following watcher", f"{w2:,.0f}", f"{w2 / w:.2f}x"])
                body.append([f"  watcher: {seen[0]:,} rows, done {lag:.2f} s after", "", ""])
                ts = client.insert(NAME, {"id": [-2], "vector": [[0.0] * args.dim]})["ts"]
                u = write(client, args.rows, args.dim, args.batch, 0, True)
                n, r = read_all(client, login, ts)
                body.append(["upsert", f"{u:,.0f}", ""])
                body.append([f"watch catch-up of upserts ({n:,})", f"{r:,.0f}", f"{r / u:.2f}x"])
        finally:
            server.stop()
    print_table(
        "change stream vs writes (rows/s; ratio: vs the write rate)",
        ["case", "rows/s", "ratio"],
        body,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
