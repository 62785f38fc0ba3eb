"""Spark connector benchmark: write and read rows/s of the ``elanus`` data source beside Spark
writing and reading the same data as plain Parquet, in the same run, in ``local[2]``.

    .venv/bin/python bench/spark.py                 # 1M x 128-d
    .venv/bin/python bench/spark.py --rows 200000   # a quicker run
    .venv/bin/python bench/spark.py --rows 200000 --cases write   # the writes only

One ``elanus standalone`` child process holds the collection (int64 ``id``, 128-d float
``vector``; 2 shards), loaded before the write. The rows are generated once into a Parquet
*source* file, so every case starts from the same input:

* **Parquet write**: source -> ``df.write.parquet`` (a copy);
* **Elanus write**: source -> ``df.write.format("elanus")`` (staged DoPut per task, one commit;
  rows are visible when ``save()`` returns). Only ``save()`` is timed: the collection is
  created and loaded before, and the index build the new segments start (in the
  background) ends before the next case;
* **Parquet read** / **Elanus read**: ``spark.read...`` -> the ``noop`` sink, which makes Spark
  read every row and column and write nothing; Elanus is read loaded, then released (a
  files-only plan: no delegator is asked). Each Elanus read alternates run by run with a
  Parquet read after the writes (the JVM is slower then than before them: a Parquet read
  measured first flattered Parquet); the Parquet row is the best of all those runs.

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


def best_of(repeat: int, run: object, prepare: object = None, settle: object = None) -> float:
    """The best time of ``run(i)``; ``prepare(i)`` before it and ``settle(i)`` before the
    next run are not timed."""
    times = []
    for i in range(repeat):
        if prepare is not None:
            prepare(i)  # type: ignore[operator]
        started = time.perf_counter()
        run(i)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
        if settle is not None and i + 1 < repeat:
            settle(i)  # type: ignore[operator]
    print("  runs: " + ", ".join(f"{t:.2f}s" for t in times), flush=True)
    return min(times)


def alternate(repeat: int, first: object, second: object) -> tuple[float, float]:
    """The best times of ``first(i)`` and ``second(i)``, run one after the other in turn."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for run, out in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            run(i)  # type: ignore[operator]
            out.append(time.perf_counter() - started)
    for label, out in zip(("baseline", "elanus"), times, strict=True):
        print(f"  {label} runs: " + ", ".join(f"{t:.2f}s" for t in out), flush=True)
    return min(times[0]), min(times[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--cases", choices=("all", "write", "read"), default="all")
    args = p.parse_args(argv)
    n = args.rows
    writes, reads = args.cases in ("all", "write"), args.cases in ("all", "read")
    parquet_write = parquet_read = ours_write = ours_read = files_read = float("nan")
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

            if writes:
                parquet_write = best_of(
                    args.repeat,
                    lambda i: data.write.mode("overwrite").parquet(str(root / f"copy{i}.parquet")),
                )
                print(f"parquet write {parquet_write:.1f}s", flush=True)

            def parquet_read_once(i: int) -> None:
                spark.read.parquet(source).write.format("noop").mode("overwrite").save()

            with Standalone(root / "data") as server, Client(server.uri, timeout=600) as client:

                def create(i: int) -> None:
                    name = f"bench_spark_{i}"
                    client.create_collection(name, dimension=DIM, metric_type="L2", num_shards=2)
                    client.load_collection(name)

                def elanus_write(i: int) -> None:
                    data.write.format("elanus").option("uri", server.uri).option(
                        "collection", f"bench_spark_{i}"
                    ).mode("append").save()

                def indexed(i: int) -> None:
                    """The index build the write started runs in the background: let it end
                    before the next case, which would share the CPUs with it otherwise."""
                    client.wait_for_index(f"bench_spark_{i}", timeout=3600)

                if writes:
                    ours_write = best_of(args.repeat, elanus_write, create, indexed)
                    print(f"elanus write {ours_write:.1f}s", flush=True)
                else:  # the read needs one written collection
                    create(0)
                    elanus_write(0)
                    indexed(0)
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

                if reads:  # each read beside Parquet's, alternating (the JVM's state after
                    # the writes slows both: Parquet alone before them would flatter it)
                    parquet_a, ours_read = alternate(args.repeat, parquet_read_once, elanus_read)
                    print(f"elanus read {ours_read:.1f}s", flush=True)
                    client.release_collection("bench_spark_0")
                    parquet_b, files_read = alternate(args.repeat, parquet_read_once, elanus_read)
                    print(f"elanus read, not loaded {files_read:.1f}s", flush=True)
                    parquet_read = min(parquet_a, parquet_b)
                    print(f"parquet read {parquet_read:.1f}s (best of its runs)", flush=True)
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
        if secs == secs:  # not NaN: the case ran
            print(f"| {case} | {secs:.1f} | {n / secs:,.0f} | {base / secs:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
