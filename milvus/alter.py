"""AlterCollection (alter and drop collection properties), AlterCollectionField and
AlterIndex. A collection's properties are stored and described as Milvus does
(``alter_collection_properties``: the keys Milvus acts on and Elanus does not are refused
by ``honoured_data.COLLECTION_PROPERTIES`` first; ``collection.ttl.seconds`` is enforced).
A field's properties change as Milvus allows (``elanus.fieldprops``: ``max_length``,
``max_capacity``, ``mmap.enabled``, warm-up). Elanus fixes its indexes' parameters when
they are created, except Milvus's ``mmap.enabled``, which these set and drop at every
level (collection, field, index: ``elanus.mmapsettings``; refused while the collection is
loaded, as in Milvus).
What it has no concept of at all (lazy load, warm-up) it accepts and ignores, as on
create. Any other key is answered with Milvus's "not supported" status, naming the key,
after the collection (and index) were found."""

from __future__ import annotations

from typing import Any

from elanus.milvus.schemas import IGNORED_PARAMS, kv_dict
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
