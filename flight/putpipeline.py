"""Publishing a DoPut's batches with several in flight (a Flight thread's write pipeline).

A batch's publish mostly waits for JetStream's acknowledgements. Waiting for each before
checking the next left the Flight thread idle for a fifth of an insert (py-spy, 300k x
128-d). So up to ``DEPTH`` checked batches are out at once (sent from this thread,
``flight/threadwrite.py``) while the thread checks the next; acknowledgements go back to
the client in the batches' order, each once its batch is in the log. Used as a context
manager: when checking a batch fails, the batches already in flight are still
acknowledged (every batch written before a bad one reaches the client as a PutResult)
before the error ends the stream. When a publish fails, the batches after it are waited
for (none is left running after the error reaches the client) and the first error is
raised; a stream written without ``atomic`` may then hold batches after the failed one,
as a client that retries an insert must expect anyway (upserts are safe to repeat).
"""

from __future__ import annotations

import collections
from types import TracebackType
from typing import TYPE_CHECKING

import pyarrow.flight as flight

from elanus.flight.metacache import CollectionInfo
from elanus.flight.threadwrite import Started, ThreadWrite
from elanus.wire.putresult import PutAck

if TYPE_CHECKING:
    import pyarrow as pa

    from elanus.flight.dml import Prepared

DEPTH = 3
"""Batches publishing at once (each at most ``max_request_bytes``, 64 MiB by default)."""


class PutPipeline:
    def __init__(
        self, writes: ThreadWrite, info: CollectionInfo, writer: flight.FlightMetadataWriter
    ) -> None:
        self.info = info
        self.writer = writer
        self.writes = writes
        self._in_flight: collections.deque[tuple[pa.Array, Started]] = collections.deque()

    def __enter__(self) -> PutPipeline:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is None:
                self.finish()
                return
            try:  # the error in hand ends the stream; what was written before it is said first
                self.finish()
            except Exception:  # noqa: BLE001, S110 - the earlier error is the one raised
                pass
        finally:
            self.writes.close()

    def add(self, prepared: Prepared) -> None:
        """Start publishing ``prepared``; acknowledge the oldest batches beyond ``DEPTH``."""
        self._in_flight.append((prepared.pks, self.writes.start(self.info, prepared.pieces)))
        while len(self._in_flight) > DEPTH:
            self._acknowledge_oldest()

    def finish(self) -> None:
        """Acknowledge every batch still in flight."""
        while self._in_flight:
            self._acknowledge_oldest()

    def _acknowledge_oldest(self) -> None:
        pks, started = self._in_flight.popleft()
        try:
            ts = self.writes.finish(started)
        except BaseException:
            self._drain()
            raise
        self.writer.write(PutAck(pks, ts).encode())

    def _drain(self) -> None:
        """Finish the batches still in flight after a failure (their outcome is moot, but
        the time ticker waits for each)."""
        for _, started in self._in_flight:
            try:
                self.writes.finish(started)
            except Exception:  # noqa: BLE001, S112 - the first error is the one raised
                continue
        self._in_flight.clear()
