"""The coord's meta invalidation broadcast (``elanus.meta.invalidate``) and each proxy's ack.

Not a stub call: the coord scatters it to every live proxy and waits, briefly, for their
acks before a DDL returns (``meta/collections.py`` ``ProxyNotifier``), so a client that
goes to another proxy next never reads the old meta. Plain JSON objects, declared here so
the sender and the proxy's cache (``flight/metacache.py``) read the same keys.
"""

from __future__ import annotations

from typing import TypedDict


class MetaInvalidation(TypedDict, total=False):
    """What a proxy drops: a collection's meta (by ``db`` and ``name``, and by
    ``collection_id``), every entry of a database (a ``kind`` of ``database...``), or the
    cached identity of ``user`` (``kind`` ``auth``)."""

    kind: str
    db: str
    name: str
    collection_id: int
    ts: int
    user: str


class InvalidationAck(TypedDict):
    """A proxy's answer: how many entries it dropped (``-1``: a message it could not read,
    so it dropped everything)."""

    node_id: str
    dropped: int
