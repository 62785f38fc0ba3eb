"""docs/filters.md is checked against a real server: every example expression selects exactly
the rows the page says, every error example fails as the page says, and 64-bit integers
travel exactly in JSON bodies. Requests go through a bare pyarrow Flight client, as a Java
or Go client would send them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.flight as flight
import pytest
from conftest import StandaloneProcess

from elanus.client.client import Client
from elanus.expr import FUNCTIONS

DOC = Path(__file__).resolve().parent.parent / "docs" / "filters.md"
COLLECTION = "filters_doc"
BIG = 2**53 + 1
_BLOCK = re.compile(r"^```([\w-]+)(?: (\w+))?\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Example:
    text: str
    params: dict[str, Any]
    matches: list[int]
    error: str | None


def _ids(value: str) -> list[int]:
    value = value.strip()
    return [] if value == "none" else [int(x) for x in value.split(",")]


def _example(body: str) -> Example:
    lines, notes = [], {}
    for line in body.splitlines():
        if line.startswith("# "):
            key, _, value = line[2:].partition(":")
            notes[key.strip()] = value.strip()
        else:
            lines.append(line)
    assert set(notes) <= {"params", "matches", "error"}, f"unknown note in {body!r}"
    return Example(
        text="\n".join(lines).strip(),
        params=json.loads(notes.get("params", "{}")),
        matches=_ids(notes.get("matches", "none")),
        error=notes.get("error"),
    )


def _blocks() -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2) or "", m.group(3)) for m in _BLOCK.finditer(DOC.read_text())]


def _named(lang: str, name: str) -> str:
    [body] = [b for lg, nm, b in _blocks() if lg == lang and nm == name]
    return body


EXAMPLES = [_example(b) for lang, _, b in _blocks() if lang == "filter"]
ERRORS = [_example(b) for lang, _, b in _blocks() if lang == "filter-error"]


def _action(conn: flight.FlightClient, name: str, body: dict[str, Any] | bytes) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    [result] = conn.do_action(flight.Action(name, raw))
    return bytes(result.body.to_pybytes())


def _refusal(conn: flight.FlightClient, name: str, body: dict[str, Any] | bytes) -> str:
    """The Flight error message of a call that must fail."""
    with pytest.raises(flight.FlightServerError) as info:
        _action(conn, name, body)
    return str(info.value).split(". Detail:")[0]


@pytest.fixture(scope="module")
def conn(server: StandaloneProcess) -> Iterator[flight.FlightClient]:
    """A bare Flight client on a server holding the page's example collection, loaded."""
    schema = json.loads(_named("json", "schema"))
    rows = [json.loads(line) for line in _named("jsonl", "rows").splitlines() if line.strip()]
    for row in rows:
        row["vector"] = [0.5, 0.5]
    c = flight.FlightClient(server.uri)
    _action(c, "create_collection", {"name": COLLECTION, "schema": schema})
    with Client(server.uri, timeout=30) as sdk:
        sdk.insert(COLLECTION, rows)
    _action(c, "load_collection", {"collection": COLLECTION})
    try:
        yield c
    finally:
        c.close()


def _query_ids(conn: flight.FlightClient, text: str, params: dict[str, Any]) -> list[int]:
    body = {
        "collection": COLLECTION,
        "filter": text,
        "filter_params": params,
        "output_fields": ["id"],
        "consistency_level": "Strong",
    }
    return [r["id"] for r in json.loads(_action(conn, "query", body))["rows"]]


def _search_ids(conn: flight.FlightClient, text: str, params: dict[str, Any]) -> list[int]:
    body = {
        "collection": COLLECTION,
        "data": [[0.5, 0.5]],
        "limit": 100,
        "filter": text,
        "filter_params": params,
        "consistency_level": "Strong",
    }
    [hits] = json.loads(_action(conn, "search", body))["results"]
    return sorted(h["id"] for h in hits)


def test_the_page_has_examples_of_everything() -> None:
    """Every function and operator of the language has at least one checked example."""
    assert len(EXAMPLES) >= 50 and len(ERRORS) >= 8
    texts = "\n".join(e.text.lower() for e in EXAMPLES)
    for fn in FUNCTIONS:
        assert f"{fn}(" in texts, f"no example uses {fn}"
    for token in (
        " or ", "||", " and ", "&&", "not ", "!in", "==", "!=", "<=", ">=", " < ", " > ",
        " + ", " - ", " * ", " / ", " % ", "**", " in ", " not in ", " like ", " is null",
        " is not null", "exists ", "[0]", '["', "{", "$meta", "0x", "true",
    ):  # fmt: skip
        assert token in texts, f"no example uses {token!r}"


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.text for e in EXAMPLES])
def test_example_selects_the_documented_rows(conn: flight.FlightClient, ex: Example) -> None:
    got = _query_ids(conn, ex.text, ex.params)
    assert got == ex.matches, f"{ex.text!r} matched {got}, the page says {ex.matches}"
    assert _search_ids(conn, ex.text, ex.params) == got


@pytest.mark.parametrize("ex", ERRORS, ids=[e.text for e in ERRORS])
def test_error_example_fails_as_documented(conn: flight.FlightClient, ex: Example) -> None:
    assert ex.error is not None
    code, _, message = ex.error.partition(": ")
    body = {"collection": COLLECTION, "filter": ex.text, "consistency_level": "Strong"}
    assert _refusal(conn, "query", body).startswith(f"[{code}] {message}")
    # a refused delete deletes nothing
    assert _refusal(conn, "delete", {"collection": COLLECTION, "filter": ex.text}).startswith(
        f"[{code}]"
    )
    assert len(_query_ids(conn, "id > 0", {})) == 8


def test_big_integers_travel_exactly(conn: flight.FlightClient) -> None:
    """Integers above 2**53 are exact JSON integers both ways; strings are refused."""
    query = {"collection": COLLECTION, "consistency_level": "Strong"}
    raw = _action(conn, "query", {**query, "ids": [BIG], "output_fields": ["id", "info"]})
    assert b'"rows":[{"id":9007199254740993,' in raw
    [row] = json.loads(raw)["rows"]  # Python's json keeps every integer exact
    info = row["info"]
    assert (json.loads(info) if isinstance(info, str) else info) == {"serial": BIG}
    raw = _action(conn, "query", {**query, "filter": "id > {k}", "filter_params": {"k": BIG - 2}})
    assert b'"rows":[{"id":9007199254740993}]' in raw
    assert re.search(rb'"ts":\d{18}\b', raw)  # hybrid timestamps are above 2**53 too
    for bad in (str(BIG), float(BIG), 2**63, True):
        message = _refusal(conn, "query", {**query, "ids": [bad]})
        assert message.startswith("[BAD_EXPRESSION] query: 'ids'"), message
        assert "INTERNAL" not in message
    message = _refusal(
        conn, "query", {**query, "filter": "id == {k}", "filter_params": {"k": str(BIG)}}
    )
    assert message.startswith("[BAD_EXPRESSION] cannot compare Int64 field 'id' with parameter")
