"""The messages of Arrow Flight SQL (Arrow's ``format/FlightSql.proto``) that Elanus speaks.

Flight SQL is plain Flight whose commands, tickets and action bodies are protobuf messages
wrapped in ``google.protobuf.Any``. pyarrow ships no Flight SQL classes, so the few
messages needed here are declared from a table at import (field names and numbers as in
the .proto) in a pool of their own; the wire format is the .proto's. Shared by the proxy
(``flight/sql/``) and the SDK (``client.sql``); pure: encoding only.

Every field is declared ``optional`` (proto2): proto3's implicit fields and its
``optional`` ones read and write the same bytes, and presence is then known for all.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

from elanus.errors import invalid

PACKAGE = "arrow.flight.protocol.sql"
TYPE_URL_PREFIX = f"type.googleapis.com/{PACKAGE}."

_S, _B, _BOOL, _U32, _I64 = "string", "bytes", "bool", "uint32", "int64"
_FIELDS: dict[str, list[tuple[str, int, str, bool]]] = {
    # name: [(field, number, type, repeated)]
    "CommandGetSqlInfo": [("info", 1, _U32, True)],
    "CommandGetCatalogs": [],
    "CommandGetDbSchemas": [("catalog", 1, _S, False), ("db_schema_filter_pattern", 2, _S, False)],
    "CommandGetTables": [
        ("catalog", 1, _S, False),
        ("db_schema_filter_pattern", 2, _S, False),
        ("table_name_filter_pattern", 3, _S, False),
        ("table_types", 4, _S, True),
        ("include_schema", 5, _BOOL, False),
    ],
    "CommandGetTableTypes": [],
    "CommandGetPrimaryKeys": [
        ("catalog", 1, _S, False),
        ("db_schema", 2, _S, False),
        ("table", 3, _S, False),
    ],
    "CommandStatementQuery": [("query", 1, _S, False), ("transaction_id", 2, _B, False)],
    "TicketStatementQuery": [("statement_handle", 1, _B, False)],
    "CommandPreparedStatementQuery": [("prepared_statement_handle", 1, _B, False)],
    "CommandStatementUpdate": [("query", 1, _S, False), ("transaction_id", 2, _B, False)],
    "CommandPreparedStatementUpdate": [("prepared_statement_handle", 1, _B, False)],
    "DoPutPreparedStatementResult": [("prepared_statement_handle", 1, _B, False)],
    "ActionCreatePreparedStatementRequest": [
        ("query", 1, _S, False),
        ("transaction_id", 2, _B, False),
    ],
    "ActionCreatePreparedStatementResult": [
        ("prepared_statement_handle", 1, _B, False),
        ("dataset_schema", 2, _B, False),
        ("parameter_schema", 3, _B, False),
    ],
    "ActionClosePreparedStatementRequest": [("prepared_statement_handle", 1, _B, False)],
}

REFUSED_COMMANDS = {
    "CommandStatementUpdate": "an update statement (INSERT, UPDATE, DELETE, DDL)",
    "CommandPreparedStatementUpdate": "a prepared update statement",
    "CommandStatementIngest": "bulk ingest",
    "CommandStatementSubstraitPlan": "a Substrait plan",
    "CommandGetXdbcTypeInfo": "XDBC type info",
    "CommandGetExportedKeys": "foreign keys (collections have none)",
    "CommandGetImportedKeys": "foreign keys (collections have none)",
    "CommandGetCrossReference": "foreign keys (collections have none)",
}
"""Flight SQL commands Elanus knows and refuses, with what each would have asked for."""

CREATE_PREPARED = "CreatePreparedStatement"
CLOSE_PREPARED = "ClosePreparedStatement"
REFUSED_ACTIONS = {
    "CreatePreparedSubstraitPlan": "Substrait plans are not supported",
    "BeginTransaction": "transactions are not supported: SQL through Elanus is read-only",
    "EndTransaction": "transactions are not supported: SQL through Elanus is read-only",
    "BeginSavepoint": "savepoints are not supported: SQL through Elanus is read-only",
    "EndSavepoint": "savepoints are not supported: SQL through Elanus is read-only",
    "CancelQuery": "CancelQuery is not supported: cancel the DoGet call instead",
}
ACTIONS = frozenset({CREATE_PREPARED, CLOSE_PREPARED, *REFUSED_ACTIONS})
"""The DoAction types of Flight SQL: none is an Elanus action name."""


def _pool() -> tuple[descriptor_pool.DescriptorPool, dict[str, Any]]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="elanus_flightsql.proto", package=PACKAGE, syntax="proto2"
    )
    kinds = descriptor_pb2.FieldDescriptorProto
    for name, fields in _FIELDS.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            message.field.add(
                name=field_name,
                number=number,
                type=getattr(kinds, f"TYPE_{kind.upper()}"),
                label=kinds.LABEL_REPEATED if repeated else kinds.LABEL_OPTIONAL,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    classes = {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in _FIELDS
    }
    return pool, classes


_POOL, MESSAGES = _pool()


def new(name: str, **fields: Any) -> Any:
    """A message of type ``name`` (e.g. ``"CommandStatementQuery"``)."""
    return MESSAGES[name](**fields)


def pack(message: Any) -> bytes:
    """``message`` wrapped in ``Any``, serialized: a command, a ticket or an action result."""
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return bytes(wrapped.SerializeToString())


def looks_like_any(raw: bytes) -> bool:
    """Whether ``raw`` may be an ``Any`` of a Flight SQL message (a JSON command cannot be:
    it starts with ``{``); cheap, for the proxy's dispatch."""
    return raw[:1] == b"\x0a" and TYPE_URL_PREFIX.encode() in raw[:80]


def unpack(raw: bytes, what: str) -> tuple[str, Any]:
    """(message name, message) of an ``Any``-wrapped Flight SQL message; a message Elanus
    does not declare comes back as ``(name, None)``."""
    wrapped = any_pb2.Any()
    try:
        wrapped.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise invalid(f"{what} is not a protobuf Any message") from None
    url = str(wrapped.type_url)
    if not url.startswith(TYPE_URL_PREFIX):
        raise invalid(f"{what} is not a Flight SQL message (type {url[:120]!r})")
    name = url[len(TYPE_URL_PREFIX) :]
    cls = MESSAGES.get(name)
    if cls is None:
        return name, None
    message = cls()
    try:
        message.ParseFromString(wrapped.value)
    except Exception:  # noqa: BLE001
        raise invalid(f"{what}: unreadable {name} message") from None
    return name, message


def decode(name: str, raw: bytes, what: str) -> Any:
    """A bare (not ``Any``-wrapped) message of type ``name``: an action body."""
    message = MESSAGES[name]()
    try:
        message.ParseFromString(raw)
    except Exception:  # noqa: BLE001
        raise invalid(f"{what}: unreadable {name} message") from None
    return message


def encode(message: Any) -> bytes:
    """A bare message, serialized (``DoPutPreparedStatementResult`` travels so)."""
    return bytes(message.SerializeToString())


# -- GetSqlInfo ids (the .proto's SqlInfo enum) ----------------------------------------------
SERVER_NAME = 0
SERVER_VERSION = 1
SERVER_ARROW_VERSION = 2
SERVER_READ_ONLY = 3
SERVER_SQL = 4
SERVER_SUBSTRAIT = 5
SERVER_TRANSACTION = 8
SERVER_CANCEL = 9
SERVER_STATEMENT_TIMEOUT = 100
SQL_DDL_CATALOG = 500
SQL_DDL_SCHEMA = 501
SQL_DDL_TABLE = 502
SQL_IDENTIFIER_CASE = 503
SQL_IDENTIFIER_QUOTE_CHAR = 504
SQL_QUOTED_IDENTIFIER_CASE = 505
SQL_ALL_TABLES_ARE_SELECTABLE = 506
SQL_NULL_ORDERING = 507
SQL_KEYWORDS = 508
SQL_SCHEMA_TERM = 529
SQL_CATALOG_TERM = 531
SQL_TRANSACTIONS_SUPPORTED = 563
