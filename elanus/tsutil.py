"""Hybrid timestamps: ``physical_ms << 18 | logical`` as in Milvus's TSO (seed 003)."""

from __future__ import annotations

import time

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
MAX_TIMESTAMP = (1 << 64) - 1


def compose(physical_ms: int, logical: int = 0) -> int:
    if not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"logical part {logical} out of range")
    return (physical_ms << LOGICAL_BITS) | logical


FUTURE_SLACK_MS = 3000
"""How far a timestamp a client sends may lead this machine's clock before it is worth
asking the TSO whether it was handed out (machines' clocks differ a little)."""


def beyond_now(ts: int, slack_ms: int = FUTURE_SLACK_MS) -> bool:
    """Whether ``ts`` lies past this machine's clock by more than the slack: made up, or
    from a TSO whose clock leads (after a restart it resumes above its saved bound)."""
    return ts > compose(now_ms() + slack_ms)


def physical_ms(ts: int) -> int:
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    return ts & LOGICAL_MASK


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def from_unix_seconds(seconds: float) -> int:
    """The smallest hybrid timestamp at a wall-clock instant (for `as_of` and staleness)."""
    return compose(int(seconds * 1000))


def to_unix_seconds(ts: int) -> float:
    return physical_ms(ts) / 1000.0
