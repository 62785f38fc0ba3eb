"""Running one statement in a DuckDB of its own, within the SQL limits.

Each statement gets a fresh in-memory DuckDB (about 20 ms to open): its catalog
``elanus`` holds one schema per database and in it one view per collection the statement
reads, over that collection's rows at the snapshot (``tables.CollectionTable``), plus a
table per ``vector_search`` call. Nothing else is reachable: no file, no network, no
extension (``statement.SANDBOX``), and the configuration is locked before the statement
runs, so SQL cannot lift a limit. Its limits (settings, docs/sql.md):

- ``sql_timeout_s``: the whole statement, its result's streaming included; DuckDB is
  interrupted and every read checks the deadline between pages (TIMEOUT);
- ``sql_memory_limit_mb``: DuckDB's memory limit for the statement, with no spilling to
  disk (LIMIT_EXCEEDED);
- ``sql_max_result_mb``: bytes of result sent (LIMIT_EXCEEDED, after what was sent);
- ``sql_threads``: DuckDB threads per statement, and ``sql_max_statements`` statements at
  once per proxy (RATE_LIMITED beyond): a statement runs on its Flight thread, never on
  the proxy's event loop, so writes and searches go on beside it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import duckdb
import pyarrow as pa

from elanus.errors import ElanusError, ErrorCode
from elanus.flight.sql.statement import CATALOG, SANDBOX, clean_message
from elanus.flight.sql.tables import CollectionTable
from elanus.settings import Settings

BATCH_ROWS = 8192
MAX_BATCH_BYTES = 4 << 20
"""Result batches are cut to about this size: Flight clients cap a message (ADBC's Go
driver at 16 MiB by default)."""
Source: TypeAlias = CollectionTable | pa.Table


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int
    max_result_bytes: int
    threads: int
    max_statements: int

    @classmethod
    def of(cls, s: Settings) -> Limits:
        return cls(
            timeout_s=s.sql_timeout_s,
            memory_mb=s.sql_memory_limit_mb,
            max_result_bytes=s.sql_max_result_mb << 20,
            threads=s.sql_threads,
            max_statements=s.sql_max_statements,
        )


class Executor:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_statements)

    def deadline(self) -> float:
        return time.monotonic() + self.limits.timeout_s if self.limits.timeout_s else float("inf")

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """One of ``sql_max_statements``; none free is RATE_LIMITED at once."""
        if not self._slots.acquire(blocking=False):
            raise ElanusError(
                ErrorCode.RATE_LIMITED,
                f"{self.limits.max_statements} SQL statements are running on this proxy "
                "(setting sql_max_statements); retry when one is done",
            )
        try:
            yield
        finally:
            self._slots.release()

    def open(
        self,
        db: str,
        tables: dict[tuple[str, str], Source],
        searches: dict[str, pa.Table],
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB holding the statement's views (``tables``: by (database, name)) and
        search results (by the name ``statement.rewrite`` gave each), ``db`` first on the
        search path, its configuration locked."""
        config: dict[str, str | bool | int | float | list[str]] = {
            **SANDBOX,
            "lock_configuration": False,
            "threads": self.limits.threads,
            "memory_limit": f"{self.limits.memory_mb}MB" if self.limits.memory_mb else "-1",
            "temp_directory": "",  # no spilling: the memory limit is the limit
        }
        con = duckdb.connect(config=config)
        try:
            con.execute(f"ATTACH ':memory:' AS {CATALOG}")
            con.execute(f"USE {CATALOG}")
            for schema in sorted({db, *(d for d, _ in tables)}):
                con.execute(f"CREATE SCHEMA {_quote(schema)}")
            for i, ((schema, name), source) in enumerate(tables.items()):
                con.register(f"$t{i}", source)
                view = f"{_quote(schema)}.{_quote(name)}"
                con.execute(f"CREATE VIEW {view} AS SELECT * FROM {_quote(f'$t{i}')}")
            for name, hits in searches.items():
                con.register(name, hits)
            con.execute(f"SET search_path = '{CATALOG}.{_quote(db)}'")
            con.execute("SET lock_configuration = true")
        except BaseException:
            con.close()
            raise
        return con

    def schema(
        self, con: duckdb.DuckDBPyConnection, text: str, params: dict[str, Any]
    ) -> pa.Schema:
        """The statement's result schema, bound but not run (``LIMIT 0``); closes ``con``."""
        try:
            return con.sql(text, params=params or None).limit(0).to_arrow_table().schema
        except BaseException as exc:
            raise _error(exc, [], _Watch(con, float("inf"))) from None
        finally:
            con.close()

    def run(
        self,
        con: duckdb.DuckDBPyConnection,
        text: str,
        params: dict[str, Any],
        sources: list[Source],
        deadline: float,
    ) -> Result:
        """Start the statement on ``con`` (which the result closes): its schema is known
        once DuckDB bound it, its batches come as they are computed."""
        watch = _Watch(con, deadline)
        try:
            reader = con.sql(text, params=params or None).to_arrow_reader(BATCH_ROWS)
        except BaseException as exc:
            watch.stop()
            con.close()
            raise _error(exc, sources, watch) from None
        return Result(con, reader, sources, watch, self.limits.max_result_bytes)


class Result:
    """A running statement's result: iterate for its batches (cut to ``MAX_BATCH_BYTES``,
    counted against the result limit); ``close`` ends it, at any point."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        reader: pa.RecordBatchReader,
        sources: list[Source],
        watch: _Watch,
        limit: int,
    ) -> None:
        self.schema: pa.Schema = reader.schema
        self._con, self._reader, self._sources, self._watch = con, reader, sources, watch
        self._limit = limit

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        sent = 0
        while True:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return
            except BaseException as exc:
                raise _error(exc, self._sources, self._watch) from None
            for piece in _pieces(batch):
                sent += piece.nbytes
                if self._limit and sent > self._limit:
                    raise ElanusError(
                        ErrorCode.LIMIT_EXCEEDED,
                        f"the result is larger than {self._limit >> 20} MiB (setting "
                        "sql_max_result_mb); aggregate, select fewer columns or add a LIMIT",
                    )
                yield piece

    def close(self) -> None:
        self._watch.stop()
        self._con.close()


def _pieces(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into pieces of about ``MAX_BATCH_BYTES``."""
    if batch.nbytes <= MAX_BATCH_BYTES or batch.num_rows <= 1:
        yield batch
        return
    rows = max(1, batch.num_rows * MAX_BATCH_BYTES // batch.nbytes)
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)


class _Watch:
    """Interrupts the statement at its deadline."""

    def __init__(self, con: duckdb.DuckDBPyConnection, deadline: float) -> None:
        self.fired = False
        self._timer: threading.Timer | None = None
        if deadline != float("inf"):
            self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire, [con])
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, con: duckdb.DuckDBPyConnection) -> None:
        self.fired = True
        with contextlib.suppress(Exception):
            con.interrupt()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _error(exc: BaseException, sources: list[Source], watch: _Watch) -> BaseException:
    """What a failed statement tells its client: a read's own error (DuckDB wraps it), a
    limit it met, or DuckDB's message about the SQL."""
    if isinstance(exc, ElanusError):
        return exc
    for source in sources:
        if isinstance(source, CollectionTable) and source.failure is not None:
            return source.failure
    if watch.fired or isinstance(exc, duckdb.InterruptException):
        return ElanusError(
            ErrorCode.TIMEOUT, "the statement ran past its timeout (setting sql_timeout_s)"
        )
    if isinstance(exc, duckdb.OutOfMemoryException):
        return ElanusError(
            ErrorCode.LIMIT_EXCEEDED,
            "the statement needs more memory than it may use (setting sql_memory_limit_mb): "
            f"{clean_message(exc)}",
        )
    if isinstance(exc, duckdb.Error | pa.ArrowException | OSError):
        return ElanusError(ErrorCode.INVALID_ARGUMENT, f"SQL: {clean_message(exc)}")
    return exc


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
