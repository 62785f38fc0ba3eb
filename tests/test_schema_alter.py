"""drop_collection_field (Milvus 2.6's ``AlterCollectionSchema`` drop request) through the
Elanus SDK: a dropped field leaves describe, query, search and filters, for flushed and
growing rows, loaded or not, and after a restart; its index goes with it; its id is never
given again, its name may be, and a field added under it never shows the old values.
Refusals carry Milvus's words (milvus-io/milvus rootcoord ``buildSchemaForDropField`` and
its proxy checks) and change nothing. The Milvus face's ``AlterCollectionSchema`` is
tested in ``tests/test_milvus_schema_alter.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lance
import pyarrow as pa
import pytest
from conftest import cli, cli_json, raises_code, run_elanus, wait_for

from elanus import ElanusError, ErrorCode
from elanus.functions import fill_outputs
from elanus.meta.catalog import number_fields
from elanus.schema import FIELD_ID_KEY, DataType, Field, Schema
from elanus.segments import storage

if TYPE_CHECKING:
    from conftest import Stack, StandaloneProcess

    from elanus.client.client import Client

STRONG = "Strong"
NAME = "shelf"


def _schema() -> Schema:
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("tag", DataType.VARCHAR, max_length=16)
    s.add_field("extra", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("part", DataType.INT64, is_partition_key=True)
    return s


def _rows(ids: range, **values: Any) -> list[dict[str, Any]]:
    """Rows of the full schema (``tag`` and ``extra`` included); ``values`` replace or,
    when ``None``, leave out a field's."""
    out = []
    for i in ids:
        row = {"id": i, "vector": [float(i), 1.0, 0.0], "tag": f"t{i}", "extra": [1.0, 0.0]}
        row = {**row, "part": i, **values}
        out.append({k: v for k, v in row.items() if v is not None})
    return out


def _fields(client: Client) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in client.describe_collection(NAME)["schema"]["fields"]}


def _index(client: Client) -> None:
    for field in ("vector", "extra"):
        params = client.prepare_index_params()
        params.add_index(field, index_type="FLAT", metric_type="L2")
        client.create_index(NAME, params)


def test_a_dropped_field_leaves_reads_and_its_name_may_come_back(stack: Stack) -> None:
    client = stack.client()
    client.create_collection(NAME, schema=_schema(), num_partitions=4)
    _index(client)
    client.insert(NAME, _rows(range(0, 5)))
    client.flush(NAME)  # ids 0-4: a flushed segment
    client.load_collection(NAME)
    client.insert(NAME, _rows(range(5, 10)))  # ids 5-9: growing

    client.drop_collection_field(NAME, "tag")
    fields = _fields(client)
    assert "tag" not in fields and client.describe_collection(NAME)["schema"]["version"] == 1
    rows = client.query(NAME, "id >= 0", ["*"], consistency_level=STRONG)
    assert len(rows) == 10 and all("tag" not in r for r in rows)
    raises_code(
        ErrorCode.BAD_EXPRESSION,
        lambda: client.query(NAME, 'tag == "t1"', ["id"], consistency_level=STRONG),
        "unknown field 'tag'",
    )
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.query(NAME, "id >= 0", ["tag"], consistency_level=STRONG),
        "tag",
    )

    # a vector field that is not the last one goes, and its index with it
    client.drop_collection_field(NAME, field_id=fields["extra"]["field_id"])
    assert [i for i in client.list_indexes(NAME)] == ["vector"]
    hits = client.search(NAME, [[1.0, 1.0, 0.0]], limit=3, output_fields=["*"],
                         consistency_level=STRONG)[0]  # fmt: skip
    assert len(hits) == 3 and all(set(h["entity"]) == {"id", "vector", "part"} for h in hits)
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.search(NAME, [[1.0, 0.0]], anns_field="extra", limit=1),
        "extra",
    )

    # the name comes back under a new id: none of the old values shows
    client.add_collection_field(NAME, "tag", DataType.VARCHAR, max_length=16, nullable=True)
    tag = _fields(client)["tag"]
    assert tag["field_id"] == 105  # 100-104 were given (102 and 103 dropped since)
    client.insert(NAME, _rows(range(10, 12), tag="new", extra=None))
    rows = {r["id"]: r["tag"] for r in client.query(NAME, "id >= 0", ["tag"],
                                                     consistency_level=STRONG)}  # fmt: skip
    assert rows == {**{i: None for i in range(10)}, 10: "new", 11: "new"}

    client.flush(NAME)
    params = client.prepare_index_params()
    params.add_index("tag", index_type="INVERTED")  # built over segments that held "t1"...
    stack.add_indexnode()
    client.create_index(NAME, params)
    client.wait_for_index(NAME, "tag", timeout=120)
    stack.restart()
    client = stack.client()
    client.load_collection(NAME)
    segments = [seg for qn in stack.querynodes for seg in qn.worker.segments.values()]
    assert segments and all(seg.has_scalar("tag") for seg in segments)  # the index answers
    for expr, ids in (('tag == "t1"', []), ('tag == "new"', [10, 11]), ("tag is null", [0, 9])):
        got = sorted(r["id"] for r in client.query(NAME, expr, ["id"], consistency_level=STRONG))
        assert got[:1] + got[-1:] == ids, (expr, got)
    rows = {r["id"]: r["tag"] for r in client.query(NAME, "id >= 0", ["*"],
                                                     consistency_level=STRONG)}  # fmt: skip
    assert rows == {**{i: None for i in range(10)}, 10: "new", 11: "new"}
    assert set(_fields(client)) == {"id", "vector", "part", "tag"}


def test_compaction_writes_without_the_dropped_column(stack: Stack) -> None:
    client = stack.client()
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("tag", DataType.VARCHAR, max_length=16)
    client.create_collection(NAME, schema=s)
    for start in (0, 5):
        client.insert(NAME, [{"id": i, "vector": [1.0, 0.0, 0.0], "tag": "x"} for i in
                             range(start, start + 5)])  # fmt: skip
        client.flush(NAME)
    client.drop_collection_field(NAME, "tag")
    job = client.compact(NAME)
    wait_for(lambda: client.get_compaction_state(job) == "Completed", 60, "compaction")
    segs = [g for g in client.get_segment_info(NAME) if g["state"] == "Flushed"]
    assert len(segs) == 1 and segs[0]["num_rows"] == 10
    data = [d for d in stack.settings.storage_path.rglob("*.lance") if d.name == "data.lance"]
    newest = max(data, key=lambda d: d.stat().st_mtime)
    assert "tag" not in lance.dataset(str(newest)).schema.names
    client.load_collection(NAME)
    rows = client.query(NAME, "id >= 0", ["*"], consistency_level=STRONG)
    assert len(rows) == 10 and all(set(r) == {"id", "vector"} for r in rows)


def test_refusals_carry_milvus_words_and_change_nothing(stack: Stack) -> None:
    client = stack.client()
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("part", DataType.INT64, is_partition_key=True)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_function({"name": "bm25", "type": "BM25", "input_field_names": ["text"],
                    "output_field_names": ["sparse"]})  # fmt: skip
    client.create_collection(NAME, schema=s, num_partitions=2)
    before = client.describe_collection(NAME)["schema"]

    bad = ErrorCode.INVALID_ARGUMENT
    drop = client.drop_collection_field
    raises_code(bad, lambda: drop(NAME, "missing"), "field not found: missing")
    raises_code(bad, lambda: drop(NAME, field_id=999), "field not found with id: 999")
    raises_code(bad, lambda: drop(NAME, "$meta"), "field not found: $meta")
    raises_code(bad, lambda: drop(NAME, "id"), "cannot drop primary key field: id")
    raises_code(bad, lambda: drop(NAME, "part"), "cannot drop partition key field: part")
    raises_code(
        bad,
        lambda: drop(NAME, "text"),
        "field is referenced by function bm25 as input, drop function first",
    )
    raises_code(
        bad,
        lambda: drop(NAME, "sparse"),
        "field is referenced by function bm25 as output, drop function first",
    )
    raises_code(bad, lambda: drop(NAME), "exactly one of 'field_name' and 'field_id'")
    raises_code(ErrorCode.COLLECTION_NOT_FOUND, lambda: drop("nope", "vector"), "nope")
    assert client.describe_collection(NAME)["schema"] == before

    client.create_collection("lone", dimension=2)
    raises_code(bad, lambda: drop("lone", "vector"), "cannot drop the last vector field: vector")

    # the function goes with its output field; its input is then a plain field
    raises_code(bad, lambda: client.drop_function_field(NAME, "x"), "function not found: x")
    client.drop_function_field(NAME, "bm25")
    after = client.describe_collection(NAME)["schema"]
    assert not after.get("functions") and after["version"] == 1
    assert [f["name"] for f in after["fields"]] == ["id", "vector", "part", "text"]
    drop(NAME, "text")
    assert client.describe_collection(NAME)["schema"]["dropped_fields"] == {
        "103": "text",
        "104": "sparse",
    }


def test_conform_keeps_a_dropped_fields_column_from_its_namesake() -> None:
    """A segment written before ``tag`` was dropped holds a ``tag`` column; the field added
    later under that name reads null there, and its own values where it wrote them."""
    s = Schema.from_dict(
        {
            "fields": [
                Field("id", DataType.INT64, is_primary=True, field_id=100).to_dict(),
                Field("tag", DataType.VARCHAR, max_length=8, nullable=True, field_id=103).to_dict(),
            ],
            "dropped_fields": {"101": "tag", "104": "gone"},
        }
    )
    target = storage.segment_schema(s, with_ts=False)
    assert target.field("tag").metadata[FIELD_ID_KEY] == b"103"
    stored = pa.field("tag", pa.string(), metadata={b"elanus.type": b"VarChar"})
    old = pa.table({"id": [1, 2], "tag": ["a", "b"]}).cast(
        pa.schema([pa.field("id", pa.int64()), stored])
    )  # the dropped field's column, as a segment stored it
    assert storage.conform(old, target).column("tag").to_pylist() == [None, None]
    client = pa.table({"id": [4], "tag": ["d"]})  # an import file's: the field of its name
    assert storage.conform(client, target).column("tag").to_pylist() == ["d"]
    new = pa.Table.from_arrays([pa.array([3]), pa.array(["c"])], schema=target)
    assert storage.conform(new, target).column("tag").to_pylist() == ["c"]
    again = Schema.from_dict(s.to_dict())
    assert again.max_field_id == 104 and again.dropped == {101: "tag", 104: "gone"}
    clash = Schema.from_dict({**s.to_dict(), "dropped_fields": {"103": "tag"}})
    with pytest.raises(ElanusError, match="none of them dropped"):
        number_fields(clash)


@pytest.mark.slow
def test_cli_collection_drop_field(server: StandaloneProcess) -> None:
    cli(server, "collection", "create", "cli_shelf", "--dim", "4")
    cli(server, "collection", "add-field", "cli_shelf", "lang", "--type", "VarChar",
        "--max-length", "8")  # fmt: skip
    dropped = cli_json(server, "collection", "drop-field", "cli_shelf", "lang")
    assert dropped == {"collection": "cli_shelf", "dropped": "lang"}
    fields = cli_json(server, "collection", "describe", "cli_shelf")["schema"]["fields"]
    assert "lang" not in {f["name"] for f in fields}
    refused = run_elanus("collection", "drop-field", "cli_shelf", "id", "--uri", server.uri)
    assert refused.returncode != 0 and "cannot drop primary key field: id" in refused.stderr
    refused = run_elanus("collection", "drop-function", "cli_shelf", "bm25", "--uri", server.uri)
    assert refused.returncode != 0 and "function not found: bm25" in refused.stderr


def test_rows_checked_before_a_function_came_get_its_output() -> None:
    """A row the proxy checked just before ``add_function_field`` reaches the nodes
    without the output: they compute it from the input, as an insert after would."""
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("text", DataType.VARCHAR, max_length=64, enable_analyzer=True)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_function({"name": "bm25", "type": "BM25", "input_field_names": ["text"],
                    "output_field_names": ["sparse"]})  # fmt: skip
    rows = pa.table({"id": [1, 2], "text": ["a b b", None]})
    filled = fill_outputs(rows, s)
    assert filled.column_names == ["id", "text", "sparse"]
    first, second = filled.column("sparse").to_pylist()
    assert len(first) == 2 and not second  # two terms; a null text: an empty vector
    assert fill_outputs(filled, s) is filled  # nothing lacking: unchanged
    batch = fill_outputs(pa.record_batch({"id": [3], "text": ["c"]}), s)  # a datanode's
    assert batch.schema.names == ["id", "text", "sparse"] and len(batch.column(2)[0]) == 1
