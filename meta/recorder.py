"""Recording what a catalog call changes: a DuckDB connection (or cursor) wrapper that notes
each statement that succeeded and changed something, for the catalog journal
(``meta/journal.py``). Reads are not noted; a statement that failed changed nothing."""

from __future__ import annotations

from typing import Any, Protocol

_READS = ("SELECT", "WITH", "PRAGMA", "SHOW", "DESCRIBE", "EXPLAIN", "FROM", "SUMMARIZE")

Statement = tuple[str, Any, bool]
"""(sql, parameters, executemany?)"""


class Journal(Protocol):
    """Where recorded changes go (``meta/journal.py``'s ``CatalogJournal``)."""

    def append(self, entry: list[Statement]) -> None:
        """Publish ``entry`` and wait until it is stored."""

    def queue(self, entry: list[Statement]) -> None:
        """Publish ``entry`` after those before it, without waiting."""


def mutates(sql: str) -> bool:
    return not sql.lstrip().upper().startswith(_READS)


class Recorder:
    """A DuckDB connection (or cursor) that notes each statement that changed something."""

    def __init__(self, target: Any, sink: list[Statement], journal: Journal) -> None:
        self._target, self._sink, self._journal = target, sink, journal

    def execute(self, sql: str, parameters: Any = None) -> Any:
        out = (
            self._target.execute(sql)
            if parameters is None
            else self._target.execute(sql, parameters)
        )
        if mutates(sql):
            self._sink.append((sql, parameters, False))
        return out

    def executemany(self, sql: str, parameters: Any) -> Any:
        rows = [list(p) if isinstance(p, tuple) else p for p in parameters]
        out = self._target.executemany(sql, rows)
        self._sink.append((sql, rows, True))
        return out

    def cursor(self) -> CursorRecorder:
        return CursorRecorder(self._target.cursor(), self._journal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class CursorRecorder:
    """A cursor kept beyond one catalog call (the counters'): each change is queued as an
    entry of its own at once, in the order they happen."""

    def __init__(self, cursor: Any, journal: Journal) -> None:
        self._cursor, self._journal = cursor, journal

    def execute(self, sql: str, parameters: Any = None) -> Any:
        out = (
            self._cursor.execute(sql)
            if parameters is None
            else self._cursor.execute(sql, parameters)
        )
        if mutates(sql):
            self._journal.queue([(sql, parameters, False)])
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)
