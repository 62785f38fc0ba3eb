"""Named, persisted counters in the coord's DuckDB file (the TSO bound, the ID high-water).

The TSO and the ID allocator are called from many threads; they write through their own
DuckDB cursor under a lock, independent of the catalog's database thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import duckdb

TSO_BOUND = "tso_bound_ms"
ID_HIGH_WATER = "id_high_water"


class CounterStore:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._cur = con.cursor()
        self._lock = threading.Lock()

    def get(self, name: str) -> int | None:
        with self._lock:
            row = self._cur.execute("SELECT value FROM counters WHERE name = ?", [name]).fetchone()
        return int(row[0]) if row else None

    def set(self, name: str, value: int) -> None:
        with self._lock:
            self._cur.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                [name, value],
            )

    def setter(self, name: str) -> Callable[[int], None]:
        """A persist callback for one counter (what the TSO and ID allocator take)."""
        return lambda value: self.set(name, value)

    def close(self) -> None:
        with self._lock:
            self._cur.close()
