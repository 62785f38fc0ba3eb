"""Milvus's protocol served over gRPC for one proxy: ``MilvusService`` from the concern
mixins (``servicer.py`` and friends), on ``milvus_port``, with the proxy's TLS files.

Imported only when a proxy serves that port (``face.py``): pymilvus's generated code pulls
in the whole pymilvus package (pandas, requests, ...), a third of a second at start."""

from __future__ import annotations

from concurrent import futures
from typing import TYPE_CHECKING, Any

import grpc
from pymilvus.grpc_gen import milvus_pb2_grpc

from elanus.errors import ElanusError, ErrorCode
from elanus.milvus.alter import AlterRpcs
from elanus.milvus.analyze import AnalyzerRpcs
from elanus.milvus.auth import MilvusCredentials
from elanus.milvus.ddl import DdlRpcs
from elanus.milvus.dml import DmlRpcs
from elanus.milvus.flushall import FlushAllRpcs
from elanus.milvus.hybrid import HybridRpcs
from elanus.milvus.imports import ImportRpcs
from elanus.milvus.indexstate import IndexStateRpcs
from elanus.milvus.metrics import MetricsRpcs
from elanus.milvus.ops import OpsRpcs
from elanus.milvus.rbac import RbacRpcs
from elanus.milvus.read import ReadRpcs
from elanus.milvus.session import SessionRpcs
from elanus.milvus.snapshots import SnapshotRpcs
from elanus.wire.tls import server_tls

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

WORKERS = 16
"""gRPC threads; like Flight's, each blocks while the proxy's loop does the work."""
STOP_GRACE_S = 5.0
KEEPALIVE = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]
"""Keepalive pings as Milvus's proxy takes them (``internal/distributed/proxy/service.go``):
from a client with no call in flight too, 5 s apart at least (pymilvus pings every 10 s).
gRPC's defaults (5 min, and only during a call) answered a client's third early ping with
GOAWAY ``too_many_pings``. An earlier ping counts a strike but, unlike Milvus, no number
of strikes closes the connection: a ping costs less than a reconnect. The server pings a
client idle for 60 s and drops it without an answer in 10 s, as Milvus does."""


class MilvusServicer(
    SessionRpcs,
    DdlRpcs,
    AlterRpcs,
    DmlRpcs,
    ReadRpcs,
    HybridRpcs,
    OpsRpcs,
    IndexStateRpcs,
    FlushAllRpcs,
    MetricsRpcs,
    ImportRpcs,
    RbacRpcs,
    AnalyzerRpcs,
    SnapshotRpcs,
):
    """Every served RPC, from the concern mixins; the rest answer "not supported"."""


class MilvusFace:
    """A gRPC server answering Milvus's protocol for one proxy."""

    def __init__(self, proxy: ProxyServer) -> None:
        self.proxy = proxy
        self.port: int | None = None
        self._server: grpc.Server | None = None
        self.servicer: MilvusServicer | None = None

    def start(self) -> int:
        """Bind and serve (on gRPC's threads); the port bound. Runs off the event loop."""
        s = self.proxy.settings
        limit = max(s.max_request_bytes, 64 * 1024 * 1024)
        options = [
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            # Shared by a standalone's serving processes (the kernel spreads connections,
            # docs/process-model.md); otherwise a taken port is an error.
            ("grpc.so_reuseport", 1 if s.node_group else 0),
            *KEEPALIVE,
        ]
        server = grpc.server(futures.ThreadPoolExecutor(WORKERS, "milvus"), options=options)
        self.servicer = MilvusServicer(self.proxy, MilvusCredentials(self.proxy.auth))
        milvus_pb2_grpc.add_MilvusServiceServicer_to_server(self.servicer, server)
        address = f"{s.flight_host}:{s.milvus_port}"
        try:
            port = _bind(server, address, server_tls(s.tls_cert, s.tls_key, s.tls_client_ca))
        except RuntimeError as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"cannot serve Milvus's protocol on {address}: {exc}"
            ) from None
        server.start()
        self._server, self.port = server, port
        return port

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(STOP_GRACE_S).wait(STOP_GRACE_S + 1)


def _bind(server: grpc.Server, address: str, tls: dict[str, Any]) -> int:
    if not tls:
        port = server.add_insecure_port(address)
    else:
        cert, key = tls["tls_certificates"][0]
        credentials = grpc.ssl_server_credentials(
            [(key, cert)],
            root_certificates=tls.get("root_certificates"),
            require_client_auth=bool(tls.get("verify_client")),
        )
        port = server.add_secure_port(address, credentials)
    if not port:
        raise RuntimeError("the port is taken or the address cannot be bound")
    return int(port)
