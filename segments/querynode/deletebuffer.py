"""The delegator's delete buffer (seed 001): recent deletes, for segments that join late.

Every delete the delegator consumes is put here. A sealed segment that joins the
distribution later (a handoff after a flush, a compaction target, an import) was loaded
from its files, which may lack the newest deletes; the delegator replays the buffer into
it, in one request per worker. Snapshot readers (``snapshot_read``) add it to segment
files they read themselves.

What may be trimmed. The datanode's channel checkpoint (``ChannelWriter.checkpoint``,
kept by the data coord) is the stream position of the oldest message whose effect is not
yet on disk: a growing segment holds it at its first row until it is flushed with its
deletes, a flushed segment holds it at each pending delete until its delta log is
written, and a compaction writes its sources' deletes first. The stream is cut by time
ticks: every message stamped at or below a tick's timestamp comes before the tick. So if
a tick's sequence is below the checkpoint, every delete stamped at or below that tick is
in the files of every segment it touches that the datanode still writes to, or will be
in a segment written later (a flush or a compaction carries every delete consumed before
it). ``persisted_ts`` finds that tick among the ticks the delegator noted after deletes.

That holds for files read after the checkpoint was observed. So the query coord reads
the checkpoint before it loads a segment on a worker, and sends it with the ``sync`` that
hands the segment over; loads and syncs run one at a time, so every load after that sync
reads newer files. The delegator replays the whole buffer into the newcomers first, then
trims. Two exceptions, both decided by the query coord and the delegator:

- a segment compacted away at the datanode stops receiving deletes (they go to the
  target): while a segment a delegator serves is compacted away but not yet handed over,
  the coord sends no checkpoint (its compaction report lands before the datanode reports
  a checkpoint past the compaction);
- a retired segment (compacted away, kept for snapshot reads planned before) is read from
  its frozen files plus this buffer: it holds the buffer at the floor it had when the
  segment retired (which the rule above kept below the compaction) for ``gc_delay_s``,
  after which its files are due for garbage collection; a read that finds the buffer
  trimmed past a retired segment's hold is refused like one that finds the files gone.

Snapshot reads at a time inside ``retention_s`` need nothing more: a live segment's files
hold every trimmed delete, and a read takes a ``snapshot`` (an immutable copy) in one step
with the distribution, so a trim meanwhile changes nothing it sees.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class DeleteBatch:
    """Buffered deletes as one batch: keys, and the delete timestamp of each key."""

    pks: pa.Array
    ts: np.ndarray
    end: int
    """The buffer position after the last entry read (``DeleteBuffer.batch(start=...)``)."""

    def __len__(self) -> int:
        return len(self.pks)


Entry = tuple[pa.Array, int, int]
"""Keys, delete timestamp, buffer position."""


def _batch(
    entries: tuple[Entry, ...], pk_type: pa.DataType, after_ts: int, end: int
) -> DeleteBatch:
    kept = [(p, t) for p, t, _ in entries if t > after_ts and len(p)]
    if not kept:
        return DeleteBatch(pa.array([], pk_type), np.zeros(0, np.uint64), end)
    pks = pa.concat_arrays([p for p, _ in kept])
    ts = np.repeat(
        np.fromiter((t for _, t in kept), np.uint64, len(kept)),
        np.fromiter((len(p) for p, _ in kept), np.int64, len(kept)),
    )
    return DeleteBatch(pks, ts, end)


@dataclass(frozen=True)
class DeleteSnapshot:
    """The buffer at one moment, for a read that runs while the buffer moves on."""

    entries: tuple[Entry, ...]
    pk_type: pa.DataType
    floor: int

    def batch(self, after_ts: int = 0) -> DeleteBatch:
        end = self.entries[-1][2] + 1 if self.entries else 0
        return _batch(self.entries, self.pk_type, after_ts, end)


class DeleteBuffer:
    """Deletes in arrival order; used from the delegator's event loop only."""

    def __init__(self, pk_type: pa.DataType) -> None:
        self.pk_type = pk_type
        self._entries: list[Entry] = []
        self._end = 0
        self._ticks: deque[tuple[int, int]] = deque()  # (seq, ts) of noted ticks
        self._newest = 0  # the newest delete timestamp put
        self._noted_ts = 0  # the newest noted tick's timestamp
        self.floor = 0
        """Every delete stamped at or below this has been trimmed (0: none)."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def num_keys(self) -> int:
        return sum(len(e[0]) for e in self._entries)

    @property
    def end(self) -> int:
        """The position after the newest entry: how many entries were ever put."""
        return self._end

    def put(self, pks: pa.Array, ts: int) -> None:
        if pks.type != self.pk_type:
            pks = pks.cast(self.pk_type)
        self._entries.append((pks, int(ts), self._end))
        self._end += 1
        self._newest = max(self._newest, int(ts))

    def note_tick(self, seq: int, ts: int) -> None:
        """A tick (stream sequence, timestamp) the channel passed; ``persisted_ts`` maps a
        checkpoint to these. Only ticks that cover a delete not covered by the previous
        one are kept (a pack may hold deletes stamped above its closing tick)."""
        if self._newest > self._noted_ts:
            self._ticks.append((seq, ts))
            self._noted_ts = ts

    def persisted_ts(self, checkpoint_seq: int) -> int:
        """The newest noted tick below a datanode checkpoint: every delete stamped at or
        below it is on disk (module docstring); 0 when there is none."""
        ts = 0
        while self._ticks and self._ticks[0][0] < checkpoint_seq:
            ts = self._ticks.popleft()[1]
        return ts

    def batch(self, after_ts: int = 0, start: int = 0) -> DeleteBatch:
        """Every delete stamped above ``after_ts`` put at position ``start`` or later, as
        one batch (keys concatenated, one timestamp per key)."""
        entries = tuple(e for e in self._entries if e[2] >= start)
        return _batch(entries, self.pk_type, after_ts, self._end)

    def snapshot(self) -> DeleteSnapshot:
        return DeleteSnapshot(tuple(self._entries), self.pk_type, self.floor)

    def trim(self, ts: int) -> int:
        """Drop the deletes stamped at or below ``ts``; how many entries went."""
        if ts <= self.floor:
            return 0
        self.floor = ts
        kept = [e for e in self._entries if e[1] > ts]
        dropped = len(self._entries) - len(kept)
        self._entries = kept  # a new list: a batch or snapshot being built keeps the old
        return dropped
