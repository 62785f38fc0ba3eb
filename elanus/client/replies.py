"""What the SDK's methods return where it is not the action's reply as is
(``elanus.ops.replies``): pymilvus's views of a collection and of an index, and the
results the SDK puts together itself. Each a ``TypedDict``: the user gets the plain
dict pymilvus would give, and mypy knows its keys.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from elanus.functions import FunctionType
from elanus.ops.replies import CollectionDescription, IndexDescription, PrimaryKey
from elanus.schema import DataType


class MilvusField(TypedDict):
    """One field as pymilvus describes it: sizes, text settings and stored settings
    (``mmap_enabled``, warm-up) under ``params``; each flag only when it is set."""

    field_id: int | None
    name: str
    description: str
    type: DataType
    params: dict[str, Any]
    element_type: NotRequired[DataType]
    is_primary: NotRequired[bool]
    auto_id: NotRequired[bool]
    nullable: NotRequired[bool]
    is_partition_key: NotRequired[bool]
    is_clustering_key: NotRequired[bool]
    default_value: NotRequired[Any]
    is_function_output: NotRequired[bool]


class MilvusFunction(TypedDict):
    """A schema function as pymilvus describes it."""

    name: str
    description: str
    type: FunctionType
    input_field_names: list[str]
    output_field_names: list[str]
    params: dict[str, Any]


class DescribedCollection(CollectionDescription):
    """``describe_collection``: Elanus's description with pymilvus's keys beside it."""

    collection_name: str
    auto_id: bool
    fields: list[MilvusField]
    functions: list[MilvusFunction]
    enable_dynamic_field: bool
    consistency_level_name: str
    num_partitions: int
    enable_namespace: bool
    schema_version: int


class IndexInfo(IndexDescription):
    """``describe_index``: Elanus's description with pymilvus's ``field_name`` and
    ``pending_index_rows``; the build parameters are also flat at the top level (``M``,
    ``efConstruction``), as pymilvus shows them."""

    field_name: str
    pending_index_rows: NotRequired[int]


class IndexSpec(TypedDict):
    """An ``IndexParam`` as a dict (pymilvus's ``IndexParam.to_dict``); what is unset is
    left out."""

    field_name: str
    index_type: str
    index_name: NotRequired[str]
    metric_type: NotRequired[str]
    params: NotRequired[dict[str, Any]]


class ServerVersion(TypedDict):
    """``get_server_version(detail=True)``."""

    version: str
    deploy_mode: str


class PrivilegeGroup(TypedDict):
    """One group of ``list_privilege_groups``, as pymilvus gives it."""

    privilege_group: str
    privileges: tuple[str, ...]


class InsertResult(TypedDict):
    insert_count: int
    ids: list[PrimaryKey]
    ts: int


class UpsertResult(TypedDict):
    upsert_count: int
    ids: list[PrimaryKey]
    ts: int


class PartitionStats(TypedDict):
    """``get_partition_stats``: the rows of the partition's flushed segments."""

    row_count: int


class PutOptions(TypedDict, total=False):
    """The keys a DoPut write command may add to its target (``flight/putcommand.py``):
    a partial upsert's, and a staged write's (``stage_insert``)."""

    partial_update: bool
    field_ops: dict[str, str]
    stage: str
    stage_part: str
