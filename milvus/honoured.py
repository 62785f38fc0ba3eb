"""What each served RPC honours of its request, field by field (``fields.py`` applies it):
databases, collections, partitions, aliases, load, indexes, segments, compaction, import,
users and roles, analyzers; the reads are in ``honoured_reads.py``, schemas and writes in
``honoured_data.py``. ``REQUESTS`` maps every served RPC to its request's table, and
``refusals_markdown`` writes what is refused for ``docs/milvus-compat.md``."""

from __future__ import annotations

from pymilvus.grpc_gen import feder_pb2, milvus_pb2

from elanus.fieldprops import WARMUP_KEYS
from elanus.milvus.fields import (
    BASE,
    DB,
    NAME,
    Table,
    Use,
    harmless,
    keys,
    nested,
    refused,
    serialized,
    use,
    with_db,
)
from elanus.milvus.honoured_data import (
    COLLECTION_PROPERTIES,
    COLLECTION_SCHEMA,
    DATABASE_PROPERTIES,
    FIELD_SCHEMA,
    FUNCTION_SCHEMA,
    WRITES,
)
from elanus.milvus.honoured_reads import READS

_NAMED = harmless("the collection is named (collection_name)")
_AS_OF = refused("reading metadata as of a timestamp")


# -- databases, collections, partitions, aliases ---------------------------------------------
_IN_MEMORY = refused("listing only what is loaded, ShowType InMemory")
_INDEX_PROPERTIES = keys(
    {
        "mmap.enabled": use(),
        "mmap_enabled": use(),
        "indexoffsetcache.enabled": harmless("stored and described, no effect"),
        "warmup": harmless("stored and described, no effect"),
    },
    use("any other key is refused with code 1100, naming it, as Milvus's proxy does"),
)
_FIELD_PROPERTIES = keys(
    {
        **dict.fromkeys(
            ("max_length", "max_capacity", "field.description", "mmap.enabled", "mmap_enabled"),
            use(),
        ),
        **dict.fromkeys(sorted(WARMUP_KEYS), harmless("stored and described, no effect")),
    },
    use("any other key is refused with code 1100, naming it, as Milvus's proxy does"),
)
_COLLECTION_PROPERTIES = keys(
    COLLECTION_PROPERTIES, harmless("stored and described, as Milvus does")
)
_DATABASE_PROPERTIES = keys(DATABASE_PROPERTIES, harmless("stored and described, as Milvus does"))
_ALTER_SCHEMA = milvus_pb2.AlterCollectionSchemaRequest
_BOUND_INDEX = use("the index of a function's output field (add_function_field), made after it")
_SCHEMA_ACTION = Table(
    _ALTER_SCHEMA.Action,
    {
        "add_request": nested(
            Table(
                _ALTER_SCHEMA.AddRequest,
                {
                    "field_infos": nested(
                        Table(
                            _ALTER_SCHEMA.FieldInfo,
                            {
                                "field_schema": nested(FIELD_SCHEMA),
                                "index_name": _BOUND_INDEX,
                                "extra_params": keys(
                                    {}, use("checked by the index, as CreateIndex's")
                                ),
                            },
                        ),
                        "one field: add_collection_field, or a function's output",
                    ),
                    "func_schema": nested(
                        FUNCTION_SCHEMA, "BM25; rows already written get its output"
                    ),
                    "do_physical_backfill": harmless(
                        "Elanus always writes a new function's output into the segments' "
                        "files (and computes it for rows held in memory)"
                    ),
                },
            )
        ),
        "drop_request": nested(
            Table(
                _ALTER_SCHEMA.DropRequest,
                {
                    "field_name": use(),
                    "field_id": use(),
                    "function_name": use(),
                    "drop_function_output_fields": use("must be true, as Milvus wants"),
                },
            )
        ),
    },
)
DDL = {
    "CreateDatabase": Table(
        milvus_pb2.CreateDatabaseRequest, with_db(properties=_DATABASE_PROPERTIES)
    ),
    "DropDatabase": Table(milvus_pb2.DropDatabaseRequest, with_db()),
    "ListDatabases": Table(milvus_pb2.ListDatabasesRequest, {"base": BASE}),
    "DescribeDatabase": Table(milvus_pb2.DescribeDatabaseRequest, with_db()),
    "AlterDatabase": Table(
        milvus_pb2.AlterDatabaseRequest,
        with_db(
            db_id=harmless("the database is named (db_name)"),
            properties=_DATABASE_PROPERTIES,
            delete_keys=use("a key that is not set is no change"),
        ),
    ),
    "CreateCollection": Table(
        milvus_pb2.CreateCollectionRequest,
        with_db(
            collection_name=NAME,
            schema=serialized(COLLECTION_SCHEMA),
            shards_num=use(),
            consistency_level=use(),
            properties=_COLLECTION_PROPERTIES,
            num_partitions=use(),
        ),
    ),
    "DropCollection": Table(milvus_pb2.DropCollectionRequest, with_db(collection_name=NAME)),
    "TruncateCollection": Table(
        milvus_pb2.TruncateCollectionRequest, with_db(collection_name=NAME)
    ),
    "HasCollection": Table(
        milvus_pb2.HasCollectionRequest, with_db(collection_name=NAME, time_stamp=_AS_OF)
    ),
    "DescribeCollection": Table(
        milvus_pb2.DescribeCollectionRequest,
        with_db(
            collection_name=NAME,
            collectionID=use("without collection_name, refused: name the collection"),
            time_stamp=_AS_OF,
        ),
    ),
    "ShowCollections": Table(
        milvus_pb2.ShowCollectionsRequest,
        with_db(time_stamp=_AS_OF, type=_IN_MEMORY, collection_names=use()),
    ),
    "RenameCollection": Table(
        milvus_pb2.RenameCollectionRequest, with_db(oldName=NAME, newName=NAME, newDBName=use())
    ),
    "AddCollectionField": Table(
        milvus_pb2.AddCollectionFieldRequest,
        with_db(collection_name=NAME, collectionID=_NAMED, schema=serialized(FIELD_SCHEMA)),
    ),
    "AlterCollectionSchema": Table(
        milvus_pb2.AlterCollectionSchemaRequest,
        with_db(collection_name=NAME, collectionID=_NAMED, action=nested(_SCHEMA_ACTION)),
    ),
    "AlterCollection": Table(
        milvus_pb2.AlterCollectionRequest,
        with_db(
            collectionID=_NAMED,
            collection_name=NAME,
            delete_keys=use("a key that is not set is no change"),
            properties=_COLLECTION_PROPERTIES,
        ),
    ),
    "AlterCollectionField": Table(
        milvus_pb2.AlterCollectionFieldRequest,
        with_db(
            collection_name=NAME,
            field_name=use(),
            delete_keys=use(),
            properties=_FIELD_PROPERTIES,
        ),
    ),
    "CreatePartition": Table(
        milvus_pb2.CreatePartitionRequest, with_db(collection_name=NAME, partition_name=NAME)
    ),
    "DropPartition": Table(
        milvus_pb2.DropPartitionRequest, with_db(collection_name=NAME, partition_name=NAME)
    ),
    "HasPartition": Table(
        milvus_pb2.HasPartitionRequest, with_db(collection_name=NAME, partition_name=NAME)
    ),
    "ShowPartitions": Table(
        milvus_pb2.ShowPartitionsRequest,
        with_db(collection_name=NAME, collectionID=_NAMED, partition_names=use(), type=_IN_MEMORY),
    ),
    "GetPartitionStatistics": Table(
        milvus_pb2.GetPartitionStatisticsRequest,
        with_db(collection_name=NAME, partition_name=NAME),
    ),
    "GetCollectionStatistics": Table(
        milvus_pb2.GetCollectionStatisticsRequest, with_db(collection_name=NAME)
    ),
    "CreateAlias": Table(milvus_pb2.CreateAliasRequest, with_db(collection_name=NAME, alias=NAME)),
    "AlterAlias": Table(milvus_pb2.AlterAliasRequest, with_db(collection_name=NAME, alias=NAME)),
    "DropAlias": Table(milvus_pb2.DropAliasRequest, with_db(alias=NAME)),
    "DescribeAlias": Table(milvus_pb2.DescribeAliasRequest, with_db(alias=NAME)),
    "ListAliases": Table(milvus_pb2.ListAliasesRequest, with_db(collection_name=use())),
}

# -- load, indexes, segments, compaction, import ---------------------------------------------
_LOAD = {
    "collection_name": NAME,
    "replica_number": use(),
    "resource_groups": refused("resource groups"),
    "refresh": use(),
    "load_fields": refused("loading some fields only"),
    "skip_load_dynamic_field": refused("leaving the dynamic field unloaded"),
    "load_params": keys({"load_priority": refused("load priorities")}),
}
_INDEX = {"collection_name": NAME, "field_name": use(), "index_name": use()}
_FLUSH_TARGETS = nested(
    Table(
        milvus_pb2.FlushAllTarget,
        {"db_name": use("else the call's database"), "collection_names": use("none: all")},
    )
)
_PROGRESS = {
    "base": BASE,
    "db_name": DB,
    "collection_name": NAME,
    "partition_names": use(),
}
OPS = {
    "LoadCollection": Table(milvus_pb2.LoadCollectionRequest, with_db(**_LOAD)),
    "LoadPartitions": Table(
        milvus_pb2.LoadPartitionsRequest, with_db(partition_names=use(), **_LOAD)
    ),
    "ReleaseCollection": Table(milvus_pb2.ReleaseCollectionRequest, with_db(collection_name=NAME)),
    "ReleasePartitions": Table(
        milvus_pb2.ReleasePartitionsRequest,
        with_db(collection_name=NAME, partition_names=use()),
    ),
    "GetLoadState": Table(milvus_pb2.GetLoadStateRequest, _PROGRESS),
    "GetLoadingProgress": Table(milvus_pb2.GetLoadingProgressRequest, _PROGRESS),
    "GetReplicas": Table(
        milvus_pb2.GetReplicasRequest,
        with_db(collectionID=use(), with_shard_nodes=use(), collection_name=use()),
    ),
    "CreateIndex": Table(
        milvus_pb2.CreateIndexRequest,
        with_db(
            extra_params=keys({}, use("checked by the index: an unknown parameter is refused")),
            **_INDEX,
        ),
    ),
    "DescribeIndex": Table(
        milvus_pb2.DescribeIndexRequest,
        with_db(
            timestamp=harmless("the state covers all data, so what came before it too"), **_INDEX
        ),
    ),
    "DropIndex": Table(
        milvus_pb2.DropIndexRequest,
        with_db(**_INDEX),
    ),
    "AlterIndex": Table(
        milvus_pb2.AlterIndexRequest,
        with_db(
            collection_name=NAME,
            index_name=use(),
            delete_keys=use(),
            extra_params=_INDEX_PROPERTIES,
        ),
    ),
    "GetIndexState": Table(milvus_pb2.GetIndexStateRequest, with_db(**_INDEX)),
    "GetIndexBuildProgress": Table(milvus_pb2.GetIndexBuildProgressRequest, with_db(**_INDEX)),
    "GetIndexStatistics": Table(
        milvus_pb2.GetIndexStatisticsRequest,
        with_db(
            collection_name=NAME,
            index_name=use(),
            timestamp=harmless("the statistics cover all data, so what came before it too"),
        ),
    ),
    "ListIndexedSegment": Table(
        feder_pb2.ListIndexedSegmentRequest,
        {"base": BASE, "collection_name": NAME, "index_name": use()},
    ),
    "Flush": Table(milvus_pb2.FlushRequest, with_db(collection_names=use())),
    "FlushAll": Table(milvus_pb2.FlushAllRequest, with_db(flush_targets=_FLUSH_TARGETS)),
    "GetFlushAllState": Table(
        milvus_pb2.GetFlushAllStateRequest,
        with_db(
            flush_all_ts=use(),
            flush_targets=_FLUSH_TARGETS,
            flush_all_tss=refused("flush timestamps per channel, of Milvus's replication"),
        ),
    ),
    "GetFlushState": Table(
        milvus_pb2.GetFlushStateRequest,
        {
            "segmentIDs": use(),
            "flush_ts": harmless("a flush is followed by the segments it sealed"),
            "db_name": DB,
            "collection_name": harmless("the segments are the collection's"),
        },
    ),
    "GetPersistentSegmentInfo": Table(
        milvus_pb2.GetPersistentSegmentInfoRequest,
        {"base": BASE, "dbName": DB, "collectionName": NAME, "states": use()},
    ),
    "GetQuerySegmentInfo": Table(
        milvus_pb2.GetQuerySegmentInfoRequest,
        {"base": BASE, "dbName": DB, "collectionName": NAME},
    ),
    "ManualCompaction": Table(
        milvus_pb2.ManualCompactionRequest,
        {
            "collectionID": _NAMED,
            "timetravel": refused("compacting as of a timestamp"),
            "majorCompaction": use("a clustering compaction, by the clustering key"),
            "collection_name": NAME,
            "db_name": DB,
            "partition_id": refused("compacting one partition"),
            "channel": refused("compacting one channel"),
            "segment_ids": refused("compacting chosen segments"),
            "l0Compaction": refused(
                "L0 compaction alone; its compaction applies deletes as it merges"
            ),
            "target_size": use(),
        },
    ),
    "GetCompactionState": Table(milvus_pb2.GetCompactionStateRequest, {"compactionID": use()}),
    "GetCompactionStateWithPlans": Table(
        milvus_pb2.GetCompactionPlansRequest,
        {
            "compactionID": use(),
            "db_name": DB,
            "collection_name": use("without compactionID: the collection's compactions"),
            "collection_id": refused("naming the collection by id; give collection_name"),
        },
    ),
    "Import": Table(
        milvus_pb2.ImportRequest,
        {
            "collection_name": NAME,
            "partition_name": use(),
            "channel_names": refused("importing into chosen channels"),
            "row_based": harmless("Milvus 2.4+ reads a file's format from its name too"),
            "files": use("read from the server's import roots"),
            "options": keys({"sep": use("the CSV separator")}),
            "db_name": DB,
            "clustering_info": refused(
                "clustering info for an import; compact(is_clustering=True) after it"
            ),
        },
    ),
    "GetImportState": Table(milvus_pb2.GetImportStateRequest, {"task": use()}),
    "ListImportTasks": Table(
        milvus_pb2.ListImportTasksRequest,
        {"collection_name": use(), "limit": use(), "db_name": DB},
    ),
}

# -- session, users, roles, privileges, analyzers --------------------------------------------
_NAME_ONLY = {"name": use()}
ROLE = Table(milvus_pb2.RoleEntity, {"name": use(), "description": harmless("roles go by name")})
PRIVILEGE = Table(milvus_pb2.PrivilegeEntity, _NAME_ONLY)
GRANTOR = Table(
    milvus_pb2.GrantorEntity,
    {
        "user": harmless("Milvus records the caller as the grantor"),
        "privilege": nested(PRIVILEGE),
    },
)
_GRANT = {
    "role": nested(ROLE),
    "object": nested(Table(milvus_pb2.ObjectEntity, _NAME_ONLY)),
    "object_name": use(),
    "db_name": use(),
}
_STAMPS = harmless("Milvus's proxy sets them itself")
_CREDENTIAL = {
    "base": BASE,
    "username": use(),
    "created_utc_timestamps": _STAMPS,
    "modified_utc_timestamps": _STAMPS,
    "description": refused("user descriptions"),
}
_OPERATE = use("grant or revoke")
ACCESS = {
    "Connect": Table(
        milvus_pb2.ConnectRequest,
        {"base": BASE, "client_info": harmless("who the client says it is; Milvus logs it")},
    ),
    "GetVersion": Table(milvus_pb2.GetVersionRequest, {}),
    "CheckHealth": Table(milvus_pb2.CheckHealthRequest, {}),
    "GetComponentStates": Table(milvus_pb2.GetComponentStatesRequest, {}),
    "GetMetrics": Table(
        milvus_pb2.GetMetricsRequest,
        {"base": BASE, "request": use('JSON: {"metric_type": "system_info"} only')},
    ),
    "AllocTimestamp": Table(milvus_pb2.AllocTimestampRequest, {"base": BASE}),
    "CreateCredential": Table(
        milvus_pb2.CreateCredentialRequest, {**_CREDENTIAL, "password": use()}
    ),
    "UpdateCredential": Table(
        milvus_pb2.UpdateCredentialRequest,
        {**_CREDENTIAL, "oldPassword": use(), "newPassword": use()},
    ),
    "DeleteCredential": Table(
        milvus_pb2.DeleteCredentialRequest, {"base": BASE, "username": use()}
    ),
    "ListCredUsers": Table(milvus_pb2.ListCredUsersRequest, {"base": BASE}),
    "SelectUser": Table(
        milvus_pb2.SelectUserRequest,
        {
            "base": BASE,
            "user": nested(Table(milvus_pb2.UserEntity, _NAME_ONLY)),
            "include_role_info": use(),
        },
    ),
    "CreateRole": Table(
        milvus_pb2.CreateRoleRequest,
        {
            "base": BASE,
            "entity": nested(
                Table(
                    milvus_pb2.RoleEntity,
                    {"name": use(), "description": refused("role descriptions")},
                )
            ),
        },
    ),
    "DropRole": Table(
        milvus_pb2.DropRoleRequest, {"base": BASE, "role_name": use(), "force_drop": use()}
    ),
    "OperateUserRole": Table(
        milvus_pb2.OperateUserRoleRequest,
        {"base": BASE, "username": use(), "role_name": use(), "type": use()},
    ),
    "SelectRole": Table(
        milvus_pb2.SelectRoleRequest,
        {"base": BASE, "role": nested(ROLE), "include_user_info": use()},
    ),
    "OperatePrivilege": Table(
        milvus_pb2.OperatePrivilegeRequest,
        {
            "base": BASE,
            "entity": nested(Table(milvus_pb2.GrantEntity, {**_GRANT, "grantor": nested(GRANTOR)})),
            "type": _OPERATE,
            "version": refused("versions of OperatePrivilege; use OperatePrivilegeV2"),
        },
    ),
    "OperatePrivilegeV2": Table(
        milvus_pb2.OperatePrivilegeV2Request,
        {
            "base": BASE,
            "role": nested(ROLE),
            "grantor": nested(GRANTOR),
            "type": _OPERATE,
            "db_name": use(),
            "collection_name": use(),
        },
    ),
    "SelectGrant": Table(
        milvus_pb2.SelectGrantRequest,
        {
            "base": BASE,
            "entity": nested(
                Table(
                    milvus_pb2.GrantEntity,
                    {**_GRANT, "grantor": harmless("grants are selected by role and object")},
                )
            ),
        },
    ),
    "CreatePrivilegeGroup": Table(
        milvus_pb2.CreatePrivilegeGroupRequest, {"base": BASE, "group_name": use()}
    ),
    "DropPrivilegeGroup": Table(
        milvus_pb2.DropPrivilegeGroupRequest, {"base": BASE, "group_name": use()}
    ),
    "OperatePrivilegeGroup": Table(
        milvus_pb2.OperatePrivilegeGroupRequest,
        {"base": BASE, "group_name": use(), "privileges": nested(PRIVILEGE), "type": use()},
    ),
    "ListPrivilegeGroups": Table(milvus_pb2.ListPrivilegeGroupsRequest, {"base": BASE}),
    "RunAnalyzer": Table(
        milvus_pb2.RunAnalyzerRequest,
        with_db(
            analyzer_params=use(),
            placeholder=use(),
            with_detail=use(),
            with_hash=use(),
            collection_name=use(),
            field_name=use(),
            analyzer_names=refused("multi-language analyzers"),
        ),
    ),
}

# -- snapshots (milvus/snapshots.py) ---------------------------------------------------------
SNAPSHOT_NAMED = with_db(name=use(), collection_name=NAME)
SNAPSHOTS: dict[str, Table] = {
    "CreateSnapshot": Table(
        milvus_pb2.CreateSnapshotRequest,
        {
            **SNAPSHOT_NAMED,
            "description": use(),
            "compaction_protection_seconds": refused(
                "protecting segments from compaction; a snapshot keeps its files through "
                "compaction anyway"
            ),
        },
    ),
    "DropSnapshot": Table(milvus_pb2.DropSnapshotRequest, SNAPSHOT_NAMED),
    "DescribeSnapshot": Table(milvus_pb2.DescribeSnapshotRequest, SNAPSHOT_NAMED),
    "ListSnapshots": Table(
        milvus_pb2.ListSnapshotsRequest, with_db(collection_name=use("else every collection's"))
    ),
    "RestoreSnapshot": Table(
        milvus_pb2.RestoreSnapshotRequest,
        {
            **SNAPSHOT_NAMED,
            "rewrite_data": harmless("a restore always writes the rows into new segments"),
            "target_db_name": use(),
            "target_collection_name": use(),
        },
    ),
    "GetRestoreSnapshotState": Table(
        milvus_pb2.GetRestoreSnapshotStateRequest, {"base": BASE, "job_id": use()}
    ),
    "ListRestoreSnapshotJobs": Table(
        milvus_pb2.ListRestoreSnapshotJobsRequest,
        with_db(collection_name=use("the target collection; else every job's")),
    ),
    "PinSnapshotData": Table(
        milvus_pb2.PinSnapshotDataRequest,
        {**SNAPSHOT_NAMED, "ttl_seconds": use("0: an hour")},
    ),
    "UnpinSnapshotData": Table(
        milvus_pb2.UnpinSnapshotDataRequest, {"base": BASE, "pin_id": use()}
    ),
}

REQUESTS: dict[str, Table] = {**READS, **WRITES, **DDL, **OPS, **ACCESS, **SNAPSHOTS}
"""The request table of every served RPC (the servicer refuses to start without one)."""


def refusals_markdown() -> str:
    """The fields and keys each served RPC refuses, as the list in
    ``docs/milvus-compat.md`` ("Fields refused"), kept equal to it by a test."""
    lines = []
    for rpc in sorted(REQUESTS):
        grouped: dict[tuple[str, str], list[str]] = {}
        for where, key, why in _refusals(REQUESTS[rpc], ""):
            grouped.setdefault((where, why), []).append(key)
        items = [
            f"`{where}`"
            + (
                " key" + "s" * (len(ks) > 1) + " " + ", ".join(f"`{k}`" for k in sorted(ks))
                if ks[0]
                else ""
            )
            + f" ({why})"
            for (where, why), ks in sorted(grouped.items())
        ]
        if items:
            lines.append(f"- `{rpc}`: " + "; ".join(items) + ".")
    return "\n".join(lines) + "\n"


def _refusals(
    table: Table, path: str, seen: frozenset[int] = frozenset()
) -> list[tuple[str, str, str]]:
    """(field path, key or "", why) of each refusal below ``table`` (the header's aside:
    the docs name those once)."""
    if id(table) in seen:
        return []
    seen = seen | {id(table)}
    out = []
    for name, rule in table.rules.items():
        where = f"{path}{name}"
        if rule is BASE:
            continue
        if rule.use is Use.REFUSED:
            out.append((where, "", rule.why))
        for inner in (rule.nested, rule.serialized):
            if inner is not None:
                out.extend(_refusals(inner, f"{where}.", seen))
        if rule.keys is not None:
            every = {**rule.keys.rules}
            out.extend((where, k, r.why) for k, r in every.items() if r.use is Use.REFUSED)
    return out
