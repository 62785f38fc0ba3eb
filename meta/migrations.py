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
]
