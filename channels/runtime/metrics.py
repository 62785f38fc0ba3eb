"""Every Prometheus metric family of Elanus, declared here once (docs/metrics.md).

Families are named in the spirit of Milvus's ``milvus_*`` ones. Counters and histograms
are updated where things happen (one ``inc`` or ``observe`` per request, nothing per
row); the gauges of state that lives elsewhere -- consumer lag, the coord's segments,
loads and index tasks -- are read at scrape time from the live objects that ``report``
them, so keeping them costs nothing between scrapes. All roles of a process share
prometheus_client's default registry (which also carries ``process_*``: memory, CPU,
open files), served on ``metrics_port`` by ``serve``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from wsgiref.simple_server import WSGIServer

import psutil
from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from elanus.channels.runtime import requestlog
from elanus.channels.runtime.hotmetrics import QueuedCounter, QueuedHistogram
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

disable_created_metrics()  # no ``*_created`` series beside every counter: noise to a dashboard
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# -- the proxy ------------------------------------------------------------------------------
# Updated on every request: queued, folded at scrape (elanus.channels.runtime.hotmetrics).
PROXY_REQUESTS = QueuedCounter(
    "elanus_proxy_req_count",
    "Requests a proxy answered, by function (DoAction name, DoPut, DoGet, ..., or the "
    "Milvus RPC) and status (ok, or the error code)",
    ["function", "status"],
)
PROXY_LATENCY = QueuedHistogram(
    "elanus_proxy_req_latency_seconds",
    "Time a proxy took to answer a request, by function (a DoGet until its stream starts)",
    ["function"],
    buckets=LATENCY_BUCKETS,
)
PROXY_RATE_LIMITED = Counter(
    "elanus_proxy_rate_limited",
    "Requests refused with RATE_LIMITED (a user's rate or flow control), by function",
    ["function"],
)
PROXY_FAILOVERS = Counter(
    "elanus_proxy_failover",
    "Reads a proxy sent to another replica because the first one failed, by function",
    ["function"],
)
FLOW_CONTROL_STATE = Gauge(
    "elanus_proxy_flow_control_state",
    "A proxy's DML flow control: 0 normal, 1 slowing writes down, 2 refusing them",
)

# -- the query node -------------------------------------------------------------------------
SEARCH_LATENCY = QueuedHistogram(
    "elanus_querynode_search_latency_seconds",
    "Time a query node took to search: scope shard (a delegator: wait, growing segments, "
    "workers, reduce) or segments (a worker's sealed segments)",
    ["scope"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_SCOPE_SHARD, SEARCH_SCOPE_SEGMENTS = ("shard",), ("segments",)
WAIT_TSAFE = QueuedHistogram(
    "elanus_querynode_wait_tsafe_seconds",
    "Time a read waited for its shard's tsafe to reach the guarantee timestamp",
    [],
    buckets=LATENCY_BUCKETS,
)
SEGMENTS_PRUNED = QueuedCounter(
    "elanus_querynode_segments_pruned",
    "Sealed segments a read (search, query, count) skipped: their clustering key range "
    "cannot match its filter",
    [],
)
NO_LABELS: tuple[str, ...] = ()


# -- read at scrape time ----------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    labels: tuple[str, ...]


CONSUMER = ("role", "node_id", "vchannel")
TICK_LAG = Family(
    "elanus_channel_tick_lag_seconds",
    "How far a channel consumer's last time tick (its tsafe) is behind the wall clock",
    CONSUMER,
)
CONSUMER_PENDING = Family(
    "elanus_channel_consumer_pending_messages",
    "Messages of a channel (data and ticks) a consumer has not fetched yet",
    CONSUMER,
)
CONSUMER_HEADERS_ONLY = Family(
    "elanus_channel_consumer_headers_only",
    "1 while a consumer reads the log's headers only and takes payloads from a proxy of "
    "its process (channels/handoff.py), 0 while it reads whole messages",
    CONSUMER,
)
SEGMENTS = Family("elanus_coord_segments", "Segments the coord tracks, by state", ("state",))
SEGMENT_ROWS = Family(
    "elanus_coord_segment_rows",
    "Rows in the coord's segments, by state (Flushed: stored in segment files)",
    ("state",),
)
LOAD_PROGRESS = Family(
    "elanus_coord_load_progress_percent",
    "Progress of each loaded (or loading) collection: loaded rows over persisted rows",
    ("collection_id",),
)
INDEX_TASKS = Family("elanus_coord_index_tasks", "Index build tasks, by state", ("state",))
LOADED_MEMORY = Family(
    "elanus_querynode_collection_memory_bytes",
    "Bytes a query node holds for each loaded collection: its segments' rows, indexes and "
    "row versions (sealed and growing)",
    ("node_id", "collection_id"),
)
LOADED_MAPPED = Family(
    "elanus_querynode_collection_mapped_bytes",
    "Bytes of files a query node maps for each loaded collection (mmap.enabled: indexes and "
    "raw columns on disk, paged in as searches touch them), beside the memory it holds",
    ("node_id", "collection_id"),
)
SCRAPED = (
    TICK_LAG,
    CONSUMER_PENDING,
    CONSUMER_HEADERS_ONLY,
    SEGMENTS,
    SEGMENT_ROWS,
    LOAD_PROGRESS,
    INDEX_TASKS,
    LOADED_MEMORY,
    LOADED_MAPPED,
)

Sample = tuple[Family, tuple[str, ...], float]


class Reporter(Protocol):
    def metric_samples(self) -> Iterable[Sample]:
        """This object's current values; called on the scrape's thread."""
        ...


_reporters: weakref.WeakSet[Any] = weakref.WeakSet()
_reporters_lock = threading.Lock()


def report(source: Reporter) -> None:
    """Have ``source.metric_samples()`` read at every scrape, until ``unreport`` (or until
    ``source`` is gone: only a weak reference is kept)."""
    with _reporters_lock:
        _reporters.add(source)


def unreport(source: Reporter) -> None:
    with _reporters_lock:
        _reporters.discard(source)


def reporters() -> list[Any]:
    with _reporters_lock:
        return list(_reporters)


class _ScrapeCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {f: GaugeMetricFamily(f.name, f.doc, labels=f.labels) for f in SCRAPED}
        for source in reporters():
            try:
                samples = list(source.metric_samples())
            except Exception:  # noqa: BLE001 - a source shutting down must not fail the scrape
                log.debug("metric samples of %r failed", source, exc_info=True)
                continue
            for family, labels, value in samples:
                families[family].add_metric(list(labels), value)
        yield from families.values()


REGISTRY.register(_ScrapeCollector())


# -- recording -------------------------------------------------------------------------------
class proxy_request:  # noqa: N801 - used as ``with proxy_request(...)``, like a function
    """Count and time one request of a proxy (and keep it in ``requestlog``, the recent
    and slow requests); RATE_LIMITED ones are also counted apart.
    ``as outcome`` gives the object whose ``fail(code)`` sets the status of a request that
    answers its error instead of raising it. A class, not a generator context manager:
    it runs on every request, the single-query search included."""

    __slots__ = ("function", "started", "status")

    def __init__(self, function: str) -> None:
        self.function = function
        self.status = "ok"
        self.started = 0.0

    def fail(self, code: ErrorCode | str) -> None:
        self.status = str(code)

    def __enter__(self) -> proxy_request:
        self.started = time.perf_counter()
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            self.fail(error_code(exc))
        seconds = time.perf_counter() - self.started
        PROXY_LATENCY.observe((self.function,), seconds)
        PROXY_REQUESTS.inc((self.function, self.status))
        requestlog.record(self.function, self.status, seconds)
        if self.status == ErrorCode.RATE_LIMITED:
            PROXY_RATE_LIMITED.labels(self.function).inc()


Outcome = proxy_request
"""What ``with proxy_request(...) as outcome`` gives (``outcome.fail(code)``)."""


def error_code(exc: BaseException) -> str:
    """An error's code: an ``ElanusError``'s, or the ``[CODE]`` a Flight error's text
    starts with (``elanus.wire.codec.to_flight_error``); INTERNAL for anything else."""
    if isinstance(exc, ElanusError):
        return str(exc.code)
    text = str(exc)
    if text.startswith("["):
        code = text[1 : text.find("]")]
        if code in ErrorCode.__members__:
            return code
    return str(ErrorCode.INTERNAL)


_SELF: psutil.Process | None = None


def rss_bytes() -> int:
    """This process's resident memory. Every role asks at each tick (its flow report): one
    ``psutil.Process`` is kept, as making one reads ``/proc`` for the start time again."""
    global _SELF
    me = _SELF
    if me is None or me.pid != os.getpid():  # first call, or a forked child
        me = _SELF = psutil.Process()
    return int(me.memory_info().rss)


# -- the endpoint ----------------------------------------------------------------------------
class MetricsServer:
    """``/metrics`` on ``host:port`` in a thread of its own, until ``stop``."""

    def __init__(self, host: str, port: int) -> None:
        try:
            self._httpd: WSGIServer | None
            self._httpd, self._thread = start_http_server(port, addr=host)
        except OSError as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"cannot serve metrics on {host}:{port} (setting metrics_port): {exc}",
            ) from None
        self.host = host
        self.port = int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
            self._thread.join(timeout=5)
