"""Insert, Upsert and Delete: the columns go the way of a DoPut (``DmlService.insert``,
checked and published as one batch), a delete is the ``delete`` action."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from elanus.errors import invalid
from elanus.flight.limits import Kind
from elanus.flight.partial import check_field_ops
from elanus.milvus.fielddata import ids_of, to_table
from elanus.milvus.params import templates
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops.writes import Delete
from elanus.privileges import Need


class DmlRpcs(Servicer):
    @served(Kind.DML)
    def Insert(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return self._write(ctx, request, upsert=False)

    @served(Kind.DML)
    def Upsert(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return self._write(ctx, request, upsert=True)

    def _write(self, ctx: Ctx, request: Any, upsert: bool) -> Any:
        name = request.collection_name
        ctx.caller.require(Need("Upsert" if upsert else "Insert", ctx.db, name))
        info = self.proxy.dml.collection(ctx.db, name)
        self.proxy.dbgate.admit_write(info, f"{'upsert' if upsert else 'insert'} into {name}")
        partial = _partial(request) if upsert else None
        table = to_table(request.fields_data, info.schema, int(request.num_rows))
        partition = request.partition_name or None
        result = self.proxy.dml.insert(info, partition, table, upsert=upsert, partial=partial)
        n = result.count
        return milvus_pb2.MutationResult(
            status=ok(),
            IDs=ids_of(result.pks, info.schema.primary),
            succ_index=range(n),
            insert_cnt=0 if upsert else n,
            upsert_cnt=n if upsert else 0,
            timestamp=result.ts,
        )

    @served(Kind.DML)
    def Delete(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        if not request.expr.strip():  # pymilvus sends a delete by ids as "pk in [...]"
            raise invalid("Delete: expr is empty; give a filter expression")
        op = Delete(
            db=ctx.db,
            collection=request.collection_name,
            filter=request.expr,
            filter_params=templates(request.expr_template_values) or None,
            partition=request.partition_name or None,
        )
        doc = self.run_op(ctx, op)
        return milvus_pb2.MutationResult(
            status=ok(),
            delete_cnt=int(doc.get("delete_count", doc.get("count", 0)) or 0),
            timestamp=int(doc.get("ts", 0) or 0),
        )


def _partial(request: Any) -> dict[str, str] | None:
    """An Upsert's ``field_ops`` by operator name (``flight/partial.py``), or None when it
    is a whole-row upsert. A non-REPLACE operator makes it partial, as Milvus does."""
    named: dict[str, str] = {}
    for entry in request.field_ops:
        if entry.field_name in named:
            raise invalid(f"Upsert: field_ops gives field {entry.field_name!r} two operators")
        known = entry.op in _OP_TYPE.values()
        named[entry.field_name] = _OP_TYPE.Name(entry.op).lower() if known else f"#{entry.op}"
    ops = check_field_ops(named, "Upsert")
    return ops if ops or request.partial_update else None


_OP_TYPE = schema_pb2.FieldPartialUpdateOp.OpType
