"""NATS subject and bucket names, in one place so every role agrees on them."""

PREFIX = "elanus"
COORD = f"{PREFIX}.coord"
"""Coord request/reply: ``elanus.coord.<method>`` (for example ``elanus.coord.tso.alloc``)."""
META_INVALIDATE = f"{PREFIX}.meta.invalidate"
"""Broadcast by the coord after every DDL change; proxies drop the named cache entries."""
SESSIONS_BUCKET = "elanus_sessions"
COORD_LEASE_BUCKET = "elanus_coord_lease"
"""The active coordinator's lease (``meta/lease.py``), watched by every other role."""
COORD_LEASE_KEY = "active"
SEGMENT_FLUSHED = f"{PREFIX}.segment.flushed"
"""Broadcast by the coord after a segment is flushed (query and index coordination listen)."""
SEGMENT_COMPACTED = f"{PREFIX}.segment.compacted"
"""Broadcast by the coord after compacted sources were swapped for their target."""

FLOW_REPORT = f"{PREFIX}.flow.report"
"""Every role's flow-control figures, each tick interval; proxies listen (channels/flow.py)."""


def coord(method: str) -> str:
    return f"{COORD}.{method}"


def node_prefix(role: str, node_id: str) -> str:
    """The subject root a node instance serves its methods under."""
    return f"{PREFIX}.{role}.{node_id}"


def node(role: str, node_id: str, method: str) -> str:
    """Request/reply subject of one node instance (datanode, querynode, indexnode, proxy)."""
    return f"{node_prefix(role, node_id)}.{method}"
