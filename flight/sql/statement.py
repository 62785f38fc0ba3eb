"""What a SQL statement reads, found in DuckDB's own parse tree, before it runs.

DuckDB parses the text (``json_serialize_sql``: one JSON tree per statement, SELECT only,
so anything else is refused here with the statement's kind named). From the tree come:

- the collections it reads (``BASE_TABLE`` references that are not CTE names), as
  ``(database, name)``: a schema qualifier is the database (``"default".books``), the
  catalog may only be ``elanus``;
- the columns it may touch (every column reference's names, ``USING`` columns), or "all"
  when a ``*``, ``COLUMNS(...)``, a ``NATURAL`` join or a whole-row reference appears: a
  collection is then fetched with only the columns named, and ``count(*)`` with its key;
- its ``vector_search(...)`` calls and its snapshot clauses (DuckDB's own time-travel
  syntax, ``FROM books AT (VERSION => <hybrid ts>)`` or ``AT (TIMESTAMP => ...)``), which
  are taken out of the tree before the statement runs (``rewrite``);
- its parameters (``?``, ``$1``, ``$name``), by the identifiers DuckDB gives them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, cast

import duckdb
import orjson

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.sql.parsetree import ParseNode, SerializedSql, walk

CATALOG = "elanus"
"""The one catalog of Flight SQL's catalog commands and of three-part names."""
SEARCH_FUNCTION = "vector_search"
MAX_SQL_CHARS = 1 << 20
SANDBOX: dict[str, str | bool | int | float | list[str]] = {
    "threads": 1,
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}
"""How every DuckDB of the proxy is opened: no file, network or extension from SQL."""


def clean_message(exc: BaseException) -> str:
    """DuckDB's message without what would echo the server's insides (a Python traceback
    that a failed source added), on one line."""
    text = str(exc)
    for cut in (". Detail: Python exception", "\nTraceback", "Traceback (most recent"):
        at = text.find(cut)
        if at >= 0:
            text = text[:at]
    return " ".join(text.split())


@dataclass
class SearchCall:
    """One ``vector_search(...)`` call: its arguments' parse trees, by name or position."""

    node: ParseNode
    positional: list[ParseNode]
    named: dict[str, ParseNode]


@dataclass
class Statement:
    text: str
    tree: ParseNode
    tables: list[tuple[str, str]]
    """The collections read, (database, name), in order of first mention."""
    names: set[str] = field(default_factory=set)
    """Every name a column reference or a USING list holds."""
    every_column: bool = False
    """A ``*``, ``COLUMNS(...)``, natural join or whole-row reference: fetch all columns."""
    searches: list[SearchCall] = field(default_factory=list)
    snapshots: list[tuple[str, ParseNode]] = field(default_factory=list)
    """``AT (unit => expr)`` clauses: (``VERSION`` or ``TIMESTAMP``, the expression)."""
    parameters: set[str] = field(default_factory=set)

    @property
    def rewritten(self) -> bool:
        return bool(self.searches or self.snapshots)


class Parser:
    """DuckDB's parser behind a lock (one connection, used by every Flight thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None

    def _query(self, sql: str, args: list[str] | dict[str, Any] | None) -> Any:
        with self._lock:
            if self._con is None:
                self._con = duckdb.connect(config=SANDBOX)
            row = self._con.execute(sql, args).fetchone()
        assert row is not None
        return row[0]

    def evaluate(self, expr: ParseNode, params: dict[str, Any] | None) -> Any:
        """The value of a constant expression (a literal, a list, a cast, a parameter...)
        under the statement's parameter values (None: not bound yet)."""
        used = parameters_of(expr)
        if used and params is None:
            raise invalid("bind the statement's parameters first: an argument uses one")
        missing = sorted(used - set(params or {}))
        if missing:
            raise invalid(f"parameter ${missing[0]} has no bound value")
        text = self.expression_text(expr)
        try:
            return self._query(text, {k: (params or {})[k] for k in used} if used else None)
        except duckdb.Error as exc:
            raise invalid(f"{text[7:][:200]} is not a constant: {clean_message(exc)}") from None

    def tree(self, text: str) -> ParseNode:
        """The statement's parse tree; refused unless it is one read-only query."""
        if not text.strip():
            raise invalid("the SQL statement is empty")
        if len(text) > MAX_SQL_CHARS:
            raise invalid(f"the SQL statement is longer than {MAX_SQL_CHARS} characters")
        raw = orjson.loads(self._query("SELECT json_serialize_sql(?::VARCHAR)", [text]))
        doc = cast(SerializedSql, raw)
        if doc.get("error"):
            raise _refusal(text, doc)
        statements = doc["statements"]
        if len(statements) != 1:
            raise invalid(f"send one SQL statement at a time, not {len(statements)}")
        return statements[0]

    def text(self, tree: ParseNode) -> str:
        """SQL text of a parse tree (after ``rewrite``)."""
        doc = SerializedSql(error=False, statements=[tree])
        return str(
            self._query("SELECT json_deserialize_sql(?::JSON)", [orjson.dumps(doc).decode()])
        )

    def expression_text(self, expr: ParseNode) -> str:
        """``SELECT <expr>`` as SQL text, to evaluate one expression."""
        tree = self.tree("SELECT 1")
        tree["node"]["select_list"] = [expr]
        return self.text(tree)


def _refusal(text: str, doc: SerializedSql) -> ElanusError:
    """DuckDB's parse error, or the kind of a statement that is not a query."""
    message = str(doc.get("error_message") or "unreadable statement")
    if doc.get("error_type") == "parser":
        return invalid(f"SQL: {message}")
    try:
        kinds = [s.type.name for s in duckdb.extract_statements(text)]
    except duckdb.Error:
        kinds = []
    refused = [k for k in kinds if k != "SELECT"]
    if refused:
        return ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"SQL through Elanus is read-only: {refused[0]} is refused; "
            "write with insert, upsert and delete (the write path), define collections "
            "and indexes with their commands",
        )
    return invalid(f"SQL: {message}")


def analyse(parser: Parser, text: str, default_db: str) -> Statement:
    """The statement's parse tree and what it reads (see the module's docstring)."""
    tree = parser.tree(text)
    ctes = {
        str(entry["key"]).lower()
        for node in walk(tree)
        if isinstance(node.get("cte_map"), dict)
        for entry in node["cte_map"].get("map", [])
    }
    st = Statement(text=text, tree=tree, tables=[])
    for node in walk(tree):
        kind = node.get("class") or node.get("type")
        if kind == "COLUMN_REF":
            st.names.update(str(n) for n in node.get("column_names", []))
        elif kind == "STAR":
            st.every_column = True
        elif kind == "PARAMETER":
            st.parameters.add(str(node.get("identifier")))
        elif kind == "JOIN":
            st.names.update(str(n) for n in node.get("using_columns") or [])
            if node.get("ref_type") == "NATURAL":
                st.every_column = True
        elif kind == "BASE_TABLE":
            ref = _table(node, default_db, ctes)
            if ref is not None and ref not in st.tables:
                st.tables.append(ref)
            at = node.get("at_clause")
            if at:
                st.snapshots.append((str(at.get("unit", "")).upper(), at["expr"]))
        elif kind == "TABLE_FUNCTION":
            call = _search_call(node)
            if call is not None:
                st.searches.append(call)
    lowered = {n.lower() for n in st.names}
    if any(name.lower() in lowered for _, name in st.tables):
        st.every_column = True  # ``SELECT books FROM books``: the whole row
    return st


def _table(node: ParseNode, default_db: str, ctes: set[str]) -> tuple[str, str] | None:
    catalog = str(node.get("catalog_name") or "")
    schema = str(node.get("schema_name") or "")
    name = str(node["table_name"])
    if not catalog and not schema and name.lower() in ctes:
        return None
    if catalog and catalog != CATALOG:
        raise ElanusError(
            ErrorCode.DATABASE_NOT_FOUND,
            f"catalog {catalog!r} does not exist: the one catalog is {CATALOG!r}, whose "
            "schemas are the databases",
        )
    return (schema or default_db, name)


def _search_call(node: ParseNode) -> SearchCall | None:
    function = node.get("function") or {}
    if str(function.get("function_name", "")).lower() != SEARCH_FUNCTION:
        return None
    if function.get("schema") or function.get("catalog"):
        return None
    positional: list[ParseNode] = []
    named: dict[str, ParseNode] = {}
    for arg in function.get("arguments", []):
        expr = arg.get("expression", arg)
        name = str(arg.get("name") or "") if expr is not arg else str(expr.get("alias", ""))
        if name:
            if name in named:
                raise invalid(f"{SEARCH_FUNCTION}: argument {name!r} is given twice")
            named[name] = expr
        else:
            positional.append(expr)
    return SearchCall(node, positional, named)


def parameters_of(tree: ParseNode) -> set[str]:
    """The identifiers of the parameters a parse tree uses."""
    return {str(n["identifier"]) for n in walk(tree) if n.get("class") == "PARAMETER"}


def rewrite(st: Statement, result_tables: list[str]) -> ParseNode:
    """The tree to run: each ``vector_search`` call replaced by the table holding its hits
    (``result_tables``, in the order of ``st.searches``), keeping its alias (or naming it
    ``vector_search``), and every ``AT`` clause dropped (the snapshot is the statement's).
    A new tree: ``st.tree`` is left as it was."""
    tables = iter(result_tables)

    def swapped(value: object) -> object:
        if isinstance(value, list):
            return [swapped(v) for v in value]
        if not isinstance(value, dict):
            return value
        node = cast(ParseNode, value)
        kind = node.get("type")
        if kind == "TABLE_FUNCTION" and _search_call(node) is not None:
            return _hits_table(node, next(tables))
        drop_at = kind == "BASE_TABLE" and bool(node.get("at_clause"))
        return {k: None if drop_at and k == "at_clause" else swapped(v) for k, v in value.items()}

    return cast(ParseNode, swapped(st.tree))


def _hits_table(call: ParseNode, table: str) -> ParseNode:
    """The table reference that stands for a ``vector_search`` call: its hits' table."""
    return {
        "type": "BASE_TABLE",
        "alias": call.get("alias") or SEARCH_FUNCTION,
        "sample": None,
        "query_location": 0,
        "schema_name": "",
        "table_name": table,
        "qualified_name": {"path": [table]},
        "column_name_alias": call.get("column_name_alias") or [],
        "catalog_name": "",
        "at_clause": None,
    }
