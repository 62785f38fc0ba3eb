"""The ``elanus`` Spark data source, reads: real Spark (``local[2]``, one session for the
module), a real stack (NATS, coord, datanode, query node, proxy). A DataFrame equals a
query ``as_of`` its snapshot; pushed filters, column pruning and the partitions option cut
what the reader returns (counted through the reader and through Spark's scan metric)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
from conftest import Stack, bare_collection, own_stack, wait_for
from spark_collection import DIM, make_collection

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.client.client import Client
from elanus.schema import SPARSE_ARROW_TYPE, Field

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    EqualNullSafe,
    EqualTo,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    Not,
    StringContains,
    StringStartsWith,
)

from elanus.spark.source import ElanusDataSource, read_partitions, safe_pushdown  # noqa: E402

pytestmark = pytest.mark.spark
BIG = 50_000
FLUSHED = 30_000
TAGS = ["alpha", "beta", "gamma", "al_pha", "delta"]
DELETED = set(range(0, BIG, 10))
UPSERTED = set(range(1, 101))
LIVE = len((set(range(BIG)) - DELETED) | UPSERTED)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("spark-read")
    settings = {"compaction_interval_s": 0, "segment_max_rows": 12_000, "retention_s": 3600}
    with own_stack(tmp, "spark-read", **settings) as stack:
        assert stack.coord is not None
        wait_for(lambda: stack.coord.sessions.of_role("querynode"), what="a query node")  # type: ignore[union-attr]
        yield stack


def handed_off(stack: Stack, segment_id: int) -> bool:
    delegators = [d for qn in stack.querynodes for d in qn.delegators.values()]
    return any(segment_id in d.distribution.sealed for d in delegators)


def flush_and_hand_off(c: Client, stack: Stack, name: str) -> None:
    c.flush(name, timeout=60)
    flushed = [s["segment_id"] for s in c.get_segment_info(name) if s["state"] == "Flushed"]
    wait_for(lambda: all(handed_off(stack, s) for s in flushed), what="handoff")


def big_rows(start: int, n: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed * 1_000_003 + start)
    ids = np.arange(start, start + n)
    score = rng.random(n)
    return {
        "id": ids,
        "vector": rng.standard_normal((n, DIM)).astype(np.float32),
        "tag": [TAGS[i % len(TAGS)] for i in ids],
        "n": (ids % 1000).astype(np.int32),
        "score": pa.array(score, mask=ids % 13 == 0),  # some nulls
    }


@pytest.fixture(scope="module")
def big(served: Stack) -> Client:
    """50k rows with 128-d vectors: 30k flushed, 20k growing; deletes on both after the
    flush; an upsert moves 100 flushed keys into growing data."""
    c = served.client()
    make_collection(c, "big")
    for start in range(0, FLUSHED, 10_000):
        c.insert("big", big_rows(start, 10_000))
    flush_and_hand_off(c, served, "big")
    for start in range(FLUSHED, BIG, 10_000):
        c.insert("big", big_rows(start, 10_000))
    c.delete("big", sorted(DELETED))
    c.upsert("big", big_rows(min(UPSERTED), len(UPSERTED), seed=7))
    return c


def query_at(uri: str, name: str, ts: int, filter: str = "id >= 0", **extra: Any) -> pa.Table:
    """A query as_of ``ts`` of every stored column, through DoGet (Arrow)."""
    fc = flight.FlightClient(uri)
    body = {"collection": name, "filter": filter, "output_fields": ["*"], "as_of": ts, **extra}
    try:
        return fc.do_get(flight.Ticket(json.dumps(body).encode())).read_all()
    finally:
        fc.close()


def reader(spark: SparkSession, uri: str, name: str, **options: Any) -> Any:
    r = spark.read.format("elanus").option("uri", uri).option("collection", name)
    for key, value in options.items():
        r = r.option(key, str(value))
    return r


def values(column: pa.ChunkedArray | pa.Array) -> Any:
    """Comparable contents: float lists as a float32 matrix, anything else as Python."""
    t = column.type
    if (pa.types.is_list(t) or pa.types.is_fixed_size_list(t)) and pa.types.is_floating(
        t.value_type
    ):
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return flat.reshape(len(column), -1) if len(column) else flat
    return column.to_pylist()


def assert_same(got: pa.Table, want: pa.Table, columns: list[str] | None = None) -> None:
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a primary key came back twice"
    got, want = got.sort_by("id"), want.sort_by("id")
    for name in columns or want.column_names:
        a, b = values(got.column(name)), values(want.column(name))
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            assert a == b, name


def scan_rows(df: DataFrame) -> int:
    """Rows the data source's scan returned in the last action on ``df`` (Spark's metric)."""
    plan = df._jdf.queryExecution().executedPlan()
    found = []

    def walk(node: Any) -> None:
        if node.nodeName() == "AdaptiveSparkPlan":
            node = node.executedPlan()
        if node.nodeName().startswith("BatchScan"):
            found.append(int(node.metrics().get("numOutputRows").get().value()))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(plan)
    assert len(found) == 1, found
    return found[0]


# -- the 50k-row collection -----------------------------------------------------------------


def test_dataframe_equals_query_at_its_snapshot(
    spark: SparkSession, served: Stack, big: Client
) -> None:
    ts = big.get_timestamp()
    df = reader(spark, served.uri, "big", snapshot_ts=ts).load()
    assert df.schema == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("vector", T.ArrayType(T.FloatType(), False), False),
            T.StructField("tag", T.StringType(), False),
            T.StructField("n", T.IntegerType(), False),
            T.StructField("score", T.DoubleType(), True),
        ]
    )
    got = df.toArrow()
    want = query_at(served.uri, "big", ts)
    assert got.num_rows == want.num_rows == LIVE
    assert_same(got, want)
    upserted = got.filter(pc.equal(got.column("id"), 11)).column("vector").to_pylist()[0]
    assert upserted == pytest.approx(big_rows(1, 100, seed=7)["vector"][10].tolist())
    # One Spark partition per sealed segment plus one per vchannel with growing data.
    local = read_partitions({"uri": served.uri, "collection": "big", "snapshot_ts": str(ts)})
    kinds = [p.kind for p, _ in local.parts]
    flushed = [s for s in big.get_segment_info("big") if s["state"] == "Flushed"]
    assert kinds.count("sealed") == len(flushed) >= 3 and kinds.count("growing") == 2
    assert_same(local.table, want)


def test_pushed_filters_cut_what_the_reader_returns(
    spark: SparkSession, served: Stack, big: Client
) -> None:
    ts = big.get_timestamp()
    df = reader(spark, served.uri, "big", snapshot_ts=ts, pushdown="true", columns="id,n,tag")
    df = df.load()
    picked = df.filter((F.col("n") < 300) & F.col("tag").startswith("al") & (F.col("n") % 3 == 0))
    got = picked.toArrow()
    want = query_at(served.uri, "big", ts, 'n < 300 and tag like "al%" and n % 3 == 0')
    assert 0 < got.num_rows == want.num_rows
    assert_same(got, want, ["id", "n", "tag"])
    pushed = query_at(served.uri, "big", ts, 'n < 300 and tag like "al%"').num_rows
    assert scan_rows(picked) == pushed < LIVE  # n % 3 stays with Spark, the rest was pushed
    # The same through the reader outside Spark, partition by partition.
    opts = {
        "uri": served.uri,
        "collection": "big",
        "snapshot_ts": str(ts),
        "pushdown": "true",
        "columns": "id,n",
    }
    everything = read_partitions(opts)
    filters = [
        LessThan(("n",), 300),
        StringStartsWith(("tag",), "al_"),  # '_' is a literal, not a wildcard
        EqualTo(("vector",), [0.0] * DIM),  # not translatable: handed back
    ]
    cut = read_partitions(opts, filters)
    assert cut.rejected == [filters[2]]
    assert sum(cut.rows) == query_at(served.uri, "big", ts, 'n < 300 and tag == "al_pha"').num_rows
    assert all(a <= b for a, b in zip(cut.rows, everything.rows, strict=True))
    assert 0 < sum(cut.rows) < sum(everything.rows) == LIVE
    assert read_partitions({**opts, "pushdown": "false"}, filters).rejected == filters


def test_a_dataframe_reused_for_other_queries_stays_exact(
    spark: SparkSession, served: Stack, big: Client
) -> None:
    """The default reader (on Spark 4.x: no pushdown, see ``safe_pushdown``) gives every
    query on one loaded DataFrame its own right answer."""
    ts = big.get_timestamp()
    df = reader(spark, served.uri, "big", snapshot_ts=ts, columns="id,n,tag").load()
    picked = df.filter((F.col("n") < 300) & F.col("tag").startswith("al"))
    got = picked.toArrow()
    assert got.num_rows == query_at(served.uri, "big", ts, 'n < 300 and tag like "al%"').num_rows
    if not safe_pushdown():
        assert scan_rows(picked) == LIVE  # Spark filtered
    assert df.toArrow().num_rows == LIVE  # not the rows of the filtered query before


def test_column_pruning(spark: SparkSession, served: Stack, big: Client) -> None:
    ts = big.get_timestamp()
    df = reader(spark, served.uri, "big", snapshot_ts=ts, columns="tag,id").load()
    assert df.columns == ["tag", "id"]
    got = df.toArrow()
    assert_same(got, query_at(served.uri, "big", ts), ["id", "tag"])
    local = read_partitions(
        {"uri": served.uri, "collection": "big", "snapshot_ts": str(ts), "columns": "id,n"}
    )
    assert all(t.column_names == ["id", "n"] for _, t in local.parts)
    typed = spark.read.format("elanus").schema("id long, score double")
    df2 = typed.option("uri", served.uri).option("collection", "big").load()
    assert df2.filter("id < 100").toArrow().column_names == ["id", "score"]


# -- smaller collections ---------------------------------------------------------------------


def small(c: Client, stack: Stack, name: str, partitions: tuple[str, ...] = ()) -> None:
    c.create_collection(name, dimension=4)
    for p in partitions:
        c.create_partition(name, p)
    c.load_collection(name)
    rng = np.random.default_rng(3)
    for k, p in enumerate((None, *partitions)):
        ids = np.arange(k * 100, k * 100 + 100)
        rows = {"id": ids, "vector": rng.random((100, 4), dtype=np.float32), "k": [k] * 100}
        c.insert(name, rows, partition_name=p)
    flush_and_hand_off(c, stack, name)


def test_partitions_option_reads_only_those_partitions(served: Stack) -> None:
    c = served.client()
    small(c, served, "parts", ("p1", "p2"))
    c.insert("parts", {"id": [1000], "vector": [[0.5] * 4]}, partition_name="p2")
    opts = {"uri": served.uri, "collection": "parts", "partitions": "p2, p1"}
    got = read_partitions(opts).table
    ids = sorted(got.column("id").to_pylist())
    assert ids == [*range(100, 300), 1000]
    want = c.query(
        "parts", "id >= 0", ["id"], partition_names=["p1", "p2"], consistency_level="Strong"
    )
    assert ids == sorted(r["id"] for r in want)
    with pytest.raises(ElanusError) as err:
        read_partitions({**opts, "partitions": "p9"})
    assert err.value.code == ErrorCode.PARTITION_NOT_FOUND


def test_snapshot_in_the_past_equals_a_query_at_that_time(
    spark: SparkSession, served: Stack
) -> None:
    c = served.client()
    small(c, served, "travel")
    before = c.get_timestamp()
    c.delete("travel", [1, 2, 3])
    c.upsert("travel", {"id": [5], "vector": [[9.0] * 4], "k": [9]})
    c.insert("travel", {"id": [500], "vector": [[1.0] * 4]})
    df = reader(spark, served.uri, "travel", snapshot_ts=before).load()
    got = df.toArrow()
    assert_same(got, query_at(served.uri, "travel", before, output_fields=["*", "k"]))
    assert sorted(got.column("id").to_pylist()) == list(range(100))
    now = read_partitions({"uri": served.uri, "collection": "travel"}).table
    assert 500 in now.column("id").to_pylist() and 1 not in now.column("id").to_pylist()


def test_compaction_between_plan_and_read_duplicates_nothing(served: Stack) -> None:
    c = served.client()
    small(c, served, "merge")
    c.insert("merge", {"id": np.arange(100, 150), "vector": np.ones((50, 4), np.float32)})
    c.delete("merge", [7, 120])
    source = ElanusDataSource({"uri": served.uri, "collection": "merge"})
    r = source.reader(source.schema())
    parts = r.partitions()  # the plan, with its snapshot
    ts = json.loads(parts[0].ticket)["ts"]
    flush_and_hand_off(c, served, "merge")  # the growing segment is sealed ...
    before = {s["segment_id"] for s in c.get_segment_info("merge") if s["state"] == "Flushed"}
    job = c.compact("merge")  # ... and merged with the other into a new segment
    wait_for(lambda: c.get_compaction_state(job) == "Completed", what="compaction")
    after = {s["segment_id"] for s in c.get_segment_info("merge") if s["state"] == "Flushed"}
    assert after.isdisjoint(before)
    wait_for(lambda: all(handed_off(served, s) for s in after), what="target handoff")
    c.delete("merge", [8])
    got = pa.Table.from_batches([b for p in parts for b in r.read(p)])
    want = query_at(served.uri, "merge", ts, output_fields=["*", "k"])
    assert got.num_rows == want.num_rows == 148
    assert_same(got, want)


def test_a_collection_that_was_never_loaded_reads_from_its_files(
    spark: SparkSession, served: Stack
) -> None:
    """No load needed: the plan flushes, waits for the deletes to be on disk, and every
    partition reads one segment's files (``flight/search/fileplan.py``)."""
    c = served.client()
    bare_collection(c, "idle", 4)  # never loaded
    rng = np.random.default_rng(3)
    c.insert("idle", {"id": np.arange(300), "vector": rng.random((300, 4), dtype=np.float32)})
    c.flush("idle", timeout=60)
    c.insert("idle", {"id": np.arange(300, 400), "vector": rng.random((100, 4), dtype=np.float32)})
    c.delete("idle", [0, 299, 350])
    df = reader(spark, served.uri, "idle").load()
    assert df.rdd.getNumPartitions() >= 2  # one per segment
    ids = sorted(r["id"] for r in df.select("id").collect())
    assert ids == [i for i in range(400) if i not in (0, 299, 350)]
    local = read_partitions({"uri": served.uri, "collection": "idle", "columns": "id"})
    assert sorted(local.table.column("id").to_pylist()) == ids
    c.load_collection("idle")
    c.insert("idle", {"id": np.arange(400, 450), "vector": rng.random((50, 4), dtype=np.float32)})
    options = {"uri": served.uri, "collection": "idle", "columns": "id", "files_only": "true"}
    local = read_partitions(options)
    assert {p.kind for p, _ in local.parts} == {"sealed"}  # the growing rows were flushed
    assert sorted(local.table.column("id").to_pylist()) == [*ids, *range(400, 450)]
    with pytest.raises(ElanusError, match="'files_only' must be true or false"):
        read_partitions({**options, "files_only": "yes"})


def test_unknown_collections_and_options_are_clear_errors(
    spark: SparkSession, served: Stack
) -> None:
    with pytest.raises(Exception, match=r"COLLECTION_NOT_FOUND.*'nowhere'"):
        reader(spark, served.uri, "nowhere").load()
    with pytest.raises(Exception, match=r"needs option 'uri'"):
        spark.read.format("elanus").option("collection", "idle").load()
    with pytest.raises(ElanusError, match="unknown elanus option"):
        read_partitions({"uri": served.uri, "collection": "idle", "colums": "id"})


# -- types -------------------------------------------------------------------------------------


def all_types_schema() -> Schema:
    return Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("vec", DataType.FLOAT_VECTOR, dim=4),
            Field("half", DataType.FLOAT16_VECTOR, dim=2),
            Field("bits", DataType.BINARY_VECTOR, dim=16),
            Field("sparse", DataType.SPARSE_FLOAT_VECTOR),
            Field("flag", DataType.BOOL, nullable=True),
            Field("i8", DataType.INT8),
            Field("i16", DataType.INT16, nullable=True),
            Field("i32", DataType.INT32),
            Field("f", DataType.FLOAT),
            Field("d", DataType.DOUBLE, nullable=True),
            Field("name", DataType.VARCHAR, max_length=8, nullable=True),
            Field("doc", DataType.JSON, nullable=True),
            Field("tags", DataType.ARRAY, element_type=DataType.INT16, max_capacity=3),
            Field(
                "words",
                DataType.ARRAY,
                element_type=DataType.VARCHAR,
                max_length=3,
                max_capacity=2,
                nullable=True,
            ),
        ],
        enable_dynamic_field=True,
    )


def all_types_rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    null = ids % 4 == 0
    return pa.table(
        {
            "id": ids,
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(np.arange(n * 4, dtype=np.float32) / 8), 4
            ),
            "half": pa.FixedSizeListArray.from_arrays(
                pa.array((np.arange(n * 2) / 4).astype(np.float16)), 2
            ),
            "bits": pa.array([bytes([i % 256, 7]) for i in ids], pa.binary(2)),
            "sparse": pa.array(
                [[(int(i), 0.5), (4_000_000_000, 1.5)] for i in ids], SPARSE_ARROW_TYPE
            ),
            "flag": pa.array(ids % 2 == 0, mask=null),
            "i8": pa.array(ids % 100, pa.int8()),
            "i16": pa.array(ids, pa.int16(), mask=null),
            "i32": pa.array(-ids, pa.int32()),
            "f": pa.array(ids / 4, pa.float32()),
            "d": pa.array(ids / 3, mask=null),
            "name": pa.array([f"n{i}" for i in ids], mask=null),
            "doc": pa.array([json.dumps({"a": int(i), "b": [1, 2]}) for i in ids], mask=null),
            "tags": pa.array([[1, int(i % 7)] for i in ids], pa.list_(pa.int16())),
            "words": pa.array([["ab", "c"]] * n, pa.list_(pa.string()), mask=null),
            "extra": [f"x{i}" for i in ids],  # a dynamic field
        }
    )


def test_every_field_type_maps_to_spark(spark: SparkSession, served: Stack) -> None:
    c = served.client()
    c.create_collection("types", schema=all_types_schema())
    c.load_collection("types")
    c.insert("types", all_types_rows(0, 40))
    flush_and_hand_off(c, served, "types")
    c.insert("types", all_types_rows(40, 20))
    ts = c.get_timestamp()
    df = reader(spark, served.uri, "types", snapshot_ts=ts).load()
    nonnull_floats = T.ArrayType(T.FloatType(), False)
    assert df.schema == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("vec", nonnull_floats, False),
            T.StructField("half", nonnull_floats, False),
            T.StructField("bits", T.BinaryType(), False),
            T.StructField("sparse", T.MapType(T.LongType(), T.FloatType(), False), False),
            T.StructField("flag", T.BooleanType(), True),
            T.StructField("i8", T.ByteType(), False),
            T.StructField("i16", T.ShortType(), True),
            T.StructField("i32", T.IntegerType(), False),
            T.StructField("f", T.FloatType(), False),
            T.StructField("d", T.DoubleType(), True),
            T.StructField("name", T.StringType(), True),
            T.StructField("doc", T.StringType(), True),
            T.StructField("tags", T.ArrayType(T.ShortType(), False), False),
            T.StructField("words", T.ArrayType(T.StringType(), False), True),
            T.StructField("$meta", T.StringType(), True),
        ]
    )
    got = df.toArrow()
    want = query_at(served.uri, "types", ts, output_fields=["*", "extra"])
    assert got.num_rows == 60
    assert_same(got, want)
    assert json.loads(got.sort_by("id").column("$meta")[3].as_py()) == {"extra": "x3"}
    # Pushdown on nullable and string columns keeps Spark's null semantics.
    opts = {
        "uri": served.uri,
        "collection": "types",
        "snapshot_ts": str(ts),
        "columns": "id",
        "pushdown": "true",
    }
    cases = [
        ([Not(EqualTo(("i16",), 5))], "i16 != 5"),
        ([EqualNullSafe(("i16",), 5)], "i16 == 5"),
        ([Not(EqualNullSafe(("i16",), 5))], "not (i16 == 5) or i16 is null"),
        ([IsNull(("name",))], "name is null"),
        ([In(("i8",), (1, 2, 3)), GreaterThanOrEqual(("d",), 0.5)], "i8 in [1, 2, 3] and d >= 0.5"),
        ([StringContains(("name",), "1")], 'name like "%1%"'),
    ]
    for filters, text in cases:
        local = read_partitions(opts, filters)
        assert local.rejected == []
        expected = query_at(served.uri, "types", ts, text).column("id").to_pylist()
        assert sorted(local.table.column("id").to_pylist()) == sorted(expected), text
    assert read_partitions(opts, [EqualTo(("doc",), "{}")]).rejected  # JSON stays with Spark


# -- docs ----------------------------------------------------------------------------------------


def test_the_docs_example_runs_as_written(spark: SparkSession, served: Stack) -> None:
    doc = (Path(__file__).parent.parent / "docs" / "spark.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert blocks, "docs/spark.md has no python example"
    code = "\n".join(blocks)
    assert 'uri = "grpc://localhost:8815"' in code
    namespace: dict[str, Any] = {}
    code = code.replace("grpc://localhost:8815", served.uri)
    exec(compile(code, "docs/spark.md", "exec"), namespace)
    client = namespace["client"]
    count = client.query(
        "books",
        'year >= 2010 and title like "book 1%"',
        output_fields=["count(*)"],
        consistency_level="Strong",
    )[0]["count(*)"]
    assert namespace["n_recent"] == count > 0
    assert namespace["n_books"] == 1100  # the write example appended 100 rows
    local = read_partitions({"uri": served.uri, "collection": "books", "columns": "id"})
    assert local.table.num_rows == 1100
