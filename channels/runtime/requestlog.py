"""A proxy process's recent and slow requests, kept in memory: what an operator asks first
when something is slow (``list_requests``, the console's Requests page), as Milvus's WebUI
shows its proxy's slow requests.

Every request that ``metrics.proxy_request`` counts (each Flight call and Milvus RPC) is
appended here: one tuple and one ``deque.append`` (atomic under the GIL, no lock), the
oldest falling off. A request that took at least the slow threshold (the setting
``slow_request_s``, which the proxy sets at start) is also kept among the slow ones, which
last longer since they are rarer. Process-wide, as the metrics registry is.
"""

from __future__ import annotations

import collections
import time
from typing import Any

RECENT = 200
"""The last requests kept."""
SLOW = 100
"""The last slow requests kept."""

Entry = tuple[float, str, str, float]
"""When it ended (Unix seconds), function, status (``ok`` or the error code), seconds."""

_recent: collections.deque[Entry] = collections.deque(maxlen=RECENT)
_slow: collections.deque[Entry] = collections.deque(maxlen=SLOW)
_threshold = [1.0]


def set_slow_threshold(seconds: float) -> None:
    """Requests of at least ``seconds`` are slow from now on (the proxy's ``slow_request_s``)."""
    _threshold[0] = seconds


def slow_threshold() -> float:
    return _threshold[0]


def record(function: str, status: str, seconds: float) -> None:
    entry = (time.time(), function, status, seconds)
    _recent.append(entry)
    if seconds >= _threshold[0]:
        _slow.append(entry)


def _rows(entries: collections.deque[Entry]) -> list[dict[str, Any]]:
    return [
        {"at": at, "function": function, "status": status, "seconds": round(seconds, 6)}
        for at, function, status, seconds in reversed(entries.copy())  # copy: atomic
    ]


def recent() -> list[dict[str, Any]]:
    """The last requests, newest first."""
    return _rows(_recent)


def slow() -> list[dict[str, Any]]:
    """The last slow requests, newest first."""
    return _rows(_slow)
