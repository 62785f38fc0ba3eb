"""Spark connector benchmark: write and read rows/s of the ``elanus`` data source beside Spark
writing and reading the same data as plain Parquet, in the same run, in ``local[2]``.

    .venv/bin/python bench/spark.py                 # 1M x 128-d
    .venv/bin/python bench/spark.py --rows 200000   # a quicker run

One ``elanus standalone`` child process holds the collection (int64 ``id``, 128-d float
``vector``; 2 shards), loaded before the write. The rows are generated once into a Parquet
*source* file, so every case starts from the same input:

* **Parquet write**: source -> ``df.write.parquet`` (a copy);
* **Elanus write**: source -> ``df.write.format("elanus")`` (staged DoPut per task, one commit;
  rows are visible when ``save()`` returns);
* **Parquet read** / **Elanus read**: ``spark.read...`` -> the ``noop`` sink, which makes Spark
  read every row and column and write nothing; Elanus is read loaded, then released (a
  files-only plan: no delegator is asked).

Each case runs ``--repeat`` times (best taken); the Elanus write goes to a fresh collection
each time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Standalone  # noqa: E402

import elanus.spark  # noqa: E402
from elanus.client.client import Client  # noqa: E402

DIM = 128


def best_of(repeat: int, run: object) -> float:
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        run(i)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    n = args.rows
    with tempfile.TemporaryDirectory(prefix="elanus-bench-spark-") as tmp:
        root = Path(tmp)
        spark = elanus.spark.session("local[2]", "elanus-bench", **{"spark.driver.memory": "4g"})
        spark.sparkContext.setLogLevel("ERROR")
        from pyspark.sql import functions as F

        try:
            source = str(root / "source.parquet")
            (
                spark.range(0, n, numPartitions=args.partitions)
                .withColumn(
                    "vector",
                    F.transform(
                        F.sequence(F.lit(1), F.lit(DIM)),
                        lambda x: ((F.col("id") * x) % 997) / 997.0,
                    ).cast("array<float>"),
                )
                .write.parquet(source)
            )
            print(f"source: {n:,} x {DIM}-d rows in {source}", flush=True)
            data = spark.read.parquet(source)

            parquet_write = best_of(
                args.repeat,
                lambda i: data.write.mode("overwrite").parquet(str(root / f"copy{i}.parquet")),
            )
            print(f"parquet write {parquet_write:.1f}s", flush=True)
            parquet_read = best_of(
                args.repeat,
                lambda i: spark.read.parquet(source).write.format("noop").mode("overwrite").save(),
            )
            print(f"parquet read {parquet_read:.1f}s", flush=True)

            with Standalone(root / "data") as server, Client(server.uri, timeout=600) as client:

                def elanus_write(i: int) -> None:
                    name = f"bench_spark_{i}"
                    client.create_collection(name, dimension=DIM, metric_type="L2", num_shards=2)
                    client.load_collection(name)
                    data.write.format("elanus").option("uri", server.uri).option(
                        "collection", name
                    ).mode("append").save()

                ours_write = best_of(args.repeat, elanus_write)
                print(f"elanus write {ours_write:.1f}s", flush=True)
                stored = client.query(
                    "bench_spark_0",
                    "id >= 0",
                    output_fields=["count(*)"],
                    consistency_level="Strong",
                )[0]["count(*)"]
                assert stored == n, (stored, n)

                def elanus_read(i: int) -> None:
                    spark.read.format("elanus").option("uri", server.uri).option(
                        "collection", "bench_spark_0"
                    ).load().write.format("noop").mode("overwrite").save()

                ours_read = best_of(args.repeat, elanus_read)
                print(f"elanus read {ours_read:.1f}s", flush=True)
                client.release_collection("bench_spark_0")
                files_read = best_of(args.repeat, elanus_read)  # a files-only plan
                print(f"elanus read, not loaded {files_read:.1f}s", flush=True)
        finally:
            elanus.spark.shutdown(spark)

    print()
    print(f"## Spark local[2], {n:,} x {DIM}-d float32 rows (best of {args.repeat})")
    print("| case | seconds | rows/s | vs Parquet |")
    print("|---|---|---|---|")
    for case, secs, base in (
        ("Parquet write", parquet_write, parquet_write),
        ("Elanus write (visible at return)", ours_write, parquet_write),
        ("Parquet read", parquet_read, parquet_read),
        ("Elanus read (one snapshot)", ours_read, parquet_read),
        ("Elanus read, not loaded (files only)", files_read, parquet_read),
    ):
        print(f"| {case} | {secs:.1f} | {n / secs:,.0f} | {base / secs:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
