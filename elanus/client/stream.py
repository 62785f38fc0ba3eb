"""Many single-query searches over one DoExchange stream (``Client.search_stream``).

A caller with a stream of queries (a batch job, an evaluation loop, an iterator of
embeddings) pays one DoAction round trip per ``search``: the request's JSON, its plan
lookup and a network round trip each time. ``search_stream`` opens one DoExchange search
(docs/protocol.md) and keeps it full: a reader thread pulls queries from the caller's
iterable, a writer thread sends every query that is ready as one Arrow batch (up to
``max_batch``; one alone when the caller produces them slowly, so nothing waits for a
batch to fill), at most ``window`` queries in flight, and the caller's thread reads the
answers, in order, as one ``Hits`` per query.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.compat import reject_unknown
from elanus.client.read import ReadAPI
from elanus.client.results import Hit, Hits
from elanus.errors import ElanusError, ErrorCode
from elanus.outputs import entity, json_fields, resolve_outputs
from elanus.schema import Schema
from elanus.wire.codec import from_flight_error

_END = object()
FIXED = ("query_index", "rank", "id", "distance")


class StreamAPI(ReadAPI):
    def search_stream(
        self,
        collection_name: str,
        data: Iterable[Any],
        filter: str = "",
        limit: int = 10,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        *,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        max_batch: int = 32,
        window: int = 256,
        db: str | None = None,
        **kwargs: Any,
    ) -> Iterator[Hits]:
        """One ``Hits`` per query vector of ``data`` (any iterable of float vectors, read
        lazily), in order, as ``search`` would answer each alone; all over one stream.
        ``timeout`` bounds the whole stream. Stop iterating early and the stream closes."""
        reject_unknown("search_stream", kwargs)
        if max_batch < 1 or window < max_batch:
            raise ElanusError(
                ErrorCode.INVALID_ARGUMENT,
                "search_stream: max_batch must be at least 1 and window at least max_batch",
            )
        command = self._in_db(
            db, collection=collection_name, limit=limit, output_fields=list(output_fields or [])
        )
        if filter:
            command["filter"] = filter
        if filter_params:
            command["filter_params"] = filter_params
        if search_params:
            command["search_params"] = search_params
        if anns_field:
            command["anns_field"] = anns_field
        command = self._read_options(command, consistency_level, None, None, partition_names)
        schema = self._schema_of(collection_name, db)  # hits are shaped as ``search`` shapes
        shape = _Shape(resolve_outputs(schema, collection_name, command["output_fields"]), schema)
        descriptor = flight.FlightDescriptor.for_command(json.dumps(command).encode())
        try:
            writer, reader = self._conn().do_exchange(descriptor, self._options(timeout))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        return _Exchange(writer, reader, iter(data), max_batch, window, shape).answers()


class _Exchange:
    """The threads of one stream: ``feed`` (caller's iterable -> ``ready``), ``send``
    (``ready`` -> Arrow batches; the size of each into ``sent``) and ``answers``."""

    def __init__(
        self,
        writer: Any,
        reader: Any,
        data: Iterator[Any],
        max_batch: int,
        window: int,
        shape: _Shape,
    ) -> None:
        self.writer, self.reader, self.data, self.shape = writer, reader, data, shape
        self.max_batch = max_batch
        self.ready: queue.Queue[Any] = queue.Queue()
        self.sent: queue.Queue[Any] = queue.Queue()
        self.room = threading.Semaphore(window)
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def feed(self) -> None:
        try:
            for vector in self.data:
                while not self.room.acquire(timeout=0.1):
                    if self.stop.is_set():
                        return
                if self.stop.is_set():
                    return
                self.ready.put(np.asarray(vector, dtype=np.float32).ravel())
        except BaseException as exc:  # noqa: BLE001 - the caller's iterable failed: say so
            self.failure = exc
        finally:
            self.ready.put(_END)

    def send(self) -> None:
        schema: pa.Schema | None = None
        try:
            while True:
                first = self.ready.get()
                if first is _END:
                    break
                rows = [first]
                while len(rows) < self.max_batch:
                    try:
                        more = self.ready.get_nowait()
                    except queue.Empty:
                        break
                    if more is _END:
                        self.ready.put(_END)
                        break
                    rows.append(more)
                batch = _vectors_batch(rows)
                if schema is None:
                    schema = batch.schema
                    self.writer.begin(schema)
                self.sent.put(len(rows))
                self.writer.write_batch(batch)
            if schema is not None:
                self.writer.done_writing()
        except BaseException as exc:  # noqa: BLE001 - reported by answers()
            if self.failure is None:
                self.failure = exc
        finally:
            self.sent.put(_END)

    def answers(self) -> Iterator[Hits]:
        threads = [
            threading.Thread(target=self.feed, name="search-stream-feed", daemon=True),
            threading.Thread(target=self.send, name="search-stream-send", daemon=True),
        ]
        for t in threads:
            t.start()
        first = 0
        try:
            while True:
                count = self.sent.get()
                if count is _END:
                    break
                chunk = self.reader.read_chunk().data
                yield from self.shape.split(chunk, first, count)
                first += count
                for _ in range(count):
                    self.room.release()
            if self.failure is not None:
                raise self.failure
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        finally:
            self.stop.set()
            self.room.release()  # a feeder waiting for room sees the stop
            try:
                self.writer.close()
            except (flight.FlightError, pa.ArrowException):
                pass


def _vectors_batch(rows: list[np.ndarray]) -> pa.RecordBatch:
    dims = {r.shape[0] for r in rows}
    if len(dims) != 1:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"search_stream: query vectors of different lengths ({sorted(dims)})",
        )
    (dim,) = dims
    flat = pa.array(np.concatenate(rows))
    return pa.record_batch([pa.FixedSizeListArray.from_arrays(flat, dim)], names=["vector"])


@dataclass(frozen=True)
class _Shape:
    """How a stream's hits look: the entity of each holds the resolved outputs, JSON
    decoded and dynamic keys flattened (``elanus.outputs.entity``, as ``search``)."""

    outputs: list[str]
    schema: Schema

    def split(self, chunk: pa.RecordBatch, first: int, count: int) -> list[Hits]:
        """A batch's answer (rows of query_index, rank, id, distance, stored outputs; the
        index counts from the stream's first query) as ``count`` ``Hits``."""
        if chunk.num_rows == 0:
            return [Hits() for _ in range(count)]
        slot = chunk.column(0).to_numpy() - first
        ids = chunk.column(2).to_pylist()
        distances = chunk.column(3).to_pylist()
        stored = chunk.select([n for n in chunk.schema.names if n not in FIXED])
        rows = stored.to_pylist() if stored.num_columns else [{}] * chunk.num_rows
        json_names = json_fields(self.schema)
        per_query: list[list[Hit]] = [[] for _ in range(count)]
        for row, q in enumerate(slot.tolist()):
            value = entity(rows[row], self.outputs, json_names)
            per_query[q].append(Hit(id=ids[row], distance=distances[row], entity=value))
        return [Hits(hits) for hits in per_query]
