"""What an operator reads of a running cluster (the web console's Tasks, Requests and
Configuration pages): the coord's recent compactions and backups, a proxy's recent
requests, its settings.

Each needs ``DescribeCluster``, checked in the default database whatever ``db`` a body
carries (as the dict checkers' requests held no ``db``); ``db`` is checked as every
action's and otherwise unused, and the console sends none.
"""

from __future__ import annotations

from typing import Annotated

from elanus.ops import operation, shape
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


@operation("describe_config")
class DescribeConfig(ClusterWide):
    pass
