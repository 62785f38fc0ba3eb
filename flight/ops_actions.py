"""DoAction entries of what an operator reads of a running cluster beside ``list_sessions``
and ``health``: the coord's recent compactions and backups, this proxy's recent and slow
requests, its effective settings. The web console's Tasks, Requests and Configuration pages
show them (``webui/``); each needs ``DescribeCluster``, as ``list_sessions`` does. Declared
by their records (``elanus/ops/console.py``).
"""

from __future__ import annotations

from elanus.api.backup import BackupTasks, ListBackupTasks
from elanus.api.compaction import CompactionList, ListCompactions
from elanus.channels.natsauth import redact_url
from elanus.channels.runtime import requestlog
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import console as ops


async def _run_list_compactions(c: OpCall[ops.ListCompactions]) -> CompactionList:
    return await c.proxy.compaction.recent(ListCompactions(limit=c.request.limit))


operation(
    ops.ListCompactions,
    "The coord's latest compactions (since it started), newest first. Body: limit (default "
    "100). Result: compactions (compaction_id, collection_id (null: the automatic policy's "
    "round), collection_ids, planned_ts, manual, state, pending, executing, completed, "
    "failed, reason).",
    privilege="DescribeCluster",
    loop=True,
    run=_run_list_compactions,
)


async def _run_list_backup_tasks(c: OpCall[ops.ListBackupTasks]) -> BackupTasks:
    return await c.proxy.coord.backup.tasks(ListBackupTasks())


operation(
    ops.ListBackupTasks,
    "The backups the coord ran or runs (since it started), newest first. Result: tasks "
    "(name, location, state: Running | Completed | Failed, phase, started_at, seconds, ts, "
    "rows, files, bytes, reason).",
    privilege="DescribeCluster",
    loop=True,
    run=_run_list_backup_tasks,
)


def _run_list_requests(c: OpCall[ops.ListRequests]) -> ops.RequestLog:
    limit = c.request.limit
    recent, slow = (
        [
            ops.RequestEntry(
                at=r["at"], function=r["function"], status=r["status"], seconds=r["seconds"]
            )
            for r in rows[:limit]
        ]
        for rows in (requestlog.recent(), requestlog.slow())
    )
    return ops.RequestLog(
        node_id=c.proxy.node_id,
        slow_request_s=requestlog.slow_threshold(),
        recent=recent,
        slow=slow,
    )


operation(
    ops.ListRequests,
    "This proxy's latest requests and its latest slow ones (at least slow_request_s), "
    "newest first. Body: limit (default 100). Result: node_id, slow_request_s, recent and "
    "slow (at, function, status, seconds).",
    privilege="DescribeCluster",
    run=_run_list_requests,
)


def _run_describe_config(c: OpCall[ops.DescribeConfig]) -> ops.ProxyConfig:
    settings = c.proxy.settings
    values = settings.shown()
    values["nats_url"] = redact_url(settings.nats_url)
    return ops.ProxyConfig(node_id=c.proxy.node_id, settings=values)


operation(
    ops.DescribeConfig,
    "This proxy's effective settings, as elanus config show prints them (secrets that are "
    "set as ***). Result: node_id, settings.",
    privilege="DescribeCluster",
    run=_run_describe_config,
)
