"""What every operation record's tests check (tests/test_operations*.py): its action is
declared by it, a bad body is refused with the old checker's words, and the SDK's bodies
are recorded without a server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from elanus.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.registry import Action, catalogue, check_request
from elanus.ops import is_operation, keys_of, name_of
from elanus.wire.codec import encode_json


def declared_by(record: type) -> Action:
    """The action of ``record``, checked to be declared by it, keys and all."""
    spec = catalogue()[name_of(record)]
    assert spec.op is record and is_operation(record)
    assert spec.keys == keys_of(record)
    return spec


def decoded(name: str, body: dict[str, Any]) -> Any:
    """A DoAction body as the proxy checks it: the request its executor gets."""
    return check_request(name, orjson.dumps(body))[1]


def refused(name: str, body: dict[str, Any], words: str) -> None:
    """``body`` is refused INVALID_ARGUMENT, the message holding ``words``."""
    with pytest.raises(ElanusError) as err:
        decoded(name, body)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert words in err.value.message


class RecordingClient(Client):
    """An SDK client whose DoActions are recorded (name, JSON body) and answered with
    ``replies`` (by action name), with no server."""

    def __init__(self, replies: dict[str, dict[str, Any]] | None = None) -> None:
        self._db = "own"  # no connection: the SDK's own database is "own"
        self.replies = replies or {}
        self.sent: list[tuple[str, bytes]] = []

    def _action(
        self, name: str, body: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        self.sent.append((name, encode_json(body or {})))
        return dict(self.replies.get(name, {}))

    def bodies(self) -> list[tuple[str, dict[str, Any]]]:
        """What was sent, each body decoded."""
        return [(name, orjson.loads(raw)) for name, raw in self.sent]


def sent_bodies(
    client: RecordingClient, call: Callable[[RecordingClient], object]
) -> list[tuple[str, dict[str, Any]]]:
    """The DoActions ``call`` makes through ``client``, each body decoded."""
    call(client)
    return client.bodies()


def declaration_test(records: list[type]) -> Callable[[type], None]:
    """A test module's check that each of ``records`` declares its action."""

    @pytest.mark.parametrize("record", records, ids=lambda r: r.__name__)
    def test(record: type) -> None:
        declared_by(record)

    return test


def refusal_test(cases: list[tuple[str, dict[str, Any], str]]) -> Callable[..., None]:
    """A test module's check of its bad bodies: (action, body, the refusal's words)."""

    @pytest.mark.parametrize(("name", "body", "words"), cases)
    def test(name: str, body: dict[str, Any], words: str) -> None:
        refused(name, body, words)

    return test
