"""The DoAction registry: each action declared once, with everything the proxy needs to run it.

A concern's module (``ddl_actions``, ``database_actions``, ``schema_actions``,
``dml_actions``, ``query_actions``, ``index_actions``, ``import_actions``, ``auth_actions``,
``backup_actions``, ``snapshot_actions``, ``ops_actions``, ``watch_actions``) declares each
of its actions with ``action(...)`` on the action's request checker: the public name and
ListActions text, the body keys, the privilege (``elanus.privileges``; ``OPEN``: any
authenticated caller), the rate bucket, and the executor. ``check_request`` checks a body
(INVALID_ARGUMENT naming the problem, before anything is sent anywhere). Declaring is pure.

This module sits below the services: the search and read services check requests through
it. What runs an action on the proxy (``Call``, ``perform``) is ``flight/actions.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elanus.api.base import as_body
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.limits import Kind
from elanus.ops import decode_op, keys_of, name_of
from elanus.privileges import OPEN, PRIVILEGES
from elanus.requests import Body
from elanus.schema import check_name
from elanus.wire.codec import DEFAULT_DB, decode_request

Checker = Callable[[Body], Any]
"""A body's check: the request the executor gets (a dict, or an operation record)."""
Executor = Callable[[Any], Any]
"""An action's executor: takes ``flight/actions.py``'s ``Call`` (typed there, above the
proxy; the registry stays below every service that checks a request through it), and
returns its typed reply (``reply_body`` writes it as the action's JSON body)."""


@dataclass(frozen=True)
class Action:
    """One DoAction, as the proxy runs it and ListActions describes it."""

    name: str
    description: str
    keys: tuple[str, ...]
    check: Checker
    run: Executor
    """Runs on the Flight thread, unless ``loop`` or ``ddl`` (a coroutine on the loop)."""
    privilege: str
    """What the caller needs (``elanus.privileges.PRIVILEGES``), or ``OPEN``."""
    rate: Kind | None = None
    """The per-user rate bucket the call counts against (``flight/limits.py``)."""
    loop: bool = False
    """The executor is a coroutine function, run on the proxy's asyncio loop."""
    ddl: bool = False
    """Runs one at a time through the DdQueue, on the loop, with ``Call.ts`` from the TSO."""
    self_checked: bool = False
    """The executor checks and authorises ``Call.raw`` itself (search reuses checked
    plans by request shape); ``check`` is what it calls for a body it has not seen."""
    self_service: bool = False
    """A user may call it on themselves without the privilege (describe, re-password)."""
    op: type[Any] | None = None
    """The operation record (``elanus/ops``) the body decodes into, if declared by one."""


_DECLARED: dict[str, Action] = {}
"""Filled as the concern modules are imported; read it through ``catalogue``."""
CONCERNS = (
    "ddl_actions",
    "database_actions",
    "schema_actions",
    "dml_actions",
    "query_actions",
    "index_actions",
    "import_actions",
    "auth_actions",
    "backup_actions",
    "snapshot_actions",
    "ops_actions",
    "watch_actions",
)
"""The modules that declare actions (under ``elanus.flight``): ``catalogue`` imports them."""


def action(
    name: str,
    description: str,
    keys: tuple[str, ...] = (),
    *,
    privilege: str,
    run: Executor,
    rate: Kind | None = None,
    loop: bool = False,
    ddl: bool = False,
    self_checked: bool = False,
    self_service: bool = False,
) -> Callable[[Checker], Checker]:
    """Declare an action on its request checker (returned unchanged, for reuse)."""
    if privilege != OPEN and privilege not in PRIVILEGES:
        raise ValueError(f"action {name!r}: unknown privilege {privilege!r}")

    def register(check: Checker) -> Checker:
        if name in _DECLARED:
            raise ValueError(f"action {name!r} is declared twice")
        _DECLARED[name] = Action(
            name, description, keys, check, run, privilege, rate, loop, ddl, self_checked,
            self_service,
        )  # fmt: skip
        return check

    return register


def operation(
    op: type[Any],
    description: str,
    *,
    privilege: str,
    run: Executor,
    rate: Kind | None = None,
    loop: bool = False,
    ddl: bool = False,
    self_service: bool = False,
    self_checked: bool = False,
) -> None:
    """Declare the action of an operation record (``elanus/ops``): its name and keys are
    the record's, its check decodes the body into the record (``self_checked``: the
    executor decodes it, as ``search`` does to reuse the plan of a body of the same
    shape)."""
    name = name_of(op)

    def check(body: Body) -> Any:
        return decode_op(op, body.raw)

    action(
        name, description, keys_of(op), privilege=privilege, run=run, rate=rate, loop=loop,
        ddl=ddl, self_service=self_service, self_checked=self_checked,
    )(check)  # fmt: skip
    _DECLARED[name] = dataclasses.replace(_DECLARED[name], op=op)


_loaded: list[bool] = []


def catalogue() -> dict[str, Action]:
    """Every declared action, by name (its modules imported the first time)."""
    if not _loaded:
        for module in CONCERNS:
            importlib.import_module(f"elanus.flight.{module}")
        _loaded.append(True)
    return _DECLARED


def lookup(name: str) -> Action:
    """The action called ``name``; UNKNOWN_ACTION, with a guess, for any other name."""
    spec = catalogue().get(name)
    if spec is None:
        close = difflib.get_close_matches(name, _DECLARED, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "ListActions lists the known ones"
        raise ElanusError(ErrorCode.UNKNOWN_ACTION, f"unknown action {name!r}; {hint}")
    return spec


def reply_body(reply: object) -> object:
    """An executor's reply as the action's JSON body, the one place a reply becomes one: a
    record (an ``elanus/api`` reply, an ``elanus/ops`` reply) as its fields, nested records
    too; a dict (a TypedDict, or a result built as JSON already, such as search hits) as
    it is, so a large result is not copied."""
    if isinstance(reply, dict):
        return reply
    return as_body(reply)


def rate_of(name: str) -> Kind | None:
    """The rate bucket of a DoAction, from its name alone (nothing of the body is read)."""
    spec = catalogue().get(name)
    return spec.rate if spec is not None else None


def privilege_table() -> dict[str, str]:
    """Action -> privilege (``OPEN``: any authenticated caller), as docs/security.md lists."""
    return {name: spec.privilege for name, spec in catalogue().items()}


def check_request(name: str, raw: bytes) -> tuple[Action, Any]:
    """Look the action up and statically check its body; the result is safe to execute."""
    return check_body(name, decode_request(raw, f"{name} body"))


def check_body(name: str, raw_body: dict[str, Any]) -> tuple[Action, Any]:
    """``check_request`` of a body already parsed, or built by another face (the Milvus
    port's hybrid search): no JSON between."""
    spec = lookup(name)
    allowed = {"db", *spec.keys}
    unknown = sorted(set(raw_body) - allowed)
    if unknown:  # before anything else, so a misspelt key is named as such
        raise invalid(
            f"{name}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys are {', '.join(sorted(allowed))}"
        )
    body = Body(raw_body, name)
    check_db(body)  # every action takes "db", even those that do not use it: it must be a name
    request = spec.check(body)
    body.allow(allowed).done()
    return spec, request


# -- checks every concern shares -----------------------------------------------------------
def check_db(b: Body) -> str:
    return check_name(b.str("db", DEFAULT_DB), "database")


def check_named(b: Body, key: str, what: str) -> str:
    return check_name(b.str(key), what)
