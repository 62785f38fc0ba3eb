"""``elanus insert`` / ``flush`` / ``segments`` run as a user runs them, against a real
standalone server (coord + datanode + proxy), plus the file-reading helpers on their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import LoopThread, Stack, StandaloneProcess, cli, cli_json, run_elanus

from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.cli.data import file_format
from elanus.filereaders import parse_dense_vectors, prepare, rebatch
from elanus.meta.coord import Coordinator
from elanus.schema import DataType, Field, Schema

pytestmark = pytest.mark.timeout(120)

DIM = 8


def one_line_error(result: Any, code: str, exit_code: int = 1) -> str:
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    return str(lines[0])


def vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim), dtype=np.float32)


def write_parquet(path: Path, ids: range, dim: int = DIM) -> Path:
    flat = pa.array(vectors(len(ids), dim).reshape(-1))
    table = pa.table(
        {
            "id": pa.array(ids, type=pa.int64()),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
            "title": [f"book {i}" for i in ids],  # a dynamic field
        }
    )
    pq.write_table(table, path)
    return path


def write_jsonl(path: Path, ids: range) -> Path:
    with path.open("w") as out:
        for i, vec in zip(ids, vectors(len(ids), seed=1), strict=True):
            out.write(json.dumps({"id": i, "vector": vec.tolist(), "year": 1900 + i % 100}) + "\n")
    return path


def total_rows(segments: list[dict[str, Any]]) -> int:
    return sum(int(s["num_rows"]) for s in segments)


# -- against a server ---------------------------------------------------------------------------
@pytest.mark.slow
def test_insert_flush_segments(server: StandaloneProcess, tmp_path: Path) -> None:
    cli(server, "collection", "create", "books", "--dim", str(DIM))
    parquet = write_parquet(tmp_path / "books.parquet", range(1000))
    jsonl = write_jsonl(tmp_path / "books.jsonl", range(1000, 1200))

    first = cli_json(server, "insert", "books", str(parquet), "--batch-rows", "300")
    assert first["insert_count"] == 1000 and first["ts"] > 0 and first["elapsed_s"] >= 0
    summary = cli(server, "insert", "books", str(jsonl))
    assert "inserted 200 row(s) into books" in summary and "rows/s" in summary

    flushed = cli_json(server, "flush", "books")
    assert flushed["flushed"] is True and flushed["segment_ids"]
    segments = flushed["segments"]
    assert {s["state"] for s in segments} == {"Flushed"}
    assert set(flushed["segment_ids"]) <= {s["segment_id"] for s in segments}
    assert total_rows(segments) == 1200
    assert {s["partition"] for s in segments} == {"_default"}

    listed = cli_json(server, "segments", "books")
    assert [s["segment_id"] for s in listed] == [s["segment_id"] for s in segments]
    assert total_rows(listed) == 1200 and {s["state"] for s in listed} == {"Flushed"}
    table = cli(server, "segments", "books")
    assert "Flushed" in table and "_default" in table and "1,200 row(s)" in table

    # A wrong dimension is refused whole: one error line, nothing inserted.
    bad = write_parquet(tmp_path / "bad.parquet", range(5000, 5010), dim=4)
    line = one_line_error(
        run_elanus("insert", "books", str(bad), "--uri", server.uri), "SCHEMA_MISMATCH"
    )
    assert "dim" in line and "Traceback" not in line
    assert total_rows(cli_json(server, "flush", "books")["segments"]) == 1200
    assert total_rows(cli_json(server, "segments", "books")) == 1200


@pytest.mark.slow
def test_insert_csv_into_a_partition(server: StandaloneProcess, tmp_path: Path) -> None:
    cli(server, "collection", "create", "notes", "--dim", "4", "--id-type", "varchar")
    cli(server, "partition", "create", "notes", "p1")
    path = tmp_path / "notes.csv"
    lines = ["id,vector,stars"]
    for i, vec in enumerate(vectors(50, 4)):
        text = json.dumps([round(float(x), 5) for x in vec])
        lines.append(f'00{i},"{text}",{i % 5}')  # "00i": ids stay strings
    path.write_text("\n".join(lines) + "\n")

    result = cli_json(server, "insert", "notes", str(path), "--partition", "p1")
    assert result["insert_count"] == 50
    segments = cli_json(server, "flush", "notes")["segments"]
    assert total_rows(segments) == 50 and {s["partition"] for s in segments} == {"p1"}

    # A vector that is not JSON is named with its row and the file.
    path.write_text('id,vector\nx1,"[1, 2, 3, 4]"\nx2,"[1, 2, oops]"\n')
    line = one_line_error(
        run_elanus("insert", "notes", str(path), "--uri", server.uri), "INVALID_ARGUMENT"
    )
    assert "row 1 of notes.csv" in line

    missing = run_elanus("insert", "no_such_collection", str(path), "--uri", server.uri)
    one_line_error(missing, "COLLECTION_NOT_FOUND")


@pytest.mark.slow
def test_flush_timeout(nats_server: EmbeddedNats, loop_thread: LoopThread, tmp_path: Path) -> None:
    """No datanode watches the channel yet: the sealed segment cannot be written, so the
    wait ends in TIMEOUT; once a datanode starts, the same command lists it flushed."""
    stack = Stack(loop_thread, nats_server, tmp_path / "data")
    try:
        stack.coord = Coordinator(stack.settings, stack.bus)
        stack.call(stack.coord.start())
        stack.add_querynode()  # the quick setup loads the collection
        stack.add_proxy()
        uri = ["--uri", stack.uri]
        assert run_elanus("collection", "create", "slow", "--dim", str(DIM), *uri).returncode == 0
        rows = write_jsonl(tmp_path / "slow.jsonl", range(20))
        assert run_elanus("insert", "slow", str(rows), *uri).returncode == 0
        result = run_elanus("flush", "slow", "--timeout", "0", *uri)
        assert "flush of 'slow' not done after 0s" in one_line_error(result, "TIMEOUT")
        stack.add_datanode()
        done = run_elanus("flush", "slow", "--json", *uri)
        assert done.returncode == 0, done.stderr
        assert total_rows(json.loads(done.stdout)["segments"]) == 20
    finally:
        stack.close()


@pytest.mark.slow
def test_a_bad_batch_stops_the_insert(server: StandaloneProcess, tmp_path: Path) -> None:
    cli(server, "collection", "create", "partial", "--dim", str(DIM))
    path = write_jsonl(tmp_path / "partial.jsonl", range(300))
    lines = path.read_text().splitlines()
    lines[250] = json.dumps({"id": 250, "vector": [0.5] * (DIM - 1)})
    path.write_text("\n".join(lines) + "\n")
    result = run_elanus("insert", "partial", str(path), "--batch-rows", "100", "--uri", server.uri)
    line = one_line_error(result, "SCHEMA_MISMATCH")
    assert "(row 50)" in line and "rows 200-299 of partial.jsonl" in line, line
    assert "200 row(s) before this batch were inserted" in line
    assert total_rows(cli_json(server, "flush", "partial")["segments"]) == 200


# -- usage errors (checked before any server is reached) ---------------------------------------
@pytest.mark.slow
def test_file_usage_errors(tmp_path: Path) -> None:
    uri = f"grpc://127.0.0.1:{free_port()}"
    missing = run_elanus("insert", "books", str(tmp_path / "nothere.parquet"), "--uri", uri)
    assert missing.returncode == 2, missing.stderr
    assert "nothere.parquet" in missing.stderr and "Traceback" not in missing.stderr

    odd = tmp_path / "rows.xlsx"
    odd.write_text("x")
    unknown = run_elanus("insert", "books", str(odd), "--uri", uri)
    assert unknown.returncode == 2 and "rows.xlsx" in unknown.stderr

    nothing = run_elanus("insert", "books", str(tmp_path), "--uri", uri)
    assert nothing.returncode == 2


# -- the helpers --------------------------------------------------------------------------------
def test_file_format() -> None:
    assert file_format(Path("a.parquet")) == "parquet"
    assert file_format(Path("a.b.JSONL")) == "jsonl"
    assert file_format(Path("a.ndjson.gz")) == "jsonl"
    assert file_format(Path("a.csv.zst")) == "csv"
    for bad in ("a.json", "a", "a.parquet.gz"):
        with pytest.raises(Exception, match="unknown file type"):
            file_format(Path(bad))


def test_parse_dense_vectors() -> None:
    text = pa.array(["[1, 2.5,3e-1]", None, "  [ -4,5 ,6] "])
    parsed = parse_dense_vectors(text)
    assert parsed is not None
    assert parsed.type == pa.list_(pa.float32())
    assert parsed.to_pylist() == [[1.0, 2.5, pytest.approx(0.3)], None, [-4.0, 5.0, 6.0]]
    assert parse_dense_vectors(pa.array(["[1, x]"])) is None
    assert parse_dense_vectors(pa.array(["1, 2"])) is None
    sliced = parse_dense_vectors(pa.array(["[9]", "[1,2]", "[3,4]"]).slice(1))
    assert sliced is not None and sliced.to_pylist() == [[1, 2], [3, 4]]


def test_prepare_converts_text_and_objects() -> None:
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("v", DataType.FLOAT_VECTOR, dim=2),
            Field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4),
            Field("doc", DataType.JSON),
            Field("sparse", DataType.SPARSE_FLOAT_VECTOR),
        ]
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "id": [1, 2],
            "v": ["[1, 2]", "[3,4]"],
            "tags": ["[1, 2]", "[]"],
            "doc": [{"a": 1, "b": None}, {"a": None, "b": "x"}],
            "sparse": ['{"3": 0.5}', '{"1": 0.25, "7": 1}'],
            "extra": ["kept", "as is"],
        }
    )
    out = prepare(batch, schema)
    assert out.column("v").to_pylist() == [[1, 2], [3, 4]]
    assert out.column("tags").to_pylist() == [[1, 2], []]
    assert [json.loads(d) for d in out.column("doc").to_pylist()] == [{"a": 1}, {"b": "x"}]
    assert out.column("sparse").to_pylist() == [[(3, 0.5)], [(1, 0.25), (7, 1.0)]]
    assert out.column("extra").to_pylist() == ["kept", "as is"]


def test_rebatch() -> None:
    batches = [pa.record_batch({"x": list(range(n))}) for n in (5, 0, 7, 3)]
    sizes = [t.num_rows for t in rebatch(iter(batches), 4)]
    assert sizes == [4, 4, 4, 3]
    assert sum(sizes) == 15
