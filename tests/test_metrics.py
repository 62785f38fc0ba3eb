"""Prometheus metrics (docs/metrics.md): a standalone's ``/metrics`` holds every family
after an insert and a search, the Grafana dashboard names only metrics that exist, and
``metrics_port = 0`` serves nothing."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import wait_for
from nats_settings import settings_on
from prometheus_client.parser import text_string_to_metric_families

from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.channels.runtime import metrics
from elanus.cli.host import RoleHost
from elanus.cli.roles import standalone_roles
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana-dashboard.json"
FAMILIES = {
    "elanus_proxy_req_count",
    "elanus_proxy_req_latency_seconds",
    "elanus_proxy_rate_limited",
    "elanus_proxy_failover",
    "elanus_proxy_flow_control_state",
    "elanus_querynode_search_latency_seconds",
    "elanus_querynode_wait_tsafe_seconds",
    "elanus_channel_tick_lag_seconds",
    "elanus_channel_consumer_pending_messages",
    "elanus_channel_consumer_headers_only",
    "elanus_coord_segments",
    "elanus_coord_segment_rows",
    "elanus_coord_load_progress_percent",
    "elanus_coord_index_tasks",
    "elanus_querynode_collection_memory_bytes",
    "elanus_querynode_collection_mapped_bytes",
    "process_resident_memory_bytes",
}


def scrape(url: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Family name -> its samples (name, labels, value), as Prometheus would read them."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return {
        family.name: [(s.name, s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[RoleHost]:
    settings = Settings(
        data_dir=str(tmp_path / "data"),
        flight_port=0,
        milvus_port=0,
        metrics_port=free_port(),
        session_ttl_s=2,
        timetick_interval_ms=50,
    )
    with RoleHost(settings, standalone_roles()) as host:
        yield host


def test_a_standalone_serves_every_family(standalone: RoleHost) -> None:
    assert standalone.metrics is not None
    url = standalone.info()["metrics_url"]
    assert url == f"http://127.0.0.1:{standalone.settings.metrics_port}/metrics"
    dim = 8
    with Client(str(standalone.flight_uri), timeout=60) as c:
        c.create_collection("m", dimension=dim, metric_type="L2")
        vectors = np.random.default_rng(0).random((100, dim), dtype=np.float32)
        c.insert(
            "m",
            pa.table(
                {
                    "id": pa.array(np.arange(100)),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
                }
            ),
        )
        c.flush("m")
        c.load_collection("m")
        hits = c.search("m", [vectors[3].tolist()], limit=3, consistency_level="Strong")
        assert hits[0][0]["id"] == 3
        with pytest.raises(ElanusError):
            c.describe_collection("no_such_collection")
        collection_id = c.describe_collection("m")["collection_id"]

        def memory_published() -> int | None:  # the query node's session, as of its keepalive
            held = int(c.get_load_state("m").get("memory_bytes", 0))
            return held if held >= vectors.nbytes else None

        wait_for(memory_published, what="the loaded collection's memory in get_load_state")

    def lagging_querynode() -> dict[str, list[tuple[str, dict[str, str], float]]] | None:
        found = scrape(url)
        lags = found.get("elanus_channel_tick_lag_seconds", [])
        return found if any(s[1]["role"] == "querynode" for s in lags) else None

    families = wait_for(lagging_querynode, what="a query node's tick lag")
    assert not FAMILIES - set(families), FAMILIES - set(families)

    requests = {(s[1]["function"], s[1]["status"]) for s in families["elanus_proxy_req_count"]}
    assert ("DoPut", "ok") in requests
    assert ("describe_collection", "COLLECTION_NOT_FOUND") in requests
    assert "shard" in {s[1]["scope"] for s in families["elanus_querynode_search_latency_seconds"]}
    segments = {s[1]["state"]: s[2] for s in families["elanus_coord_segments"]}
    assert segments["Flushed"] >= 1
    rows = {s[1]["state"]: s[2] for s in families["elanus_coord_segment_rows"]}
    assert rows["Flushed"] == 100  # flushed rows are counted; growing ones once flushed
    assert [s[2] for s in families["elanus_coord_load_progress_percent"]] == [100.0]
    pending = families["elanus_channel_consumer_pending_messages"]
    assert {s[1]["role"] for s in pending} == {"datanode", "querynode"}
    assert all(s[2] >= 0 for s in pending)
    handed = families["elanus_channel_consumer_headers_only"]  # which: a matter of timing
    assert {s[1]["role"] for s in handed} == {"datanode", "querynode"}
    assert {s[2] for s in handed} <= {0.0, 1.0}
    assert families["process_resident_memory_bytes"][0][2] > 0
    held = families["elanus_querynode_collection_memory_bytes"]
    assert [s[1]["collection_id"] for s in held] == [str(collection_id)]
    assert held[0][2] >= vectors.nbytes  # the vectors at least (in the column or the index)
    mapped = families["elanus_querynode_collection_mapped_bytes"]
    assert [s[2] for s in mapped] == [0.0]  # no mmap.enabled: nothing mapped

    # the dashboard names nothing a running standalone does not export (a counter no
    # request has touched yet exports its family, without samples)
    named = dashboard_metrics()
    assert named, "the dashboard names no metric"
    unknown = {n for n in named if not any(n in series_of(f, t) for f, t in types(url).items())}
    assert not unknown, f"the dashboard names unknown metrics: {unknown}"


def test_status_meta_carries_memory_and_channel_lag(standalone: RoleHost) -> None:
    """What ``elanus status`` shows comes from the sessions: memory, and per consumed
    channel its tick lag and unfetched messages."""
    with Client(str(standalone.flight_uri), timeout=60) as c:
        c.create_collection("s", dimension=4, metric_type="L2")
        c.load_collection("s")

        def querynode_channels() -> list[dict[str, object]] | None:
            sessions = c.list_sessions()
            qn = [s for s in sessions if s["role"] == "querynode"]
            channels = qn[0]["meta"].get("channels") if qn else None
            return list(channels.values()) if channels else None

        channels = wait_for(querynode_channels, what="the query node's channels in its session")
        figures = {"tick_lag_s", "flow_lag_s", "pending", "consumed"}
        assert all(set(ch) == figures for ch in channels)
        sessions = c.list_sessions()
    assert all(s["meta"]["rss_bytes"] > 0 for s in sessions)


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


def types(url: str) -> dict[str, str]:
    """Family name -> its type, as the scrape declares them."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def series_of(family: str, kind: str) -> set[str]:
    """The series names a family of that type is queried by."""
    return {family + suffix for suffix in SUFFIXES.get(kind, ("",))}


def dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's queries use."""
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in doc["panels"] for t in panel.get("targets", [])]
    return {m for e in exprs for m in re.findall(r"\b(?:elanus|process)_[a-z_]+\b", e)}


def test_metrics_port_zero_serves_nothing(nats_server: EmbeddedNats, tmp_path: Path) -> None:
    settings = settings_on(nats_server, tmp_path / "data", metrics_port=0)
    with RoleHost(settings, ["coord"]) as host:
        assert host.metrics is None
        assert host.info()["metrics_url"] is None


def test_a_refusal_is_counted_with_its_code() -> None:
    def count(function: str, status: str) -> float:
        return metrics.PROXY_REQUESTS.value((function, status))

    limited = metrics.PROXY_RATE_LIMITED.labels("test_refusal")
    before = limited._value.get()
    with pytest.raises(ElanusError), metrics.proxy_request("test_refusal"):
        raise ElanusError(ErrorCode.RATE_LIMITED, "over the rate")
    with pytest.raises(RuntimeError), metrics.proxy_request("test_refusal"):
        raise RuntimeError("[COLLECTION_NOT_FOUND] as a Flight error's text reads")
    with metrics.proxy_request("test_refusal") as outcome:
        outcome.fail(ErrorCode.TIMEOUT)
    assert limited._value.get() == before + 1
    assert count("test_refusal", "RATE_LIMITED") == 1
    assert count("test_refusal", "COLLECTION_NOT_FOUND") == 1
    assert count("test_refusal", "TIMEOUT") == 1
    assert metrics.error_code(ValueError("[NOT_A_CODE] x")) == "INTERNAL"


def test_a_busy_metrics_port_is_a_clear_error() -> None:
    first = metrics.MetricsServer("127.0.0.1", 0)
    try:
        with pytest.raises(ElanusError, match="metrics_port") as err:
            metrics.MetricsServer("127.0.0.1", first.port)
        assert err.value.code == ErrorCode.UNAVAILABLE
    finally:
        first.stop()


def test_queued_histograms_fold_into_prometheus_buckets() -> None:
    """The hot-path families queue their updates; a scrape folds them into the same
    buckets prometheus_client's own Histogram would give (``le`` is inclusive)."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

    from elanus.channels.runtime.hotmetrics import QueuedHistogram

    h = QueuedHistogram("test_queued_seconds", "test", ["scope"], buckets=(0.01, 0.1, 1))
    try:
        for v in (0.005, 0.01, 0.05, 0.5, 5.0):
            h.observe(("a",), v)
        h.observe(("b",), 0.2)
        registry = CollectorRegistry()
        registry.register(h)
        text = generate_latest(registry).decode()
        assert 'test_queued_seconds_bucket{le="0.01",scope="a"} 2.0' in text
        assert 'test_queued_seconds_bucket{le="0.1",scope="a"} 3.0' in text
        assert 'test_queued_seconds_bucket{le="1.0",scope="a"} 4.0' in text
        assert 'test_queued_seconds_bucket{le="+Inf",scope="a"} 5.0' in text
        assert 'test_queued_seconds_count{scope="b"} 1.0' in text
        sums = re.findall(r'test_queued_seconds_sum\{scope="a"\} (\S+)', text)
        assert [round(float(x), 6) for x in sums] == [5.565]
        assert h.count(("a",)) == 5
    finally:
        REGISTRY.unregister(h)
