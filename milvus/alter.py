"""AlterCollection (alter and drop collection properties), AlterCollectionField and
AlterIndex. A collection's properties are stored and described as Milvus does
(``alter_collection_properties``: the keys Milvus acts on and Elanus does not are refused
by ``honoured_data.COLLECTION_PROPERTIES`` first; ``collection.ttl.seconds`` is enforced).
Elanus fixes its fields' and its indexes' parameters when they are created; what it has
no concept of at all (memory mapping, warm-up) it accepts and ignores there. Any other key
is answered with Milvus's "not supported" status, naming the key, after the collection
(and index) were found."""

from __future__ import annotations

from typing import Any

from elanus.milvus.schemas import IGNORED_PARAMS, kv_dict
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import not_supported, ok
from elanus.properties import check_property


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
        f"{', '.join(sorted(IGNORED_PARAMS))} are accepted and have no effect",
    )


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
        self.act(ctx, "describe_collection", name=request.collection_name)
        return _refusal(
            "AlterCollectionField",
            "a field's parameters",
            _keys(request, "properties", "AlterCollectionField"),
        )

    @served()
    def AlterIndex(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        self.act(
            ctx,
            "describe_index",
            collection=request.collection_name,
            index_name=request.index_name or None,
        )
        return _refusal(
            "AlterIndex", "an index's parameters", _keys(request, "extra_params", "AlterIndex")
        )
