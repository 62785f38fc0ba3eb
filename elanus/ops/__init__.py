"""The client-facing operations, each declared once as a typed request record.

An operation is a frozen, keyword-only dataclass declared with ``@operation(name)``: its
fields are the body of the Flight action ``name``, ``db`` first, each with its check
(``Annotated[str, Named(...)]``, ``Range``; ``elanus/requests.py``), and an optional
``check(self)`` for what spans fields. Every face builds the same record:

- the SDK sends it as the action's JSON body (``body_of``);
- the Milvus face hands it to the proxy as it is (``flight/actions.py`` ``perform_op``),
  which checks its values again (``checked``): no JSON between;
- the proxy's registry decodes a DoAction body into it once (``decode``), and the executor
  reads its attributes.

So the keys, their checks and the ListActions text of an operation live in one place, and
the wire body is what it always was: the fields by name, ``None`` left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, TypedDict, TypeVar, cast, dataclass_transform

from elanus.frozenrecord import frozen_dataclass
from elanus.requests import Named, decode
from elanus.wire.codec import DEFAULT_DB

T = TypeVar("T")
_NAMES: dict[type, str] = {}
"""Operation record class -> the action it is the request of."""

DbName = Annotated[str, Named("database")]
CollectionName = Annotated[str, Named("collection")]
PartitionName = Annotated[str, Named("partition")]
AliasName = Annotated[str, Named("alias")]

__all__ = [
    "DEFAULT_DB", "AliasName", "CollectionName", "DbName", "InCollection", "PartitionName",
    "PrivilegeScope", "body_of",
    "checked", "decode_op", "keys_of", "name_of", "operation", "reply", "scope_of", "shape",
    "values_of",
]  # fmt: skip


@dataclass_transform(kw_only_default=True, frozen_default=True)
def operation(name: str) -> Callable[[type[T]], type[T]]:
    """Declare the request record of the Flight action ``name``."""

    def declare(cls: type[T]) -> type[T]:
        made = frozen_dataclass(cls)
        made.__request_what__ = name  # type: ignore[attr-defined]
        _NAMES[made] = name
        return made

    return declare


@dataclass_transform(kw_only_default=True, frozen_default=True)
def shape(cls: type[T]) -> type[T]:
    """The body several operations share, as a base of their records (``class
    RevokeRole(RoleGrant)``): declared once, and no operation itself."""
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls)


@dataclass_transform(kw_only_default=True, frozen_default=True)
def reply(cls: type[T]) -> type[T]:
    """Declare the reply record of an operation whose reply the proxy composes (not one it
    passes on from a coord, an ``elanus/api`` reply): its fields are the reply's keys, and
    the registry writes it as the JSON body (``flight/registry.py`` ``reply_body``)."""
    return frozen_dataclass(cls)


@shape
class InCollection:
    """The body of an operation on one collection: ``db`` and ``collection``, as its first
    keys (a record that takes more adds its own after them)."""

    db: DbName = DEFAULT_DB
    collection: CollectionName


def is_operation(cls: Any) -> bool:
    return cls in _NAMES


def name_of(op: Any) -> str:
    """The action an operation record (or its class) is the request of."""
    return _NAMES[op if isinstance(op, type) else type(op)]


def keys_of(cls: type[Any]) -> tuple[str, ...]:
    """The body keys of an operation besides ``db`` (which every action takes)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "db")


def body_of(op: Any) -> dict[str, Any]:
    """The JSON body of an operation: its fields by name, ``None`` left out."""
    return {
        f.name: value for f in dataclasses.fields(op) if (value := getattr(op, f.name)) is not None
    }


def values_of(op: Any, base: type[Any]) -> dict[str, Any]:
    """The values ``op`` holds for the fields of ``base`` (a ``@shape`` it is built on), by
    name, ``None`` kept: what a face passes on to build another record from the same keys."""
    return {f.name: getattr(op, f.name) for f in dataclasses.fields(base)}


class PrivilegeScope(TypedDict, total=False):
    """What the privilege check reads of a request (``flight/auth.py`` ``need_for``): the
    database, the object the privilege is about (a collection by ``collection`` or
    ``name``, a user by ``user_name``), and whether a write is an upsert."""

    db: str
    collection: str
    name: str
    user_name: str
    upsert: bool


def scope_of(op: Any) -> PrivilegeScope:
    """What the privilege check reads of an operation: its body, or what its
    ``privilege_scope()`` says where the check must not follow ``db`` (a database action
    is about the database it names, and its privilege is checked in the default one)."""
    scope = getattr(op, "privilege_scope", None)
    if callable(scope):
        made: PrivilegeScope = scope()
        return made
    # the body holds the scope's keys, by these names and types, among its other keys
    return cast(PrivilegeScope, body_of(op))


def decode_op(cls: type[T], raw: dict[str, Any]) -> T:
    """A body checked against operation ``cls``, field by field, then as a whole."""
    op = decode(cls, raw)
    check = getattr(op, "check", None)
    if check is not None:
        check()
    return op


def checked(op: T) -> T:
    """``op`` as built by a face from its own values, checked as a body would be."""
    record: Any = op
    return decode_op(type(op), {f.name: getattr(op, f.name) for f in dataclasses.fields(record)})
