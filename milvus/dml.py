"""Insert, Upsert and Delete: the columns go the way of a DoPut (``DmlService.insert``,
checked and published as one batch), a delete is the ``delete`` action."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from elanus.errors import invalid
from elanus.flight.limits import Kind
from elanus.milvus.fielddata import ids_of, to_table
from elanus.milvus.params import templates
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
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
        self.proxy.flow.admit(info.vchannels, f"{'upsert' if upsert else 'insert'} into {name}")
        table = to_table(request.fields_data, info.schema, int(request.num_rows))
        partition = request.partition_name or None
        result = self.proxy.dml.insert(info, partition, table, upsert=upsert)
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
        doc = self.act(
            ctx,
            "delete",
            collection=request.collection_name,
            filter=request.expr,
            filter_params=templates(request.expr_template_values) or None,
            partition=request.partition_name or None,
        )
        return milvus_pb2.MutationResult(
            status=ok(),
            delete_cnt=int(doc.get("delete_count", doc.get("count", 0)) or 0),
            timestamp=int(doc.get("ts", 0) or 0),
        )
