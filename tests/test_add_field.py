"""add_collection_field (Milvus 2.6): a nullable scalar field added to a collection that
holds rows, flushed and growing, loaded or not. Old rows read null (or the default), new
rows carry values, filters and outputs see the field, flush, compaction and a restart keep
it; refusals change nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from conftest import cli, cli_json, raises_code, run_elanus, wait_for

from elanus import ElanusError, ErrorCode
from elanus.schema import MAX_FIELDS, DataType, Field, Schema
from elanus.segments import storage

if TYPE_CHECKING:
    from conftest import Stack, StandaloneProcess

    from elanus.client.client import Client

STRONG = "Strong"
NAME = "books"


def _schema() -> Schema:
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    return s


def _rows(ids: range | list[int], **extra: Any) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 1.0, 0.0], **extra} for i in ids]


def _query(client: Client, expr: str, fields: list[str]) -> dict[int, dict[str, Any]]:
    rows = client.query(NAME, expr, fields, consistency_level=STRONG)
    return {int(r["id"]): r for r in rows}


def _fields(client: Client) -> dict[str, dict[str, Any]]:
    schema = client.describe_collection(NAME)["schema"]
    return {f["name"]: f for f in schema["fields"]}


def _compact(client: Client) -> None:
    job = client.compact(NAME)
    wait_for(lambda: client.get_compaction_state(job) == "Completed", 60, "compaction")


def test_old_rows_read_null_or_default_new_rows_carry_values(stack: Stack) -> None:
    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.insert(NAME, _rows(range(0, 5)))
    client.flush(NAME)  # ids 0-4: a flushed segment
    client.load_collection(NAME)
    client.insert(NAME, _rows(range(5, 10)))  # ids 5-9: growing, in the delegator

    client.add_collection_field(NAME, "note", DataType.VARCHAR, max_length=32, nullable=True)
    client.add_collection_field(NAME, "rank", DataType.INT32, nullable=True, default_value=7)
    fields = _fields(client)
    assert fields["note"]["field_id"] == 102 and fields["rank"]["field_id"] == 103
    assert fields["rank"]["default_value"] == 7 and fields["note"]["nullable"]
    assert client.describe_collection(NAME)["schema"]["version"] == 2

    old = _query(client, "id >= 0", ["id", "note", "rank"])
    assert sorted(old) == list(range(10))
    assert all(r["note"] is None and r["rank"] == 7 for r in old.values())
    assert sorted(_query(client, "note is null", ["id"])) == list(range(10))

    client.insert(NAME, _rows(range(10, 13), note="new", rank=1))
    client.insert(NAME, _rows(range(13, 15)))  # leaves both out: null and the default
    client.upsert(NAME, _rows([2, 7], note="up", rank=2))
    rows = _query(client, "id >= 0", ["note", "rank"])
    assert len(rows) == 15
    assert {i for i, r in rows.items() if r["note"] == "new"} == {10, 11, 12}
    assert {i for i, r in rows.items() if r["note"] == "up"} == {2, 7}
    assert sorted(_query(client, "note is null", ["id"])) == [0, 1, 3, 4, 5, 6, 8, 9, 13, 14]
    assert sorted(_query(client, "rank == 7", ["id"])) == [0, 1, 3, 4, 5, 6, 8, 9, 13, 14]
    assert sorted(_query(client, 'note in ["new", "up"] and rank < 2', ["id"])) == [10, 11, 12]

    hits = client.search(
        NAME, [[11.0, 1.0, 0.0]], limit=3, output_fields=["note", "rank"], filter="id >= 9"
    )[0]
    got = {int(h["id"]): (h["entity"]["note"], h["entity"]["rank"]) for h in hits}
    assert got == {11: ("new", 1), 10: ("new", 1), 12: ("new", 1)}
    hits = client.search(NAME, [[4.0, 1.0, 0.0]], limit=1, output_fields=["note", "rank"])[0]
    assert (int(hits[0]["id"]), hits[0]["entity"]["note"], hits[0]["entity"]["rank"]) == (
        4,
        None,
        7,
    )

    # the growing rows written before the field existed flush with it; compaction mixes
    # the segment flushed before the field with those flushed after
    before = _query(client, "id >= 0", ["note", "rank"])
    client.flush(NAME)
    client.insert(NAME, _rows(range(15, 17), note="late"))
    client.flush(NAME)
    _compact(client)
    after = _query(client, "id >= 0", ["note", "rank"])
    assert {i: after[i] for i in before} == before
    assert after[15]["note"] == "late" and after[16]["rank"] == 7
    assert sorted(_query(client, "note is null", ["id"])) == [0, 1, 3, 4, 5, 6, 8, 9, 13, 14]


def test_the_schema_survives_a_restart(stack: Stack) -> None:
    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.insert(NAME, _rows(range(4)))
    client.flush(NAME)
    client.add_collection_field(NAME, "tag", DataType.VARCHAR, max_length=8, nullable=True)
    client.insert(NAME, _rows(range(4, 6), tag="t"))
    client.flush(NAME)

    stack.restart()
    client = stack.client()
    assert _fields(client)["tag"]["field_id"] == 102
    assert client.describe_collection(NAME)["schema"]["version"] == 1
    client.load_collection(NAME)
    rows = _query(client, "id >= 0", ["tag"])
    assert {i: r["tag"] for i, r in rows.items()} == {
        0: None,
        1: None,
        2: None,
        3: None,
        4: "t",
        5: "t",
    }
    client.insert(NAME, _rows([6], tag="u"))
    assert sorted(_query(client, 'tag == "u"', ["id"])) == [6]


def test_inserts_racing_the_change_all_land(stack: Stack) -> None:
    """Batches without the field keep arriving while it is added: none is lost or
    refused, and every one reads the field as null."""
    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.load_collection(NAME)
    errors: list[BaseException] = []
    sent: list[int] = []
    writer = stack.client()

    def insert_batches() -> None:
        try:
            for b in range(20):
                ids = list(range(b * 25, (b + 1) * 25))
                writer.insert(NAME, _rows(ids))
                sent.extend(ids)
                time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=insert_batches)
    t.start()
    wait_for(lambda: len(sent) >= 100, 30, "the first batches")
    client.add_collection_field(NAME, "late", DataType.DOUBLE, nullable=True)
    t.join(60)
    assert not errors, errors
    assert len(sent) == 500
    rows = _query(client, "id >= 0", ["late"])
    assert sorted(rows) == sorted(sent)
    assert all(r["late"] is None for r in rows.values())
    client.flush(NAME)
    assert client.query(NAME, "late is null", ["count(*)"], consistency_level=STRONG) == [
        {"count(*)": 500}
    ]


def test_refusals_name_the_problem_and_change_nothing(stack: Stack) -> None:
    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.insert(NAME, _rows(range(3)))
    before = client.describe_collection(NAME)["schema"]

    def add(field: dict[str, Any], collection: str = NAME) -> Any:
        return lambda: client._action(
            "add_collection_field", {"collection": collection, "field": field}
        )

    inv = ErrorCode.INVALID_ARGUMENT
    raises_code(inv, add({"name": "n", "type": "Int64"}), "'n'", "nullable")
    raises_code(inv, add({"name": "n", "type": "Int64", "default_value": 1}), "nullable")
    vec = {"name": "v2", "type": "FloatVector", "dim": 3, "nullable": True}
    raises_code(inv, add(vec), "'v2'", "scalar")
    raises_code(inv, add({"name": "s", "type": "SparseFloatVector", "nullable": True}), "scalar")
    raises_code(
        inv, add({"name": "vector", "type": "Int64", "nullable": True}), "'vector'", "already"
    )
    raises_code(inv, add({"name": "id", "type": "Int64", "nullable": True}), "'id'", "already")
    key = {"name": "k", "type": "Int64", "nullable": True}
    raises_code(inv, add({**key, "is_primary": True}), "primary key")
    raises_code(inv, add({**key, "auto_id": True}), "auto_id")
    raises_code(inv, add({**key, "is_partition_key": True}), "partition key")
    raises_code(inv, add({**key, "type": "VarChar"}), "max_length")
    raises_code(inv, add({**key, "default_value": "x"}), "default value")
    raises_code(inv, add({**key, "name": "_ts"}), "reserved")
    raises_code(ErrorCode.COLLECTION_NOT_FOUND, add(key, "absent"), "'absent'")
    with pytest.raises(ElanusError) as err:  # the SDK refuses a vector before sending it
        client.add_collection_field(NAME, "v3", DataType.FLOAT_VECTOR, dim=3, nullable=True)
    assert err.value.code == inv

    assert client.describe_collection(NAME)["schema"] == before
    client.load_collection(NAME)
    assert sorted(_query(client, "id >= 0", ["id"])) == [0, 1, 2]

    for i in range(MAX_FIELDS - 2):  # fill the schema up to the limit
        client.add_collection_field(NAME, f"f{i}", DataType.INT8, nullable=True)
    message = raises_code(ErrorCode.LIMIT_EXCEEDED, add({**key, "name": "one_more"}), "'one_more'")
    assert str(MAX_FIELDS) in message
    schema = client.describe_collection(NAME)["schema"]
    assert len(schema["fields"]) == MAX_FIELDS and schema["version"] == MAX_FIELDS - 2
    assert _query(client, "id == 1", [f"f{MAX_FIELDS - 3}"])[1][f"f{MAX_FIELDS - 3}"] is None


def test_a_segment_spilled_before_the_field_appends_after_it(tmp_path: Path) -> None:
    """A growing segment partly written to Lance under the old schema gets its next
    fragment under the new one: the dataset widens (default or null), nothing rewritten."""
    old = _schema()
    new = Schema.from_dict(old.to_dict())
    new.fields.append(Field("rank", DataType.INT32, nullable=True, default_value=7))
    new.fields.append(Field("note", DataType.VARCHAR, max_length=8, nullable=True))

    def rows(ids: list[int], schema: Schema, **extra: list[Any]) -> pa.Table:
        data: dict[str, Any] = {
            "id": ids,
            "vector": [[float(i), 0.0, 0.0] for i in ids],
            **extra,
            "_ts": [1] * len(ids),
        }
        return pa.table(data).cast(storage.segment_schema(schema))

    seg = tmp_path / "seg"
    storage.write_rows(seg, rows([1, 2], old), storage.segment_schema(old), first=True)
    defaults = storage.column_defaults(new)
    target = storage.segment_schema(new)
    added = rows([3], new, rank=[1], note=["x"])
    storage.write_rows(seg, added, target, first=False, defaults=defaults)
    table = storage.read_segment(seg, new).sort_by("id")
    assert table.column("rank").to_pylist() == [7, 7, 1]
    assert table.column("note").to_pylist() == [None, None, "x"]
    assert table.schema.equals(target)


def test_a_function_added_to_written_rows_computes_then_writes_its_output(
    tmp_path: Path,
) -> None:
    """``add_function_field`` on rows already written (Milvus backfills them): reads
    compute the BM25 output from the text, and ``widen`` writes it into the files, the
    rows in their order (a 2.0 dataset, which cannot hold a sparse vector, rewritten)."""
    from elanus import layout
    from elanus.functions import Function, FunctionType, output_column

    old = _schema()
    old.add_field("text", DataType.VARCHAR, max_length=32, enable_analyzer=True)
    new = Schema.from_dict(old.to_dict())
    new.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    new.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))
    texts = ["pear pear apple", "apple", "pear"]
    table = pa.table(
        {"id": [3, 1, 2], "vector": [[0.0, 0.0, 0.0]] * 3, "text": texts, "_ts": [1] * 3}
    ).cast(storage.segment_schema(old))
    seg = tmp_path / "seg"
    storage.write_rows(seg, table, storage.segment_schema(old), first=True)
    want = output_column(new.functions[0], new, pa.array(texts)).to_pylist()
    assert storage.read_segment(seg, new).column("sparse").to_pylist() == want

    path = layout.data_path(seg)
    storage.widen(path, storage.segment_schema(new), storage.column_defaults(new))
    ds = storage.dataset(path)
    assert ds.data_storage_version != "2.0"
    stored = ds.to_table()
    assert stored.column("id").to_pylist() == [3, 1, 2]  # row positions kept
    assert stored.column("sparse").to_pylist() == want
    storage.widen(path, storage.segment_schema(new), storage.column_defaults(new))  # done: as is
    assert storage.dataset(path).version == ds.version


def test_a_merge_that_ran_across_a_function_added_writes_its_output(tmp_path: Path) -> None:
    """A compaction planned before ``add_function_field`` and finished after it: its target,
    merged under the old schema, is widened to the new one before it is reported."""
    from elanus import layout
    from elanus.functions import Function, FunctionType, output_column
    from elanus.segments.flushcommon.compaction import Merge

    old = _schema()
    old.add_field("text", DataType.VARCHAR, max_length=32, enable_analyzer=True)
    new = Schema.from_dict(old.to_dict())
    new.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    new.add_function(Function("bm25", FunctionType.BM25, ["text"], ["sparse"]))
    new.version = old.version + 1
    sources = []
    for i, texts in enumerate([["pear apple", "apple"], ["pear pear"]]):
        n = len(texts)
        ids = list(range(10 * i, 10 * i + n))
        table = pa.table(
            {"id": ids, "vector": [[0.0, 0.0, 0.0]] * n, "text": texts, "_ts": [1] * n}
        ).cast(storage.segment_schema(old))
        storage.write_segment(tmp_path / f"s{i}", table, old)
        sources.append(str(tmp_path / f"s{i}"))
    merge = Merge(sources, [str(tmp_path / "t")], old, horizon_ts=10, schema_now=lambda: new)
    outcome = merge.write(0)
    assert not isinstance(outcome, Exception)
    stored = storage.dataset(layout.data_path(tmp_path / "t")).to_table()
    texts = stored.column("text").combine_chunks()
    want = output_column(new.functions[0], new, texts).to_pylist()
    assert stored.column("sparse").to_pylist() == want and len(want) == 3


def test_spark_reads_the_field_from_segments_flushed_before_it(stack: Stack) -> None:
    """The Spark source's direct file read fills the column a segment's files lack."""
    pytest.importorskip("pyspark")
    from elanus.spark.source import read_partitions

    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.insert(NAME, _rows(range(4)))
    client.flush(NAME)
    client.add_collection_field(NAME, "rank", DataType.INT64, nullable=True, default_value=5)
    client.add_collection_field(NAME, "note", DataType.VARCHAR, max_length=8, nullable=True)
    client.insert(NAME, _rows(range(4, 6), rank=9, note="n"))
    client.flush(NAME)
    client.load_collection(NAME)
    opts = {"uri": stack.uri, "collection": NAME, "direct": "true"}
    read = read_partitions(opts)
    kinds = {p.kind for p, _ in read.parts}
    assert kinds == {"sealed"}, kinds
    table = pa.concat_tables([t for _, t in read.parts]).sort_by("id")
    assert table.column("rank").to_pylist() == [5, 5, 5, 5, 9, 9]
    assert table.column("note").to_pylist() == [None] * 4 + ["n", "n"]
    nulls = read_partitions({**opts, "filter": "note is null and rank == 5"})
    ids = sorted(i for _, t in nulls.parts for i in t.column("id").to_pylist())
    assert ids == [0, 1, 2, 3]


def test_imports_after_the_change_may_carry_the_field_or_not(stack: Stack, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    client = stack.client()
    client.create_collection(NAME, schema=_schema())
    client.insert(NAME, _rows(range(2)))
    client.add_collection_field(NAME, "rank", DataType.INT64, nullable=True, default_value=5)

    def parquet(name: str, ids: list[int], **extra: list[Any]) -> str:
        vectors = [[float(i), 1.0, 0.0] for i in ids]
        table = pa.table({"id": pa.array(ids, pa.int64()), "vector": vectors, **extra})
        pq.write_table(table, tmp_path / name)
        return str(tmp_path / name)

    with_field = parquet("with.parquet", [10, 11], rank=[1, None])
    without = parquet("without.parquet", [20, 21])
    for files in ([with_field], [without]):
        client.wait_import(client.bulk_import(NAME, files), timeout=60)
    client.load_collection(NAME)
    ranks = {i: r["rank"] for i, r in _query(client, "id >= 0", ["rank"]).items()}
    assert ranks == {0: 5, 1: 5, 10: 1, 11: 5, 20: 5, 21: 5}


@pytest.mark.slow
def test_cli_collection_add_field(server: StandaloneProcess) -> None:
    cli(server, "collection", "create", "cli_books", "--dim", "4")
    added = cli_json(
        server, "collection", "add-field", "cli_books", "lang", "--type", "VarChar",
        "--max-length", "8", "--default", "en",
    )  # fmt: skip
    assert added == {"collection": "cli_books", "added": "lang"}
    fields = cli_json(server, "collection", "describe", "cli_books")["schema"]["fields"]
    lang = next(f for f in fields if f["name"] == "lang")
    assert (lang["nullable"], lang["default_value"], lang["max_length"]) == (True, "en", 8)
    refused = run_elanus(
        "collection", "add-field", "cli_books", "v", "--type", "FloatVector", "--uri", server.uri
    )
    assert refused.returncode != 0 and "scalar" in refused.stderr
