"""DoAction entries that change an existing collection's fields (Milvus 2.6's schema
evolution): add or drop a field, add or drop a function with its output field. Each runs
as DDL through the proxy's DdQueue; the root coord applies it (``meta/rootcoord.py``,
``_change_schema``) once every node holding rows took the new schema. Their requests are
the records of ``elanus/ops/schemachange.py``.
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
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import schemachange as ops
from elanus.schemachange import added_field


def _add_collection_field(c: OpCall[ops.AddCollectionField]) -> Any:
    r = c.request
    field = added_field(r.field).to_dict()
    req = AddCollectionField(db=r.db, collection=r.collection, field=field, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.add_collection_field, req, r.db, r.collection)


def _drop_collection_field(c: OpCall[ops.DropCollectionField]) -> Any:
    r = c.request
    req = DropCollectionField(
        db=r.db, collection=r.collection, field_name=r.field_name, field_id=r.field_id, ts=c.ts
    )
    return c.proxy.ddl.apply_to(RootCoordAPI.drop_collection_field, req, r.db, r.collection)


def _add_function_field(c: OpCall[ops.AddFunctionField]) -> Any:
    r = c.request
    field, function = ops.function_field(r)
    req = AddFunction(
        db=r.db,
        collection=r.collection,
        field=field.to_dict(),
        function=function.to_dict(),
        ts=c.ts,
    )
    return c.proxy.ddl.apply_to(RootCoordAPI.add_function, req, r.db, r.collection)


def _drop_function_field(c: OpCall[ops.DropFunctionField]) -> Any:
    r = c.request
    req = DropFunction(db=r.db, collection=r.collection, function=r.function_name, ts=c.ts)
    return c.proxy.ddl.apply_to(RootCoordAPI.drop_function, req, r.db, r.collection)


operation(
    ops.AddCollectionField,
    "Add a nullable scalar field to an existing collection (Milvus 2.6); rows already there "
    "read its default_value, or null. Body: collection, field. Result: collection_id, "
    "field_id, version.",
    privilege="AddCollectionField",
    ddl=True,
    run=_add_collection_field,
)
operation(
    ops.DropCollectionField,
    "Drop a field, named (field_name) or by id (field_id), as Milvus 2.6's AlterCollectionSchema "
    "drop request: not the primary key, the partition key, a function's input or output or "
    "the last vector field. Its values are never read again and its indexes are dropped; "
    "its id is never given again, its name may be. Body: collection, field_name | field_id. "
    "Result: collection_id, field_id, version.",
    privilege="AddCollectionField",  # Elanus's one privilege over a collection's fields
    ddl=True,
    run=_drop_collection_field,
)
operation(
    ops.AddFunctionField,
    "Add a BM25 function and its SparseFloatVector output field (Milvus 2.6's "
    "add_function_field); rows already written get the output, as Milvus backfills it. "
    "Body: collection, field, function. "
    "Result: collection_id, field_id, version.",
    privilege="AddCollectionField",
    ddl=True,
    run=_add_function_field,
)
operation(
    ops.DropFunctionField,
    "Drop a function together with its output fields (Milvus 2.6's drop_function_field), "
    "as drop_collection_field drops a field: not when no vector field would be left. "
    "Body: collection, function_name. Result: collection_id, field_ids, version.",
    privilege="AddCollectionField",
    ddl=True,
    run=_drop_function_field,
)
