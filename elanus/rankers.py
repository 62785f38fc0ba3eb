"""Hybrid search's vocabulary and fusion: ``AnnSearchRequest``, ``RRFRanker``,
``WeightedRanker`` in pymilvus's shapes, and the scoring rules of Milvus's rerank functions.

Pure Python over the per-request top lists (no I/O), so the proxy fuses with the same code
the SDK's objects describe, and Milvus code ports by changing its imports. A ranker's wire
form is pymilvus's ``ranker.dict()``: ``{"strategy": "rrf"|"weighted", "params": {...}}``.

Fusion (Milvus 2.6, ``internal/util/function/rerank``):

- RRF: ``score(id) = sum over requests of 1 / (k + rank)``, ``rank`` counted from 1 in each
  request's own list; larger is better.
- Weighted: ``score(id) = sum of weight_i * f_i(distance_i)``. With ``norm_score`` ``f`` maps
  every metric onto [0, 1], larger better: COSINE ``(1 + d) / 2``, IP ``1/2 + atan(d)/pi``,
  BM25 ``2 atan(d)/pi``, distances (L2, HAMMING, JACCARD) ``1 - 2 atan(d)/pi``. Without it
  the raw distances are summed, except that when the requests mix larger-better and
  smaller-better metrics the smaller-better ones still go through ``1 - 2 atan(d)/pi``;
  the order is descending unless every metric is smaller-better and unnormalised (then the
  summed distance ranks ascending, as Milvus does).
- Ties in the fused score go to the smaller primary key (Milvus sorts by score, then id).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from elanus.errors import invalid

MAX_REQUESTS = 1024
"""Milvus's bound on the ANN requests of one hybrid search."""
MAX_RRF_K = 16_384
"""RRF's ``k`` lies in (0, 16384), as in Milvus."""
RRF, WEIGHTED = "rrf", "weighted"
LARGER_IS_BETTER = frozenset({"IP", "COSINE", "BM25"})

Hit = tuple[Hashable, float]
"""(primary key, distance) of one search hit."""
Normaliser = Callable[[float], float]


class AnnSearchRequest:
    """One ANN search of a hybrid search (pymilvus's ``AnnSearchRequest``): query vectors
    on one vector field, its search parameters, its own ``limit`` and filter."""

    def __init__(
        self,
        data: Any,
        anns_field: str,
        param: dict[str, Any],
        limit: int,
        expr: str | None = None,
        expr_params: dict[str, Any] | None = None,
        filter: str | None = None,
    ) -> None:
        if expr is not None and filter is not None:
            raise invalid("AnnSearchRequest: give either 'expr' or 'filter', not both")
        resolved = filter if filter is not None else expr
        if resolved is not None and not isinstance(resolved, str):
            raise invalid(f"AnnSearchRequest: the filter must be a string, got {resolved!r}")
        self._data = data
        self._anns_field = anns_field
        self._param = param
        self._limit = limit
        self._expr = resolved
        self._expr_params = expr_params

    @property
    def data(self) -> Any:
        return self._data

    @property
    def anns_field(self) -> str:
        return self._anns_field

    @property
    def param(self) -> dict[str, Any]:
        return self._param

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def expr(self) -> str | None:
        return self._expr

    @property
    def filter(self) -> str | None:
        return self._expr

    @property
    def expr_params(self) -> dict[str, Any] | None:
        return self._expr_params

    def __repr__(self) -> str:
        return (
            f"AnnSearchRequest(anns_field={self.anns_field!r}, param={self.param!r}, "
            f"limit={self.limit!r}, expr={self.expr!r})"
        )


class BaseRanker:
    """How the hits of several ANN requests become one ranking."""

    strategy = ""

    def params(self) -> dict[str, Any]:
        return {}

    def dict(self) -> dict[str, Any]:
        """The wire form (pymilvus's ``ranker.dict()``)."""
        return {"strategy": self.strategy, "params": self.params()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params()!r})"

    def check(self, n_requests: int) -> None:
        """Raise INVALID_ARGUMENT if this ranker cannot fuse ``n_requests`` lists."""

    def fuse(self, lists: Sequence[Sequence[Hit]], metrics: Sequence[str]) -> Fused:
        """The fused score of every key found in any list (``lists[i]`` best first, with
        ``metrics[i]`` its metric)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Fused:
    scores: dict[Hashable, float]
    descending: bool
    """Larger fused scores are better (all but unnormalised weighted L2-like sums)."""

    def ranked(self) -> list[Hit]:
        """Every key, best first; equal scores in ascending key order (as Milvus)."""
        sign = -1.0 if self.descending else 1.0
        return sorted(self.scores.items(), key=lambda kv: (sign * kv[1], kv[0]))  # type: ignore[return-value]


class RRFRanker(BaseRanker):
    """Reciprocal rank fusion: ``sum 1 / (k + rank)`` over the requests."""

    strategy = RRF

    def __init__(self, k: int | float = 60) -> None:
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 < k < MAX_RRF_K:
            raise invalid(f"The rank params k should be in range (0, {MAX_RRF_K}), got {k!r}")
        self.k = k

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def fuse(self, lists: Sequence[Sequence[Hit]], metrics: Sequence[str]) -> Fused:
        scores: dict[Hashable, float] = {}
        for hits in lists:
            for rank, (pk, _) in enumerate(hits, start=1):
                scores[pk] = scores.get(pk, 0.0) + 1.0 / (self.k + rank)
        return Fused(scores, descending=True)


class WeightedRanker(BaseRanker):
    """A weighted sum of the requests' (normalised) distances, one weight per request."""

    strategy = WEIGHTED

    def __init__(self, *weights: float, norm_score: bool = True) -> None:
        for w in weights:
            if isinstance(w, bool) or not isinstance(w, int | float):
                raise invalid(f"rank param weight must be a number, got {w!r}")
            if not 0 <= w <= 1:
                raise invalid(f"rank param weight should be in range [0, 1], got {w!r}")
        if not isinstance(norm_score, bool):
            raise invalid(f"rank param norm_score must be true or false, got {norm_score!r}")
        self.weights = list(weights)
        self.norm_score = norm_score

    def params(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "norm_score": self.norm_score}

    def check(self, n_requests: int) -> None:
        if len(self.weights) != n_requests:
            raise invalid(
                f"the length of weights param mismatch with ann search requests: "
                f"{len(self.weights)} weight(s) for {n_requests} request(s)"
            )

    def fuse(self, lists: Sequence[Sequence[Hit]], metrics: Sequence[str]) -> Fused:
        self.check(len(lists))
        upper = [m.upper() for m in metrics]
        larger = [m in LARGER_IS_BETTER for m in upper]
        mixed = any(larger) and not all(larger)
        scores: dict[Hashable, float] = {}
        for hits, metric, weight in zip(lists, upper, self.weights, strict=True):
            norm = normaliser(metric, self.norm_score, mixed)
            for pk, distance in hits:
                scores[pk] = scores.get(pk, 0.0) + weight * norm(distance)
        descending = self.norm_score or mixed or all(larger)
        return Fused(scores, descending)


def _as_is(d: float) -> float:
    return d


def _distance_to_similarity(d: float) -> float:
    return 1.0 - 2.0 * math.atan(d) / math.pi


def normaliser(metric: str, norm_score: bool, mixed: bool) -> Normaliser:
    """Milvus's ``getNormalizeFunc``: what a weighted ranker sums for one metric."""
    metric = metric.upper()
    if not norm_score:
        keep = not mixed or metric in LARGER_IS_BETTER
        return _as_is if keep else _distance_to_similarity
    if metric == "COSINE":
        return lambda d: (1.0 + d) * 0.5
    if metric == "IP":
        return lambda d: 0.5 + math.atan(d) / math.pi
    if metric == "BM25":
        return lambda d: 2.0 * math.atan(d) / math.pi
    return _distance_to_similarity


def ranker_from_dict(body: Any, n_requests: int) -> BaseRanker:
    """A ranker from its wire form, checked for ``n_requests`` requests. No ranker (or no
    strategy) is RRF with k = 60, as in Milvus."""
    if body is None:
        return RRFRanker()
    if not isinstance(body, dict):
        raise invalid("hybrid_search: 'ranker' must be a JSON object")
    unknown = sorted(set(body) - {"strategy", "params"})
    if unknown:
        raise invalid(f"hybrid_search: unknown ranker key(s) {', '.join(map(repr, unknown))}")
    strategy = body.get("strategy") or RRF
    params = body.get("params") or {}
    if not isinstance(strategy, str):
        raise invalid(f"hybrid_search: ranker 'strategy' must be a string, got {strategy!r}")
    if not isinstance(params, dict):
        raise invalid("hybrid_search: ranker 'params' must be a JSON object")
    strategy = strategy.lower()
    ranker: BaseRanker
    if strategy == RRF:
        _only(params, {"k"}, RRF)
        ranker = RRFRanker(params.get("k", 60))
    elif strategy == WEIGHTED:
        _only(params, {"weights", "norm_score"}, WEIGHTED)
        weights = params.get("weights")
        if not isinstance(weights, list) or not weights:
            raise invalid("hybrid_search: the weighted ranker needs 'weights', a list of numbers")
        ranker = WeightedRanker(*weights, norm_score=params.get("norm_score", True))
    else:
        raise invalid(
            f"hybrid_search: unsupported rank type {strategy!r}; expected {RRF!r} or {WEIGHTED!r}"
        )
    ranker.check(n_requests)
    return ranker


def _only(params: dict[str, Any], allowed: set[str], strategy: str) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise invalid(
            f"hybrid_search: unknown {strategy} ranker param(s) {', '.join(map(repr, unknown))}"
            f"; it takes {', '.join(sorted(allowed))}"
        )


def window(ranked: Sequence[Hit], limit: int, offset: int = 0) -> list[Hit]:
    """Ranks ``offset`` .. ``offset + limit`` of a fused ranking."""
    return list(ranked[offset : offset + limit])


def grouped(
    ranked: Sequence[Hit],
    descending: bool,
    group_of: dict[Hashable, Any],
    limit: int,
    offset: int = 0,
    group_size: int = 1,
    strict: bool = False,
) -> list[Hit]:
    """Milvus's grouped rerank: fill each group with its ``group_size`` best hits (in
    ranked order), rank groups by their best hit (ties: the fuller group, then the group
    whose first key is smaller), keep groups ``offset`` .. ``offset + limit``, their hits
    side by side. ``strict`` drops kept groups with fewer than ``group_size`` hits."""
    groups: dict[Any, list[Hit]] = {}
    for pk, score in ranked:
        members = groups.setdefault(group_of.get(pk), [])
        if len(members) < group_size:
            members.append((pk, score))
    order = list(groups.values())
    sign = -1.0 if descending else 1.0
    order.sort(key=lambda g: (sign * g[0][1], -len(g), g[0][0]))
    out: list[Hit] = []
    for members in order[offset : offset + limit]:
        if strict and len(members) < group_size:
            continue
        out.extend(members)
    return out
