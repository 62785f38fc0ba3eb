"""Connect (pymilvus's ``identifier`` handshake), GetVersion, CheckHealth and
GetComponentStates (the proxy's own state, as Milvus's proxy answers it)."""

from __future__ import annotations

import itertools
import time
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

import elanus
from elanus.milvus.ops import node_number
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops.collections import ListCollections
from elanus.ops.control import GetTimestamp, Health

MILVUS_VERSION = "v2.6.0"
"""The Milvus release whose protocol the face speaks (pymilvus checks features by it)."""
_identifiers = itertools.count(int(time.time() * 1000) % 1_000_000_000)


class SessionRpcs(Servicer):
    @served()
    def Connect(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802 - the RPC's name
        self.run_op(ctx, ListCollections(db=ctx.db))  # the database must exist, as Milvus checks
        info = common_pb2.ServerInfo(
            build_tags=f"elanus-{elanus.__version__}",
            deploy_mode="elanus",
            reserved={"elanus_version": elanus.__version__, "milvus_protocol": MILVUS_VERSION},
        )
        return milvus_pb2.ConnectResponse(
            status=ok(), server_info=info, identifier=next(_identifiers)
        )

    @served()
    def GetVersion(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        return milvus_pb2.GetVersionResponse(status=ok(), version=MILVUS_VERSION)

    @served()
    def CheckHealth(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        doc = self.run_op(ctx, Health(db=ctx.db))
        healthy = str(doc.get("status", "")).lower() in ("ok", "healthy", "serving")
        reasons = [] if healthy else [str(doc)]
        return milvus_pb2.CheckHealthResponse(status=ok(), isHealthy=healthy, reasons=reasons)

    @served()
    def GetComponentStates(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        """Healthy while the proxy serves: a call reaching this answer is served (Milvus's
        proxy reports its own state code, without its coordinators')."""
        info = milvus_pb2.ComponentInfo(
            nodeID=node_number(self.proxy.node_id), role="proxy", state_code=common_pb2.Healthy
        )
        return milvus_pb2.ComponentStates(state=info, status=ok())

    @served()
    def AllocTimestamp(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        doc = self.run_op(ctx, GetTimestamp(db=ctx.db))
        return milvus_pb2.AllocTimestampResponse(status=ok(), timestamp=int(doc["ts"]))
