"""The coord's DuckDB file: one connection, used from one thread, with versioned migrations.

DuckDB calls block, so the coord never runs them on the event loop: ``run`` hands each
call to a single worker thread, which also serialises every catalog change. With a
journal (``meta/journal.py``), the statements a call changed the catalog with are
published before the call returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from elanus.meta.migrations import MIGRATIONS
from elanus.meta.recorder import Journal, Recorder, Statement

T = TypeVar("T")


class Database:
    def __init__(self, path: str | Path, journal: Journal | None = None) -> None:
        self.path = Path(path)
        self.journal = journal
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="duckdb")
        self._lock = threading.RLock()
        self.con = self._executor.submit(self._open).result()

    def _open(self) -> duckdb.DuckDBPyConnection:
        # One DuckDB thread: the catalog's statements touch a few rows each, and a pool only
        # adds scheduling to every one (a small commit: 2.8 -> 1.6 ms; the SQL of a collection's
        # create/index/load/drop: -10 %, docs/design-notes.md).
        con = duckdb.connect(str(self.path), config={"threads": 1})
        migrate(con)
        return con

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(con, *args)`` on the database thread and wait (for threaded callers)."""
        return self._executor.submit(self._locked, fn, *args).result()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(con, *args)`` on the database thread without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._locked, fn, *args)

    def raw(self, fn: Callable[..., T], *args: Any) -> T:
        """``call`` with the bare connection: nothing it does is journaled (snapshots)."""

        def bare() -> T:
            with self._lock:
                return fn(self.con, *args)

        return self._executor.submit(bare).result()

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            journal = self.journal
            if journal is None:
                return fn(self.con, *args)
            changes: list[Statement] = []
            try:
                return fn(Recorder(self.con, changes, journal), *args)
            finally:
                if changes:  # what succeeded is in the file: it goes to the journal too
                    journal.append(changes)

    def close(self) -> None:
        def _close() -> None:
            self.con.close()

        try:
            self._executor.submit(_close).result(timeout=10)
        finally:
            self._executor.shutdown(wait=True)


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP DEFAULT now())"
    )
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every migration newer than the file's version, each in its own transaction."""
    current = schema_version(con)
    for version, name, statements in MIGRATIONS:
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            for stmt in statements:
                con.execute(stmt)
            con.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        current = version
    return current
