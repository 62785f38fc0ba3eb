"""DuckDB's parse tree as ``json_serialize_sql`` writes it, typed by the keys Elanus reads.

A node is a JSON object whose keys depend on its ``class`` (an expression) or ``type`` (a
table reference); each type below names only what ``statement.py`` reads or writes, and a
node keeps every other key DuckDB gave it, so ``json_deserialize_sql`` reads it back whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypedDict, cast


class AtClause(TypedDict):
    """``AT (VERSION => expr)`` or ``AT (TIMESTAMP => expr)`` on a table reference."""

    unit: str
    expr: ParseNode


class CteEntry(TypedDict):
    key: str


class CteMap(TypedDict):
    map: list[CteEntry]


class QualifiedName(TypedDict):
    path: list[str]


ParseNode = TypedDict(
    "ParseNode",
    {
        # what a node is: ``class`` for an expression, ``type`` for a table reference
        "class": str,
        "type": str,
        # a statement, a SELECT node
        "node": "ParseNode",
        "select_list": "list[ParseNode]",
        "cte_map": CteMap,
        # column references, parameters, joins
        "column_names": list[str],
        "identifier": str,
        "using_columns": list[str],
        "ref_type": str,
        # a table reference
        "catalog_name": str,
        "schema_name": str,
        "table_name": str,
        "at_clause": AtClause | None,
        "alias": str,
        "column_name_alias": list[str],
        "sample": None,
        "query_location": int,
        "qualified_name": QualifiedName,
        # a table function, its call and arguments
        "function": "ParseNode",
        "function_name": str,
        "schema": str,
        "catalog": str,
        "arguments": "list[ParseNode]",
        "expression": "ParseNode",
        "name": str,
    },
    total=False,
)


class SerializedSql(TypedDict, total=False):
    """What ``json_serialize_sql`` returns: the statements, or why there are none."""

    error: bool
    error_type: str
    error_message: str
    statements: list[ParseNode]


def walk(value: object) -> Iterator[ParseNode]:
    """Every node under ``value`` (itself first), depth first in the tree's order."""
    if isinstance(value, dict):
        yield cast(ParseNode, value)
        for child in value.values():
            yield from walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from walk(child)
