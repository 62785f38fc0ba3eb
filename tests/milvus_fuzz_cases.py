"""The cases of the Milvus-port malformed-request suite (tests/test_milvus_fuzz.py), as
plain data: the shared vocabulary, a harmless request for every served RPC, and the cases
generated from those (the raw bytes and the names). The bad values of the data, search and
DDL RPCs are in ``milvus_fuzz_values.py``.

Each case is one ``MilvusService`` call a hostile or careless client could make, sent as
raw bytes through a bare gRPC channel (no pymilvus client code in between): the RPC's name,
the request bytes, and what it may answer.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass
from typing import Any

from fuzz_cases import NAMES
from pymilvus.grpc_gen import common_pb2, feder_pb2, milvus_pb2, schema_pb2

DIM = 4
MAIN = "mfz"
"""The collection every case reads, or must leave as it is when it writes (80 rows)."""
MAIN_ROWS = 80
BIG = "mfzbig"
"""Where the harmless writes go, so they never change the row count of ``MAIN``."""
ABSENT = "mfz_absent"
NEVER = "mfz_never"
"""A collection name the bad CreateCollection cases use: none of them may create it."""
VEC = [0.1, 0.2, 0.3, 0.4]

INVALID = frozenset({1100})
"""Milvus's ParameterInvalid: what bad input answers."""
NOT_FOUND = frozenset({100, 200, 700, 800, 1600})
"""Collection, partition, index, database, alias not found."""


@dataclass(frozen=True)
class Case:
    """One malformed call and what it may answer.

    ``codes``: the Milvus status codes allowed (empty: any code of a coded refusal).
    ``ok``: the call may also succeed. ``words``: text the refusal must hold. ``raw``: the
    bytes may not parse, so gRPC's own error status is an answer too.
    """

    id: str
    rpc: str
    payload: bytes
    codes: frozenset[int] = frozenset()
    ok: bool = False
    words: tuple[str, ...] = ()
    raw: bool = False


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kv(**pairs: Any) -> list[common_pb2.KeyValuePair]:
    """Key-value pairs as pymilvus sends them: text as is, anything else as JSON."""
    return [
        common_pb2.KeyValuePair(key=k, value=v if isinstance(v, str) else json.dumps(v))
        for k, v in pairs.items()
    ]


def placeholder(vectors: list[list[float]] | None = None, raw: list[bytes] | None = None) -> bytes:
    """A ``PlaceholderGroup`` of float vectors (or of the raw values given)."""
    import numpy as np

    values = raw if raw is not None else [np.asarray(v, "<f4").tobytes() for v in vectors or [VEC]]
    group = common_pb2.PlaceholderGroup(
        placeholders=[
            common_pb2.PlaceholderValue(
                tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=values
            )
        ]
    )
    return group.SerializeToString()


def field_schema(name: str, dtype: int, **params: Any) -> schema_pb2.FieldSchema:
    extra = {k: v for k, v in params.items() if k in ("is_primary_key", "nullable", "autoID")}
    type_params = {k: str(v) for k, v in params.items() if k not in extra}
    return schema_pb2.FieldSchema(
        name=name, data_type=dtype, type_params=kv(**type_params), **extra
    )


def collection_schema(*extra: schema_pb2.FieldSchema, dim: Any = DIM) -> bytes:
    """A valid schema (id, vec) plus ``extra`` fields, serialized as CreateCollection takes it."""
    fields = [
        field_schema("id", schema_pb2.Int64, is_primary_key=True),
        field_schema("vec", schema_pb2.FloatVector, dim=dim),
        *extra,
    ]
    return schema_pb2.CollectionSchema(name="s", fields=fields).SerializeToString()


def float_column(name: str, rows: int, dim: int = DIM) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.FloatVector,
        field_name=name,
        vectors=schema_pb2.VectorField(
            dim=dim, float_vector=schema_pb2.FloatArray(data=[0.5] * (rows * dim))
        ),
    )


def long_column(name: str, values: list[int]) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.Int64,
        field_name=name,
        scalars=schema_pb2.ScalarField(long_data=schema_pb2.LongArray(data=values)),
    )


def string_column(name: str, values: list[str]) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.VarChar,
        field_name=name,
        scalars=schema_pb2.ScalarField(string_data=schema_pb2.StringArray(data=values)),
    )


def json_column(name: str, values: list[bytes]) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.JSON,
        field_name=name,
        scalars=schema_pb2.ScalarField(json_data=schema_pb2.JSONArray(data=values)),
    )


def insert_columns(ids: list[int]) -> list[schema_pb2.FieldData]:
    """Every column of a valid insert of ``ids`` into a fuzz collection."""
    n = len(ids)
    return [
        long_column("id", ids),
        float_column("vec", n),
        string_column("title", [f"t{i}" for i in ids]),
        json_column("doc", [b'{"a": 1}'] * n),
    ]


def search_request(**over: Any) -> milvus_pb2.SearchRequest:
    """A valid search of ``MAIN`` as pymilvus sends it; ``over`` replaces fields."""
    fields: dict[str, Any] = {
        "collection_name": MAIN,
        "dsl": "",
        "dsl_type": common_pb2.BoolExprV1,
        "placeholder_group": placeholder(),
        "search_params": kv(anns_field="vec", topk=3, metric_type="L2", params="{}"),
        "nq": 1,
    }
    fields.update(over)
    return milvus_pb2.SearchRequest(**fields)


def hybrid_request(subs: int = 2, **over: Any) -> milvus_pb2.HybridSearchRequest:
    fields: dict[str, Any] = {
        "collection_name": MAIN,
        "requests": [search_request() for _ in range(subs)],
        "rank_params": kv(strategy="rrf", params={"k": 60}, limit=3),
    }
    fields.update(over)
    return milvus_pb2.HybridSearchRequest(**fields)


# -- a harmless, well-formed request for every served RPC -----------------------------------
# Each is refused, if at all, for a reason that is not its shape (an absent collection),
# and harmless should it run: destructive RPCs name absent objects, writes go to BIG.
def _role(name: str) -> milvus_pb2.RoleEntity:
    return milvus_pb2.RoleEntity(name=name)


def _grant(role: str) -> milvus_pb2.GrantEntity:
    return milvus_pb2.GrantEntity(
        role=_role(role),
        object=milvus_pb2.ObjectEntity(name="Collection"),
        object_name=MAIN,
        db_name="default",
        grantor=milvus_pb2.GrantorEntity(privilege=milvus_pb2.PrivilegeEntity(name="Search")),
    )


M = milvus_pb2
BASE: dict[str, Any] = {
    "AddCollectionField": M.AddCollectionFieldRequest(
        collection_name=ABSENT,
        schema=schema_pb2.FieldSchema(
            name="fz_added", data_type=schema_pb2.Int64, nullable=True
        ).SerializeToString(),
    ),
    "AlterCollectionSchema": M.AlterCollectionSchemaRequest(
        collection_name=ABSENT,
        action=M.AlterCollectionSchemaRequest.Action(
            drop_request=M.AlterCollectionSchemaRequest.DropRequest(field_name="fz_added")
        ),
    ),
    "AllocTimestamp": M.AllocTimestampRequest(),
    "AlterAlias": M.AlterAliasRequest(collection_name=ABSENT, alias="mfz_alias"),
    "AlterCollection": M.AlterCollectionRequest(
        collection_name=MAIN, properties=kv(**{"mmap.enabled": "true"})
    ),
    "AlterCollectionField": M.AlterCollectionFieldRequest(
        collection_name=MAIN, field_name="title", properties=kv(**{"mmap.enabled": "false"})
    ),
    "AlterIndex": M.AlterIndexRequest(
        collection_name=MAIN, extra_params=kv(**{"mmap.enabled": "true"})
    ),
    "AlterDatabase": M.AlterDatabaseRequest(
        db_name="mfzdb_absent", properties=kv(**{"database.max.collections": "5"})
    ),
    "CheckHealth": M.CheckHealthRequest(),
    "Connect": M.ConnectRequest(client_info=common_pb2.ClientInfo(sdk_type="fuzz")),
    "CreateAlias": M.CreateAliasRequest(collection_name=ABSENT, alias="mfz_alias"),
    "CreateCollection": M.CreateCollectionRequest(
        collection_name="mfz_new", schema=collection_schema(), shards_num=1
    ),
    "CreateCredential": M.CreateCredentialRequest(username="mfz_user", password=b64("fz-pw-123")),
    "CreateDatabase": M.CreateDatabaseRequest(db_name="mfzdb"),
    "CreateIndex": M.CreateIndexRequest(
        collection_name=ABSENT, field_name="vec",
        extra_params=kv(index_type="FLAT", metric_type="L2"),
    ),
    "CreatePartition": M.CreatePartitionRequest(collection_name=ABSENT, partition_name="p1"),
    "CreatePrivilegeGroup": M.CreatePrivilegeGroupRequest(group_name="mfz_group"),
    "CreateRole": M.CreateRoleRequest(entity=_role("mfz_role")),
    "Delete": M.DeleteRequest(collection_name=MAIN, expr="id in [999999]"),
    "DeleteCredential": M.DeleteCredentialRequest(username="mfz_absent_user"),
    "DescribeAlias": M.DescribeAliasRequest(alias="mfz_absent_alias"),
    "DescribeCollection": M.DescribeCollectionRequest(collection_name=MAIN),
    "DescribeDatabase": M.DescribeDatabaseRequest(db_name="default"),
    "DescribeIndex": M.DescribeIndexRequest(collection_name=MAIN),
    "DropAlias": M.DropAliasRequest(alias="mfz_absent_alias"),
    "DropCollection": M.DropCollectionRequest(collection_name=ABSENT),
    "DropDatabase": M.DropDatabaseRequest(db_name="mfzdb_absent"),
    "DropIndex": M.DropIndexRequest(collection_name=ABSENT, field_name="vec"),
    "DropPartition": M.DropPartitionRequest(collection_name=ABSENT, partition_name="p1"),
    "DropPrivilegeGroup": M.DropPrivilegeGroupRequest(group_name="mfz_absent_group"),
    "DropRole": M.DropRoleRequest(role_name="mfz_absent_role"),
    "Flush": M.FlushRequest(collection_names=[ABSENT]),
    "GetCollectionStatistics": M.GetCollectionStatisticsRequest(collection_name=MAIN),
    "GetCompactionState": M.GetCompactionStateRequest(compactionID=1),
    "GetCompactionStateWithPlans": M.GetCompactionPlansRequest(compactionID=1),
    "GetComponentStates": M.GetComponentStatesRequest(),
    "FlushAll": M.FlushAllRequest(flush_targets=[M.FlushAllTarget(collection_names=[ABSENT])]),
    "GetFlushAllState": M.GetFlushAllStateRequest(flush_all_ts=1),
    "GetIndexBuildProgress": M.GetIndexBuildProgressRequest(collection_name=MAIN),
    "GetIndexState": M.GetIndexStateRequest(collection_name=MAIN),
    "GetIndexStatistics": M.GetIndexStatisticsRequest(collection_name=MAIN),
    "GetMetrics": M.GetMetricsRequest(request='{"metric_type": "system_info"}'),
    "ListIndexedSegment": feder_pb2.ListIndexedSegmentRequest(collection_name=MAIN),
    "GetFlushState": M.GetFlushStateRequest(segmentIDs=[1]),
    "GetImportState": M.GetImportStateRequest(task=1),
    "GetLoadState": M.GetLoadStateRequest(collection_name=MAIN),
    "GetLoadingProgress": M.GetLoadingProgressRequest(collection_name=MAIN),
    "GetPartitionStatistics": M.GetPartitionStatisticsRequest(
        collection_name=MAIN, partition_name="_default"
    ),
    "GetPersistentSegmentInfo": M.GetPersistentSegmentInfoRequest(collectionName=MAIN),
    "GetQuerySegmentInfo": M.GetQuerySegmentInfoRequest(collectionName=MAIN),
    "GetReplicas": M.GetReplicasRequest(collection_name=MAIN),
    "GetVersion": M.GetVersionRequest(),
    "HasCollection": M.HasCollectionRequest(collection_name=MAIN),
    "HasPartition": M.HasPartitionRequest(collection_name=MAIN, partition_name="_default"),
    "HybridSearch": hybrid_request(),
    "Import": M.ImportRequest(collection_name=ABSENT, files=["/nonexistent/a.parquet"]),
    "Insert": M.InsertRequest(collection_name=BIG, fields_data=insert_columns([1000]), num_rows=1),
    "ListAliases": M.ListAliasesRequest(),
    "ListCredUsers": M.ListCredUsersRequest(),
    "ListDatabases": M.ListDatabasesRequest(),
    "ListImportTasks": M.ListImportTasksRequest(),
    "ListPrivilegeGroups": M.ListPrivilegeGroupsRequest(),
    "LoadCollection": M.LoadCollectionRequest(collection_name=ABSENT),
    "LoadPartitions": M.LoadPartitionsRequest(collection_name=ABSENT, partition_names=["p1"]),
    "ManualCompaction": M.ManualCompactionRequest(collection_name=ABSENT),
    "OperatePrivilege": M.OperatePrivilegeRequest(entity=_grant("mfz_absent_role")),
    "OperatePrivilegeGroup": M.OperatePrivilegeGroupRequest(
        group_name="mfz_absent_group", privileges=[milvus_pb2.PrivilegeEntity(name="Query")]
    ),
    "OperatePrivilegeV2": M.OperatePrivilegeV2Request(
        role=_role("mfz_absent_role"),
        grantor=milvus_pb2.GrantorEntity(privilege=milvus_pb2.PrivilegeEntity(name="Search")),
        db_name="default",
        collection_name=MAIN,
    ),
    "OperateUserRole": M.OperateUserRoleRequest(username="mfz_absent_user", role_name="public"),
    "Query": M.QueryRequest(collection_name=MAIN, expr="id < 3"),
    "ReleaseCollection": M.ReleaseCollectionRequest(collection_name=ABSENT),
    "ReleasePartitions": M.ReleasePartitionsRequest(collection_name=ABSENT, partition_names=["p"]),
    "RenameCollection": M.RenameCollectionRequest(oldName=ABSENT, newName="mfz_absent2"),
    "RunAnalyzer": M.RunAnalyzerRequest(placeholder=[b"hello fuzzy world"]),
    "Search": search_request(),
    "SelectGrant": M.SelectGrantRequest(entity=milvus_pb2.GrantEntity(role=_role("public"))),
    "SelectRole": M.SelectRoleRequest(role=_role("public")),
    "SelectUser": M.SelectUserRequest(user=milvus_pb2.UserEntity(name="root")),
    "ShowCollections": M.ShowCollectionsRequest(),
    "ShowPartitions": M.ShowPartitionsRequest(collection_name=MAIN),
    "TruncateCollection": M.TruncateCollectionRequest(collection_name=ABSENT),
    "UpdateCredential": M.UpdateCredentialRequest(
        username="mfz_absent_user", oldPassword=b64("fz-pw-123"), newPassword=b64("fz-pw-456")
    ),
    "Upsert": M.UpsertRequest(collection_name=BIG, fields_data=insert_columns([1001]), num_rows=1),
    "CreateSnapshot": M.CreateSnapshotRequest(collection_name=ABSENT, name="mfz_snap"),
    "DropSnapshot": M.DropSnapshotRequest(collection_name=MAIN, name="mfz_absent"),
    "DescribeSnapshot": M.DescribeSnapshotRequest(collection_name=MAIN, name="mfz_absent"),
    "ListSnapshots": M.ListSnapshotsRequest(collection_name=MAIN),
    "RestoreSnapshot": M.RestoreSnapshotRequest(
        collection_name=MAIN, name="mfz_absent", target_collection_name=ABSENT
    ),
    "GetRestoreSnapshotState": M.GetRestoreSnapshotStateRequest(job_id=1),
    "ListRestoreSnapshotJobs": M.ListRestoreSnapshotJobsRequest(collection_name=MAIN),
    "PinSnapshotData": M.PinSnapshotDataRequest(collection_name=MAIN, name="mfz_absent"),
    "UnpinSnapshotData": M.UnpinSnapshotDataRequest(pin_id=1),
}  # fmt: skip
WRITES = frozenset(
    {
        "Insert", "Upsert", "Delete", "Import", "DropCollection", "RenameCollection",
        "DropPartition", "ReleaseCollection", "ReleasePartitions", "DropIndex",
        "AlterCollection", "AlterCollectionField", "AlterIndex", "ManualCompaction",
        "AlterCollectionSchema",
    }
)  # fmt: skip
"""RPCs that could change ``MAIN``: after any of them is refused, its row count is checked."""
_FOUND = NOT_FOUND | INVALID | {1, 10, 702, 1602}
"""How a base may be refused: not found, invalid (a name that is not there), already
exists (1, 702, 1602), not supported (10)."""


def base_cases() -> list[Case]:
    """Every base request is well formed: it succeeds, or names a missing object."""
    return [
        Case(f"base/{rpc}", rpc, message.SerializeToString(), codes=_FOUND, ok=True)
        for rpc, message in BASE.items()
    ]


# -- bytes that are not the message -------------------------------------------------------
def raw_cases(served: list[str]) -> list[Case]:
    """For every served RPC: its base message cut in half, random bytes, a string field with
    bytes that are not UTF-8, and a length that runs past the end. Protobuf refuses what
    does not parse (gRPC's own status); what parses is an odd request, answered as any."""
    rng = random.Random(33)
    out = []
    for rpc in served:
        good = BASE[rpc].SerializeToString()
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 96)))
        for label, payload in [
            ("truncated", good[: len(good) // 2]),
            ("random", noise),
            ("not-utf8", b"\x12\x03\xff\xfe\xfd" + good),  # field 2 (a name in most) as text
            ("overrun", b"\x12\x7f" + b"a" * 8),  # a length past the end of the message
        ]:
            out.append(Case(f"raw/{rpc}/{label}", rpc, payload, ok=True, raw=True))
    return out


# -- names: the Flight suite's (unicode, NUL, control characters, paths, length) -----------
_SPOTS: list[tuple[str, str, Any]] = [
    ("create_collection", "CreateCollection", lambda n: M.CreateCollectionRequest(
        collection_name=n, schema=collection_schema())),
    ("field", "CreateCollection", lambda n: M.CreateCollectionRequest(
        collection_name=NEVER, schema=collection_schema(field_schema(n, schema_pb2.Int64)))),
    ("create_partition", "CreatePartition", lambda n: M.CreatePartitionRequest(
        collection_name=MAIN, partition_name=n)),
    ("create_database", "CreateDatabase", lambda n: M.CreateDatabaseRequest(db_name=n)),
    ("create_alias", "CreateAlias", lambda n: M.CreateAliasRequest(
        collection_name=MAIN, alias=n)),
    ("index_name", "CreateIndex", lambda n: M.CreateIndexRequest(
        collection_name=ABSENT, field_name="title", index_name=n,
        extra_params=kv(index_type="INVERTED"))),
    ("role", "CreateRole", lambda n: M.CreateRoleRequest(entity=_role(n))),
    ("user", "CreateCredential", lambda n: M.CreateCredentialRequest(
        username=n, password=b64("fz-pw-123"))),
    ("privilege_group", "CreatePrivilegeGroup", lambda n: M.CreatePrivilegeGroupRequest(
        group_name=n)),
    ("has_collection", "HasCollection", lambda n: M.HasCollectionRequest(collection_name=n)),
    ("db", "ShowCollections", lambda n: M.ShowCollectionsRequest(db_name=n)),
    ("output_field", "Query", lambda n: M.QueryRequest(
        collection_name=MAIN, expr="id < 3", output_fields=[n])),
    ("partition", "Search", lambda n: search_request(partition_names=[n])),
    ("insert_into", "Insert", lambda n: M.InsertRequest(
        collection_name=n, fields_data=insert_columns([2000]), num_rows=1)),
]  # fmt: skip
_LOOKUPS = {"has_collection", "db", "insert_into", "index_name"}
"""Spots where Milvus may answer an odd name as one it does not know."""


def name_cases() -> list[Case]:
    out = []
    for spot, rpc, make in _SPOTS:
        for label, name in NAMES:
            codes = INVALID | NOT_FOUND if spot in _LOOKUPS else INVALID
            # Milvus reads an empty db_name as "default", and trims a group's name
            ok = (spot, label) in {("db", "empty"), ("privilege_group", "spaces")}
            payload = make(name).SerializeToString()
            out.append(Case(f"name/{spot}/{label}", rpc, payload, codes=codes, ok=ok))
    return out
