"""The console's charts: a few of the metrics this process already exports (docs/metrics.md),
sampled from prometheus_client's registry into memory.

A sample is a handful of sums read off the registry, as a scrape reads it (a standalone's
registry holds every role's families; a proxy of a cluster has its own requests and
process figures). Samples are taken every ``interval_s`` and, while a page asks, at most
once a second more, so an open Metrics page moves at its refresh rate; the last ``keep``
are kept. Counters become rates between samples.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.registry import CollectorRegistry

INTERVAL_S = 5.0
KEEP = 180
"""15 minutes at the background rate."""
FRESH_S = 1.0
"""A page's request takes a sample of its own when the last one is older than this."""

Sample = tuple[float, dict[str, float]]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    kind: str
    """``gauge``: the figure itself; ``rate``: a counter's change per second; ``ratio``:
    the change of ``key`` over the change of ``per`` (a mean over the interval)."""
    per: str = ""
    scale: float = 1.0


CHARTS = (
    Chart("requests", "Proxy requests", "per s", "rate"),
    Chart("errors", "Proxy errors", "per s", "rate"),
    Chart("latency_sum", "Mean request latency", "ms", "ratio", "latency_count", 1000.0),
    Chart("search_sum", "Mean shard search latency", "ms", "ratio", "search_count", 1000.0),
    Chart("rss", "Process memory", "MiB", "gauge", scale=1 / (1 << 20)),
    Chart("cpu", "Process CPU", "% of a core", "rate", scale=100.0),
    Chart("tick_lag", "Largest channel tick lag", "s", "gauge"),
    Chart("pending", "Unfetched channel messages", "msgs", "gauge"),
    Chart("flushed_rows", "Rows in flushed segments", "rows", "gauge"),
    Chart("index_pending", "Index builds to do", "tasks", "gauge"),
)


def read(registry: CollectorRegistry = REGISTRY) -> dict[str, float]:
    """The figures of one sample; a family this process does not have is left out."""
    out: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        out[key] = out.get(key, 0.0) + value

    for metric in registry.collect():
        for s in metric.samples:
            name, labels, value = s.name, s.labels, float(s.value)
            if name == "elanus_proxy_req_count_total":
                add("requests", value)
                add("errors", 0.0 if labels.get("status") == "ok" else value)
            elif name == "elanus_proxy_req_latency_seconds_sum":
                add("latency_sum", value)
            elif name == "elanus_proxy_req_latency_seconds_count":
                add("latency_count", value)
            elif name.startswith("elanus_querynode_search_latency_seconds_"):
                if labels.get("scope") == "shard" and name.endswith(("_sum", "_count")):
                    add("search_" + name.rsplit("_", 1)[1], value)
            elif name == "process_resident_memory_bytes":
                out["rss"] = value
            elif name == "process_cpu_seconds_total":
                out["cpu"] = value
            elif name == "elanus_channel_tick_lag_seconds":
                out["tick_lag"] = max(out.get("tick_lag", 0.0), value)
            elif name == "elanus_channel_consumer_pending_messages":
                add("pending", value)
            elif name == "elanus_coord_segment_rows" and labels.get("state") == "Flushed":
                out["flushed_rows"] = value
            elif name == "elanus_coord_index_tasks":
                pending = labels.get("state") in ("Unissued", "InProgress")
                add("index_pending", value if pending else 0.0)
    return out


class MetricSamples:
    """The samples of this process, taken on a thread of their own until ``stop``."""

    def __init__(
        self,
        registry: CollectorRegistry = REGISTRY,
        interval_s: float = INTERVAL_S,
        keep: int = KEEP,
    ) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self._samples: collections.deque[Sample] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> MetricSamples:
        self.take()
        self._thread = threading.Thread(target=self._run, daemon=True, name="console-samples")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.take()

    def take(self) -> None:
        figures = read(self.registry)
        with self._lock:
            self._samples.append((time.time(), figures))

    def charts(self) -> dict[str, Any]:
        """Each chart this process has figures for: its points (Unix seconds, value)."""
        with self._lock:
            stale = not self._samples or time.time() - self._samples[-1][0] > FRESH_S
        if stale:
            self.take()
        with self._lock:
            samples = list(self._samples)
        latest = samples[-1][1] if samples else {}
        charts = []
        for chart in CHARTS:
            if chart.key not in latest:
                continue
            charts.append(
                {
                    "key": chart.key,
                    "title": chart.title,
                    "unit": chart.unit,
                    "points": _points(chart, samples),
                }
            )
        return {"interval_s": self.interval_s, "charts": charts}


def _points(chart: Chart, samples: list[Sample]) -> list[tuple[float, float]]:
    if chart.kind == "gauge":
        return [(t, f[chart.key] * chart.scale) for t, f in samples if chart.key in f]
    points = []
    for (t0, a), (t1, b) in zip(samples, samples[1:], strict=False):
        if chart.key not in b or t1 <= t0:
            continue
        change = b[chart.key] - a.get(chart.key, 0.0)  # a counter not there yet was at 0
        if chart.kind == "rate":
            points.append((t1, max(change, 0.0) / (t1 - t0) * chart.scale))
        else:  # ratio: a mean over the interval, none where nothing happened
            count = b.get(chart.per, 0.0) - a.get(chart.per, 0.0)
            if count > 0:
                points.append((t1, change / count * chart.scale))
    return points
