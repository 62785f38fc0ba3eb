"""A search as every shard and segment runs it: vectors, k, metric, filter, timestamps.

The proxy makes one per request shape (its search plan) and fills in the vectors and
timestamps per request with :meth:`SearchRequest.at`; delegators and workers take the same
object, in-process as is and over the bus as a frame message (it is a wire type)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from elanus.expr import Expr, parse_cached
from elanus.schema import Schema
from elanus.wiretypes import wire_type


@wire_type
@dataclass
class SearchRequest:
    field: str
    k: int
    metric: str
    queries: np.ndarray | list[dict[int, float]] | None = None
    """Dense vectors as rows of an array; sparse ones (and BM25 text weights) as maps."""
    guarantee_ts: int = 0
    """The delegator answers once its tsafe reached this (and its own ``ready_ts``)."""
    ts: int = 0
    """The read timestamp; 0 until a delegator reads at its tsafe (or ``as_of``)."""
    filter: str | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    search_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Index parameters of this search (``nprobe``, ``ef``)."""
    radius: float | None = None
    range_filter: float | None = None
    output_fields: list[str] = dataclasses.field(default_factory=list)
    partition_ids: list[int] | None = None
    group_by: str | None = None
    """Grouped search: ``k`` counts groups of up to ``group_size`` hits."""
    group_size: int = 1
    ttl: int = 0
    """The collection's TTL in ms (0: none): rows expired at ``ts`` are not searched."""
    _expr: Any = dataclasses.field(default=None, repr=False, compare=False)
    """The parsed filter, once a holder of the schema asked for it."""

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> SearchRequest:
        """From the proxy's node body (``group_by_field`` names the group field)."""
        return cls(
            field=body["field"],
            k=int(body["k"]),
            metric=body["metric"],
            queries=body.get("queries"),
            guarantee_ts=int(body.get("guarantee_ts") or 0),
            ts=int(body.get("ts") or 0),
            filter=body.get("filter"),
            params=body.get("params") or {},
            search_params=body.get("search_params") or {},
            radius=body.get("radius"),
            range_filter=body.get("range_filter"),
            output_fields=list(body.get("output_fields") or []),
            partition_ids=body.get("partition_ids"),
            group_by=body.get("group_by_field"),
            group_size=int(body.get("group_size") or 1),
            ttl=int(body.get("ttl") or 0),
        )

    def expr(self, schema: Schema) -> Expr | None:
        """The parsed filter (parsed once per filter, schema and params: see the cache)."""
        if self.filter is None:
            return None
        if self._expr is None:
            self._expr = parse_cached(self.filter, schema, self.params)
        return self._expr  # type: ignore[no-any-return]

    def at(
        self, queries: Any = None, ts: int | None = None, guarantee_ts: int | None = None
    ) -> SearchRequest:
        """The same search for other (checked) vectors or timestamps. A shallow copy of the
        fields, not ``dataclasses.replace`` (which re-runs ``__init__`` with every field: twice per
        search, it was a measurable part of a single query's cost)."""
        new = object.__new__(SearchRequest)
        new.__dict__.update(self.__dict__)
        if queries is not None:
            new.queries = queries
        if ts is not None:
            new.ts = ts
        if guarantee_ts is not None:
            new.guarantee_ts = guarantee_ts
        return new
