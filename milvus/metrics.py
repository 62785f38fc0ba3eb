"""``GetMetrics`` with ``{"metric_type": "system_info"}``: the cluster's topology in the
JSON shape of Milvus's ``metricsinfo.SystemTopology``, built from the live role sessions
(the same ``list_sessions`` the CLI and the console read).

One node per session, numbered from 1: the proxy answering forwards to the coordinator
(Elanus's one coord is Milvus 2.6's ``mixcoord``), which manages the worker nodes. Node ids
are numbers as in Milvus (``ops.node_number``). Of the hardware, Elanus knows each node's
host; the cores are told for the answering proxy only. Other metric types are refused
with Milvus's MetricNotFound (``1200``), naming the type.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, NotRequired, TypedDict

import orjson
from pymilvus.grpc_gen import common_pb2, milvus_pb2

import elanus
from elanus.errors import invalid
from elanus.milvus.ops import node_number
from elanus.milvus.servicer import Ctx, Servicer, served
from elanus.milvus.status import ok
from elanus.ops.control import ListSessions
from elanus.ops.replies import Session, Sessions

SYSTEM_INFO = "system_info"
METRIC_NOT_FOUND = 1200
"""Milvus's ``ErrMetricNotFound``."""
_TYPES = {"coord": "mixcoord"}
"""Elanus's role names that differ from Milvus's node types."""
_COORD = "mixcoord"


class Connection(TypedDict):
    connected_identifier: int
    type: str
    target_type: str


class HardwareInfos(TypedDict):
    ip: str
    cpu_core_count: NotRequired[int]
    """This proxy's only: the others' are not known here."""


class SystemInfo(TypedDict):
    system_version: str
    deploy_mode: str
    build_version: str


class NodeInfos(TypedDict):
    has_error: bool
    error_reason: str
    name: str
    hardware_infos: HardwareInfos
    system_info: SystemInfo
    created_time: str
    updated_time: str
    type: str
    id: int


class NodeInfo(TypedDict):
    identifier: int
    connected: list[Connection]
    infos: NodeInfos


class Topology(TypedDict):
    """``GetMetrics``' ``system_info`` as Milvus writes it (what Attu and birdwatcher
    read): each node with the nodes it talks to."""

    nodes_info: list[NodeInfo]


class MetricsRpcs(Servicer):
    @served()
    def GetMetrics(self, ctx: Ctx, request: Any) -> Any:  # noqa: N802
        kind = _metric_type(request.request)
        if kind != SYSTEM_INFO:
            return milvus_pb2.GetMetricsResponse(
                status=common_pb2.Status(
                    code=METRIC_NOT_FOUND,
                    error_code=common_pb2.UnexpectedError,
                    reason=f"metric not found: Elanus answers metric_type {SYSTEM_INFO!r} "
                    f"only, not {kind!r}",
                )
            )
        listed: Sessions = self.run_op(ctx, ListSessions(db=ctx.db))
        sessions = list(listed["sessions"])
        me = f"proxy{node_number(self.proxy.node_id)}"
        return milvus_pb2.GetMetricsResponse(
            status=ok(),
            response=orjson.dumps(self._topology(sessions)).decode(),
            component_name=me,
        )

    def _topology(self, sessions: list[Session]) -> Topology:
        ordered = sorted(sessions, key=lambda s: s.get("node_id") != self.proxy.node_id)
        ids = {_key(s): n for n, s in enumerate(ordered, start=1)}  # this proxy is 1
        nodes: list[NodeInfo] = []
        for n, s in enumerate(ordered, start=1):
            kind = _node_type(s)
            if kind == "proxy":
                edges = [(ids[_key(o)], "forward", _COORD) for o in ordered if _is_coord(o)]
            elif kind == _COORD:
                edges = [
                    (ids[_key(o)], "manage", _node_type(o))
                    for o in ordered
                    if _node_type(o) not in ("proxy", _COORD)
                ]
            else:
                edges = []
            connected = [
                Connection(connected_identifier=i, type=t, target_type=target)
                for i, t, target in edges
            ]
            nodes.append(NodeInfo(identifier=n, connected=connected, infos=self._infos(s, kind)))
        return Topology(nodes_info=nodes)

    def _infos(self, s: Session, kind: str) -> NodeInfos:
        number = node_number(str(s.get("node_id", "")))
        hardware = HardwareInfos(ip=s.get("address") or s.get("host") or "")
        if s.get("node_id") == self.proxy.node_id:
            hardware["cpu_core_count"] = os.cpu_count() or 0
        started = float(s.get("started_at") or 0)
        return NodeInfos(
            has_error=False,
            error_reason="",
            name=f"{kind}{number}",
            hardware_infos=hardware,
            system_info=SystemInfo(
                system_version=elanus.__version__,
                deploy_mode="elanus",
                build_version=f"elanus-{elanus.__version__}",
            ),
            created_time=_when(started),
            updated_time=_when(datetime.datetime.now(datetime.UTC).timestamp()),
            type=kind,
            id=number,
        )


def _metric_type(text: str) -> str:
    """The ``metric_type`` of a ``GetMetrics`` request's JSON."""
    try:
        doc = orjson.loads(text or b"{}")
    except orjson.JSONDecodeError:
        raise invalid(
            'GetMetrics: \'request\' must be a JSON object, such as {"metric_type": "system_info"}'
        ) from None
    kind = doc.get("metric_type") if isinstance(doc, dict) else None
    if not isinstance(kind, str) or not kind:
        raise invalid(
            "GetMetrics: 'request' must name a metric_type, such as "
            '{"metric_type": "system_info"}'
        )
    others = sorted(k for k in doc if k != "metric_type")
    if others:
        raise invalid(
            f"GetMetrics: the request's key {others[0]!r} is not taken (only metric_type)"
        )
    return kind


def _key(s: Session) -> str:
    return f"{s.get('role')}.{s.get('node_id')}"


def _node_type(s: Session) -> str:
    role = str(s.get("role", ""))
    return _TYPES.get(role, role)


def _is_coord(s: Session) -> bool:
    return _node_type(s) == _COORD


def _when(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
