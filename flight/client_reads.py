"""The snapshot-read schema call of the SDK (mixed into ``Client``): the Arrow schema a
read plan would have, from Flight ``GetSchema``, and the command both calls send."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.flight.wire import encode_json, from_flight_error


class ReadSchemaAPI:
    if TYPE_CHECKING:  # provided by ``Client``

        def _conn(self) -> flight.FlightClient: ...

        def _options(self, timeout: float | None) -> flight.FlightCallOptions: ...

        def _in_db(self, db: str | None, **body: Any) -> dict[str, Any]: ...

    def _read_command(
        self,
        collection_name: str,
        db: str | None,
        columns: list[str] | None = None,
        filter: str = "",
        filter_params: dict[str, Any] | None = None,
        partition_names: list[str] | None = None,
        snapshot_ts: int | None = None,
    ) -> flight.FlightDescriptor:
        """The ``read_plan`` body of GetFlightInfo and GetSchema, as a command descriptor."""
        command = self._in_db(db, collection=collection_name)
        if columns is not None:
            command["columns"] = list(columns)
        if filter:
            command["filter"] = filter
        if filter_params:
            command["filter_params"] = filter_params
        if partition_names:
            command["partition_names"] = list(partition_names)
        if snapshot_ts:
            command["snapshot_ts"] = int(snapshot_ts)
        return flight.FlightDescriptor.for_command(encode_json(command))

    def read_schema(
        self,
        collection_name: str,
        *,
        columns: list[str] | None = None,
        db: str | None = None,
        timeout: float | None = None,
    ) -> pa.Schema:
        """The Arrow schema of a snapshot read of these columns (Flight ``GetSchema``),
        without taking a snapshot."""
        descriptor = self._read_command(collection_name, db, columns)
        try:
            return self._conn().get_schema(descriptor, self._options(timeout)).schema
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
