"""The DoAction catalogue and the proxy's static checks (seed 000 §6: "static check").

Every action name here is public protocol (docs/protocol.md). ``check_request`` turns a raw
body into the normalised request the coord expects, or raises INVALID_ARGUMENT naming the
problem, before anything is sent anywhere, so bad input never changes the catalog.
Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elanus import layout
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.flight.wire import DEFAULT_DB, decode_request
from elanus.requests import Body
from elanus.schema import (
    MAX_DESCRIPTION,
    MAX_NAME_LENGTH,
    MAX_SHARDS,
    DataType,
    Schema,
    check_name,
    quick_schema,
)

DEFAULT_PARTITION = "_default"
QUICK_METRICS = ("L2", "IP", "COSINE")
MAX_PROPERTIES = 64
MAX_TIMESTAMPS = 10_000
QUICK_KEYS = ("primary_field", "vector_field", "id_type", "auto_id", "metric_type", "max_length")

Checker = Callable[[Body], dict[str, Any]]


@dataclass(frozen=True)
class ActionSpec:
    """One DoAction: its public name, what ListActions says, the body keys it takes."""

    name: str
    description: str
    keys: tuple[str, ...]
    check: Checker
    ddl: bool = False
    """DDL runs one at a time through the DdQueue, tagged with a TSO timestamp."""


ACTIONS: dict[str, ActionSpec] = {}


def _action(
    name: str, description: str, keys: tuple[str, ...] = (), ddl: bool = False
) -> Callable[[Checker], Checker]:
    def register(check: Checker) -> Checker:
        ACTIONS[name] = ActionSpec(name, description, keys, check, ddl)
        return check

    return register


def check_request(name: str, raw: bytes) -> tuple[ActionSpec, dict[str, Any]]:
    """Look the action up and statically check its body; the result is safe to execute."""
    spec = ACTIONS.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, ACTIONS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "ListActions lists the known ones"
        raise ElanusError(ErrorCode.UNKNOWN_ACTION, f"unknown action {name!r}; {hint}")
    raw_body = decode_request(raw, f"{name} body")
    allowed = {"db", *spec.keys}
    unknown = sorted(set(raw_body) - allowed)
    if unknown:  # before anything else, so a misspelt key is named as such
        raise invalid(
            f"{name}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys are {', '.join(sorted(allowed))}"
        )
    body = Body(raw_body, name)
    _db(body)  # every action takes "db", even those that do not use it: it must be a name
    request = spec.check(body)
    body.allow(allowed).done()
    return spec, request


def _db(b: Body) -> str:
    return check_name(b.str("db", DEFAULT_DB), "database")


def _name(b: Body, key: str, what: str) -> str:
    return check_name(b.str(key), what)


def _given(b: Body, key: str) -> bool:
    return b.raw.get(key) is not None


# -- collections --------------------------------------------------------------------------
@_action(
    "create_collection",
    "Create a collection from a full schema or a quick setup (dimension). Body: name, "
    "schema | dimension, num_shards, consistency_level, properties, description.",
    (
        "name",
        "schema",
        "dimension",
        "num_shards",
        "consistency_level",
        "properties",
        "description",
        *QUICK_KEYS,
    ),
    ddl=True,
)
def _create_collection(b: Body) -> dict[str, Any]:
    db, name = _db(b), _name(b, "name", "collection")
    properties = _properties(b)
    schema = _schema(b, properties)
    num_shards = b.int("num_shards", 1, lo=1, hi=MAX_SHARDS)
    try:
        level = ConsistencyLevel.parse(b.str("consistency_level", "Bounded"))
    except ValueError as exc:
        raise invalid(f"create_collection: {exc}") from None
    description = b.str("description", "")
    if len(description) > MAX_DESCRIPTION:
        raise invalid(
            f"create_collection: 'description' is longer than {MAX_DESCRIPTION} characters"
        )
    return {
        "db": db,
        "name": name,
        "schema": schema.to_dict(),
        "num_shards": num_shards,
        "consistency_level": level.value,
        "properties": properties,
        "description": description,
    }


def _schema(b: Body, properties: dict[str, str]) -> Schema:
    """Either the client's schema or the quick-setup one; validated, field ids stripped."""
    given = b.dict("schema", None)
    if given is not None and _given(b, "dimension"):
        raise invalid("create_collection: give either 'schema' or 'dimension', not both")
    if given is None and not _given(b, "dimension"):
        raise invalid("create_collection: needs a 'schema' or a 'dimension' (quick setup)")
    if given is not None:
        quick = [k for k in QUICK_KEYS if _given(b, k)]
        if quick:
            raise invalid(
                f"create_collection: {', '.join(map(repr, quick))} only apply to "
                "quick setup with 'dimension', not with 'schema'"
            )
        try:
            schema = Schema.from_dict(given)
        except (TypeError, ValueError, KeyError) as exc:
            raise invalid(f"create_collection: bad schema: {exc}") from None
    else:
        metric = b.str("metric_type", "COSINE").upper()
        if metric not in QUICK_METRICS:
            raise invalid(
                f"create_collection: metric_type {metric!r} is not one of "
                f"{', '.join(QUICK_METRICS)}"
            )
        properties["metric_type"] = metric
        schema = quick_schema(
            b.int("dimension"),
            primary_field=b.str("primary_field", "id"),
            vector_field=b.str("vector_field", "vector"),
            id_type=b.str("id_type", "int64"),
            auto_id=b.bool("auto_id", False),
            max_length=b.int("max_length", 512),
        )
    _validate_schema(schema)
    for f in schema.fields:
        f.field_id = None
    return schema


def _validate_schema(schema: Schema) -> None:
    """``Schema.validate`` plus what it does not check: non-string names, auto_id types."""
    for f in schema.fields:
        check_name(f.name, "field")  # validate() puts names in a set: they must be strings
    schema.validate()
    pk = schema.primary
    if pk.auto_id and pk.dtype != DataType.INT64:
        raise invalid(f"auto_id primary key field {pk.name!r} must be Int64, not {pk.dtype.value}")


def _properties(b: Body) -> dict[str, str]:
    """String to string; numbers and booleans are accepted and written as text."""
    props = b.dict("properties", {})
    if len(props) > MAX_PROPERTIES:
        raise invalid(f"create_collection: {len(props)} properties; the limit is {MAX_PROPERTIES}")
    out: dict[str, str] = {}
    for key, value in props.items():
        if not key or len(key) > MAX_NAME_LENGTH:
            raise invalid(
                f"create_collection: property key {key[:40]!r} must have 1 to "
                f"{MAX_NAME_LENGTH} characters"
            )
        if isinstance(value, dict | list) or value is None:
            raise invalid(f"create_collection: property {key!r} must be a string, got {value!r}")
        out[key] = value if isinstance(value, str) else _scalar_text(value)
    return out


def _scalar_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@_action(
    "drop_collection", "Drop a collection and its partitions. Body: name.", ("name",), ddl=True
)
def _drop_collection(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "name": _name(b, "name", "collection")}


@_action("has_collection", "Whether a collection exists. Body: name. Result: value.", ("name",))
def _has_collection(b: Body) -> dict[str, Any]:
    return _drop_collection(b)


@_action(
    "describe_collection",
    "A collection's id, schema (with field ids), shards, channels, partitions. Body: name.",
    ("name",),
)
def _describe_collection(b: Body) -> dict[str, Any]:
    return _drop_collection(b)


@_action("list_collections", "Names of the collections of a database. Result: names.")
def _list_collections(b: Body) -> dict[str, Any]:
    return {"db": _db(b)}


@_action(
    "rename_collection",
    "Rename a collection, optionally into another database. Body: name, new_name, new_db.",
    ("name", "new_name", "new_db"),
    ddl=True,
)
def _rename_collection(b: Body) -> dict[str, Any]:
    db, name = _db(b), _name(b, "name", "collection")
    new_name = _name(b, "new_name", "collection")
    new_db = check_name(b.str("new_db", db), "database")
    if (db, name) == (new_db, new_name):
        raise invalid(f"rename_collection: 'new_name' {new_name!r} is the current name")
    return {"db": db, "name": name, "new_name": new_name, "new_db": new_db}


# -- partitions ---------------------------------------------------------------------------
def _partition_body(b: Body) -> dict[str, Any]:
    return {
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "name": _name(b, "partition", "partition"),
    }


@_action(
    "create_partition",
    "Create a partition. Body: collection, partition.",
    ("collection", "partition"),
    ddl=True,
)
def _create_partition(b: Body) -> dict[str, Any]:
    return _partition_body(b)


@_action(
    "drop_partition",
    "Drop a partition (not _default). Body: collection, partition.",
    ("collection", "partition"),
    ddl=True,
)
def _drop_partition(b: Body) -> dict[str, Any]:
    req = _partition_body(b)
    if req["name"] == DEFAULT_PARTITION:
        raise invalid(
            f"drop_partition: the default partition {DEFAULT_PARTITION!r} cannot be dropped"
        )
    return req


@_action(
    "has_partition",
    "Whether a partition exists. Body: collection, partition.",
    ("collection", "partition"),
)
def _has_partition(b: Body) -> dict[str, Any]:
    return _partition_body(b)


@_action(
    "list_partitions",
    "Partitions of a collection. Body: collection. Result: names.",
    ("collection",),
)
def _list_partitions(b: Body) -> dict[str, Any]:
    return {"db": _db(b), "collection": _name(b, "collection", "collection")}


# -- databases ----------------------------------------------------------------------------
def _database_name(b: Body) -> str:
    """Database actions name their database by ``name`` (``db`` is accepted as a synonym)."""
    name, db = b.str("name", None), b.str("db", None)
    if name is not None and db is not None and name != db:
        raise invalid(f"{b.what}: 'name' {name!r} and 'db' {db!r} disagree; give one")
    if name is None and db is None:
        raise invalid(f"{b.what}: missing required key 'name'")
    return check_name(name if name is not None else db, "database")


@_action("create_database", "Create a database. Body: name.", ("name",), ddl=True)
def _create_database(b: Body) -> dict[str, Any]:
    return {"name": _database_name(b)}


@_action(
    "drop_database", "Drop an empty database (not 'default'). Body: name.", ("name",), ddl=True
)
def _drop_database(b: Body) -> dict[str, Any]:
    name = _database_name(b)
    if name == DEFAULT_DB:
        raise invalid(f"drop_database: the {DEFAULT_DB!r} database cannot be dropped")
    return {"name": name}


@_action("list_databases", "Names of all databases. Result: names.")
def _list_databases(b: Body) -> dict[str, Any]:
    _db(b)
    return {}


# -- control ------------------------------------------------------------------------------
@_action("list_sessions", "Live processes (roles) registered in the cluster. Result: sessions.")
def _list_sessions(b: Body) -> dict[str, Any]:
    return _list_databases(b)


@_action("health", "Status of this proxy and of the coord it talks to. Result: status.")
def _health(b: Body) -> dict[str, Any]:
    return _list_databases(b)


@_action(
    "get_timestamp",
    "Allocate hybrid timestamps from the TSO. Body: count (default 1). Result: ts, count.",
    ("count",),
)
def _get_timestamp(b: Body) -> dict[str, Any]:
    _db(b)
    return {"count": b.int("count", 1, lo=1, hi=MAX_TIMESTAMPS)}


# -- DoPut --------------------------------------------------------------------------------
PUT_OPS = ("insert", "upsert")
UPLOAD_OP = "upload"
"""A DoPut that carries a file into the server's import area (``flight/uploads.py``)."""


def check_put(raw: bytes) -> dict[str, Any]:
    """The JSON command of a DoPut descriptor: op, collection, partition, db, atomic, and
    for a staged write (``flight/imports.py``) stage (the write id) and stage_part."""
    b = Body(decode_request(raw, "DoPut command"), "DoPut command")
    op = b.str("op", "insert")
    if op == UPLOAD_OP:
        return _check_upload(b)
    if op not in PUT_OPS:
        ops = ", ".join((*PUT_OPS, UPLOAD_OP))
        raise invalid(f"DoPut command: 'op' must be one of {ops}, not {op!r}")
    partition = b.str("partition", None)
    request = {
        "op": op,
        "atomic": b.bool("atomic", False),
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "partition": check_name(partition, "partition") if partition else None,
        "stage": None,
    }
    stage = b.str("stage", None)
    part = b.str("stage_part", None)
    if stage is not None:
        request["stage"] = layout.check_write_id(stage, "DoPut command: 'stage'")
        request["stage_part"] = layout.check_write_id(
            part or layout.DEFAULT_PART, "DoPut command: 'stage_part'"
        )
    elif part is not None:
        raise invalid("DoPut command: 'stage_part' needs 'stage'")
    b.done()
    return request


def _check_upload(b: Body) -> dict[str, Any]:
    """``{"op": "upload", "collection", "name", "db"}``: the collection the file is for
    (it must exist; privileges are the import's) and the file's name (sanitised)."""
    request = {
        "op": UPLOAD_OP,
        "db": _db(b),
        "collection": _name(b, "collection", "collection"),
        "name": b.str("name"),
    }
    b.done()
    return request
