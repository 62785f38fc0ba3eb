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

from typing import Any

from elanus.milvus.schemas import kv_dict
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok


class AlterRpcs(Servicer):
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
        """Every key Milvus allows, checked and applied by the Flight action
        (``elanus.fieldprops``)."""
        self.act(
            ctx,
            "alter_collection_field",
            collection=request.collection_name,
            field_name=request.field_name,
            properties=kv_dict(request.properties) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        return ok()

    @served()
    def AlterIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """The keys Milvus lets change (``elanus.indexprops``), of the index named (or
        the collection's one index)."""
        doc = self.act(
            ctx,
            "describe_index",
            collection=request.collection_name,
            index_name=request.index_name or None,
        )
        self.act(
            ctx,
            "alter_index_properties",
            collection=request.collection_name,
            index_name=doc["indexes"][0]["index_name"],
            properties=kv_dict(request.extra_params) or None,
            delete_keys=list(request.delete_keys) or None,
        )
        return ok()
