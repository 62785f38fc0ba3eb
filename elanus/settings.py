"""One settings object for every role: defaults < ``elanus.toml`` < ``ELANUS_*`` env < flags.

The TOML file is ``./elanus.toml`` unless ``ELANUS_CONFIG`` or ``--config`` names another; its
keys are the field names below (flat, or under an ``[elanus]`` table).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "ELANUS_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
SECRET_SUFFIXES = ("password", "secret_access_key")
"""Settings whose values are secrets: shown as set, never as they are."""
_S3_ROOT = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\x00]*)?")


@dataclass
class Settings:
    data_dir: str = "./elanus-data"
    """Root of everything a standalone server keeps: DuckDB catalog, NATS store, segments."""
    flight_host: str = "127.0.0.1"
    flight_port: int = 8815
    milvus_port: int = 19530
    """Port of the proxy's Milvus face (Milvus's gRPC ``MilvusService``, for pymilvus and the
    other Milvus SDKs), on ``flight_host``; 0: off (docs/milvus-compat.md)."""
    metrics_port: int = 0
    """Port of this process's Prometheus ``/metrics`` (docs/metrics.md), on ``flight_host``;
    all roles of the process share it. 0 (the default): off, because every process of a
    machine needs a port of its own (``run ROLE --metrics-port``) and a fixed default would
    collide; Milvus's is 9091, a good choice for a standalone (9092 beside ``make run``'s
    web console, which takes 9091)."""
    webui_port: int = 0
    """Port of the proxy's read-only web console (docs/console.md), on ``flight_host``, with
    the proxy's TLS files and users. 0 (the default): off, as ``metrics_port`` for the same
    reason; ``make run`` serves it on 9091."""
    slow_request_s: float = 1.0
    """A proxy request that takes longer is kept among its slow requests (``list_requests``,
    the console's Requests page), as Milvus's proxy logs its slow queries."""
    nats_url: str | None = None
    """An external NATS server, or the servers of a NATS cluster comma-separated
    (``nats://n1:4222,nats://n2:4222,nats://n3:4222``): each process connects to any live
    one and moves to another when it dies. When unset, standalone starts an embedded one."""
    nats_port: int = 0
    """Port of the embedded NATS server; 0 picks a free one."""
    stream_replicas: int = 1
    """How many NATS servers hold a copy of each stream and KV bucket Elanus creates (the
    DML log, sessions). 1 for a single server; 3 for a cluster, so the log survives the loss
    of one server. Existing streams with fewer are raised to it at start."""
    storage: str | None = None
    """Where segments, delta logs, statistics, index files and uploads live: a local path or
    ``s3://bucket/prefix`` (any S3-compatible service); defaults to ``<data_dir>/storage``.
    The catalog keeps paths relative to it, so a copied data dir or prefix works."""
    s3_endpoint: str | None = None
    """URL of an S3-compatible service (MinIO, Ceph, ``http://127.0.0.1:9000``); unset: AWS
    (or ``AWS_ENDPOINT_URL``)."""
    s3_region: str | None = None
    """S3 region; unset: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else ``us-east-1``."""
    s3_access_key_id: str | None = None
    """S3 access key; unset: ``AWS_ACCESS_KEY_ID``."""
    s3_secret_access_key: str | None = None
    """S3 secret key; unset: ``AWS_SECRET_ACCESS_KEY``. Pass it through the environment
    (``ELANUS_S3_SECRET_ACCESS_KEY``), never on a command line."""
    s3_allow_http: bool = False
    """Allow a plain-HTTP ``s3_endpoint`` (a development MinIO or moto server)."""
    num_pchannels: int = 16
    timetick_interval_ms: int = 200
    session_ttl_s: float = 6.0
    segment_max_rows: int = 1_000_000
    segment_max_bytes: int = 512 * 1024 * 1024
    segment_idle_s: float = 600.0
    max_request_bytes: int = 256 * 1024 * 1024
    max_json_depth: int = 64
    """How deeply a JSON request body (DoAction body, command, ticket) may nest arrays and
    objects; a deeper one is refused with INVALID_ARGUMENT. Process-wide."""
    bounded_staleness_ms: int = 1000
    """How far behind a Bounded read may be."""
    compaction_interval_s: float = 60.0
    """How often the automatic policy looks for small flushed segments to merge (0: off)."""
    retention_s: float = 600.0
    log_retention_s: float = 0.0
    """How long the log (the DML streams) keeps changes the datanodes already flushed, so
    a change stream (``client.watch``, ``spark.readStream``) can start or resume that far
    back; 0: the log is cut as soon as the data is flushed."""
    """Time-travel window: compaction keeps rows deleted less than this long ago."""
    gc_delay_s: float = 60.0
    """Files of dropped segments stay this long (readers may still have them open)."""
    orphan_grace_s: float = 3600.0
    """Files no catalog entry and no running task owns (a segment directory of a flush or
    compaction never reported, index files of a build that failed or was given up) stay
    this long after their last change before garbage collection removes them."""
    catalog_journal: bool = True
    """Journal every catalog change to a replicated JetStream stream (``stream_replicas``)
    before acknowledging it, with snapshots of the catalog in the storage, so a coord on
    another machine, or a standby, rebuilds the catalog (``meta/journal.py``)."""
    log_retry_window_s: float = 15.0
    """How long a write the log (NATS JetStream) did not take (DML, a catalog change) is
    sent again before it fails with UNAVAILABLE: long enough for a stream leader's election
    (at most 9 s), short enough that a cluster without a quorum answers clearly."""
    coord_lease_ttl_s: float = 3.0
    """How long the active coord's lease outlives its last renewal: a standby coord
    (``elanus run coord`` started again) takes over this long after the active one died."""
    housekeeping_interval_s: float = 60.0
    """How often the coord deletes the JetStream consumers of nodes whose sessions are
    gone (it also does at start and when a session ends); 0: only then."""
    query_node_wait_s: float = 5.0
    """How long a load with no query node running waits for one to appear (one may be just
    starting) before it fails with UNAVAILABLE."""
    query_memory_limit_bytes: int = 0
    """Memory a query node's loaded segments may take (``segments/querynode/admission.py``); 0: 90 %
    of what the system says is available at each load. A load past it is refused."""
    index_build_delay_s: float = 0.0
    """Index nodes wait this long before each build (for tests and demos of builder loss)."""
    max_parallel_syncs: int = 4
    """Syncs (segment and delta-log writes) one datanode channel runs at once; more wait
    for a slot, the channel is consumed meanwhile (``segments/flushcommon/syncmgr.py``)."""
    log_level: str = "WARNING"
    # -- security (docs/security.md) --------------------------------------------------------
    auth_enabled: bool = False
    """Every Flight call must carry a credential (basic auth handshake, then a bearer token)."""
    root_password: str | None = None
    """The ``root`` user's password on first start; unset: generated into
    ``<data_dir>/root_password`` (owner-only)."""
    token_ttl_s: float = 86_400.0
    """How long a bearer token from the handshake stays valid."""
    import_roots: str | None = None
    """Directories import files may be read from, separated by ``,``; unset:
    ``<data_dir>/import`` and ``<storage>/import`` (created at start). Relative import
    paths are taken under the first; uploads land in ``<storage>/import/uploads``, always
    readable (``elanus/importroots.py``, docs/security.md)."""
    tls_cert: str | None = None
    """PEM certificate chain of the Flight server; with ``tls_key`` it serves grpc+tls and
    advertises a ``grpc+tls://`` uri."""
    tls_key: str | None = None
    """PEM private key of ``tls_cert``."""
    tls_client_ca: str | None = None
    """PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS)."""
    nats_user: str | None = None
    """User the roles log in to NATS with (default ``elanus``). In cluster mode, the external
    server's (userinfo in ``nats_url`` works too); standalone requires it on its embedded
    server (docs/security.md)."""
    nats_password: str | None = None
    """Its password; unset in standalone: generated on first start into
    ``<data_dir>/nats/credentials.json`` (owner-only) and reused. Pass it to role processes
    through ``ELANUS_NATS_PASSWORD``, never on a command line."""
    max_action_bytes: int = 64 * 1024 * 1024
    """Largest DoAction body, DoGet ticket, or DoPut / DoExchange / GetFlightInfo command;
    a larger one is refused with REQUEST_TOO_LARGE from its length alone, before parsing.
    0: no limit. Bulk data travels in DoPut and DoExchange streams, not in bodies."""
    max_put_bytes: int = 4 * 1024 * 1024 * 1024
    """Most bytes one DoPut stream may carry, whatever its mode (atomic streams are also
    held to ``max_request_bytes``). 0: no limit."""
    max_put_batches: int = 1_000_000
    """Most messages (record batches) one DoPut stream may carry. 0: no limit."""
    dml_rate_per_user: float = 1_000.0
    """DML requests (inserts, upserts, deletes, imports, commits) per second per user; a
    burst of one second's worth passes at once. 0: unlimited. Far above an honest client's
    rate (a batch of rows is one request) yet a cap on a runaway loop."""
    dql_rate_per_user: float = 10_000.0
    """Search, query and read requests per second per user, with a burst of one second's
    worth. 0: unlimited. About twice what an empty Flight server answers on the 2-core
    benchmark machine (bench/README.md), so benchmarks never meet it."""

    # -- flow control (docs/protocol.md "Flow control", channels/flow.py) ---------------------
    flow_tick_lag_soft_s: float = 1.0
    """A consumer this far behind (its tsafe against the wall clock), beyond two tick
    intervals that ticking alone accounts for, has the writes to its vchannel held at the
    rate it takes them in, less what drains the excess (``flight/flowrate.py``): the lag
    converges here. A Strong read waits about the tick lag plus a tick interval."""
    flow_tick_lag_hard_s: float = 5.0
    """A consumer this far behind (beyond two tick intervals) refuses writes to its
    collection with RATE_LIMITED until it catches up. 0: tick lag is not watched. The
    default refuses only a runaway backlog (a loaded 2-core machine lags seconds at times);
    set soft/hard lower (e.g. 0.1/0.25 s, with ``timetick_interval_ms`` 50) to keep Strong
    reads under a second under the fastest writers, as tests/test_flow_control.py and
    ``bench/flow.py --tight`` do (bench/README.md)."""
    flow_pending_soft: int = 64
    """Messages (up to ~1 MB each) a consumer has not fetched yet past which writes slow
    down: a backlog shows here before it shows as tick lag."""
    flow_pending_hard: int = 256
    """Unfetched messages past which writes are refused. 0: not watched."""
    flow_memory_low: float = 0.85
    """A process whose resident memory passes this share of the machine's slows every
    write down (Milvus's memory low water level)."""
    flow_memory_high: float = 0.95
    """... and past this share refuses them (the high water level). 0: not watched."""
    flow_max_delay_s: float = 0.5
    """How long a proxy holds one write at most while throttled: a write whose turn at a
    held rate is further off is refused with RATE_LIMITED (the SDK sends it again); the
    other figures delay each write in proportion to how far between soft and hard they
    are."""

    # -- SQL over Flight SQL (docs/sql.md) ---------------------------------------------------
    sql_timeout_s: float = 300.0
    """How long one SQL statement may run, its result's streaming included (0: no limit)."""
    sql_memory_limit_mb: int = 1024
    """DuckDB memory one SQL statement may use, without spilling to disk (0: no limit)."""
    sql_max_result_mb: int = 1024
    """Bytes of result one SQL statement may send (0: no limit)."""
    sql_threads: int = 1
    """DuckDB threads per SQL statement."""
    sql_max_statements: int = 4
    """SQL statements one proxy runs at once; more are refused with RATE_LIMITED."""

    serving_processes: int = 1
    """Processes of a standalone that serve reads (docs/process-model.md): the first hosts
    every role; each further one hosts a proxy and a query node, shares the Milvus port
    (``SO_REUSEPORT``: the kernel spreads connections) and serves Flight on a port of its
    own. Their query nodes form one node group, on which every replica is copied whole, so
    a read is planned, searched and reduced in the process that received it. 1: one
    process, as before; 0: one per core this process may run on."""
    node_group: str = ""
    """The node group this process's query node belongs to (set by a standalone for its
    serving processes; empty: none). The coord places on a group as on one node."""
    serving_index: int = 0
    """Which serving process of its group this one is (0: the first, which hosts the
    coord); set by the standalone that starts it."""

    transport: str = "auto"
    """How roles reach each other: ``auto`` calls a role of the same process directly and
    others over NATS; ``nats`` sends every request over NATS, even within a process (a
    one-process stack then exercises the wire exactly as a cluster does)."""

    def __post_init__(self) -> None:
        if self.transport not in ("auto", "nats"):
            raise ValueError("transport must be 'auto' or 'nats'")
        if self.num_pchannels < 1:
            raise ValueError("num_pchannels must be at least 1")
        if self.timetick_interval_ms < 1:
            raise ValueError("timetick_interval_ms must be at least 1")
        if not 1 <= self.stream_replicas <= 5:
            raise ValueError("stream_replicas must be between 1 and 5 (JetStream's limit)")
        if not 0 <= self.serving_processes <= 64:
            raise ValueError("serving_processes must be between 0 (one per core) and 64")
        if self.node_group and not re.fullmatch(r"[a-z0-9-]{1,40}", self.node_group):
            raise ValueError("node_group: lower-case letters, digits and '-', at most 40")
        if self.node_group and self.transport != "auto":
            raise ValueError("a node group (serving_processes > 1) needs transport 'auto'")
        if self.max_parallel_syncs < 1:
            raise ValueError("max_parallel_syncs must be at least 1")
        for name in ("flight_port", "milvus_port", "metrics_port", "nats_port", "webui_port"):
            if not 0 <= getattr(self, name) < 65536:
                raise ValueError(
                    f"{name} must be a port number (0 to 65535), not {getattr(self, name)}"
                )
        if self.log_level.upper() not in LOG_LEVELS:
            raise ValueError(f"log_level {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        if self.slow_request_s <= 0:
            raise ValueError("slow_request_s must be positive")
        if self.max_json_depth < 2:
            raise ValueError("max_json_depth must be at least 2")
        for name in ("max_action_bytes", "max_put_bytes", "max_put_batches"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (no limit) or positive")
        for name in ("dml_rate_per_user", "dql_rate_per_user"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (unlimited) or positive")
        for soft, hard in (
            ("flow_tick_lag_soft_s", "flow_tick_lag_hard_s"),
            ("flow_pending_soft", "flow_pending_hard"),
            ("flow_memory_low", "flow_memory_high"),
        ):
            if getattr(self, soft) < 0 or getattr(self, hard) < 0:
                raise ValueError(f"{soft} and {hard} must be 0 (off) or positive")
            if getattr(self, hard) and getattr(self, soft) > getattr(self, hard):
                raise ValueError(f"{soft} must not be above {hard}")
        for name in ("orphan_grace_s", "housekeeping_interval_s", "query_node_wait_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or positive")
        for name in ("coord_lease_ttl_s", "log_retry_window_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.flow_max_delay_s < 0:
            raise ValueError("flow_max_delay_s must be 0 or positive")
        for name in ("sql_timeout_s", "sql_memory_limit_mb", "sql_max_result_mb"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (no limit) or positive")
        if self.sql_threads < 1 or self.sql_max_statements < 1:
            raise ValueError("sql_threads and sql_max_statements must be at least 1")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("TLS needs both tls_cert and tls_key")
        text = str(self.storage or "")
        scheme, sep, _ = text.partition("://")
        if sep and scheme.lower() != "s3":
            raise ValueError(
                f"storage {text!r}: Elanus stores in a local directory or on an S3-compatible "
                f"service (s3://bucket[/prefix]), not at a {scheme}:// url"
            )
        object_store = text.lower().partition(":")[0] in ("s3", "s3a", "gs", "az")
        if object_store and not _S3_ROOT.fullmatch(text):
            raise ValueError("storage: an object store is written s3://bucket[/prefix]")
        if self.tls_client_ca and not self.tls_cert:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_cert and tls_key too")

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    @property
    def storage_remote(self) -> bool:
        return bool(self.storage) and str(self.storage).startswith("s3://")

    @property
    def storage_uri(self) -> str:
        """The storage root as a location: ``s3://bucket/prefix`` or an absolute path."""
        if self.storage_remote:
            return str(self.storage).rstrip("/")
        return str(self.storage_path)

    @property
    def storage_path(self) -> Path:
        """The local storage root (only for a local ``storage``)."""
        if self.storage_remote:
            raise ValueError(f"storage {self.storage} is not a local path")
        return (
            Path(self.storage).expanduser().resolve()
            if self.storage
            else (self.data_path / "storage")
        )

    @property
    def catalog_path(self) -> Path:
        return self.data_path / "catalog.duckdb"

    @property
    def nats_store_path(self) -> Path:
        return self.data_path / "nats"

    @property
    def flight_uri(self) -> str:
        host = "127.0.0.1" if self.flight_host in ("0.0.0.0", "") else self.flight_host
        return f"{self.flight_scheme}://{host}:{self.flight_port}"

    @property
    def flight_scheme(self) -> str:
        """``grpc+tls`` when the proxy serves TLS (``tls_cert``), else ``grpc``."""
        return "grpc+tls" if self.tls_cert else "grpc"

    @property
    def webui_scheme(self) -> str:
        """``https`` when the proxy serves TLS (the console uses the same files), else ``http``."""
        return "https" if self.tls_cert else "http"

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["storage"] = self.storage_uri
        d["data_dir"] = str(self.data_path)
        return d

    def shown(self) -> dict[str, Any]:
        """``to_dict`` fit to show (``elanus config show``, ``describe_config``): with the
        Flight uri, every secret that is set as ``***``. A URL's userinfo is the caller's
        to drop (``channels.natsauth.redact_url``)."""
        d = self.to_dict()
        d["flight_uri"] = self.flight_uri
        for key in [k for k in d if k.endswith(SECRET_SUFFIXES) and d[k]]:
            d[key] = "***"  # set, never shown
        return d


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) stays on this machine."""
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _coerce(name: str, raw: Any, annotation: Any) -> Any:
    text = str(annotation)
    try:
        if "int" in text and "str" not in text:
            return int(raw)
        if "float" in text:
            return float(raw)
        if "bool" in text:
            return str(raw).lower() in ("1", "true", "yes", "on")
    except (TypeError, ValueError):
        raise ValueError(f"setting {name}: cannot read {raw!r} as {text}") from None
    return None if raw in ("", None) and "None" in text else str(raw)


def load_settings(config_file: str | os.PathLike[str] | None = None, **flags: Any) -> Settings:
    """Merge the four layers; ``flags`` set to ``None`` leave lower layers in force."""
    values: dict[str, Any] = {}
    known = {f.name: f.type for f in fields(Settings)}
    path = Path(config_file or os.environ.get(f"{ENV_PREFIX}CONFIG", "elanus.toml"))
    if path.is_file():
        with path.open("rb") as fh:
            try:
                doc = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{path} is not TOML: {exc}") from None
        doc = doc.get("elanus", doc)
        unknown = sorted(set(doc) - set(known))
        if unknown:
            raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}")
        values.update(doc)
    elif config_file:
        raise ValueError(f"config file {path} does not exist")
    for name in known:
        env = os.environ.get(ENV_PREFIX + name.upper())
        if env is not None:
            values[name] = env
    values.update({k: v for k, v in flags.items() if v is not None})
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
    typed = {k: _coerce(k, v, known[k]) for k, v in values.items()}
    return Settings(**typed)
