"""Spark reads, writes and index runs against a server with ``auth_enabled``: credentials
travel in the data source's options (and ``run_index_build``'s ``connection``); without
them, or without the privilege, the job fails with the server's code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Stack, own_stack
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from elanus import DataType, Schema
from elanus.client.client import Client
from elanus.errors import ElanusError
from elanus.spark.index_run import run_index_build

DIM = 8
ROOT = "root:spark-root-pw"
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with own_stack(
        tmp_path_factory.mktemp("auth_spark"), "auth-spark", auth_enabled=True,
        root_password="spark-root-pw",
    ) as stack:  # fmt: skip
        root = Client(stack.uri, token=ROOT)
        schema = (
            Schema()
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        )
        root.create_collection("sp", schema=schema)
        root.load_collection("sp")
        root.create_role("sparkrw")
        root.grant_privilege("sparkrw", "Collection", "CollectionReadWrite", "sp")
        root.create_user("sparky", "sparky-pw")
        root.grant_role("sparky", "sparkrw")
        root.create_role("builder")
        root.grant_privilege("builder", "Global", "IndexBuilder", "*")
        root.create_user("bob", "builder-pw")
        root.grant_role("bob", "builder")
        root.close()
        yield stack


def _frame(spark: SparkSession, n: int) -> Any:
    return spark.range(0, n, numPartitions=2).withColumn(
        "vector",
        F.transform(F.sequence(F.lit(1), F.lit(DIM)), lambda x: (F.col("id") * x % 97) / 97.0)
        .cast("array<float>"),
    )  # fmt: skip


def _write(df: Any, uri: str, **options: str) -> None:
    writer = df.write.format("elanus").option("uri", uri).option("collection", "sp").mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_spark_reads_and_writes_with_credentials(secured: Stack, spark: SparkSession) -> None:
    df = _frame(spark, 400)
    with pytest.raises(Exception, match=r"UNAUTHENTICATED"):
        _write(df, secured.uri)
    _write(df, secured.uri, user="sparky", password="sparky-pw")
    read = (
        spark.read.format("elanus").option("uri", secured.uri).option("collection", "sp")
        .option("token", "sparky:sparky-pw").load()
    )  # fmt: skip
    assert read.count() == 400
    assert sorted(r["id"] for r in read.select("id").collect())[:3] == [0, 1, 2]
    with pytest.raises(Exception, match=r"UNAUTHENTICATED"):
        spark.read.format("elanus").option("uri", secured.uri).option("collection", "sp").load()
    with Client(secured.uri, token=ROOT) as root:
        assert root.query("sp", "", output_fields=["count(*)"], consistency_level="Strong") == [
            {"count(*)": 400}
        ]


def test_spark_index_run_needs_the_builder_privilege(secured: Stack, spark: SparkSession) -> None:
    with Client(secured.uri, token=ROOT) as root:
        root.insert("sp", [{"id": 10_000 + i, "vector": [0.1 * i] * DIM} for i in range(50)])
        root.flush("sp")
        root.create_index("sp", field_name="vector", index_type="FLAT", metric_type="L2")
    with pytest.raises(ElanusError) as denied:
        run_index_build(
            secured.uri, "sp", spark=spark, client_options={"token": "sparky:sparky-pw"}
        )
    assert denied.value.code == "PERMISSION_DENIED" and "IndexBuilder" in denied.value.message
    run = run_index_build(
        secured.uri, "sp", spark=spark, client_options={"token": "bob:builder-pw"}
    )
    assert run.claimed >= 1 and run.built == run.claimed and run.failed == 0
    with Client(secured.uri, token=ROOT) as root:
        assert root.describe_index("sp")[0]["state"] == "Finished"
