"""A Flight thread's writes: placed on the loop, sent from the thread itself.

The short, ordered part of a write — the time ticker's task, the timestamp, segment
quotas — stays on the proxy's loop (``DmlService.begin`` and ``end``). The messages go
out on a raw NATS connection the thread holds for its whole request
(``channels/syncpublish.py``), so megabytes of DML never pass through the loop, which
also serves the consumers of a standalone. Where the thread cannot have a connection of
its own (servers that need TLS) or a message is not acknowledged on it, the loop's
publisher sends it, as it sent everything before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from elanus.channels.syncpublish import Sending, ThreadPublisher
from elanus.errors import ElanusError

if TYPE_CHECKING:
    from elanus.channels.bus import Bus
    from elanus.channels.publisher import Piece
    from elanus.channels.syncpublish import Wire
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.ports import LoopBridge
    from elanus.flight.timeticker import DmlTask

log = logging.getLogger(__name__)


@dataclass
class Outgoing:
    """A write stamped and placed (``DmlService.begin``), its messages ready to go out."""

    task: DmlTask
    epoch: int
    ts: int
    used: list[int]
    wire: list[Wire]


class LoopSteps(Protocol):
    """The loop's part of a write (``DmlService``)."""

    async def begin(self, info: CollectionInfo, pieces: list[tuple[int, Piece]]) -> Outgoing:
        """Stamp and place a batch."""
        ...

    async def end(self, out: Outgoing, unsent: list[Wire]) -> int:
        """Send what the thread did not, close the write: its timestamp."""
        ...


@dataclass
class Started:
    out: Outgoing
    sending: Sending | None


class ThreadWrite:
    """One request's writes (a DoPut stream's batches, or one insert)."""

    def __init__(self, steps: LoopSteps, loop: LoopBridge, data_bus: Bus | None) -> None:
        self.steps, self.loop = steps, loop
        self.raw: ThreadPublisher | None = None
        requester = data_bus.sync if data_bus is not None else None
        if requester is not None and requester.usable:
            try:
                self.raw = ThreadPublisher(requester)
            except ElanusError as exc:  # e.g. the servers need TLS: the loop's way
                log.debug("DML from the loop: %s", exc)

    def start(self, info: CollectionInfo, pieces: list[tuple[int, Piece]]) -> Started:
        """Stamp, place and send a batch; ``finish`` must follow (the time ticker waits
        for it)."""
        out = self.loop.run(self.steps.begin(info, pieces))
        if self.raw is None:
            return Started(out, None)
        try:
            return Started(out, self.raw.send(out.wire))
        except Exception:  # noqa: BLE001 - all of it goes the loop's way in finish
            log.exception("sending DML from a Flight thread failed; the loop sends it")
            return Started(out, Sending({}, failed=list(out.wire)))

    def finish(self, started: Started) -> int:
        """Wait until the log took every message of the batch (sending the loop's way what
        this thread's connection did not get acknowledged): the batch's timestamp."""
        out, sending = started.out, started.sending
        unsent = out.wire
        if sending is not None and self.raw is not None:
            try:
                unsent = self.raw.wait(sending)
            except Exception:  # noqa: BLE001 - the loop sends it; the msg ids dedupe
                log.exception("waiting for DML acknowledgements on a Flight thread failed")
        return self.loop.run(self.steps.end(out, unsent))

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None
