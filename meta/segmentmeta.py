"""Segment records in DuckDB: states, row counts, positions and checkpoints (seed 004).

Growing → Sealed → Flushing → Flushed (→ Dropped after compaction or a collection drop).
A bulk import's segments are Importing (invisible) until its job commits them: Flushed.
These functions run on the database thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from elanus import layout
from elanus.states import SegmentLevel, SegmentState

COLUMNS = (
    "segment_id", "collection_id", "partition_id", "vchannel", "state", "max_rows",
    "allocated_rows", "num_rows", "created_ts", "last_expire_ts", "seal_ts", "flushed_ts",
    "dropped_ts", "start_seq", "checkpoint_seq", "checkpoint_ts", "min_ts", "max_ts", "path",
    "level", "compacted_from", "last_alloc_at", "is_sorted", "key_range",
)  # fmt: skip


@dataclass
class Segment:
    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    state: SegmentState
    max_rows: int
    allocated_rows: int = 0
    num_rows: int = 0
    created_ts: int = 0
    last_expire_ts: int = 0
    seal_ts: int | None = None
    flushed_ts: int | None = None
    dropped_ts: int | None = None
    start_seq: int | None = None
    checkpoint_seq: int | None = None
    checkpoint_ts: int | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    path: str | None = None
    level: SegmentLevel = SegmentLevel.L1
    compacted_from: list[int] = field(default_factory=list)
    last_alloc_at: float = 0.0
    is_sorted: bool = False
    """Its rows are in primary-key order (Milvus's ``is_sorted``): said by the writer of
    its files (a flush, an import, a compaction; all sort). Segments recorded before this
    was (catalog version 13) stay False until a compaction rewrites them."""
    key_range: list[Any] | None = None
    """A clustering compaction's target (L2): its lowest and highest clustering key, which
    reads prune by (``elanus.expr.keyranges``); None for every other segment."""

    def row(self) -> list[Any]:
        """The catalog row: the data path relative to the storage root (``layout``), so a
        copied data dir or bucket prefix keeps working."""
        values = [getattr(self, c) for c in COLUMNS]
        values[COLUMNS.index("path")] = layout.relative(self.path)
        values[COLUMNS.index("state")] = self.state.value
        values[COLUMNS.index("level")] = int(self.level)
        values[COLUMNS.index("compacted_from")] = json.dumps(self.compacted_from)
        if self.key_range is not None:
            values[COLUMNS.index("key_range")] = json.dumps(self.key_range)
        return values

    @classmethod
    def from_row(cls, row: tuple[Any, ...], root: str) -> Segment:
        """A record, its path a location under the storage ``root``."""
        d = dict(zip(COLUMNS, row, strict=True))
        d["path"] = layout.absolute(root, d["path"])
        d["state"] = SegmentState(d["state"])
        d["compacted_from"] = json.loads(d["compacted_from"] or "[]")
        d["last_alloc_at"] = d["last_alloc_at"] or 0.0
        d["level"] = SegmentLevel(d["level"])
        d["is_sorted"] = bool(d["is_sorted"])
        d["key_range"] = json.loads(d["key_range"]) if d["key_range"] else None
        return cls(**d)

    @property
    def label(self) -> str:
        return f"segment {self.segment_id}"

    def to_dict(self) -> dict[str, Any]:
        d = {c: getattr(self, c) for c in COLUMNS}
        d["state"] = self.state.value
        d["level"] = int(self.level)
        return d


def save(
    con: duckdb.DuckDBPyConnection,
    segments: list[Segment],
    also: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> None:
    """Upsert segment records, and run ``also`` in the same transaction (an import job's
    own row commits with its segments)."""
    if not segments and also is None:
        return
    placeholders = ", ".join("?" * len(COLUMNS))
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "segment_id")
    con.execute("BEGIN TRANSACTION")  # all or nothing: compaction swaps segments here
    try:
        if segments:
            con.executemany(
                f"INSERT INTO segments ({', '.join(COLUMNS)}) VALUES ({placeholders}) "
                f"ON CONFLICT (segment_id) DO UPDATE SET {updates}",
                [s.row() for s in segments],
            )
        if also is not None:
            also(con)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def load(
    con: duckdb.DuckDBPyConnection,
    root: str,
    where: str = "TRUE",
    params: list[Any] | None = None,
) -> list[Segment]:
    rows = con.execute(
        f"SELECT {', '.join(COLUMNS)} FROM segments WHERE {where} ORDER BY segment_id",
        params or [],
    ).fetchall()
    return [Segment.from_row(r, root) for r in rows]


def save_checkpoint(con: duckdb.DuckDBPyConnection, vchannel: str, seq: int, ts: int) -> None:
    con.execute(
        "INSERT INTO channel_checkpoints VALUES (?, ?, ?) ON CONFLICT (vchannel) "
        "DO UPDATE SET seq = excluded.seq, ts = excluded.ts",
        [vchannel, seq, ts],
    )


def load_checkpoints(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    rows = con.execute("SELECT vchannel, seq, ts FROM channel_checkpoints").fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}
