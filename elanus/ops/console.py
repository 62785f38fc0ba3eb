"""What an operator reads of a running cluster (the web console's Tasks, Requests and
Configuration pages): the coord's recent compactions and backups, a proxy's recent
requests, its settings.

Each needs ``DescribeCluster``, checked in the default database whatever ``db`` a body
carries (as the dict checkers' requests held no ``db``); ``db`` is checked as every
action's and otherwise unused, and the console sends none.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from elanus.ops import operation, reply, shape
from elanus.ops.control import ClusterWide
from elanus.requests import Range

MAX_LISTED = 1000


@shape
class Listed(ClusterWide):
    limit: Annotated[int, Range(1, MAX_LISTED)] = 100


@operation("list_compactions")
class ListCompactions(Listed):
    pass


@operation("list_backup_tasks")
class ListBackupTasks(ClusterWide):
    pass


@operation("list_requests")
class ListRequests(Listed):
    pass


class RequestEntry(TypedDict):
    """One request a proxy served (``channels/runtime/requestlog.py``)."""

    at: float
    """When it ended, in Unix seconds."""
    function: str
    status: str
    """``ok``, or the error code."""
    seconds: float


@reply
class RequestLog:
    """``list_requests``'s reply: a proxy's latest requests and latest slow ones, newest
    first."""

    node_id: str
    slow_request_s: float
    recent: list[RequestEntry]
    slow: list[RequestEntry]


@operation("describe_config")
class DescribeConfig(ClusterWide):
    pass


@reply
class ProxyConfig:
    """``describe_config``'s reply: a proxy's effective settings, by name."""

    node_id: str
    settings: dict[str, Any]
    """``Settings.shown``: every setting, a secret that is set as ``***``."""
