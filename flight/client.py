"""The Python SDK: a pymilvus-MilvusClient-shaped client over Arrow Flight.

Imports only pyarrow and Elanus's pure shared modules (never nats or duckdb), so
``import elanus`` stays light. Every server error surfaces as ``ElanusError`` with the
server's stable code; an unreachable proxy is ``UNAVAILABLE``.
"""


from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.consistency import ConsistencyLevel
from elanus.flight.client_base import ClientBase
from elanus.flight.client_index import BuilderAPI, IndexAPI
from elanus.flight.client_read import ReadAPI
from elanus.flight.client_write import ATOMIC_LIMIT_BYTES, DEFAULT_BATCH_BYTES, WriteAPI
from elanus.flight.wire import from_flight_error
from elanus.schema import Schema, check_name

__all__ = ["ATOMIC_LIMIT_BYTES", "DEFAULT_BATCH_BYTES", "Client", "ClientBase"]


class Client(ReadAPI, WriteAPI, IndexAPI, BuilderAPI):
    """``Client("grpc://host:8815")``; methods mirror pymilvus's ``MilvusClient``."""

    # -- collections ------------------------------------------------------------------------
    def create_collection(
        self,
        name: str,
        dimension: int | None = None,
        *,
        schema: Schema | dict[str, Any] | None = None,
        primary_field_name: str = "id",
        vector_field_name: str = "vector",
        id_type: str = "int64",
        auto_id: bool = False,
        metric_type: str = "COSINE",
        max_length: int | None = None,
        num_shards: int = 1,
        consistency_level: str | ConsistencyLevel = "Bounded",
        properties: dict[str, str] | None = None,
        description: str = "",
        db: str | None = None,
    ) -> dict[str, Any]:
        """Create from a ``Schema`` or by quick setup (``dimension``); returns the description."""
        body = self._in_db(
            db,
            name=name,
            num_shards=num_shards,
            consistency_level=str(consistency_level),
            properties=properties or {},
            description=description,
        )
        if schema is not None:
            body["schema"] = schema.to_dict() if isinstance(schema, Schema) else schema
        if dimension is not None:
            body.update(
                dimension=dimension,
                primary_field=primary_field_name,
                vector_field=vector_field_name,
                id_type=id_type,
                auto_id=auto_id,
                metric_type=metric_type,
                max_length=max_length,
            )
        return self._action("create_collection", body)

    def drop_collection(self, name: str, *, db: str | None = None) -> None:
        self._action("drop_collection", self._in_db(db, name=name))

    def has_collection(self, name: str, *, db: str | None = None) -> bool:
        return bool(self._action("has_collection", self._in_db(db, name=name))["value"])

    def describe_collection(self, name: str, *, db: str | None = None) -> dict[str, Any]:
        return self._action("describe_collection", self._in_db(db, name=name))

    def list_collections(self, *, db: str | None = None) -> list[str]:
        return list(self._action("list_collections", self._in_db(db))["names"])

    def rename_collection(
        self, old_name: str, new_name: str, new_db: str | None = None, *, db: str | None = None
    ) -> None:
        self._action(
            "rename_collection", self._in_db(db, name=old_name, new_name=new_name, new_db=new_db)
        )

    # -- partitions -------------------------------------------------------------------------
    def create_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> None:
        self._action("create_partition", self._partition(db, collection_name, partition_name))

    def drop_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> None:
        self._action("drop_partition", self._partition(db, collection_name, partition_name))

    def has_partition(
        self, collection_name: str, partition_name: str, *, db: str | None = None
    ) -> bool:
        body = self._partition(db, collection_name, partition_name)
        return bool(self._action("has_partition", body)["value"])

    def list_partitions(self, collection_name: str, *, db: str | None = None) -> list[str]:
        body = self._in_db(db, collection=collection_name)
        return list(self._action("list_partitions", body)["names"])

    def _partition(self, db: str | None, collection: str, partition: str) -> dict[str, Any]:
        return self._in_db(db, collection=collection, partition=partition)

    # -- databases --------------------------------------------------------------------------
    def create_database(self, db_name: str) -> None:
        self._action("create_database", {"name": db_name})

    def drop_database(self, db_name: str) -> None:
        self._action("drop_database", {"name": db_name})

    def list_databases(self) -> list[str]:
        return list(self._action("list_databases")["names"])

    def using_database(self, db_name: str) -> None:
        """Make ``db_name`` the database of later calls (checked by the server on use)."""
        self._db = check_name(db_name, "database")

    # -- control ----------------------------------------------------------------------------
    def list_sessions(self) -> list[dict[str, Any]]:
        return list(self._action("list_sessions")["sessions"])

    def health(self) -> dict[str, Any]:
        return self._action("health")

    def get_timestamp(self) -> int:
        """A fresh hybrid timestamp from the TSO (``physical_ms << 18 | logical``)."""
        return int(self._action("get_timestamp")["ts"])

    def list_actions(self) -> dict[str, str]:
        """Action name -> description, as the proxy lists them (Flight ListActions)."""
        try:
            actions = self._conn().list_actions(self._options(None))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        return {a.type: a.description for a in actions}

