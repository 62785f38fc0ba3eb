"""Backup benchmark: how fast ``backup_create`` copies a server's data, and how fast
``elanus backup restore`` brings it back (issue 21).

    .venv/bin/python bench/backup.py                 # 300k x 128-d rows, local target
    .venv/bin/python bench/backup.py --quick         # 20k rows: smoke run
    .venv/bin/python bench/backup.py --rows 200000 --dim 64 --json out.json

A standalone server is started on a fresh data dir, loaded with ``--rows`` random vectors
(inserted in batches, flushed, not indexed, so the copy is of the segments themselves),
then:

* **backup**: ``Client.create_backup`` to a local target (flush of nothing left, the
  catalog at one timestamp, every segment file copied), timed from the call to its reply;
* **restore**: ``backupfiles.restore`` into an empty data dir, as ``elanus backup restore``
  runs it (files copied, catalog installed), timed in this process;
* **restored, first answer**: a standalone started on the restored data dir until a
  Strong count of the loaded collection answers with every row (start + load + count).

Rows/s is rows over the timed seconds; MB/s the bytes the backup's manifest counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone, announce  # noqa: E402

from elanus.client.client import Client  # noqa: E402
from elanus.meta import backupfiles  # noqa: E402
from elanus.schema import quick_schema  # noqa: E402
from elanus.settings import Settings  # noqa: E402

NAME = "bench"
BATCH = 20_000


def load(uri: str, rows: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    with Client(uri, timeout=600) as client:
        client.create_collection(NAME, schema=quick_schema(dim))
        for lo in range(0, rows, BATCH):
            hi = min(rows, lo + BATCH)
            vectors = rng.random((hi - lo, dim), dtype=np.float32)
            client.insert(NAME, {"id": np.arange(lo, hi), "vector": vectors})
        client.flush(NAME, timeout=600)


def count(client: Client) -> int:
    rows = client.query(NAME, "id >= 0", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def run(rows: int, dim: int, work: Path) -> list[dict[str, Any]]:
    target = work / "backups"
    with Standalone(work / "data") as server:
        load(server.uri, rows, dim)
        with Client(server.uri, timeout=3600) as client:
            t0 = time.perf_counter()
            made = client.create_backup(str(target), name="b")
            backup_s = time.perf_counter() - t0
    size = int(made["bytes"])
    t0 = time.perf_counter()
    backupfiles.restore(made["location"], Settings(data_dir=str(work / "restored")))
    restore_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with Standalone(work / "restored") as again, Client(again.uri, timeout=600) as client:
        client.load_collection(NAME)
        got = count(client)
    first_s = time.perf_counter() - t0
    if got != rows:
        raise SystemExit(f"the restored copy counts {got} rows, not {rows}")

    def row(case: str, seconds: float) -> dict[str, Any]:
        return {
            "case": case,
            "rows": rows,
            "MB": round(size / 2**20, 1),
            "seconds": round(seconds, 2),
            "rows/s": round(rows / seconds),
            "MB/s": round(size / 2**20 / seconds, 1),
        }

    return [
        row("backup", backup_s),
        row("restore", restore_s),
        row("restored, first answer", first_s),
    ]


def print_table(results: list[dict[str, Any]]) -> None:
    columns = list(results[0])
    widths = [max(len(c), *(len(str(r[c])) for r in results)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in results:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="20k rows: a smoke run")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    announce("backup benchmark", f"{rows} x {args.dim}-d rows, local target")
    with tempfile.TemporaryDirectory(prefix="elanus-bench-backup-") as tmp:
        results = run(rows, args.dim, Path(tmp))
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
