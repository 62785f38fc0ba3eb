"""Request types of a datanode's channels (``datanode.watch``, ``datanode.unwatch``); the
coord services' requests are in ``elanus/api/`` with their replies and stubs.

Each class is the schema of one subject's body (``elanus.requests.request``); the coord
decodes bodies into them at its edge, and callers in any package may build them instead of
dicts. The key names are the wire format: renaming a field changes the protocol.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from elanus.requests import request

# -- a datanode's channels --------------------------------------------------------------------


@request("datanode.watch")
class WatchChannel:
    vchannel: str
    pchannel: str
    collection_id: int
    schema: dict[str, Any]
    checkpoint: dict[str, Any] | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    """The channel's unflushed segments, as the coord knows them."""


@request("datanode.unwatch")
class UnwatchChannel:
    vchannel: str
