"""``elanus index create | describe | list | drop`` against a real standalone server (which
hosts an index node, so builds finish on their own)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import StandaloneProcess, run_elanus
from test_cli_read import cli, cli_json, one_line_error, write_jsonl

# Every test runs the elanus command as its own process.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def wait_finished(server: StandaloneProcess, collection: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        (info,) = cli_json(server, "index", "describe", collection)
        if info["state"] == "Finished":
            return dict(info)
        assert time.monotonic() < deadline, info
        time.sleep(0.2)


def test_index_commands(server: StandaloneProcess, tmp_path: Path) -> None:
    cli(server, "collection", "create", "shelf", "--dim", "4")
    # Quick setup indexes (AUTOINDEX) and loads, as pymilvus's: start from no index.
    cli(server, "release", "shelf")
    cli(server, "index", "drop", "shelf", "--index-name", "vector")
    cli(server, "insert", "shelf", str(write_jsonl(tmp_path / "s.jsonl")))
    cli(server, "flush", "shelf")
    shown = cli(
        server, "index", "create", "shelf", "vector", "--type", "HNSW", "--metric", "L2",
        "--params", json.dumps({"M": 8, "efConstruction": 32}),
    )  # fmt: skip
    assert "HNSW" in shown and "vector" in shown
    info = wait_finished(server, "shelf")
    assert (info["indexed_rows"], info["total_rows"]) == (20, 20)
    assert info["params"] == {"M": 8, "efConstruction": 32}
    assert cli_json(server, "index", "list", "shelf") == ["vector"]
    table = cli(server, "index", "describe", "shelf")
    assert "Finished" in table and "20/20" in table

    bad = run_elanus(
        "index", "create", "shelf", "vector", "--type", "IVF_FLAT", "--params", '{"nlist": 0}',
        "--uri", server.uri,
    )  # fmt: skip
    assert "nlist" in one_line_error(bad, "INVALID_ARGUMENT")
    not_json = run_elanus(
        "index", "create", "shelf", "vector", "--params", "{", "--uri", server.uri
    )
    assert not_json.returncode == 2 and "--params" in not_json.stderr

    dropped = cli_json(server, "index", "drop", "shelf", "--index-name", "vector")
    assert dropped["remaining"] == []
    assert cli_json(server, "index", "list", "shelf") == []
    gone = run_elanus("index", "drop", "shelf", "--index-name", "vector", "--uri", server.uri)
    one_line_error(gone, "INDEX_NOT_FOUND")
