"""Counters and histograms for the per-request hot path, folded when they are scraped.

prometheus_client's ``Counter``/``Histogram`` take a lock and walk the buckets in Python on
every update: 1.5-2.5 us each, five of them per single-query search, about a tenth of the
server's own time per query. These keep a request's update to one ``deque.append`` of a
(labels, value) pair; the pairs are folded into counts at scrape time (bucket search with
numpy), or by the writer once ``FOLD_AT`` of them have queued up, so memory stays bounded
when nobody scrapes. The families they expose are ordinary Prometheus counters and
histograms (``docs/metrics.md``).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator, Sequence

import numpy as np
from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

FOLD_AT = 8192
"""Queued updates that make the writer fold them itself (a scrape usually comes first)."""

Labels = tuple[str, ...]


class _Queued(Collector):
    """The queue and fold shared by both kinds; ``_fold_items`` adds a batch to the totals."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str]) -> None:
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self._queue: collections.deque[tuple[Labels, float]] = collections.deque()
        self._lock = threading.Lock()
        REGISTRY.register(self)

    def _add(self, labels: Labels, value: float) -> None:
        queue = self._queue
        queue.append((labels, value))
        if len(queue) > FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """Move every queued update into the totals (appends meanwhile wait for the next)."""
        with self._lock:
            queue, items = self._queue, []
            for _ in range(len(queue)):
                items.append(queue.popleft())
            if items:
                self._fold_items(items)

    def _fold_items(self, items: list[tuple[Labels, float]]) -> None:
        raise NotImplementedError

    def describe(self) -> list[Metric]:
        return []  # no dry run of collect() at registration: it would fold for nothing


class QueuedCounter(_Queued):
    """A labelled counter: ``inc(("search", "ok"))``."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str]) -> None:
        self._totals: dict[Labels, float] = {}
        super().__init__(name, doc, labelnames)

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        self._add(labels, amount)

    def value(self, labels: Labels) -> float:
        """The count so far (folding what is queued): for tests and reports."""
        self.fold()
        return float(self._totals.get(labels, 0.0))

    def _fold_items(self, items: list[tuple[Labels, float]]) -> None:
        for labels, amount in items:
            self._totals[labels] = self._totals.get(labels, 0.0) + amount

    def collect(self) -> Iterator[Metric]:
        self.fold()
        family = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        with self._lock:
            for labels, total in self._totals.items():
                family.add_metric(list(labels), total)
        yield family


class QueuedHistogram(_Queued):
    """A labelled histogram of durations: ``observe(("shard",), seconds)``."""

    def __init__(
        self, name: str, doc: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.bounds = np.asarray(buckets, dtype=np.float64)
        self._counts: dict[Labels, np.ndarray] = {}
        """Per label set: observations per bucket (the last one is +Inf), not cumulative."""
        self._sums: dict[Labels, float] = {}
        super().__init__(name, doc, labelnames)

    def observe(self, labels: Labels, seconds: float) -> None:
        self._add(labels, seconds)

    def count(self, labels: Labels) -> int:
        """Observations so far (folding what is queued): for tests and reports."""
        self.fold()
        counts = self._counts.get(labels)
        return 0 if counts is None else int(counts.sum())

    def _fold_items(self, items: list[tuple[Labels, float]]) -> None:
        by_labels: dict[Labels, list[float]] = {}
        for labels, seconds in items:
            by_labels.setdefault(labels, []).append(seconds)
        width = len(self.bounds) + 1
        for labels, values in by_labels.items():
            v = np.asarray(values, dtype=np.float64)
            slots = np.searchsorted(self.bounds, v, side="left")  # le: v <= bound
            add = np.bincount(slots, minlength=width)
            counts = self._counts.get(labels)
            self._counts[labels] = add if counts is None else counts + add
            self._sums[labels] = self._sums.get(labels, 0.0) + float(v.sum())

    def collect(self) -> Iterator[Metric]:
        self.fold()
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        les = [*(floatToGoString(b) for b in self.bounds), "+Inf"]
        with self._lock:
            for labels, counts in self._counts.items():
                cumulative = np.cumsum(counts)
                buckets = [(le, float(c)) for le, c in zip(les, cumulative, strict=True)]
                family.add_metric(list(labels), buckets, self._sums[labels])
        yield family
