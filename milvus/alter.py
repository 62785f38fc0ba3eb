"""AlterCollection (alter and drop collection properties), AlterCollectionField and
AlterIndex. A collection's properties are stored and described as Milvus does
(``alter_collection_properties``: the keys Milvus acts on and Elanus does not are refused
by ``honoured_data.COLLECTION_PROPERTIES`` first; ``collection.ttl.seconds`` is enforced).
Elanus fixes its fields' and its indexes' parameters when they are created, except
Milvus's ``mmap.enabled``, which these set and drop at every level (collection, field,
index: ``elanus.mmapsettings``; refused while the collection is loaded, as in Milvus).
What it has no concept of at all (lazy load, warm-up) it accepts and ignores, as on
create. Any other key is answered with Milvus's "not supported" status, naming the key,
after the collection (and index) were found."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.errors import invalid
from elanus.milvus.ops import index_body
from elanus.milvus.schemas import IGNORED_PARAMS, field_doc, function_doc, kv_dict
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import not_supported, ok
from elanus.properties import MMAP_KEYS, check_property


def _keys(request: Any, pairs: str, rpc: str) -> list[str]:
    """The keys set and dropped; a value Milvus would refuse is refused first, as there."""
    for p in getattr(request, pairs):
        check_property(p.key, p.value, rpc)
    return [p.key for p in getattr(request, pairs)] + list(request.delete_keys)


def _refusal(rpc: str, what: str, keys: list[str]) -> Any:
    """OK when every key is one Elanus ignores anyway, else "not supported"."""
    fixed = sorted({k for k in keys if k not in IGNORED_PARAMS})
    if not fixed:
        return ok()
    return not_supported(
        rpc,
        f"{what} are set when created and cannot change (key(s) {', '.join(fixed)}); "
        f"{', '.join(sorted(IGNORED_PARAMS - MMAP_KEYS))} are accepted and have no effect",
    )


def _mmap(request: Any, pairs: str) -> tuple[bool, bool | None]:
    """Whether the request sets or drops ``mmap.enabled``, and to what (``None``: dropped)."""
    touched, enabled = False, None
    for p in getattr(request, pairs):
        if p.key in MMAP_KEYS:
            touched, enabled = True, p.value.strip().lower() == "true"
    if any(k in MMAP_KEYS for k in request.delete_keys):
        touched, enabled = True, None
    return touched, enabled


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
                self.act(ctx, "drop_collection_field", collection=collection,
                         field_name=drop.field_name)  # fmt: skip
            elif which == "field_id":
                self.act(ctx, "drop_collection_field", collection=collection,
                         field_id=drop.field_id)  # fmt: skip
            elif which == "function_name":
                if not drop.drop_function_output_fields:
                    raise invalid(
                        "detaching a function without dropping its output field is not "
                        "supported; drop_function always removes the function together "
                        f"with its output field: {drop.function_name}"
                    )
                self.act(ctx, "drop_function_field", collection=collection,
                         function_name=drop.function_name)  # fmt: skip
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
            self.act(ctx, "add_collection_field", collection=collection, field=field)
            return
        if not info.extra_params:
            raise invalid(
                f"AlterCollectionSchema: function output field {field['name']!r} needs its "
                "index params (index_type, metric_type)"
            )
        function = function_doc(functions[0])
        self.act(ctx, "add_function_field", collection=collection, field=field, function=function)
        index = SimpleNamespace(
            collection_name=collection,
            field_name=field["name"],
            index_name=info.index_name,
            extra_params=info.extra_params,
        )
        self.act(ctx, "create_index", **index_body(index))

    def _alter(self, ctx: Ctx, rpc: str, what: str, request: Any, pairs: str, **target: Any) -> Any:
        """Refuse the keys Elanus cannot change, else apply ``mmap.enabled`` if given."""
        refused = _refusal(rpc, what, _keys(request, pairs, rpc))
        touched, enabled = _mmap(request, pairs)
        if refused.code == 0 and touched:
            self.act(
                ctx,
                "alter_mmap",
                collection=request.collection_name,
                enabled=enabled,
                **target,
            )
        return refused

    @served()
    def AlterCollection(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.act(
            ctx,
            "alter_collection_properties",
            name=request.collection_name,
            properties=kv_dict(request.properties) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        return ok()

    @served()
    def AlterCollectionField(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.act(ctx, "describe_collection", name=request.collection_name)
        return self._alter(
            ctx,
            "AlterCollectionField",
            "a field's parameters",
            request,
            "properties",
            field_name=request.field_name,
        )

    @served()
    def AlterIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        doc = self.act(
            ctx,
            "describe_index",
            collection=request.collection_name,
            index_name=request.index_name or None,
        )
        return self._alter(
            ctx,
            "AlterIndex",
            "an index's parameters",
            request,
            "extra_params",
            index_name=doc["indexes"][0]["index_name"],
        )
