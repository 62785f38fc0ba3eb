"""The console's JSON views: each page's data, made of the proxy's read-only actions run as
the logged-in user.

A view never reaches into a role: it calls ``actions.perform`` as a Flight client's
DoAction would, with the caller's privileges, and only the actions of ``READ_ACTIONS``
(none of them changes anything). Each part of a page is ``{"ok": result}`` or ``{"error":
{"code", "message"}}``, so a user without, say, ``DescribeCluster`` sees the collections
they may see and a refusal where the roles would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

import elanus
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.actions import perform
from elanus.flight.auth import Caller
from elanus.wire.codec import DEFAULT_DB

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

READ_ACTIONS = frozenset(
    {
        "health", "whoami", "list_sessions", "list_databases", "list_collections",
        "describe_collection", "get_load_state", "describe_replica", "get_collection_stats",
        "get_segment_info", "describe_index", "query", "list_import_jobs", "list_compactions",
        "list_backup_tasks", "list_requests", "describe_config",
    }
)  # fmt: skip
"""Every action the console runs; ``query`` only to count a loaded collection's rows."""
MAX_COLLECTIONS = 200
"""Collections a list page describes one by one (the rest are named as left out)."""
LISTED = 100
"""Compactions and requests a page lists."""

Part = dict[str, Any]


@dataclass(frozen=True)
class Reader:
    """Runs read actions for one console request, as ``caller``."""

    proxy: ProxyServer
    caller: Caller

    def ask(self, action: str, /, **body: Any) -> Any:
        if action not in READ_ACTIONS:
            raise AssertionError(f"the console runs read actions only, not {action!r}")
        return perform(self.proxy, action, orjson.dumps(body), self.caller)

    def part(self, action: str, /, **body: Any) -> Part:
        """The action's result as a part of a page, or the error it met."""
        try:
            return {"ok": self.ask(action, **body)}
        except ElanusError as exc:
            return {"error": exc.to_dict()}

    def count(self, db: str, collection: str) -> Part:
        """A loaded collection's rows, growing ones included (``count(*)``)."""
        part = self.part("query", db=db, collection=collection, output_fields=["count(*)"])
        if "ok" in part:
            part = {"ok": part["ok"]["rows"][0]["count(*)"]}
        return part


def _value(part: Part, default: Any = None) -> Any:
    return part.get("ok", default)


def me(r: Reader) -> dict[str, Any]:
    """Who is logged in, and what the console serves (asked before anything else)."""
    proxy = r.proxy
    who = r.part("whoami")
    return {
        "auth_enabled": proxy.settings.auth_enabled,
        "authenticated": True,
        "user": r.caller.user,
        "roles": _value(who, {}).get("roles", []),
        "superuser": r.caller.superuser,
        "version": elanus.__version__,
        "node_id": proxy.node_id,
        "flight_uri": proxy.uri,
        "milvus_port": getattr(proxy, "milvus_port", None),
    }


def overview(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    return {
        "health": r.part("health"),
        "sessions": r.part("list_sessions"),
        "databases": r.part("list_databases"),
        "collections": r.part("list_collections", db=_db(params)),
    }


def collections(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    """The collections of a database, each described with its load state, rows (in flushed
    segments, as ``num_entities``) and indexes."""
    db = _db(params)
    names = r.part("list_collections", db=db)
    rows = []
    for name in sorted(_value(names, {}).get("names", []))[:MAX_COLLECTIONS]:
        rows.append(
            {
                "name": name,
                "describe": r.part("describe_collection", db=db, name=name),
                "load": r.part("get_load_state", db=db, collection=name),
                "rows": r.part("get_collection_stats", db=db, collection=name),
                "indexes": r.part("describe_index", db=db, collection=name),
            }
        )
    total = len(_value(names, {}).get("names", []))
    return {
        "db": db,
        "databases": r.part("list_databases"),
        "collections": names if "error" in names else {"ok": rows},
        "total": total,
        "shown": len(rows),
    }


def collection(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    """One collection: schema, load state and replicas, indexes, segments, rows."""
    db, name = _db(params), params.get("name", "")
    if not name:
        raise ElanusError(ErrorCode.INVALID_ARGUMENT, "name the collection: ?name=...")
    load = r.part("get_load_state", db=db, collection=name)
    loaded = _value(load, {}).get("state") == "Loaded"
    not_loaded = {"error": {"code": "COLLECTION_NOT_LOADED", "message": "not loaded"}}
    return {
        "db": db,
        "name": name,
        "describe": r.part("describe_collection", db=db, name=name),
        "load": load,
        "replicas": r.part("describe_replica", db=db, collection=name) if loaded else not_loaded,
        "indexes": r.part("describe_index", db=db, collection=name),
        "segments": r.part("get_segment_info", db=db, collection=name),
        "rows": r.part("get_collection_stats", db=db, collection=name),
        "live_rows": r.count(db, name) if loaded else not_loaded,
    }


def tasks(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    """Index builds of a database's collections, and the cluster's compactions, imports and
    backups, with their progress."""
    db = _db(params)
    names = r.part("list_collections", db=db)
    builds = []
    ids: dict[int, str] = {}
    for name in sorted(_value(names, {}).get("names", []))[:MAX_COLLECTIONS]:
        described = _value(r.part("describe_collection", db=db, name=name))
        if described is not None:
            ids[described["collection_id"]] = name
        indexes = r.part("describe_index", db=db, collection=name)
        for index in _value(indexes, {}).get("indexes", []):
            builds.append({"collection": name, **index})
    return {
        "db": db,
        "index_builds": names if "error" in names else {"ok": builds},
        "collection_names": {str(k): v for k, v in ids.items()},
        "compactions": r.part("list_compactions", limit=LISTED),
        "imports": r.part("list_import_jobs", db=db),
        "backups": r.part("list_backup_tasks"),
    }


def requests(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    return {"requests": r.part("list_requests", limit=LISTED)}


def channels(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    """Each consumed channel's tick lag and backlog, and the limits flow control holds
    them to (this proxy's settings)."""
    sessions = r.part("list_sessions")
    rows = []
    proxies = []
    for s in _value(sessions, {}).get("sessions", []):
        meta = s.get("meta") or {}
        if s.get("role") == "proxy":
            proxies.append({"node_id": s.get("node_id"), "flow_control": meta.get("flow_control")})
        for vchannel, c in sorted((meta.get("channels") or {}).items()):
            rows.append(
                {"vchannel": vchannel, "role": s.get("role"), "node_id": s.get("node_id"), **c}
            )
    settings = r.proxy.settings
    limits = {
        "flow_tick_lag_soft_s": settings.flow_tick_lag_soft_s,
        "flow_tick_lag_hard_s": settings.flow_tick_lag_hard_s,
        "flow_pending_soft": settings.flow_pending_soft,
        "flow_pending_hard": settings.flow_pending_hard,
    }
    if "error" in sessions:
        return {"channels": sessions, "proxies": sessions, "limits": limits}
    return {"channels": {"ok": rows}, "proxies": {"ok": proxies}, "limits": limits}


def config(r: Reader, params: dict[str, str]) -> dict[str, Any]:
    return {"config": r.part("describe_config")}


def _db(params: dict[str, str]) -> str:
    return params.get("db") or DEFAULT_DB


View = Callable[[Reader, dict[str, str]], dict[str, Any]]
VIEWS: dict[str, View] = {
    "overview": overview,
    "collections": collections,
    "collection": collection,
    "tasks": tasks,
    "requests": requests,
    "channels": channels,
    "config": config,
}
"""``/api/<name>`` of the console, each a page's data."""
