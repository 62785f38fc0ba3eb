"""DoAction entries that change an existing collection's fields (Milvus 2.6's schema
evolution): add or drop a field, add or drop a function with its output field. Each runs
as DDL through the proxy's DdQueue; the root coord applies it (``meta/rootcoord.py``,
``_change_schema``) once every node holding rows took the new schema.
"""

from __future__ import annotations

from typing import Any

from elanus.api.rootcoord import (
    AddCollectionField,
    AddFunction,
    DropCollectionField,
    DropFunction,
    RootCoordAPI,
)
from elanus.errors import invalid
from elanus.flight.actions import action, check_db, check_named
from elanus.flight.ddl_actions import apply_ddl
from elanus.functions import Function
from elanus.requests import Body
from elanus.schema import Field
from elanus.schemachange import added_field


@action(
    "add_collection_field",
    "Add a nullable scalar field to an existing collection (Milvus 2.6); rows already there "
    "read its default_value, or null. Body: collection, field. Result: collection_id, "
    "field_id, version.",
    ("collection", "field"),
    privilege="AddCollectionField",
    ddl=True,
    run=apply_ddl(RootCoordAPI.add_collection_field, AddCollectionField),
)
def _add_collection_field(b: Body) -> dict[str, Any]:
    db, collection = check_db(b), check_named(b, "collection", "collection")
    field = added_field(b.dict("field"))
    return {"db": db, "collection": collection, "field": field.to_dict()}


@action(
    "drop_collection_field",
    "Drop a field, named (field_name) or by id (field_id), as Milvus 2.6's AlterCollectionSchema "
    "drop request: not the primary key, the partition key, a function's input or output or "
    "the last vector field. Its values are never read again and its indexes are dropped; "
    "its id is never given again, its name may be. Body: collection, field_name | field_id. "
    "Result: collection_id, field_id, version.",
    ("collection", "field_name", "field_id"),
    privilege="AddCollectionField",  # Elanus's one privilege over a collection's fields
    ddl=True,
    run=apply_ddl(RootCoordAPI.drop_collection_field, DropCollectionField),
)
def _drop_collection_field(b: Body) -> dict[str, Any]:
    db, collection = check_db(b), check_named(b, "collection", "collection")
    field, field_id = b.str("field_name", None), b.int("field_id", None, lo=1)
    if (field is None) == (field_id is None):
        raise invalid("drop_collection_field: give exactly one of 'field_name' and 'field_id'")
    return {"db": db, "collection": collection, "field_name": field, "field_id": field_id}


@action(
    "add_function_field",
    "Add a BM25 function and its SparseFloatVector output field (Milvus 2.6's "
    "add_function_field); rows already written get the output, as Milvus backfills it. "
    "Body: collection, field, function. "
    "Result: collection_id, field_id, version.",
    ("collection", "field", "function"),
    privilege="AddCollectionField",
    ddl=True,
    run=apply_ddl(RootCoordAPI.add_function, AddFunction),
)
def _add_function_field(b: Body) -> dict[str, Any]:
    db, collection = check_db(b), check_named(b, "collection", "collection")
    field, function = Field.from_dict(b.dict("field")), Function.from_dict(b.dict("function"))
    field.validate()
    return {
        "db": db,
        "collection": collection,
        "field": field.to_dict(),
        "function": function.to_dict(),
    }


@action(
    "drop_function_field",
    "Drop a function together with its output fields (Milvus 2.6's drop_function_field), "
    "as drop_collection_field drops a field: not when no vector field would be left. "
    "Body: collection, function_name. Result: collection_id, field_ids, version.",
    ("collection", "function_name"),
    privilege="AddCollectionField",
    ddl=True,
    run=apply_ddl(RootCoordAPI.drop_function, DropFunction),
)
def _drop_function_field(b: Body) -> dict[str, Any]:
    db, collection = check_db(b), check_named(b, "collection", "collection")
    return {"db": db, "collection": collection, "function": b.str("function_name")}
