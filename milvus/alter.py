"""AlterCollection (alter and drop collection properties), AlterCollectionField and
AlterIndex (and their drops), each the Flight action of the same meaning. A collection's
properties are stored and described as Milvus does (``alter_collection_properties``: the
keys Milvus acts on and Elanus does not are refused by
``honoured_data.COLLECTION_PROPERTIES`` first; ``collection.ttl.seconds`` is enforced).
A field's properties change as Milvus allows (``elanus.fieldprops``: ``max_length``,
``max_capacity``, ``mmap.enabled``, warm-up), and an index's (``elanus.indexprops``:
``mmap.enabled``, ``indexoffsetcache.enabled``, ``warmup``); any other key is refused
with Milvus's code and message, naming it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.errors import invalid
from elanus.milvus.ops import index_body
from elanus.milvus.schemas import field_doc, function_doc, kv_dict
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops import alter
from elanus.ops import indexes as index_ops
from elanus.ops import schemachange as ops


class AlterRpcs(Servicer):
    @served()
    def AlterCollectionSchema(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Milvus 2.6's one call for schema changes: a drop request drops a field (by name
        or id) or a function with its output fields; an add request adds one plain field
        (pymilvus's ``add_collection_field`` tries this before ``AddCollectionField``) or
        a function with its output field and index (``add_function_field``)."""
        action = request.action
        collection = request.collection_name
        if action.WhichOneof("op") == "drop_request":
            drop = action.drop_request
            which = drop.WhichOneof("identifier")
            if which == "field_name":
                self.run_op(
                    ctx,
                    ops.DropCollectionField(
                        db=ctx.db, collection=collection, field_name=drop.field_name
                    ),
                )
            elif which == "field_id":
                self.run_op(
                    ctx,
                    ops.DropCollectionField(
                        db=ctx.db, collection=collection, field_id=drop.field_id
                    ),
                )
            elif which == "function_name":
                if not drop.drop_function_output_fields:
                    raise invalid(
                        "detaching a function without dropping its output field is not "
                        "supported; drop_function always removes the function together "
                        f"with its output field: {drop.function_name}"
                    )
                self.run_op(
                    ctx,
                    ops.DropFunctionField(
                        db=ctx.db, collection=collection, function_name=drop.function_name
                    ),
                )
            else:
                raise invalid("drop request must specify field_name, field_id, or function_name")
        elif action.WhichOneof("op") == "add_request":
            self._add(ctx, collection, action.add_request)
        else:
            raise invalid("AlterCollectionSchema: the request has no action (add or drop)")
        return milvus_pb2.AlterCollectionSchemaResponse(alter_status=ok())

    def _add(self, ctx: Ctx, collection: str, add: Any) -> None:
        """One plain field; or one function with its output field and that field's index
        (pymilvus's ``add_function_field`` binds exactly one), made once the field is."""
        infos, functions = add.field_infos, add.func_schema
        if len(infos) != 1 or len(functions) > 1:
            raise invalid(
                "AlterCollectionSchema: an add request takes one field and at most one "
                f"function, got {len(infos)} and {len(functions)}"
            )
        info = infos[0]
        field = field_doc(info.field_schema)
        if not functions:
            if info.index_name or info.extra_params:
                raise invalid("AlterCollectionSchema: only a function's output field is indexed")
            self.run_op(ctx, ops.AddCollectionField(db=ctx.db, collection=collection, field=field))
            return
        if not info.extra_params:
            raise invalid(
                f"AlterCollectionSchema: function output field {field['name']!r} needs its "
                "index params (index_type, metric_type)"
            )
        function = function_doc(functions[0])
        op = ops.AddFunctionField(db=ctx.db, collection=collection, field=field, function=function)
        self.run_op(ctx, op)
        index = SimpleNamespace(
            collection_name=collection,
            field_name=field["name"],
            index_name=info.index_name,
            extra_params=info.extra_params,
        )
        self.run_op(ctx, index_ops.CreateIndex(db=ctx.db, **index_body(index)))

    @served()
    def AlterCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        op = alter.AlterCollectionProperties(
            db=ctx.db,
            name=request.collection_name,
            properties=kv_dict(request.properties) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def AlterCollectionField(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Every key Milvus allows, checked and applied by the Flight action
        (``elanus.fieldprops``)."""
        op = alter.AlterCollectionField(
            db=ctx.db,
            collection=request.collection_name,
            field_name=request.field_name,
            properties=kv_dict(request.properties) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        self.run_op(ctx, op)
        return ok()

    @served()
    def AlterIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """The keys Milvus lets change (``elanus.indexprops``), of the index named (or
        the collection's one index)."""
        described = index_ops.DescribeIndex(
            db=ctx.db, collection=request.collection_name, index_name=request.index_name or None
        )
        doc = self.run_op(ctx, described)
        op = alter.AlterIndexProperties(
            db=ctx.db,
            collection=request.collection_name,
            index_name=doc["indexes"][0]["index_name"],
            properties=kv_dict(request.extra_params) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        self.run_op(ctx, op)
        return ok()
