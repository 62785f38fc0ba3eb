"""Checked searches, remembered by the shape of their request.

Clients tend to send the same kind of search over and over (same collection, limit,
filter, output fields and params) with new vectors each time. For a single query the
static check and the meta lookups behind it took about as long as the HNSW search itself,
so the proxy keeps their result, a :class:`SearchPlan`, keyed by the request body without
its ``data``. A plan is good while the meta cache has seen no invalidation since it was
made (``generation``), as a cached collection description is; any DDL, on any proxy,
drops them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from elanus.flight.metacache import CollectionInfo
from elanus.ops.search import Search, SearchOptions
from elanus.schema import Field, Function
from elanus.searchrequest import SearchRequest
from elanus.wire.bodyshape import Shape

MAX_PLANS = 256
"""Request shapes remembered; past that the table starts over (shapes repeat in practice,
so a full table means something unusual is going on, and a miss only costs the check)."""


@dataclass(frozen=True)
class SearchPlan:
    """Everything about a search except its query vectors and read timestamp."""

    info: CollectionInfo
    generation: int
    """The meta cache generation ``info`` was read at."""
    request: SearchOptions
    """The statically checked request (a ``Search`` without its ``data``, or a DoExchange
    command); its read options are what ``read_at`` takes on every search."""
    field: Field
    metric: str
    outputs: list[str]
    """Output names as the reply shows them."""
    node_request: SearchRequest
    """What each delegator gets, less its vectors and timestamps (filter parsed once)."""
    text_fn: Function | None = None
    """The BM25 function whose output ``field`` is (a text search), else None."""
    body_shape: Shape | None = None
    """``body_objects`` of the body the plan was made for: a later body of the same shape
    whose ``data`` is a list has the same (lists are not walked)."""
    read_ts: int = 0
    """Pinned: the timestamp this proxy has just read at (a search by keys, a hybrid
    search's later parts), which the search reads at too; 0: the request's options."""

    @property
    def highlighter(self) -> dict[str, Any] | None:
        """A ``search``'s highlighter params (none for a DoExchange search)."""
        return self.request.highlighter if isinstance(self.request, Search) else None


class SearchPlans:
    """Plans by request shape. Dict reads and writes are atomic, so Flight threads share
    it without a lock; two threads missing at once both check and store equal plans."""

    def __init__(self, size: int = MAX_PLANS) -> None:
        self._size = size
        self._plans: dict[bytes, SearchPlan] = {}

    @staticmethod
    def key(body: dict[str, Any]) -> bytes:
        """The shape of a decoded search body without its ``data``."""
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)

    def get(self, key: bytes, generation: int) -> SearchPlan | None:
        plan = self._plans.get(key)
        return plan if plan is not None and plan.generation == generation else None

    def put(self, key: bytes, plan: SearchPlan) -> None:
        if len(self._plans) >= self._size:
            self._plans.clear()
        self._plans[key] = plan

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)
