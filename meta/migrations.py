"""Versioned schema of the coord's DuckDB file. Append new versions; never edit old ones."""

from __future__ import annotations

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "catalog, TSO and ID allocator",
        [
            # Persisted counters: the TSO's upper bound and the ID allocator's high-water mark.
            "CREATE TABLE counters (name VARCHAR PRIMARY KEY, value UBIGINT NOT NULL)",
            """CREATE TABLE databases (
                db_id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, properties VARCHAR,
                created_ts UBIGINT NOT NULL, dropped_ts UBIGINT)""",
            """CREATE TABLE collections (
                collection_id BIGINT PRIMARY KEY, db_id BIGINT NOT NULL, name VARCHAR NOT NULL,
                description VARCHAR, schema_json VARCHAR NOT NULL, num_shards INTEGER NOT NULL,
                consistency_level VARCHAR NOT NULL, properties VARCHAR NOT NULL,
                created_ts UBIGINT NOT NULL, dropped_ts UBIGINT)""",
            """CREATE TABLE partitions (
                partition_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL,
                name VARCHAR NOT NULL, created_ts UBIGINT NOT NULL, dropped_ts UBIGINT)""",
            """CREATE TABLE vchannels (
                collection_id BIGINT NOT NULL, shard INTEGER NOT NULL, vchannel VARCHAR NOT NULL,
                pchannel VARCHAR NOT NULL, PRIMARY KEY (collection_id, shard))""",
        ],
    ),
    (
        2,
        "segments, channel checkpoints and channel assignment",
        [
            """CREATE TABLE segments (
                segment_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL,
                partition_id BIGINT NOT NULL, vchannel VARCHAR NOT NULL, state VARCHAR NOT NULL,
                max_rows BIGINT NOT NULL, allocated_rows BIGINT NOT NULL DEFAULT 0,
                num_rows BIGINT NOT NULL DEFAULT 0, created_ts UBIGINT NOT NULL,
                last_expire_ts UBIGINT NOT NULL DEFAULT 0, seal_ts UBIGINT, flushed_ts UBIGINT,
                dropped_ts UBIGINT, start_seq BIGINT, checkpoint_seq BIGINT,
                checkpoint_ts UBIGINT, min_ts UBIGINT, max_ts UBIGINT, path VARCHAR,
                level INTEGER NOT NULL DEFAULT 0, compacted_from VARCHAR,
                last_alloc_at DOUBLE)""",
            """CREATE TABLE channel_checkpoints (
                vchannel VARCHAR PRIMARY KEY, seq BIGINT NOT NULL, ts UBIGINT NOT NULL)""",
            """CREATE TABLE channel_watch (
                vchannel VARCHAR PRIMARY KEY, collection_id BIGINT NOT NULL,
                node_id VARCHAR NOT NULL, assigned_ts UBIGINT NOT NULL)""",
        ],
    ),
    (
        3,
        "loaded collections",
        [
            "CREATE TABLE query_loads (collection_id BIGINT PRIMARY KEY, partitions VARCHAR)",
        ],
    ),
    (
        4,
        "query distribution",
        [
            """CREATE TABLE query_distribution (
                segment_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL,
                node_id VARCHAR NOT NULL)""",
            """CREATE TABLE query_channels (
                vchannel VARCHAR PRIMARY KEY, collection_id BIGINT NOT NULL,
                node_id VARCHAR NOT NULL)""",
        ],
    ),
    (
        5,
        "index service: indexes and their build tasks (seed 002)",
        [
            """CREATE TABLE indexes (
                index_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL,
                field_name VARCHAR NOT NULL, index_name VARCHAR NOT NULL,
                spec_json VARCHAR NOT NULL, created_ts UBIGINT NOT NULL,
                deleted BOOLEAN NOT NULL DEFAULT false)""",
            """CREATE TABLE index_tasks (
                build_id BIGINT PRIMARY KEY, index_id BIGINT NOT NULL,
                collection_id BIGINT NOT NULL, partition_id BIGINT NOT NULL,
                segment_id BIGINT NOT NULL, num_rows BIGINT NOT NULL, data_path VARCHAR NOT NULL,
                state VARCHAR NOT NULL, version INTEGER NOT NULL DEFAULT 0, node_id VARCHAR,
                fail_reason VARCHAR, file_paths VARCHAR NOT NULL DEFAULT '[]',
                mark_deleted BOOLEAN NOT NULL DEFAULT false,
                recycled BOOLEAN NOT NULL DEFAULT false)""",
        ],
    ),
    (
        6,
        "bulk import jobs",
        [
            """CREATE TABLE import_jobs (
                job_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL, db VARCHAR,
                collection VARCHAR, partition_id BIGINT, write_id VARCHAR,
                units VARCHAR NOT NULL, options VARCHAR NOT NULL, state VARCHAR NOT NULL,
                progress DOUBLE NOT NULL DEFAULT 0, rows BIGINT NOT NULL DEFAULT 0,
                segment_ids VARCHAR NOT NULL DEFAULT '[]', reason VARCHAR,
                reason_code VARCHAR, node_id VARCHAR, commit_ts UBIGINT,
                created_ts UBIGINT NOT NULL, finished_ts UBIGINT)""",
        ],
    ),
    (
        7,
        "users, roles and grants (Milvus RBAC) and the bearer-token secret",
        [
            """CREATE TABLE users (
                name VARCHAR PRIMARY KEY, hash VARCHAR NOT NULL, pw_version INTEGER NOT NULL)""",
            "CREATE TABLE roles (name VARCHAR PRIMARY KEY)",
            """CREATE TABLE user_roles (
                user_name VARCHAR NOT NULL, role VARCHAR NOT NULL,
                PRIMARY KEY (user_name, role))""",
            """CREATE TABLE grants (
                role VARCHAR NOT NULL, object_type VARCHAR NOT NULL,
                object_name VARCHAR NOT NULL, db_name VARCHAR NOT NULL,
                privilege VARCHAR NOT NULL, grantor VARCHAR NOT NULL,
                PRIMARY KEY (role, object_type, object_name, db_name, privilege))""",
            "CREATE TABLE auth_secret (value VARCHAR NOT NULL)",
        ],
    ),
    (
        8,
        "collection aliases",
        [
            # An alias names one live collection of its database; dropping it deletes the row.
            """CREATE TABLE aliases (
                db_id BIGINT NOT NULL, alias VARCHAR NOT NULL, collection_id BIGINT NOT NULL,
                created_ts UBIGINT NOT NULL, PRIMARY KEY (db_id, alias))""",
        ],
    ),
    (
        9,
        "segment paths relative to the storage root",
        [
            # Absolute paths (older versions) keep only their part below the storage root,
            # whose layout is fixed (elanus/layout.py): a copied data dir then still works.
            r"""UPDATE segments
                SET path = regexp_extract(
                    path, '(collections/[0-9]+/[0-9]+/[0-9]+/data\.lance)/?$', 1)
                WHERE path IS NOT NULL
                  AND regexp_matches(path, '^(/|[A-Za-z]:|[a-z0-9]+://)')
                  AND regexp_matches(path, 'collections/[0-9]+/[0-9]+/[0-9]+/data\.lance/?$')""",
        ],
    ),
    (
        10,
        "custom privilege groups (Milvus 2.5+)",
        [
            "CREATE TABLE privilege_groups (name VARCHAR PRIMARY KEY)",
            """CREATE TABLE privilege_group_members (
                group_name VARCHAR NOT NULL, privilege VARCHAR NOT NULL,
                PRIMARY KEY (group_name, privilege))""",
        ],
    ),
    (
        11,
        "in-memory replicas of loaded collections",
        [
            "ALTER TABLE query_loads ADD COLUMN replica_number INTEGER NOT NULL DEFAULT 1",
            """CREATE TABLE query_replicas (
                replica_id BIGINT PRIMARY KEY, collection_id BIGINT NOT NULL,
                nodes VARCHAR NOT NULL)""",
            # The distribution is written at each change and never read back (a coord
            # placed again after a restart writes it anew): recreated with the replica.
            "DROP TABLE query_distribution",
            "DROP TABLE query_channels",
            """CREATE TABLE query_distribution (
                segment_id BIGINT NOT NULL, replica_id BIGINT NOT NULL,
                collection_id BIGINT NOT NULL, node_id VARCHAR NOT NULL,
                PRIMARY KEY (segment_id, replica_id))""",
            """CREATE TABLE query_channels (
                vchannel VARCHAR NOT NULL, replica_id BIGINT NOT NULL,
                collection_id BIGINT NOT NULL, node_id VARCHAR NOT NULL,
                PRIMARY KEY (vchannel, replica_id))""",
        ],
    ),
    (
        12,
        "collection snapshots (Milvus 2.6's create_snapshot)",
        [
            # A snapshot is metadata: the collection's shape and the segments holding its rows
            # at ``ts``; garbage collection keeps those segments' files (meta/snapshots.py).
            # A dropped snapshot keeps its row (``dropped_at``) while a pin on it lives.
            """CREATE TABLE snapshots (
                snapshot_id BIGINT PRIMARY KEY, name VARCHAR NOT NULL,
                collection_id BIGINT NOT NULL, db VARCHAR NOT NULL, collection VARCHAR NOT NULL,
                description VARCHAR NOT NULL, ts UBIGINT NOT NULL, created_at DOUBLE NOT NULL,
                shape VARCHAR NOT NULL, dropped_at DOUBLE)""",
            """CREATE TABLE snapshot_segments (
                snapshot_id BIGINT NOT NULL, segment_id BIGINT NOT NULL,
                partition_id BIGINT NOT NULL, path VARCHAR NOT NULL, num_rows BIGINT NOT NULL,
                PRIMARY KEY (snapshot_id, segment_id))""",
            """CREATE TABLE snapshot_pins (
                pin_id BIGINT PRIMARY KEY, snapshot_id BIGINT NOT NULL,
                expires_at DOUBLE NOT NULL)""",
            """CREATE TABLE snapshot_restores (
                job_id BIGINT PRIMARY KEY, snapshot VARCHAR NOT NULL, source_db VARCHAR NOT NULL,
                source_collection VARCHAR NOT NULL, db VARCHAR NOT NULL,
                collection VARCHAR NOT NULL, started_at DOUBLE NOT NULL)""",
        ],
    ),
    (
        13,
        "segment levels as Milvus numbers them, and whether a segment's rows are sorted",
        [
            # Every segment Elanus writes is L1 (Milvus's SegmentLevel: Legacy 0, L0 1,
            # L1 2, L2 3); older catalogs wrote 0 for flushed and 1 for compacted ones.
            "UPDATE segments SET level = 2",
            # Rows sorted by primary key: only what is written from now on (a compaction
            # rewrites an older segment sorted).
            "ALTER TABLE segments ADD COLUMN is_sorted BOOLEAN NOT NULL DEFAULT false",
        ],
    ),
    (
        14,
        "a clustering compaction's segments: the range of the clustering key each holds",
        ["ALTER TABLE segments ADD COLUMN key_range VARCHAR"],  # JSON [min, max]
    ),
]
