"""The change stream in Spark Structured Streaming (``spark.readStream.format("elanus")``):
a query copying a collection's changes into Parquet is stopped in the middle of the writes
and restarted from its checkpoint; every change lands once, in timestamp order per key."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import StandaloneProcess, bare_collection
from test_watch import DIM, nats_login, retaining_server, rows  # noqa: F401 - its server

from elanus import ElanusError, Schema
from elanus.client.client import Client

pytest.importorskip("pyspark")
from pyspark.errors import AnalysisException  # noqa: E402

pytestmark = pytest.mark.spark
from elanus.spark.stream import ElanusStreamReader, StreamOptions, change_schema  # noqa: E402


@pytest.fixture(scope="module")
def client(server: StandaloneProcess) -> Iterator[Client]:
    with Client(server.uri) as c:
        bare_collection(c, "streamed", DIM, num_shards=2)
        yield c


def stream(spark: Any, server: StandaloneProcess, **extra: str) -> Any:
    reader = spark.readStream.format("elanus").option("uri", server.uri)
    for k, v in {**nats_login(server), "since": "earliest", **extra}.items():
        reader = reader.option(k, v)
    return reader.load("streamed")


def copy(spark: Any, server: StandaloneProcess, out: Path) -> Any:
    return (
        stream(spark, server)
        .writeStream.format("parquet")
        .option("path", str(out / "rows"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def wait_rows(spark: Any, query: Any, out: Path, n: int, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not query.isActive:
            raise AssertionError(f"the query ended: {query.exception()}")
        try:
            got = spark.read.parquet(str(out / "rows"))
            if got.count() >= n:
                return got
        except AnalysisException:  # no batch with rows committed yet
            pass
        time.sleep(0.3)
    raise AssertionError(f"fewer than {n} rows after {timeout} s")


def test_copy_into_parquet_exactly_once_across_a_restart(
    spark: Any, server: StandaloneProcess, client: Client, tmp_path: Path
) -> None:
    expected: list[tuple[str, int, int]] = []  # (op, id, ts)
    ts = client.insert("streamed", rows(40))["ts"]
    expected += [("insert", i, ts) for i in range(40)]
    query = copy(spark, server, tmp_path)
    try:
        for k in range(3):  # writes while the query runs
            ts = client.upsert("streamed", rows(5, start=10 * k, tag="u"))["ts"]
            expected += [("upsert", i, ts) for i in range(10 * k, 10 * k + 5)]
        wait_rows(spark, query, tmp_path, 40)
    finally:
        query.stop()  # in the middle: some upserts may be copied, others not yet
    ts = client.delete("streamed", ids=[1, 2, 3])["ts"]
    expected += [("delete", i, ts) for i in (1, 2, 3)]
    ts = client.insert("streamed", rows(5, start=100))["ts"]
    expected += [("insert", i, ts) for i in range(100, 105)]
    query = copy(spark, server, tmp_path)  # from its checkpoint
    try:
        got = wait_rows(spark, query, tmp_path, len(expected))
        time.sleep(1.0)  # a few more (empty) micro-batches: nothing may come twice
        got = spark.read.parquet(str(tmp_path / "rows"))
    finally:
        query.stop()
    copied = [(r["_op"], r["id"], r["_ts"]) for r in got.collect()]
    assert sorted(copied) == sorted(expected)
    per_key: dict[int, list[int]] = {}
    for _op, key, stamp in sorted(copied, key=lambda c: c[2]):
        per_key.setdefault(key, []).append(stamp)
    assert all(len(set(s)) == len(s) for s in per_key.values())


def test_stream_options_are_checked(spark: Any, server: StandaloneProcess, client: Client) -> None:
    with pytest.raises(ElanusError, match="needs option 'since'"):
        StreamOptions.parse({"uri": server.uri, "collection": "streamed"})
    with pytest.raises(Exception, match="'since' is for spark.readStream"):
        spark.read.format("elanus").option("uri", server.uri).option("since", "0").load(
            "streamed"
        ).count()
    opts = {"uri": server.uri, "collection": "streamed", "since": "x", **nats_login(server)}
    reader = ElanusStreamReader(StreamOptions.parse(opts), change_schema(Schema([])))
    with pytest.raises(ElanusError, match="since must be"):
        reader.initialOffset()
