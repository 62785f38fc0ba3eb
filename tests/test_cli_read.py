"""``elanus load`` / ``release`` / ``search`` / ``query`` run as a user runs them, against a
real standalone server, plus the vector-file reader on its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import StandaloneProcess, bare_schema_file, cli, cli_json, run_elanus

from elanus.channels.nats_server import free_port
from elanus.cli.read import read_vectors

pytestmark = pytest.mark.timeout(120)

DIM = 4
ROWS = 20


def one_line_error(result: Any, code: str) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    return str(lines[0])


def vectors(n: int = ROWS) -> np.ndarray:
    return np.random.default_rng(7).random((n, DIM), dtype=np.float32)


def write_jsonl(path: Path) -> Path:
    with path.open("w") as out:
        for i, vec in enumerate(vectors()):
            out.write(json.dumps({"id": i, "vector": vec.tolist(), "title": f"book {i}"}) + "\n")
    return path


def create_bare(server: StandaloneProcess, name: str, tmp_path: Path) -> None:
    """The quick setup's fields with no index, not loaded (``--dim`` indexes and loads)."""
    schema = bare_schema_file(tmp_path / f"{name}.schema.json", DIM)
    cli(server, "collection", "create", name, "--schema", str(schema))


@pytest.mark.slow
def test_load_search_query_release(server: StandaloneProcess, tmp_path: Path) -> None:
    create_bare(server, "books", tmp_path)
    assert (
        cli_json(server, "insert", "books", str(write_jsonl(tmp_path / "b.jsonl")))["insert_count"]
        == ROWS
    )
    cli(server, "flush", "books")
    q = tmp_path / "q.npy"
    np.save(q, vectors()[[3, 11]])

    # Not loaded: search does not load implicitly.
    unloaded = run_elanus("search", "books", "--vector-file", str(q), "--uri", server.uri)
    one_line_error(unloaded, "COLLECTION_NOT_LOADED")

    state = cli_json(server, "load", "books")
    assert state["state"] == "Loaded"
    assert "Loaded" in cli(server, "load", "books")

    results = cli_json(
        server,
        "search",
        "books",
        "--vector-file",
        str(q),
        "--limit",
        "3",
        "--metric",
        "L2",
        "--output-fields",
        "title",
        "--consistency",
        "Strong",
    )
    assert len(results) == 2 and all(len(hits) == 3 for hits in results)
    for want, hits in zip((3, 11), results, strict=True):
        assert hits[0]["id"] == want
        assert hits[0]["distance"] == pytest.approx(0.0, abs=1e-5)
        assert hits[0]["entity"]["title"] == f"book {want}"
    shown = cli(
        server, "search", "books", "--vector-file", str(q), "--limit", "3", "--metric", "L2"
    )
    assert "query 0, 3 hit(s)" in shown and "distance" in shown

    # A .json file with one vector is one query; a filter keeps other ids out.
    one = tmp_path / "one.json"
    one.write_text(json.dumps(vectors()[5].tolist()))
    hits = cli_json(
        server,
        "search",
        "books",
        "--vector-file",
        str(one),
        "--metric",
        "L2",
        "--filter",
        "id >= 10",
        "--limit",
        "2",
    )
    assert len(hits) == 1 and [h["id"] >= 10 for h in hits[0]] == [True, True]

    rows = cli_json(server, "query", "books", "id < 5", "--consistency", "Strong")
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3, 4]
    titled = cli_json(
        server, "query", "books", "id < 5", "--output-fields", "id,title", "--limit", "2"
    )
    assert len(titled) == 2 and all(r["title"] == f"book {r['id']}" for r in titled)
    assert "5 row(s)" in cli(server, "query", "books", "id < 5")

    count = cli_json(server, "query", "books", "id >= 0", "--output-fields", "count(*)")
    assert count == [{"count(*)": ROWS}]
    assert f"count(*) = {ROWS}" in cli(
        server, "query", "books", "id >= 0", "--output-fields", "count(*)"
    )

    bad = run_elanus("query", "books", "id <", "--uri", server.uri)
    assert (
        bad.returncode == 1 and bad.stderr.startswith("error: [") and "Traceback" not in bad.stderr
    )

    released = cli_json(server, "release", "books")
    assert released["state"] == "NotLoad"
    again = run_elanus("query", "books", "id < 5", "--uri", server.uri)
    one_line_error(again, "COLLECTION_NOT_LOADED")


@pytest.mark.slow
def test_search_params_and_partitions(server: StandaloneProcess, tmp_path: Path) -> None:
    create_bare(server, "parted", tmp_path)
    cli(server, "partition", "create", "parted", "late")
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows)
    cli(server, "insert", "parted", str(rows))
    late = tmp_path / "late.jsonl"
    with late.open("w") as out:
        for i, vec in enumerate(vectors()):
            out.write(json.dumps({"id": 100 + i, "vector": vec.tolist(), "title": "late"}) + "\n")
    cli(server, "insert", "parted", str(late), "--partition", "late")
    cli(server, "flush", "parted")
    state = cli_json(server, "load", "parted", "--partition", "late", "--partition", "_default")
    assert state["state"] == "Loaded"
    q = tmp_path / "q.json"
    q.write_text(json.dumps(vectors()[3].tolist()))
    common = ("search", "parted", "--vector-file", str(q), "--metric", "L2", "--limit", "3")
    both = cli_json(server, *common, "--consistency", "Strong")
    assert {h["id"] for h in both[0]} == {3, 103} | {both[0][2]["id"]}
    only_late = cli_json(server, *common, "--partition", "late", "--params", '{"ef": 64}')
    assert [h["id"] for h in only_late[0]][0] == 103
    assert all(h["id"] >= 100 for h in only_late[0])
    rows_late = cli_json(server, "query", "parted", "id >= 0", "--partition", "late")
    assert sorted(r["id"] for r in rows_late) == list(range(100, 100 + ROWS))
    bad = run_elanus(*common, "--params", "[1]", "--uri", server.uri)
    assert bad.returncode == 2 and "--params" in bad.stderr and "JSON object" in bad.stderr


@pytest.mark.slow
def test_one_spelling_across_commands(server: StandaloneProcess, tmp_path: Path) -> None:
    """``--filter``, ``--limit/-k``, ``--offset`` and ``--output-fields`` mean the same in
    ``search`` and ``query``; ``load --all``; a read sees the insert of the command before
    it; output into a pipe is plain and never cut at 80 columns."""
    create_bare(server, "wide", tmp_path)
    title = "a title far wider than any terminal " * 5
    rows = tmp_path / "wide.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": i, "vector": v.tolist(), "title": f"{title}{i}"}) + "\n"
            for i, v in enumerate(vectors())
        )
    )
    cli(server, "insert", "wide", str(rows))
    loaded = cli_json(server, "load", "--all")
    assert loaded["wide"]["state"] == "Loaded" and all(
        s["state"] == "Loaded" for s in loaded.values()
    )
    for wrong in (("load",), ("load", "wide", "--all")):
        refused = run_elanus(*wrong, "--uri", server.uri)
        assert refused.returncode == 2 and "--all" in refused.stderr, refused.stderr

    assert len(cli_json(server, "query", "wide", "--filter", "id < 5", "-k", "2")) == 2
    assert len(cli_json(server, "query", "wide", "id < 5")) == 5  # the argument, as before
    assert len(cli_json(server, "query", "wide", "--limit", "3")) == 3  # no filter: any rows
    twice = run_elanus("query", "wide", "id < 5", "--filter", "id < 3", "--uri", server.uri)
    assert twice.returncode == 2 and "give the filter once" in twice.stderr

    q = tmp_path / "q.json"
    q.write_text(json.dumps(vectors()[3].tolist()))
    search = ("search", "wide", "--vector-file", str(q), "--metric", "L2")
    three = [h["id"] for h in cli_json(server, *search, "-k", "3")[0]]
    skipped = cli_json(server, *search, "-k", "2", "--offset", "1", "--filter", "id >= 0")
    assert [h["id"] for h in skipped[0]] == three[1:]

    one = tmp_path / "late.jsonl"
    one.write_text(json.dumps({"id": 999, "vector": [0.5] * DIM, "title": "late"}) + "\n")
    cli(server, "insert", "wide", str(one))  # and at once, with no --consistency: seen
    assert [r["id"] for r in cli_json(server, "query", "wide", "--filter", "id == 999")] == [999]

    shown = cli(server, "query", "wide", "--filter", "id == 3", "--output-fields", "title")
    assert f"{title}3" in shown and "┃" not in shown and "│" not in shown


# -- full-text search ---------------------------------------------------------------------------
BM25_SCHEMA = {
    "fields": [
        {"name": "id", "type": "Int64", "is_primary": True},
        {"name": "text", "type": "VarChar", "max_length": 200, "enable_analyzer": True,
         "analyzer_params": {"type": "english"}},
        {"name": "tag", "type": "VarChar", "max_length": 16},
        {"name": "sparse", "type": "SparseFloatVector"},
    ],
    "functions": [{"name": "text_bm25", "type": "BM25",
                   "input_field_names": ["text"], "output_field_names": ["sparse"]}],
}  # fmt: skip
DOCS = [
    (0, "a kestrel hovers over the meadow", "sky"),
    (1, "the red fox sleeps in the forest", "ground"),
    (2, "kites hovering above the forest edge", "sky"),
    (3, "rain falls on the quiet harbour", "sea"),
]


@pytest.mark.slow
def test_search_text(server: StandaloneProcess, tmp_path: Path) -> None:
    schema = tmp_path / "bm25.json"
    schema.write_text(json.dumps(BM25_SCHEMA))
    cli(server, "collection", "create", "notes", "--schema", str(schema))
    assert "text_bm25" in cli(server, "collection", "describe", "notes")  # the functions table
    rows = tmp_path / "notes.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "text": t, "tag": g}) + "\n" for i, t, g in DOCS))
    assert cli_json(server, "insert", "notes", str(rows))["insert_count"] == len(DOCS)
    cli(server, "load", "notes")

    search = ("search", "notes", "--anns-field", "sparse", "--consistency", "Strong")
    results = cli_json(
        server, *search, "--text", "sleeping foxes", "--text", "hovering kite",
        "--output-fields", "text",
    )  # fmt: skip
    assert [[h["id"] for h in hits] for hits in results] == [[1], [2, 0]]
    kites = results[1]
    assert kites[0]["distance"] > kites[1]["distance"] > 0  # BM25 scores: larger is better
    assert kites[0]["entity"]["text"] == DOCS[2][1]
    forest = cli_json(server, *search, "--text", "forest", "--filter", 'tag == "sky"')
    assert [h["id"] for h in forest[0]] == [2]
    tuned = cli_json(server, *search, "--text", "hovering kite", "--params", '{"bm25_k1": 2.0}')
    assert [h["id"] for h in tuned[0]] == [2, 0]
    assert tuned[0][0]["distance"] != pytest.approx(kites[0]["distance"])  # k1 reached BM25
    shown = cli(server, *search, "--text", "hovering kite", "--limit", "1")
    assert "query 0, 1 hit(s)" in shown and "distance" in shown

    wrong_metric = run_elanus(*search, "--text", "fox", "--metric", "L2", "--uri", server.uri)
    assert "BM25" in one_line_error(wrong_metric, "INVALID_ARGUMENT")
    cli(server, "collection", "drop", "notes", "--yes")


# -- usage errors (checked before any server is reached) ---------------------------------------
@pytest.mark.slow
def test_vector_file_usage_errors(tmp_path: Path) -> None:
    uri = f"grpc://127.0.0.1:{free_port()}"
    missing = run_elanus(
        "search", "books", "--vector-file", str(tmp_path / "nope.npy"), "--uri", uri
    )
    assert missing.returncode == 2, missing.stderr
    assert "nope.npy" in missing.stderr and "Traceback" not in missing.stderr

    garbage = tmp_path / "bad.npy"
    garbage.write_bytes(b"not numpy")
    bad = run_elanus("search", "books", "--vector-file", str(garbage), "--uri", uri)
    assert bad.returncode == 2 and "bad.npy" in bad.stderr

    odd = tmp_path / "q.txt"
    odd.write_text("1 2 3")
    assert run_elanus("search", "books", "--vector-file", str(odd), "--uri", uri).returncode == 2
    metric = run_elanus(
        "search", "books", "--vector-file", str(tmp_path / "nope.npy"), "--metric", "XX"
    )
    assert metric.returncode == 2 and "--metric" in metric.stderr


@pytest.mark.slow
def test_text_or_vector_file_usage_errors(tmp_path: Path) -> None:
    uri = f"grpc://127.0.0.1:{free_port()}"
    q = tmp_path / "q.json"
    q.write_text("[1, 2, 3, 4]")
    for args in (("--text", "fox", "--vector-file", str(q)), ()):
        result = run_elanus("search", "books", *args, "--uri", uri)
        assert result.returncode == 2, result.stderr
        assert "exactly one of --vector-file" in result.stderr and "Traceback" not in result.stderr


def test_read_vectors(tmp_path: Path) -> None:
    one = tmp_path / "one.npy"
    np.save(one, np.arange(4, dtype=np.float64))
    got = read_vectors(one)
    assert got.shape == (1, 4) and got.dtype == np.float32
    js = tmp_path / "two.json"
    js.write_text("[[1, 2], [3, 4]]")
    assert read_vectors(js).tolist() == [[1, 2], [3, 4]]
    assert read_vectors(js, binary=True).dtype == np.uint8
    ragged = tmp_path / "ragged.json"
    ragged.write_text("[[1, 2], [3]]")
    with pytest.raises(Exception, match="ragged.json"):
        read_vectors(ragged)
