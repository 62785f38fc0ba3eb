"""Spark writes (issue 6): ``df.write.format("elanus")`` with real local Spark (``local[2]``).

- 50k rows with 128-d vectors written by Spark and read back by Spark are identical;
- a job that fails part way leaves nothing visible and no staging files (Spark's abort);
- upsert replaces rows by key; ``overwrite`` and bad options are refused clearly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import Stack
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType
from spark_collection import DIM, make_collection

from elanus.client.client import Client

pytestmark = pytest.mark.timeout(600)


def frame(spark: SparkSession, lo: int, hi: int, partitions: int = 4, salt: int = 0) -> DataFrame:
    """Deterministic rows computed by Spark itself (no driver-side data)."""
    return (
        spark.range(lo, hi, numPartitions=partitions)
        .withColumn(
            "vector",
            F.transform(
                F.sequence(F.lit(1), F.lit(DIM)), lambda x: ((F.col("id") * x + salt) % 997) / 997.0
            ).cast("array<float>"),
        )
        .withColumn("tag", F.concat(F.lit("t"), (F.col("id") % 7).cast("string")))
        .withColumn("n", ((F.col("id") + salt) % 1000).cast("int"))
        .withColumn("score", F.when(F.col("id") % 5 == 0, None).otherwise(F.col("id") / 3.0))
    )


def save(df: DataFrame, uri: str, collection: str, **options: str) -> None:
    writer = df.write.format("elanus").option("uri", uri).option("collection", collection)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def read(spark: SparkSession, uri: str, collection: str) -> pa.Table:
    df = spark.read.format("elanus").option("uri", uri).option("collection", collection).load()
    return sorted_table(df.toArrow())


def sorted_table(t: pa.Table) -> pa.Table:
    t = t.select(["id", "vector", "tag", "n", "score"])
    return t.take(pc.sort_indices(t, [("id", "ascending")]))


def count(client: Client, name: str) -> int:
    rows = client.query(name, "id >= 0", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def staging_left(stack: Stack) -> list[Path]:
    root = stack.settings.storage_path / "staging"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_write_50k_rows_and_read_them_back(spark: SparkSession, stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "w")
    df = frame(spark, 0, 50_000)
    save(df, stack.uri, "w")
    assert count(client, "w") == 50_000  # visible once save() returned
    written = sorted_table(df.toArrow())
    back = read(spark, stack.uri, "w")
    assert back.num_rows == 50_000
    assert back.column("id").equals(written.column("id"))
    for name in ("tag", "n", "score"):
        assert back.column(name).to_pylist() == written.column(name).to_pylist(), name
    vectors = pc.list_flatten(back.column("vector")).to_numpy()
    assert (vectors == pc.list_flatten(written.column("vector")).to_numpy()).all()
    query = [written.column("vector")[123].as_py()]
    hits = client.search("w", query, limit=3, search_params={"metric_type": "L2"})
    assert all(h["id"] % 997 == 123 and h["distance"] < 1e-6 for h in hits[0])  # equal vectors
    assert staging_left(stack) == []


def test_a_failed_job_leaves_nothing_visible(spark: SparkSession, stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "a")
    save(frame(spark, 0, 100, partitions=1), stack.uri, "a")

    @F.udf(IntegerType())
    def explode_late(n: Any) -> int:
        if n == 9_999:  # the last row of the last partition: the others staged already
            raise RuntimeError("boom: this task fails after the others staged their rows")
        return int(n)

    doomed = frame(spark, 100, 10_000, partitions=4).withColumn("n", explode_late(F.col("id")))
    with pytest.raises(Exception, match="boom"):
        save(doomed, stack.uri, "a")
    assert count(client, "a") == 100
    assert client.query("a", "id >= 100", consistency_level="Strong") == []
    assert staging_left(stack) == []


def test_upsert_replaces_rows_and_bad_writes_are_refused(spark: SparkSession, stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "u")
    save(frame(spark, 0, 1000), stack.uri, "u")
    save(frame(spark, 500, 1500, salt=7), stack.uri, "u", upsert="true")
    assert count(client, "u") == 1500
    rows = client.get("u", [10, 600, 1400], output_fields=["id", "n"])
    assert {r["id"]: r["n"] for r in rows} == {10: 10, 600: 607, 1400: 407}

    with pytest.raises(Exception, match="overwrite"):
        frame(spark, 0, 10).write.format("elanus").option("uri", stack.uri).option(
            "collection", "u"
        ).mode("overwrite").save()
    with pytest.raises(Exception, match="colour"):
        save(frame(spark, 0, 10), stack.uri, "u", colour="red")
    with pytest.raises(Exception, match="nope"):
        save(frame(spark, 0, 10), stack.uri, "nope")
    wrong_dim = frame(spark, 5000, 5010).withColumn("vector", F.array(F.lit(1.0).cast("float")))
    with pytest.raises(Exception, match="vector"):
        save(wrong_dim, stack.uri, "u")
    assert count(client, "u") == 1500
    assert staging_left(stack) == []


def test_a_task_streams_its_batches_in_doputs_of_bounded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One DoPut per ``STREAM_BYTES`` of a task's batches (under ``max_put_bytes``), every
    batch in exactly one of them, in order."""
    from elanus.spark import writer

    monkeypatch.setattr(writer, "STREAM_BYTES", 3 * 800)
    batches = iter(
        [pa.record_batch({"x": pa.array(range(i * 100, i * 100 + 100))}) for i in range(7)]
    )
    streams = []
    while (stream := writer._stream_of(batches)) is not None:
        streams.append([b.column(0)[0].as_py() for b in stream])
    assert streams == [[0, 100, 200], [300, 400, 500], [600]]
