"""The DoAction registry (``flight/actions.py``): every action is declared once with what the
proxy needs, the docs cover each, ListActions is the registry, and an action declared
anywhere is served without the proxy knowing it by name."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.flight as flight
import pytest

from elanus.flight.actions import Call, action, catalogue, privilege_table
from elanus.privileges import OPEN, PRIVILEGES
from elanus.requests import Body

if TYPE_CHECKING:
    from conftest import Stack

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_action_is_declared_whole_and_documented() -> None:
    protocol = (DOCS / "protocol.md").read_text()
    headings = set(re.findall(r"^### `([a-z_]+)`$", protocol, re.M))
    security = (DOCS / "security.md").read_text()
    actions = catalogue()
    assert len(actions) >= 55
    for name, spec in actions.items():
        assert spec.name == name
        assert callable(spec.check) and callable(spec.run), name
        assert spec.description.strip(), name
        assert spec.privilege == OPEN or spec.privilege in PRIVILEGES, name
        assert name in headings, f"docs/protocol.md has no '### `{name}`'"
        assert f"`{name}`" in security, f"docs/security.md does not list {name!r}"
        assert not (spec.ddl and spec.loop), f"{name}: ddl already runs on the loop"
    assert privilege_table() == {n: a.privilege for n, a in actions.items()}


def test_a_declaration_is_refused_when_it_names_no_privilege_or_a_taken_name() -> None:
    with pytest.raises(ValueError, match="unknown privilege 'Teleport'"):
        action("x_teleport", "d", privilege="Teleport", run=lambda c: {})
    with pytest.raises(ValueError, match="'health' is declared twice"):
        action("health", "d", privilege=OPEN, run=lambda c: {})(lambda b: {})
    assert catalogue()["health"].privilege == OPEN  # the first declaration stands


def _list_actions(uri: str) -> list[tuple[str, str]]:
    client = flight.FlightClient(uri)
    try:
        return [(a.type, a.description) for a in client.list_actions()]
    finally:
        client.close()


def _do(uri: str, name: str, body: dict[str, Any]) -> Any:
    client = flight.FlightClient(uri)
    try:
        results = list(client.do_action(flight.Action(name, json.dumps(body).encode())))
        return json.loads(results[0].body.to_pybytes())
    finally:
        client.close()


def test_list_actions_returns_exactly_the_registry(stack: Stack) -> None:
    listed = _list_actions(stack.uri)
    assert listed == [(a.name, a.description) for a in catalogue().values()]


@pytest.fixture
def echo_actions() -> Iterator[None]:
    """Two actions declared here, as a concern module would: one on the Flight thread, one
    through the DdQueue. Taken out again afterwards."""

    def echo(b: Body) -> dict[str, Any]:
        return {"db": b.str("db", "default"), "word": b.str("word")}

    action(
        "test_echo",
        "Echo a word.",
        ("word",),
        privilege=OPEN,
        run=lambda c: {"word": c.request["word"], "caller": c.caller.user},
    )(echo)

    async def stamped(c: Call) -> dict[str, Any]:
        return {"word": c.request["word"], "ts": c.ts}

    action("test_stamp", "Echo a word at a DDL timestamp.", ("word",), privilege=OPEN,
           ddl=True, run=stamped)(echo)  # fmt: skip
    try:
        yield
    finally:
        del catalogue()["test_echo"], catalogue()["test_stamp"]


def test_a_declared_action_is_served_listed_and_checked(stack: Stack, echo_actions: None) -> None:
    assert ("test_echo", "Echo a word.") in _list_actions(stack.uri)
    assert _do(stack.uri, "test_echo", {"word": "kite"}) == {"word": "kite", "caller": "anonymous"}
    with pytest.raises(flight.FlightServerError, match=r"test_echo: unknown key\(s\) 'wrod'"):
        _do(stack.uri, "test_echo", {"wrod": "kite"})
    with pytest.raises(flight.FlightServerError, match="did you mean 'test_echo'"):
        _do(stack.uri, "test_ecko", {"word": "kite"})

    queue = stack.proxy.ddl.queue
    executed = queue.executed
    stamped = _do(stack.uri, "test_stamp", {"word": "kite"})
    assert stamped["word"] == "kite"
    assert stamped["ts"] == queue.last_ts > 0  # ran in the DdQueue, with its TSO timestamp
    assert queue.executed == executed + 1
