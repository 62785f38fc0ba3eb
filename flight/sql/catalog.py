"""Flight SQL's catalog commands: one catalog (``elanus``), its schemas (the databases), its
tables (the collections, with their SQL schema), their primary keys, and ``GetSqlInfo``.

Each answers with the schema the .proto gives it, rows in the order it asks for. Listing
databases and collections takes the privileges their actions take (``ListDatabases``,
``ShowCollections``); a table's schema, or its key, ``DescribeCollection`` on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import pyarrow as pa

import elanus
from elanus import flightsql
from elanus.errors import invalid
from elanus.flight.auth import Caller
from elanus.flight.sql.statement import CATALOG
from elanus.flight.sql.tables import PARTITION, readable_fields, table_schema
from elanus.ops.collections import ListCollections
from elanus.ops.databases import ListDatabases
from elanus.privileges import Need

if TYPE_CHECKING:
    from elanus.flight.ports import ActionRunner, CollectionLookup
    from elanus.settings import Settings

TABLE_TYPE = "TABLE"
_TEXT = pa.string()
SCHEMAS: dict[str, pa.Schema] = {
    "CommandGetCatalogs": pa.schema([pa.field("catalog_name", _TEXT, nullable=False)]),
    "CommandGetDbSchemas": pa.schema(
        [pa.field("catalog_name", _TEXT), pa.field("db_schema_name", _TEXT, nullable=False)]
    ),
    "CommandGetTables": pa.schema(
        [
            pa.field("catalog_name", _TEXT),
            pa.field("db_schema_name", _TEXT),
            pa.field("table_name", _TEXT, nullable=False),
            pa.field("table_type", _TEXT, nullable=False),
        ]
    ),
    "CommandGetTableTypes": pa.schema([pa.field("table_type", _TEXT, nullable=False)]),
    "CommandGetPrimaryKeys": pa.schema(
        [
            pa.field("catalog_name", _TEXT),
            pa.field("db_schema_name", _TEXT),
            pa.field("table_name", _TEXT, nullable=False),
            pa.field("column_name", _TEXT, nullable=False),
            pa.field("key_name", _TEXT),
            pa.field("key_sequence", pa.int32(), nullable=False),
        ]
    ),
}
_TABLE_SCHEMA = pa.field("table_schema", pa.binary(), nullable=False)

_VALUE_TYPE = pa.dense_union(
    [
        pa.field("string_value", _TEXT),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(_TEXT)),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
    ]
)
SCHEMAS["CommandGetSqlInfo"] = pa.schema(
    [pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", _VALUE_TYPE)]
)


def command_schema(name: str, command: Any) -> pa.Schema:
    """The schema of a catalog command's answer."""
    if name == "CommandGetTables" and command.include_schema:
        return SCHEMAS[name].append(_TABLE_SCHEMA)
    return SCHEMAS[name]


def _like(pattern: str | None) -> Callable[[str], bool]:
    """A Flight SQL filter pattern (``%`` any run, ``_`` one character, ``\\`` escapes)."""
    if pattern is None:
        return lambda _: True
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    regex = re.compile("".join(out), re.S)
    return lambda name: regex.fullmatch(name) is not None


def _opt(message: Any, name: str) -> str | None:
    return str(getattr(message, name)) if message.HasField(name) else None


class TableRow(TypedDict):
    """One row of ``CommandGetTables``' answer."""

    catalog_name: str
    db_schema_name: str
    table_name: str
    table_type: str
    table_schema: NotRequired[bytes]
    """With ``include_schema``: the table's Arrow schema, serialized."""


class Catalog:
    def __init__(
        self, *, settings: Settings, collections: CollectionLookup, act: ActionRunner
    ) -> None:
        self.settings = settings
        self.collections = collections
        self.act = act

    def answer(self, name: str, command: Any, caller: Caller) -> pa.Table:
        """The rows of a catalog command (``name``: its message's name)."""
        if name == "CommandGetSqlInfo":
            return sql_info(list(command.info), self.settings.sql_timeout_s)
        if name == "CommandGetCatalogs":
            return pa.table([[CATALOG]], schema=SCHEMAS[name])
        if name == "CommandGetTableTypes":
            return pa.table([[TABLE_TYPE]], schema=SCHEMAS[name])
        if name == "CommandGetDbSchemas":
            rows = [
                {"catalog_name": CATALOG, "db_schema_name": db}
                for db in self._databases(_opt(command, "catalog"), caller)
                if _like(_opt(command, "db_schema_filter_pattern"))(db)
            ]
            return pa.Table.from_pylist(rows, schema=SCHEMAS[name])
        if name == "CommandGetTables":
            return self._tables(command, caller)
        if name == "CommandGetPrimaryKeys":
            return self._primary_keys(command, caller)
        raise AssertionError(name)

    def _databases(self, catalog: str | None, caller: Caller) -> list[str]:
        if catalog is not None and catalog != CATALOG:
            return []
        listed = self.act.perform_op(ListDatabases(), caller)
        return sorted(str(n) for n in listed["names"])

    def _collections(self, db: str, caller: Caller) -> list[str]:
        listed = self.act.perform_op(ListCollections(db=db), caller)
        return sorted(str(n) for n in listed["names"])

    def _tables(self, command: Any, caller: Caller) -> pa.Table:
        types = list(command.table_types)
        schema = command_schema("CommandGetTables", command)
        if types and TABLE_TYPE not in types:
            return schema.empty_table()
        in_schema = _like(_opt(command, "db_schema_filter_pattern"))
        in_tables = _like(_opt(command, "table_name_filter_pattern"))
        rows: list[TableRow] = []
        for db in self._databases(_opt(command, "catalog"), caller):
            if not in_schema(db):
                continue
            for name in self._collections(db, caller):
                if not in_tables(name):
                    continue
                row = TableRow(
                    catalog_name=CATALOG, db_schema_name=db, table_name=name, table_type=TABLE_TYPE
                )
                if command.include_schema:
                    row["table_schema"] = self.table_schema(db, name, caller)
                rows.append(row)
        return pa.Table.from_pylist(rows, schema=schema)

    def table_schema(self, db: str, name: str, caller: Caller) -> bytes:
        """The collection's SQL schema (every column, ``$partition`` last), serialized."""
        caller.require(Need("DescribeCollection", db, name))
        info = self.collections.collection(db, name)
        schema = table_schema(info, [*readable_fields(info), PARTITION])
        meta = {
            b"ARROW:FLIGHT:SQL:CATALOG_NAME": CATALOG.encode(),
            b"ARROW:FLIGHT:SQL:DB_SCHEMA_NAME": db.encode(),
            b"ARROW:FLIGHT:SQL:TABLE_NAME": name.encode(),
            b"ARROW:FLIGHT:SQL:IS_READ_ONLY": b"1",
        }
        fields = [f.with_metadata(meta) for f in schema]
        return bytes(pa.schema(fields).serialize().to_pybytes())

    def _primary_keys(self, command: Any, caller: Caller) -> pa.Table:
        catalog, db = _opt(command, "catalog"), _opt(command, "db_schema")
        if not command.table:
            raise invalid("GetPrimaryKeys: name the table")
        schema = SCHEMAS["CommandGetPrimaryKeys"]
        if catalog not in (None, CATALOG):
            return schema.empty_table()
        db = db or "default"
        caller.require(Need("DescribeCollection", db, command.table))
        info = self.collections.collection(db, command.table)
        row = {
            "catalog_name": CATALOG,
            "db_schema_name": db,
            "table_name": info.name,
            "column_name": info.schema.primary.name,
            "key_name": None,
            "key_sequence": 1,
        }
        return pa.Table.from_pylist([row], schema=schema)


def sql_info(wanted: list[int], timeout_s: float) -> pa.Table:
    """``GetSqlInfo``: the server's answers (all, or the ``wanted`` ids it knows)."""
    f = flightsql
    known: dict[int, tuple[int, Any]] = {  # id: (union member, value)
        f.SERVER_NAME: (0, "Elanus"),
        f.SERVER_VERSION: (0, elanus.__version__),
        f.SERVER_ARROW_VERSION: (0, pa.__version__),
        f.SERVER_READ_ONLY: (1, True),
        f.SERVER_SQL: (1, True),
        f.SERVER_SUBSTRAIT: (1, False),
        f.SERVER_TRANSACTION: (3, 0),  # none
        f.SERVER_CANCEL: (1, False),
        f.SERVER_STATEMENT_TIMEOUT: (3, int(timeout_s * 1000)),
        f.SQL_DDL_CATALOG: (1, False),
        f.SQL_DDL_SCHEMA: (1, False),
        f.SQL_DDL_TABLE: (1, False),
        f.SQL_IDENTIFIER_CASE: (3, 1),  # case-insensitive, as DuckDB
        f.SQL_IDENTIFIER_QUOTE_CHAR: (0, '"'),
        f.SQL_QUOTED_IDENTIFIER_CASE: (3, 1),
        f.SQL_ALL_TABLES_ARE_SELECTABLE: (1, True),
        f.SQL_NULL_ORDERING: (3, 3),  # NULLS LAST, DuckDB's default
        f.SQL_SCHEMA_TERM: (0, "database"),
        f.SQL_CATALOG_TERM: (0, "catalog"),
        f.SQL_TRANSACTIONS_SUPPORTED: (1, False),
    }
    ids = sorted(known) if not wanted else [i for i in wanted if i in known]
    members: list[list[Any]] = [[] for _ in range(6)]
    types, offsets = [], []
    for i in ids:
        member, value = known[i]
        types.append(member)
        offsets.append(len(members[member]))
        members[member].append(value)
    children = [
        pa.array(values, type=_VALUE_TYPE.field(k).type) for k, values in enumerate(members)
    ]
    value = pa.UnionArray.from_dense(
        pa.array(types, pa.int8()),
        pa.array(offsets, pa.int32()),
        children,
        [_VALUE_TYPE.field(k).name for k in range(6)],
    )
    return pa.Table.from_arrays(
        [pa.array(ids, pa.uint32()), value], schema=SCHEMAS["CommandGetSqlInfo"]
    )
