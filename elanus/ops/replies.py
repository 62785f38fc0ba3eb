"""The JSON replies of the client-facing operations, each declared once as a ``TypedDict``.

A reply is a plain dict on the wire and in the user's hands (pymilvus's ``MilvusClient``
returns dicts, and so does the SDK); these declarations only say which keys it has, so
the SDK that reads a reply, and an executor that builds one, are checked against the same
keys. Most mirror an ``elanus/api`` reply record as ``as_body`` writes it; the rest are
built by the proxy itself (``whoami``, ``health``, ``delete``). Values a user or a role
chose (a schema document, a session's ``meta``, index ``params``) stay open.
"""

from __future__ import annotations

from typing import Any, NotRequired, Required, TypedDict

PrimaryKey = int | str
"""A primary key value: an Int64 or a VarChar field's."""


# -- users and roles ------------------------------------------------------------------------


class WhoAmI(TypedDict):
    """``whoami``: the caller's credentials."""

    user: str
    roles: list[str]
    superuser: bool


class UserDescription(TypedDict):
    """``describe_user`` (``elanus.api.auth.UserDescription``)."""

    user_name: str
    roles: list[str]


class GrantEntry(TypedDict):
    """One grant of a role (``elanus.api.auth.GrantEntry``)."""

    role_name: str
    object_type: str
    object_name: str
    db_name: str
    privilege: str
    grantor_name: str


class RoleDescription(TypedDict):
    """``describe_role`` (``elanus.api.auth.RoleDescription``)."""

    role: str
    privileges: list[GrantEntry]


class PrivilegeGroupEntry(TypedDict):
    """One group of ``list_privilege_groups``'s ``groups``."""

    privilege_group: str
    privileges: list[str]


class PrivilegeGroups(TypedDict):
    """``list_privilege_groups``: custom groups, then the built-in ones."""

    groups: list[PrivilegeGroupEntry]


# -- cluster --------------------------------------------------------------------------------


class Session(TypedDict):
    """One live role of ``list_sessions`` (``SessionInfo.to_dict``); ``meta`` is what the
    role chose to publish (its ports, its health)."""

    role: str
    node_id: str
    address: str
    started_at: float
    pid: int
    host: str
    meta: dict[str, Any]
    uptime_s: float


class Sessions(TypedDict):
    sessions: list[Session]


class TaskFailure(TypedDict):
    """A supervised task that failed (``Failure.to_dict``)."""

    task: str
    error: str
    at: float
    restarts: int


class SupervisorHealth(TypedDict):
    status: str
    failures: list[TaskFailure]
    restarts: list[TaskFailure]


class UnhealthyRole(SupervisorHealth):
    """A role the coord counts as failing, and its failures."""

    role: str
    node_id: str


class ProxyHealth(TypedDict):
    """This proxy's part of ``health``; ``health`` is its supervisor's report."""

    node_id: str
    uptime_s: float
    ddl_pending: int
    ddl_executed: int
    cached_collections: int
    version: str
    health: NotRequired[SupervisorHealth]


class CoordHealth(TypedDict):
    """The coord's part of ``health`` (``elanus.api.coord.CoordHealth``)."""

    status: str
    unhealthy: list[UnhealthyRole]
    node_id: str
    ts: int
    uptime_s: float
    live_sessions: int


class CoordUnavailable(TypedDict):
    """The coord's part of ``health`` when it did not answer in time."""

    status: str
    error: dict[str, str]
    """The error, as ``ElanusError.to_dict`` writes it (``code``, ``message``)."""


class Health(TypedDict):
    """``health``: this proxy and the coord it talks to."""

    status: str
    proxy: ProxyHealth
    coord: CoordHealth | CoordUnavailable


class BackedUpCollection(TypedDict):
    """One collection of a backup (``backupfiles.summary``): ``loaded`` says whether a
    restore loads it again."""

    db: str
    name: str
    collection_id: int
    segments: int
    rows: int
    loaded: bool


class BackupCreated(TypedDict):
    """``create_backup`` (``elanus.api.backup.BackupCreated``)."""

    name: str
    location: str
    ts: int
    collections: list[BackedUpCollection]
    segments: int
    rows: int
    files: int
    bytes: int
    seconds: float


# -- collections and databases --------------------------------------------------------------


class FieldDocument(TypedDict, total=False):
    """One field of a schema document (``Field.to_dict``): what is unset is left out."""

    name: Required[str]
    type: Required[str]
    field_id: int
    description: str
    is_primary: bool
    auto_id: bool
    is_partition_key: bool
    is_clustering_key: bool
    dim: int
    max_length: int
    max_capacity: int
    element_type: str
    nullable: bool
    default_value: Any
    enable_analyzer: bool
    enable_match: bool
    analyzer_params: dict[str, Any]


class FunctionDocument(TypedDict, total=False):
    """One function of a schema document (``Function.to_dict``)."""

    name: Required[str]
    type: Required[str]
    input_field_names: Required[list[str]]
    output_field_names: Required[list[str]]
    description: str
    params: dict[str, Any]


class PartitionInfo(TypedDict):
    name: str
    partition_id: int
    created_ts: int


class CollectionDescription(TypedDict):
    """``describe_collection`` as the proxy answers it
    (``elanus.api.rootcoord.CollectionDescription``); ``schema`` is the schema document
    (``Schema.to_dict``)."""

    collection_id: int
    db: str
    name: str
    description: str
    schema: dict[str, Any]
    num_shards: int
    consistency_level: str
    properties: dict[str, str]
    created_ts: int
    vchannels: list[str]
    pchannels: list[str]
    partitions: list[PartitionInfo]
    aliases: list[str]
    field_properties: dict[str, dict[str, str]]
    index_properties: dict[str, dict[str, str]]


class AliasDescription(TypedDict):
    alias: str
    collection_name: str
    db_name: str


class AliasList(TypedDict):
    """``collection_name`` only when one was asked about, as pymilvus answers."""

    aliases: list[str]
    db_name: str
    collection_name: NotRequired[str]


class DatabaseDescription(TypedDict):
    """``describe_database``: the properties as text, as Milvus keeps them."""

    name: str
    db_id: int
    created_ts: int
    properties: dict[str, str]


class LoadProgress(TypedDict):
    """``get_load_state`` (``elanus.api.querycoord.LoadProgress``): the last three only
    of a collection that is loaded or loading."""

    state: str
    progress: int
    persisted_rows: int
    loaded_rows: int
    partition_ids: NotRequired[list[int] | None]
    memory_bytes: NotRequired[int]
    mapped_bytes: NotRequired[int]


# -- reads ----------------------------------------------------------------------------------


class SearchHit(TypedDict):
    """One hit of a ``search`` (and ``hybrid_search``) reply's ``results``; ``entity``
    holds its output fields, by name."""

    id: PrimaryKey
    distance: float
    entity: dict[str, Any]


# -- writes and segments --------------------------------------------------------------------


class DeleteResult(TypedDict):
    """``delete``: how many keys it deleted, at which timestamp (0: none matched)."""

    delete_count: int
    ts: int


class SegmentRecord(TypedDict):
    """One segment of ``get_segment_info`` (``elanus.api.datacoord.SegmentRecord``)."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    state: str
    max_rows: int
    allocated_rows: int
    num_rows: int
    created_ts: int
    last_expire_ts: int
    seal_ts: int | None
    flushed_ts: int | None
    dropped_ts: int | None
    start_seq: int | None
    checkpoint_seq: int | None
    checkpoint_ts: int | None
    min_ts: int | None
    max_ts: int | None
    path: str | None
    level: int
    compacted_from: list[int]
    last_alloc_at: float
    is_sorted: bool
    key_range: list[PrimaryKey] | None


class Segments(TypedDict):
    segments: list[SegmentRecord]


class Uploaded(TypedDict):
    """The answer of the ``upload`` DoPut: where the file went."""

    upload_id: str
    path: str
    bytes: int


# -- indexes --------------------------------------------------------------------------------


class FailedBuild(TypedDict):
    segment_id: int
    build_id: int
    reason: str | None


class IndexDescription(TypedDict):
    """One index of ``describe_index`` (``elanus.api.indexcoord.IndexDescription``);
    ``params`` its build parameters and stored settings."""

    index_name: str
    index_id: int
    field: str
    index_type: str
    metric_type: str
    params: dict[str, Any]
    state: str
    indexed_rows: int
    total_rows: int
    pending_tasks: int
    finished_tasks: int
    failed_tasks: list[FailedBuild]


class IndexDescriptions(TypedDict):
    indexes: list[IndexDescription]


class BuildTask(TypedDict):
    """A build task as an index node takes it (``elanus.api.indexnode.BuildIndex``);
    ``spec`` is the index's build specification."""

    build_id: int
    version: int
    segment_id: int
    partition_id: int
    collection_id: int
    field: str
    data_path: str
    out_dir: str
    spec: dict[str, Any]
    num_rows: int | None


class IndexClaim(TypedDict):
    """``claim_index_tasks`` (``elanus.api.indexcoord.Claimed``): tasks now held under a
    lease of ``lease_s`` seconds."""

    tasks: list[BuildTask]
    lease_s: float


class IndexLease(TypedDict):
    """``index_heartbeat`` (``elanus.api.indexcoord.Lease``)."""

    alive: bool
    tasks: list[int]


class IndexVerdict(TypedDict):
    """``report_index_task`` (``elanus.api.indexcoord.Verdict``)."""

    accepted: bool
    reason: NotRequired[str]


# -- the change stream ----------------------------------------------------------------------


class ChannelCoordinates(TypedDict):
    vchannel: str
    stream: str
    data_subject: str
    tick_subject: str


class WatchCoordinates(TypedDict):
    """``watch_collection``: what reading a collection's log needs."""

    collection: str
    collection_id: int
    schema: dict[str, Any]
    servers: str
    type_header: str
    ts_header: str
    vchannels: list[ChannelCoordinates]
