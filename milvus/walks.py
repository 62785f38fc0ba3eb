"""pymilvus's search iterator (v2) over Milvus's protocol: a walk down one query's ranking.

pymilvus sends ``search_iter_v2`` with the walk's token (``search_iter_id``, fixed for
its life), the distance its last page ended on (``search_iter_last_bound``) and the read
timestamp of its first page as ``guarantee_timestamp``. Each page here is an exact range
search from that bound on, read at that timestamp, so the pages join into one ranking
with no hit twice and none skipped. Ties at the bound are why the face keeps a little
state per token: the keys already returned close to the bound, left out of the next page.
A token this proxy does not know (another proxy's, or forgotten) walks from the bound
pymilvus sent, as Milvus does.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from elanus.errors import invalid
from elanus.ops.search import Search, split_search_params
from elanus.rankers import LARGER_IS_BETTER

FAR = 3.0e38
"""A radius every finite float32 distance lies inside."""
TIE_TOLERANCE = 1e-5
SEEN = "__milvus_iter_seen"
"""The filter parameter holding the keys already returned near the bound."""
MAX_WALKS = 4096


@dataclass
class Walk:
    """Where one walk stands: its bound and the (key, distance) returned near it."""

    bound: float | None = None
    near: list[tuple[Any, float]] = field(default_factory=list)


class Walks:
    """The walks of the iterators that page through this proxy (the oldest forgotten)."""

    def __init__(self) -> None:
        self._walks: OrderedDict[str, Walk] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str | None, last_bound: Any) -> tuple[str, Walk]:
        """The walk of ``token`` (a new token and walk when none is given)."""
        with self._lock:
            if token and token in self._walks:
                self._walks.move_to_end(token)
                return token, self._walks[token]
            token = token or uuid.uuid4().hex
            walk = Walk(bound=_bound(last_bound))
            self._walks[token] = walk
            while len(self._walks) > MAX_WALKS:
                self._walks.popitem(last=False)
            return token, walk


class RangeParams(TypedDict):
    """A page's ``search_params``: a range search from the walk's bound."""

    metric_type: str
    radius: float
    range_filter: NotRequired[float]


def page_request(search: Search, pk: str, metric: str, walk: Walk) -> Search:
    """A checked search as the walk's next page: a range search from its bound (within the
    caller's own radius / range_filter), leaving out the keys near it."""
    params = dict(search.search_params or {})
    radius, user_bound, _ = split_search_params(params)
    larger = metric in LARGER_IS_BETTER
    bound = walk.bound if walk.bound is not None else user_bound
    if walk.bound is not None and user_bound is not None:
        bound = min(walk.bound, user_bound) if larger else max(walk.bound, user_bound)
    ranged = RangeParams(
        metric_type=params.get("metric_type") or metric,
        radius=radius if radius is not None else (-FAR if larger else FAR),
    )
    if bound is not None:
        ranged["range_filter"] = bound
    if not walk.near:
        return dataclasses.replace(search, search_params=dict(ranged))
    unseen = f"{pk} not in {{{SEEN}}}"
    return dataclasses.replace(
        search,
        search_params=dict(ranged),
        filter=f"({search.filter}) and {unseen}" if search.filter else unseen,
        filter_params={**(search.filter_params or {}), SEEN: [k for k, _ in walk.near]},
    )


def advance(walk: Walk, keys: list[Any], distances: list[float], metric: str) -> float:
    """Move the walk past a page of hits (best first); the bound it now stands on."""
    if not distances:
        return walk.bound if walk.bound is not None else 0.0
    last = float(distances[-1])
    slack = TIE_TOLERANCE * max(1.0, abs(last))
    page = list(zip(keys, distances, strict=True))
    if metric in LARGER_IS_BETTER:  # the walk goes down: radius < d <= bound
        walk.bound = last + slack if walk.bound is None else min(walk.bound, last + slack)
        walk.near = [(k, d) for k, d in walk.near + page if d <= walk.bound + slack]
    else:  # the walk goes up: bound <= d < radius
        walk.bound = last - slack if walk.bound is None else max(walk.bound, last - slack)
        walk.near = [(k, d) for k, d in walk.near + page if d >= walk.bound - slack]
    return last


def _bound(value: Any) -> float | None:
    """The distance pymilvus sends back as ``search_iter_last_bound`` (none on a first page)."""
    if value in (None, ""):
        return None
    try:
        bound = float(value)
    except (TypeError, ValueError):
        bound = float("nan")
    if bound != bound or isinstance(value, bool):
        raise invalid(f"search_iter_last_bound must be a number, got {value!r:.40}")
    return bound
