"""Databases, collections, aliases, partitions and vchannels in the coord's DuckDB file.

Every method runs on the database thread (``Database.run``), so the catalog is changed by
one writer at a time. Dropped objects keep their rows with ``dropped_ts`` set, so later
garbage collection can find their segments; names are unique among live objects only.

An alias is a second name of a collection in the same database (Milvus's rules): it never
equals a collection's name, a collection with aliases cannot be dropped or moved to another
database, and everything that looks a collection up by name (``require_collection``)
accepts an alias, except drop and rename, which refuse one by name.

Past 600 lines: one concept, the names and shapes of the catalog's objects. Databases,
collections (their schema changes included), aliases and partitions refer to each other in
every check (an alias may not shadow a collection, a partition key refuses partitions, a
drop needs no aliases left), and all of them change on one writer; split apart, each part
would read the others' tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import duckdb

from elanus.channels.dml import pchannel_name, vchannel_name
from elanus.dbproperties import MAX_COLLECTIONS as MAX_COLLECTIONS_KEY
from elanus.dbproperties import max_collections
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.functions import Function, check_functions
from elanus.mmapsettings import public
from elanus.partitionkey import key_partition_names
from elanus.properties import MAX_PROPERTIES
from elanus.schema import DEFAULT_DB, DEFAULT_PARTITION, DYNAMIC_FIELD, MAX_FIELDS, Field, Schema

MAX_PARTITIONS = 1024
MAX_COLLECTIONS = 65536
FIRST_FIELD_ID = 100


class Catalog:
    def __init__(
        self, con: duckdb.DuckDBPyConnection, alloc_id: Callable[[int], int], num_pchannels: int
    ) -> None:
        self.con = con
        self.alloc_id = alloc_id
        self.num_pchannels = num_pchannels

    # -- databases --------------------------------------------------------------------------
    def ensure_default_database(self, ts: int) -> None:
        if self._db_row(DEFAULT_DB) is None:
            self.con.execute(
                "INSERT INTO databases VALUES (?, ?, '{}', ?, NULL)",
                [self.alloc_id(1), DEFAULT_DB, ts],
            )

    def _db_row(self, name: str) -> tuple[Any, ...] | None:
        return self.con.execute(
            "SELECT db_id, name FROM databases WHERE name = ? AND dropped_ts IS NULL", [name]
        ).fetchone()

    def db_id(self, name: str) -> int:
        row = self._db_row(name)
        if row is None:
            raise ElanusError(ErrorCode.DATABASE_NOT_FOUND, f"database {name!r} does not exist")
        return int(row[0])

    def create_database(self, name: str, properties: dict[str, str], ts: int) -> int:
        if self._db_row(name) is not None:
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, f"database {name!r} already exists")
        db_id = self.alloc_id(1)
        self.con.execute(
            "INSERT INTO databases VALUES (?, ?, ?, ?, NULL)",
            [db_id, name, json.dumps(properties, sort_keys=True), ts],
        )
        return db_id

    def describe_database(self, name: str) -> dict[str, Any]:
        """Name, id, creation timestamp and properties (text to text), as Milvus's
        ``describe_database`` answers; DATABASE_NOT_FOUND for one that does not exist."""
        row = self.con.execute(
            "SELECT db_id, name, created_ts, properties FROM databases"
            " WHERE name = ? AND dropped_ts IS NULL",
            [name],
        ).fetchone()
        if row is None:
            raise ElanusError(ErrorCode.DATABASE_NOT_FOUND, f"database {name!r} does not exist")
        return {
            "db_id": int(row[0]),
            "name": row[1],
            "created_ts": int(row[2]),
            "properties": json.loads(row[3] or "{}"),
        }

    def alter_database_properties(
        self, name: str, changes: dict[str, str], dropped: list[str]
    ) -> None:
        """Set ``changes`` and remove ``dropped`` in a database's properties (checked by
        the proxy); a key dropped that is not set is no change, as in Milvus."""
        described = self.describe_database(name)
        props = {k: v for k, v in described["properties"].items() if k not in dropped}
        props |= changes
        if len(props) > MAX_PROPERTIES:
            raise invalid(
                f"alter_database_properties: database {name!r} would have {len(props)} "
                f"properties; the limit is {MAX_PROPERTIES}"
            )
        self.con.execute(
            "UPDATE databases SET properties = ? WHERE db_id = ?",
            [json.dumps(props, sort_keys=True), described["db_id"]],
        )

    def drop_database(self, name: str, ts: int) -> None:
        if name == DEFAULT_DB:
            raise invalid("the default database cannot be dropped")
        db_id = self.db_id(name)
        if self.list_collections(name):
            raise invalid(f"database {name!r} still has collections; drop them first")
        self.con.execute("UPDATE databases SET dropped_ts = ? WHERE db_id = ?", [ts, db_id])

    def _check_max_collections(self, db: str) -> None:
        """Milvus's refusal of a collection past the database's ``database.max.collections``."""
        limit = max_collections(self.describe_database(db)["properties"])
        if limit is not None and len(self.list_collections(db)) >= limit:
            raise ElanusError(
                ErrorCode.COLLECTION_LIMIT_EXCEEDED,
                f"exceeded the limit number of collections[dbName={db}][limit={limit}] "
                f"({MAX_COLLECTIONS_KEY})",
            )

    def list_databases(self) -> list[str]:
        rows = self.con.execute(
            "SELECT name FROM databases WHERE dropped_ts IS NULL ORDER BY created_ts"
        ).fetchall()
        return [r[0] for r in rows]

    # -- collections ------------------------------------------------------------------------
    def _collection_id(self, db: str, name: str) -> int | None:
        row = self.con.execute(
            "SELECT collection_id FROM collections WHERE db_id = ? AND name = ? "
            "AND dropped_ts IS NULL",
            [self.db_id(db), name],
        ).fetchone()
        return int(row[0]) if row else None

    def require_collection(self, db: str, name: str) -> int:
        """The collection called ``name``, or that the alias ``name`` stands for."""
        cid = self._collection_id(db, name)
        if cid is None:
            cid = self._alias_target(db, name)
        if cid is None:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_FOUND,
                f"collection {name!r} does not exist in database {db!r}",
            )
        return cid

    def has_collection(self, db: str, name: str) -> bool:
        return self._collection_id(db, name) is not None or self._alias_target(db, name) is not None

    def list_collections(self, db: str) -> list[str]:
        rows = self.con.execute(
            "SELECT name FROM collections WHERE db_id = ? AND dropped_ts IS NULL "
            "ORDER BY created_ts",
            [self.db_id(db)],
        ).fetchall()
        return [r[0] for r in rows]

    def create_collection(
        self,
        db: str,
        name: str,
        schema: Schema,
        *,
        num_shards: int,
        consistency_level: str,
        properties: dict[str, str],
        description: str,
        ts: int,
        num_partitions: int | None = None,
    ) -> dict[str, Any]:
        """``num_partitions`` (a partition key collection) makes ``_default_0`` ..
        ``_default_{n-1}`` instead of ``_default``."""
        db_id = self.db_id(db)
        if self._collection_id(db, name) is not None:
            raise ElanusError(
                ErrorCode.COLLECTION_ALREADY_EXISTS,
                f"collection {name!r} already exists in database {db!r}",
            )
        self._refuse_alias_name(db, name, "create a collection named")
        live = self.con.execute(
            "SELECT count(*) FROM collections WHERE dropped_ts IS NULL"
        ).fetchone()
        if live and live[0] >= MAX_COLLECTIONS:
            raise ElanusError(ErrorCode.LIMIT_EXCEEDED, f"at most {MAX_COLLECTIONS} collections")
        self._check_max_collections(db)
        number_fields(schema)
        cid = self.alloc_id(1)
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(
                "INSERT INTO collections VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                [
                    cid,
                    db_id,
                    name,
                    description,
                    schema.to_json(),
                    num_shards,
                    consistency_level,
                    json.dumps(properties, sort_keys=True),
                    ts,
                ],
            )
            for shard, pchannel in enumerate(self._pick_pchannels(num_shards)):
                self.con.execute(
                    "INSERT INTO vchannels VALUES (?, ?, ?, ?)",
                    [cid, shard, vchannel_name(pchannel, cid, shard), pchannel],
                )
            names = key_partition_names(num_partitions) if num_partitions else [DEFAULT_PARTITION]
            for partition in names:
                self._insert_partition(cid, partition, ts)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return self.describe_by_id(cid)

    def _pick_pchannels(self, num_shards: int) -> list[str]:
        """Least-used pchannels first, so collections spread over the pool."""
        usage = dict(
            self.con.execute(
                "SELECT v.pchannel, count(*) FROM vchannels v JOIN collections c "
                "USING (collection_id) WHERE c.dropped_ts IS NULL GROUP BY v.pchannel"
            ).fetchall()
        )
        names = [pchannel_name(i) for i in range(self.num_pchannels)]
        names.sort(key=lambda p: (usage.get(p, 0), int(p.split("_")[1])))
        return [names[i % len(names)] for i in range(num_shards)]

    def describe(self, db: str, name: str) -> dict[str, Any]:
        return self.describe_by_id(self.require_collection(db, name))

    def describe_by_id(self, collection_id: int) -> dict[str, Any]:
        row = self.con.execute(
            "SELECT c.collection_id, d.name, c.name, c.description, c.schema_json, c.num_shards,"
            " c.consistency_level, c.properties, c.created_ts FROM collections c"
            " JOIN databases d USING (db_id) WHERE c.collection_id = ? AND c.dropped_ts IS NULL",
            [collection_id],
        ).fetchone()
        if row is None:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_FOUND, f"collection id {collection_id} does not exist"
            )
        channels = self.con.execute(
            "SELECT vchannel, pchannel FROM vchannels WHERE collection_id = ? ORDER BY shard",
            [collection_id],
        ).fetchall()
        return {
            "collection_id": int(row[0]),
            "db": row[1],
            "name": row[2],
            "description": row[3] or "",
            "schema": json.loads(row[4]),
            "num_shards": int(row[5]),
            "consistency_level": row[6],
            "properties": json.loads(row[7]),
            "created_ts": int(row[8]),
            "vchannels": [c[0] for c in channels],
            "pchannels": [c[1] for c in channels],
            "partitions": self.list_partitions_by_id(collection_id),
            "aliases": [r[0] for r in self._aliases_of(collection_id)],
        }

    def drop_collection(self, db: str, name: str, ts: int) -> int:
        self._refuse_by_alias(db, name, "drop")
        cid = self.require_collection(db, name)
        aliases = self.list_aliases(db, name)
        if aliases:
            raise invalid(
                f"collection {name!r} has aliases {', '.join(map(repr, aliases))}; "
                "drop them (drop_alias) before dropping the collection"
            )
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(
                "UPDATE collections SET dropped_ts = ? WHERE collection_id = ?", [ts, cid]
            )
            self.con.execute(
                "UPDATE partitions SET dropped_ts = ? WHERE collection_id = ? "
                "AND dropped_ts IS NULL",
                [ts, cid],
            )
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return cid

    def rename_collection(self, db: str, name: str, new_name: str, new_db: str | None) -> int:
        self._refuse_by_alias(db, name, "rename")
        cid = self.require_collection(db, name)
        target_db = new_db or db
        target_db_id = self.db_id(target_db)
        if self._collection_id(target_db, new_name) is not None:
            raise ElanusError(
                ErrorCode.COLLECTION_ALREADY_EXISTS,
                f"collection {new_name!r} already exists in database {target_db!r}",
            )
        self._refuse_alias_name(target_db, new_name, "rename a collection to")
        aliases = self.list_aliases(db, name)
        if target_db != db and aliases:
            raise invalid(
                f"collection {name!r} has aliases {', '.join(map(repr, aliases))}, which "
                f"belong to database {db!r}; drop them before moving it to {target_db!r}"
            )
        self.con.execute(
            "UPDATE collections SET name = ?, db_id = ? WHERE collection_id = ?",
            [new_name, target_db_id, cid],
        )
        return cid

    # -- schema changes ---------------------------------------------------------------------
    def with_added_field(self, db: str, name: str, added: Field) -> tuple[int, Schema]:
        """The collection's schema with ``added`` appended under the next field id and the
        next schema version; nothing is written (``save_schema`` does, once every node
        holds the new schema). Refuses a name in use and a schema already full."""
        cid = self.require_collection(db, name)
        schema = Schema.from_dict(self.describe_by_id(cid)["schema"])
        if added.name in {f.name for f in schema.fields} or added.name == DYNAMIC_FIELD:
            raise invalid(
                f"add_collection_field: collection {name!r} already has a field named "
                f"{added.name!r}"
            )
        if len(schema.fields) >= MAX_FIELDS:
            raise ElanusError(
                ErrorCode.LIMIT_EXCEEDED,
                f"add_collection_field: collection {name!r} has {len(schema.fields)} fields; "
                f"the limit is {MAX_FIELDS}, so {added.name!r} cannot be added",
            )
        top = schema.max_field_id
        added.field_id = (FIRST_FIELD_ID - 1 if top is None else top) + 1
        schema.fields.append(added)
        schema.tag_reused_names()
        schema.version += 1
        return cid, schema

    def with_function(
        self, db: str, name: str, output: Field, function: Function
    ) -> tuple[int, Schema]:
        """The collection's schema with a function and its output field added (the
        field numbered as ``with_added_field`` numbers one), under the next version;
        nothing is written. The function is checked as at create (BM25: a VarChar input
        with an analyzer, a sparse output, ...)."""
        cid, schema = self.with_added_field(db, name, output)
        if function.name in {f.name for f in schema.functions}:
            raise invalid(
                f"add_function_field: collection {name!r} already has a function named "
                f"{function.name!r}"
            )
        schema.functions.append(function)
        check_functions(schema)
        return cid, schema

    def without_field(
        self, db: str, name: str, field_name: str | None, field_id: int | None
    ) -> tuple[int, Schema, Field]:
        """The collection's schema without one field (named, or by id), under the next
        schema version, and that field; nothing is written. Refuses what Milvus 2.6
        refuses to drop, with its words: the primary key, the partition key, a function's
        input or output, the last vector field."""
        cid = self.require_collection(db, name)
        schema = Schema.from_dict(self.describe_by_id(cid)["schema"])
        found = [
            f
            for f in schema.fields
            if (f.name == field_name if field_name is not None else f.field_id == field_id)
        ]
        what = "drop_collection_field"
        if not found:
            which = field_name if field_name is not None else f"with id: {field_id}"
            sep = ": " if field_name is not None else " "
            raise invalid(f"{what}: field not found{sep}{which}")
        gone = found[0]
        if gone.is_primary:
            raise invalid(f"{what}: cannot drop primary key field: {gone.name}")
        if gone.is_partition_key:
            raise invalid(f"{what}: cannot drop partition key field: {gone.name}")
        if gone.is_clustering_key:
            raise invalid(f"{what}: cannot drop clustering key field: {gone.name}")
        for fn in schema.functions:
            role = (
                "input"
                if gone.name in fn.input_field_names
                else "output"
                if gone.name in fn.output_field_names
                else None
            )
            if role:
                raise invalid(
                    f"{what}: field is referenced by function {fn.name} as {role}, "
                    "drop function first"
                )
        if gone.dtype.is_vector and len(schema.vector_fields) == 1:
            raise invalid(f"{what}: cannot drop the last vector field: {gone.name}")
        return cid, _without(schema, [gone]), gone

    def without_function(
        self, db: str, name: str, function: str
    ) -> tuple[int, Schema, list[Field]]:
        """The collection's schema without a function and its output fields, under the
        next schema version, and those fields; nothing is written. As Milvus 2.6, refuses
        an unknown function and a drop that would leave no vector field."""
        cid = self.require_collection(db, name)
        schema = Schema.from_dict(self.describe_by_id(cid)["schema"])
        fn = next((f for f in schema.functions if f.name == function), None)
        if fn is None:
            raise invalid(f"drop_function_field: function not found: {function}")
        gone = [f for f in schema.fields if f.name in fn.output_field_names]
        if len(schema.vector_fields) <= sum(f.dtype.is_vector for f in gone):
            raise invalid(
                f"drop_function_field: cannot drop function {function}: it would leave no "
                "vector field in the collection"
            )
        schema.functions.remove(fn)
        return cid, _without(schema, gone), gone

    def alter_properties(
        self, db: str, name: str, changes: dict[str, str], dropped: list[str]
    ) -> int:
        """Set ``changes`` and remove ``dropped`` in a collection's properties; its id. The
        field and index ``mmap.enabled`` kept among them (``elanus.mmapsettings``) do not
        count toward the limit."""
        cid = self.require_collection(db, name)
        props = self.describe_by_id(cid)["properties"]
        props = {k: v for k, v in props.items() if k not in dropped} | changes
        if (count := len(public(props))) > MAX_PROPERTIES:
            raise invalid(
                f"alter_collection_properties: collection {name!r} would have {count} "
                f"properties; the limit is {MAX_PROPERTIES}"
            )
        self.con.execute(
            "UPDATE collections SET properties = ? WHERE collection_id = ?",
            [json.dumps(props, sort_keys=True), cid],
        )
        return cid

    def save_schema(self, collection_id: int, schema: Schema) -> None:
        self.con.execute(
            "UPDATE collections SET schema_json = ? WHERE collection_id = ?",
            [schema.to_json(), collection_id],
        )

    # -- aliases ----------------------------------------------------------------------------
    def _alias_target(self, db: str, alias: str) -> int | None:
        row = self.con.execute(
            "SELECT collection_id FROM aliases WHERE db_id = ? AND alias = ?",
            [self.db_id(db), alias],
        ).fetchone()
        return int(row[0]) if row else None

    def _refuse_alias_name(self, db: str, name: str, doing: str) -> None:
        if self._alias_target(db, name) is not None:
            raise ElanusError(
                ErrorCode.ALIAS_ALREADY_EXISTS,
                f"cannot {doing} {name!r}: it is an alias in database {db!r}",
            )

    def _refuse_by_alias(self, db: str, name: str, doing: str) -> None:
        if self._collection_id(db, name) is None and self._alias_target(db, name) is not None:
            raise invalid(
                f"cannot {doing} a collection through its alias {name!r}; "
                "use the collection's own name"
            )

    def _collection_of_alias(self, db: str, alias: str) -> int:
        cid = self._alias_target(db, alias)
        if cid is None:
            raise ElanusError(
                ErrorCode.ALIAS_NOT_FOUND, f"alias {alias!r} does not exist in database {db!r}"
            )
        return cid

    def _alias_target_collection(self, db: str, collection: str, alias: str) -> int:
        """The collection an alias is to name: a real collection (not another alias),
        and the alias must not be a collection's name."""
        if self._collection_id(db, alias) is not None:
            raise ElanusError(
                ErrorCode.COLLECTION_ALREADY_EXISTS,
                f"alias {alias!r} is the name of a collection in database {db!r}",
            )
        cid = self._collection_id(db, collection)
        if cid is None:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_FOUND,
                f"collection {collection!r} does not exist in database {db!r}"
                + (" (it is an alias)" if self._alias_target(db, collection) else ""),
            )
        return cid

    def create_alias(self, db: str, collection: str, alias: str, ts: int) -> int:
        """Creating an alias that already names the same collection changes nothing (as
        in Milvus); one that names another collection is an error."""
        cid = self._alias_target_collection(db, collection, alias)
        current = self._alias_target(db, alias)
        if current == cid:
            return cid
        if current is not None:
            raise ElanusError(
                ErrorCode.ALIAS_ALREADY_EXISTS,
                f"alias {alias!r} already exists in database {db!r}, for collection "
                f"{self.describe_by_id(current)['name']!r}; use alter_alias to move it",
            )
        self.con.execute(
            "INSERT INTO aliases VALUES (?, ?, ?, ?)", [self.db_id(db), alias, cid, ts]
        )
        return cid

    def alter_alias(self, db: str, collection: str, alias: str, ts: int) -> tuple[int, int]:
        """Point an existing alias at another collection; (old, new) collection ids."""
        cid = self._alias_target_collection(db, collection, alias)
        old = self._collection_of_alias(db, alias)
        self.con.execute(
            "UPDATE aliases SET collection_id = ?, created_ts = ? WHERE db_id = ? AND alias = ?",
            [cid, ts, self.db_id(db), alias],
        )
        return old, cid

    def drop_alias(self, db: str, alias: str, ts: int) -> int:
        cid = self._collection_of_alias(db, alias)
        self.con.execute(
            "DELETE FROM aliases WHERE db_id = ? AND alias = ?", [self.db_id(db), alias]
        )
        return cid

    def describe_alias(self, db: str, alias: str) -> dict[str, Any]:
        cid = self._collection_of_alias(db, alias)
        return {
            "alias": alias,
            "collection_name": self.describe_by_id(cid)["name"],
            "db_name": db,
        }

    def list_aliases(self, db: str, collection: str | None = None) -> list[str]:
        """Aliases of ``collection`` (a collection's own name), or of the whole database."""
        if collection is None:
            rows = self.con.execute(
                "SELECT alias FROM aliases WHERE db_id = ? ORDER BY alias", [self.db_id(db)]
            ).fetchall()
        else:
            rows = self._aliases_of(self.require_collection(db, collection))
        return [r[0] for r in rows]

    def _aliases_of(self, collection_id: int) -> list[tuple[Any, ...]]:
        return self.con.execute(
            "SELECT alias FROM aliases WHERE collection_id = ? ORDER BY alias", [collection_id]
        ).fetchall()

    # -- partitions -------------------------------------------------------------------------
    def _insert_partition(self, collection_id: int, name: str, ts: int) -> int:
        pid = self.alloc_id(1)
        self.con.execute(
            "INSERT INTO partitions VALUES (?, ?, ?, ?, NULL)", [pid, collection_id, name, ts]
        )
        return pid

    def _partition_id(self, collection_id: int, name: str) -> int | None:
        row = self.con.execute(
            "SELECT partition_id FROM partitions WHERE collection_id = ? AND name = ? "
            "AND dropped_ts IS NULL",
            [collection_id, name],
        ).fetchone()
        return int(row[0]) if row else None

    def _refuse_partition_key(self, collection_id: int, collection: str, doing: str) -> None:
        """Milvus fixes a partition key collection's partitions at creation."""
        row = self.con.execute(
            "SELECT schema_json FROM collections WHERE collection_id = ?", [collection_id]
        ).fetchone()
        if row and Schema.from_dict(json.loads(row[0])).partition_key is not None:
            raise invalid(
                f"cannot {doing} collection {collection!r}: it has a partition key field, "
                "so its partitions are fixed when it is created (rows go to them by key)"
            )

    def create_partition(self, db: str, collection: str, name: str, ts: int) -> int:
        cid = self.require_collection(db, collection)
        self._refuse_partition_key(cid, collection, "create a partition in")
        if self._partition_id(cid, name) is not None:
            raise ElanusError(
                ErrorCode.PARTITION_ALREADY_EXISTS,
                f"partition {name!r} already exists in collection {collection!r}",
            )
        if len(self.list_partitions_by_id(cid)) >= MAX_PARTITIONS:
            raise ElanusError(
                ErrorCode.LIMIT_EXCEEDED,
                f"collection {collection!r} already has {MAX_PARTITIONS} partitions",
            )
        return self._insert_partition(cid, name, ts)

    def drop_partition(self, db: str, collection: str, name: str, ts: int) -> tuple[int, int]:
        cid = self.require_collection(db, collection)
        self._refuse_partition_key(cid, collection, "drop a partition of")
        if name == DEFAULT_PARTITION:
            raise invalid("the _default partition cannot be dropped")
        pid = self._partition_id(cid, name)
        if pid is None:
            raise ElanusError(
                ErrorCode.PARTITION_NOT_FOUND,
                f"partition {name!r} does not exist in collection {collection!r}",
            )
        self.con.execute("UPDATE partitions SET dropped_ts = ? WHERE partition_id = ?", [ts, pid])
        return cid, pid

    def has_partition(self, db: str, collection: str, name: str) -> bool:
        return self._partition_id(self.require_collection(db, collection), name) is not None

    def list_partitions_by_id(self, collection_id: int) -> list[dict[str, Any]]:
        rows = self.con.execute(
            "SELECT name, partition_id, created_ts FROM partitions WHERE collection_id = ? "
            "AND dropped_ts IS NULL ORDER BY created_ts, partition_id",
            [collection_id],
        ).fetchall()
        return [{"name": r[0], "partition_id": int(r[1]), "created_ts": int(r[2])} for r in rows]

    def list_partitions(self, db: str, collection: str) -> list[dict[str, Any]]:
        return self.list_partitions_by_id(self.require_collection(db, collection))


def _without(schema: Schema, gone: list[Field]) -> Schema:
    """``schema`` less the ``gone`` fields, whose ids and names it keeps as dropped, under
    the next version."""
    for f in gone:
        assert f.field_id is not None  # every saved field is numbered
        schema.fields.remove(f)
        schema.dropped[f.field_id] = f.name
    schema.tag_reused_names()
    schema.version += 1
    return schema


def number_fields(schema: Schema) -> None:
    """Number a new collection's fields in order; a schema that lists dropped fields (one
    described before, as a snapshot restores it) keeps its ids, which its segments'
    columns carry (``Field.id_tagged``)."""
    if not schema.dropped:
        for i, f in enumerate(schema.fields):
            f.field_id = FIRST_FIELD_ID + i
        return
    ids = [f.field_id for f in schema.fields]
    if None in ids or len(set(ids)) != len(ids) or set(ids) & set(schema.dropped):
        raise invalid(
            "a schema with 'dropped_fields' must give every field its own field_id, none of "
            "them dropped"
        )
