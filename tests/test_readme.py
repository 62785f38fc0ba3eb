"""The README's examples, run as written against one ``elanus standalone``: the quick
start's shell block (every ``elanus`` command, in a fresh directory, as a user pastes it)
and the two Python blocks, whose reads must see the writes just before them (the SDK
reads its own writes: no ``consistency_level`` in them, no sleep, no flush first)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import StandaloneProcess, cli_env

pytestmark = pytest.mark.slow  # some forty elanus commands

README = Path(__file__).resolve().parent.parent / "README.md"


def block(lang: str, holding: str) -> str:
    """The README's ``lang`` code block that holds ``holding``."""
    found = [
        b for b in re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S) if holding in b
    ]
    assert len(found) == 1, f"one {lang} block holds {holding!r}"
    return found[0]


def as_written(code: str, uri: str) -> str:
    """The block with the server's uri for the default one (nothing else changes)."""
    return code.replace("grpc://127.0.0.1:8815", uri)


def test_the_quick_start_runs_as_written(server: StandaloneProcess, tmp_path: Path) -> None:
    script = block("bash", "elanus collection create books")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)  # `source .venv/...`
    (tmp_path / "elanus-data").symlink_to(server.data_dir)  # where `make run` keeps its data
    env = cli_env(ELANUS_URI=server.uri)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert done.stderr == "", done.stderr  # no warning, no progress bar without a terminal
    out = done.stdout
    assert "books: query 0, 3 hit(s)" in out  # the filtered search, -k 3
    assert "notes: query 0, 1 hit(s)" in out  # BM25 sees the notes inserted just before
    assert (tmp_path / "backups").is_dir()  # `backup create ./backups`: the relative path


def run_python(code: str) -> list[tuple[str, Any]]:
    """Run ``code`` as one script; returns each top-level statement's source with what it
    gave: an expression's value (a ``print``'s argument) or the value assigned."""
    tree = ast.parse(code)
    body: list[ast.stmt] = []
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign) else None
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "print":
            value = value.args[0]
        if value is None:
            body.append(stmt)
            continue
        source = ast.get_source_segment(code, stmt) or ""
        kept = ast.parse(f"_gave = ({ast.unparse(value)})").body[0]
        record = ast.parse(f"_seen.append(({source!r}, _gave))").body[0]
        body += [kept, record]
        if isinstance(stmt, ast.Assign):
            body.append(ast.parse(f"{ast.unparse(stmt.targets[0])} = _gave").body[0])
        elif value is not stmt.value:
            body.append(ast.parse("print(_gave)").body[0])
    seen: list[tuple[str, Any]] = []
    namespace: dict[str, Any] = {"_seen": seen, "__name__": "readme"}
    exec(compile(ast.Module(body, []), "README.md", "exec"), namespace)  # noqa: S102
    return seen


def gave(seen: list[tuple[str, Any]], statement: str) -> Any:
    """What the one statement whose source starts with ``statement`` gave (white space
    aside: the formatter may have wrapped it)."""
    compact = "".join(statement.split())
    (value,) = [v for source, v in seen if "".join(source.split()).startswith(compact)]
    return value


def test_the_python_examples_see_their_own_writes(server: StandaloneProcess) -> None:
    first = block("python", 'client.create_collection("novels"')
    second = block("python", "AnnSearchRequest")
    seen = run_python(as_written(first, server.uri) + "\n" + second)

    hits = gave(seen, "hits = client.search(")  # the line after the insert and the delete
    assert len(hits) == 2 and all(len(h) == 5 for h in hits)
    assert all(h["entity"]["year"] > 2000 and h["id"] not in (1, 2, 3) for q in hits for h in q)
    rows = gave(seen, 'rows = client.query("novels"')
    assert sorted(r["id"] for r in rows) == [0, 4, 5, 6, 7, 8, 9]  # "7 rows: 1, 2 and 3 ..."
    assert gave(seen, "print(client.describe_index(")["index_type"] == "HNSW"
    assert gave(seen, "print(client.get_load_state(")["state"] == "Loaded"
    assert gave(seen, 'print(client.query("novels", "", ["count(*)"]') == [{"count(*)": 97}]

    bm25 = gave(seen, 'client.search("articles"')  # right after the insert: no flush, no wait
    assert [h["id"] for h in bm25[0]] == [1] and bm25[0][0]["distance"] > 0
    assert [r["id"] for r in gave(seen, 'client.query("articles"')] == [1]  # text_match
    assert [h["id"] for h in gave(seen, "client.hybrid_search(")[0]] == [1]
    assert [h["id"] for h in gave(seen, "print(pages.next())")] == [1]


def test_the_server_said_nothing_of_normal_operation(server: StandaloneProcess) -> None:
    """The examples above made segments, imports, indexes, a backup: normal operation,
    which the server's log (level WARNING, as shipped) does not mention."""
    said = server.log()
    assert "elanus standalone" in said  # its start panel: this is the log
    assert "WARN" not in said and "ERROR" not in said and "Traceback" not in said, said[-3000:]
