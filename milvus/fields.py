"""Nothing a Milvus request carries is silently ignored: every field of every served RPC's
request message is honoured, harmless (it has no effect Milvus would show either), or
refused with a coded error that names it. The rules are declared per message in
``honoured.py`` and ``honoured_reads.py``; ``check`` applies them before a handler runs.

A field counts as set when it differs from its default (proto3: a scalar other than its
zero, a non-empty list or map, a message with any content), so what pymilvus always sends
(``ignore_growing`` "False", an empty ``function_chains``) passes, and the same field set
to something Elanus does not do is refused at once, before anything changes. Fields of a
newer protocol than Elanus's pymilvus knows (protobuf's unknown fields) are refused too.

``tests/test_milvus_fields.py`` walks the request messages of every served RPC in
pymilvus's descriptors and fails on any field (and nested message read) these tables do
not classify, so a field a future pymilvus adds cannot slip through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from google.protobuf import unknown_fields

from elanus.errors import invalid


class Use(Enum):
    HONOURED = "honoured"
    HARMLESS = "harmless"
    REFUSED = "refused"


@dataclass(frozen=True)
class Rule:
    """What Elanus does with one field (or one key of a key-value list).

    ``why`` says it for the docs and, for a refusal, in the error. ``refuse_if`` narrows a
    refusal to the values it is true for (default: any value but the field's default).
    ``nested`` holds the rules of a message field's own fields (of each element of a list,
    of each value of a map); ``serialized``, of the message a bytes field carries (checked
    where it is parsed); ``keys``, of the keys of a ``KeyValuePair`` list or string map.
    ``walked`` False: a refusal the handler makes as it reads each row (an Array column's
    cells), which the frame does not repeat row by row.
    """

    use: Use
    why: str = ""
    refuse_if: Callable[[Any], bool] | None = None
    nested: Table | None = None
    serialized: Table | None = None
    keys: Keys | None = None
    walked: bool = True


@dataclass(frozen=True)
class Keys:
    """The rules of a key-value list's keys; a key not listed takes ``others``."""

    rules: Mapping[str, Rule]
    others: Rule


@dataclass(frozen=True)
class Table:
    """The rules of every field of one message type (``message``: its generated class)."""

    message: Any
    rules: Mapping[str, Rule]
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.message.DESCRIPTOR.name)


def use(why: str = "") -> Rule:
    return Rule(Use.HONOURED, why)


def harmless(why: str) -> Rule:
    return Rule(Use.HARMLESS, why)


def refused(why: str, refuse_if: Callable[[Any], bool] | None = None) -> Rule:
    return Rule(Use.REFUSED, why, refuse_if)


def refused_as_read(why: str) -> Rule:
    """Refused by the handler as it reads each row (see ``Rule.walked``)."""
    return Rule(Use.REFUSED, why, walked=False)


def nested(table: Table, why: str = "") -> Rule:
    return Rule(Use.HONOURED, why, nested=table)


def serialized(table: Table, why: str = "") -> Rule:
    return Rule(Use.HONOURED, why, serialized=table)


def keys(rules: Mapping[str, Rule], others: Rule | None = None, why: str = "") -> Rule:
    """A key-value list; keys not in ``rules`` are refused unless ``others`` says."""
    default = others or refused("")
    return Rule(Use.HONOURED, why, keys=Keys(rules, default))


def truthy(value: Any) -> bool:
    """A flag's text as Milvus parses it (``strconv.ParseBool``): true, True, 1, ..."""
    return str(value).strip().lower() in ("1", "t", "true")


def check(message: Any, table: Table, what: str) -> None:
    """Refuse ``message`` (``what``: the RPC, and the field that holds it) if it sets a
    field its table refuses, or one the protocol Elanus speaks does not know."""
    found = _refusal(message, table, "")
    if found is not None:
        raise invalid(f"{what}: {found}")


def _refusal(message: Any, table: Table, path: str) -> str | None:
    unknown = unknown_fields.UnknownFieldSet(message)
    if len(unknown):
        number = next(iter(unknown)).field_number
        return (
            f"{_at(path)}field number {number} of {table.name} is not in the Milvus protocol "
            "Elanus speaks (pymilvus 3.0.2's); Elanus does not ignore it"
        )
    for fd, value in message.ListFields():
        if _is_default(fd, value):
            continue
        rule = table.rules.get(fd.name)
        name = f"{path}.{fd.name}" if path else fd.name
        if rule is None:  # a table out of step with the descriptors: refuse, never ignore
            return f"field '{name}' is refused: Elanus does not know it"
        found = _rule_refusal(rule, fd, value, name)
        if found is not None:
            return found
    return None


def _rule_refusal(rule: Rule, fd: Any, value: Any, name: str) -> str | None:
    if rule.use is Use.REFUSED:
        if rule.refuse_if is None or rule.refuse_if(value):
            return f"field '{name}' is refused: {_lacks(rule)}"
        return None
    if rule.nested is not None and _checks(rule.nested):
        for label, item in _messages(fd, value, name):
            found = _refusal(item, rule.nested, label)
            if found is not None:
                return found
    if rule.keys is not None:
        return _key_refusal(rule.keys, _pairs(fd, value), name)
    return None


def _key_refusal(ks: Keys, pairs: Iterator[tuple[str, str]], name: str) -> str | None:
    for key, text in pairs:
        rule = ks.rules.get(key, ks.others)
        if rule.use is Use.REFUSED and (rule.refuse_if is None or rule.refuse_if(text)):
            return f"{name} key '{key}' is refused: {_lacks(rule)}"
    return None


def _lacks(rule: Rule) -> str:
    return f"Elanus does not support {rule.why}" if rule.why else "Elanus does not know it"


def _at(path: str) -> str:
    return f"{path}: " if path else ""


def _is_default(fd: Any, value: Any) -> bool:
    if fd.is_repeated:
        return len(value) == 0
    if fd.message_type is not None:
        return bool(value.ByteSize() == 0)
    return bool(value == fd.default_value)


def _is_map(fd: Any) -> bool:
    return bool(fd.message_type is not None and fd.message_type.GetOptions().map_entry)


def _messages(fd: Any, value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The messages a message field holds: itself, each element, each map value."""
    if _is_map(fd):
        for key in value:
            yield f"{name}[{key!r}]", value[key]
    elif fd.is_repeated:
        for i, item in enumerate(value):
            yield f"{name}[{i}]", item
    else:
        yield name, value


def _pairs(fd: Any, value: Any) -> Iterator[tuple[str, str]]:
    if _is_map(fd):
        yield from value.items()
    else:
        for pair in value:
            yield pair.key, pair.value


_CHECKS: dict[int, bool] = {}


def _checks(table: Table) -> bool:
    """Whether anything below ``table`` can be refused (else a handler's per-row
    messages, such as an array column's cells, are not walked)."""
    known = _CHECKS.get(id(table))
    if known is None:
        known = _CHECKS[id(table)] = _reaches_refusal(table, set())
    return known


def _reaches_refusal(table: Table, seen: set[int]) -> bool:
    if id(table) in seen:  # a message holding itself (a template's nested arrays)
        return False
    seen.add(id(table))
    for rule in table.rules.values():
        if rule.use is Use.REFUSED and rule.walked:
            return True
        if rule.nested is not None and _reaches_refusal(rule.nested, seen):
            return True
        if rule.keys is not None:
            every = [*rule.keys.rules.values(), rule.keys.others]
            if any(r.use is Use.REFUSED for r in every):
                return True
    return False


# -- what most requests carry ---------------------------------------------------------------
def _base() -> Table:
    from pymilvus.grpc_gen import common_pb2

    own = harmless("Milvus's proxy sets it itself")
    return Table(
        common_pb2.MsgBase,
        {
            "msg_type": own,
            "msgID": own,
            "timestamp": own,
            "sourceID": own,
            "targetID": own,
            "properties": refused("message properties, used by replication"),
            "replicateInfo": refused("replicated messages of Milvus CDC"),
        },
    )


BASE = nested(_base(), "the message header")
DB = use("the database (else the dbname header, else default)")
NAME = use()


def with_db(**rules: Rule) -> dict[str, Rule]:
    """The rules of a request with the header and a database, and ``rules``."""
    return {"base": BASE, "db_name": DB, **rules}
