"""JetStream publishing from a Flight thread, on a raw NATS connection of its own.

nats-py publishes from the event loop: each message is joined with its command line,
queued, joined again by the flusher and written by the loop, and every acknowledgement is
a future resolved there. For a megabyte of DML that cost the loop about 2 CPU-ms (py-spy:
the flusher's writes and the ack parsing were a third of a standalone's loop during an
insert) while the same publish on a raw socket, the payload handed to the kernel beside
its command line (``sendmsg``), costs a seventh of that (500 x 1 MB, one client: 0.14
against 1.0 CPU-s; ``bench/ingest.py`` has the end-to-end figures).

A ``ThreadPublisher`` holds one connection (``SyncRequester.checkout``) for a stream of
writes: ``send`` puts a batch's messages out, each asking for its acknowledgement on a
token of the connection's inbox, and returns at once; ``wait`` reads acknowledgements
until every message of that batch is answered or they stop coming. What was refused or
went unanswered comes back to the caller, who sends it the loop's way
(``DmlPublisher.publish``: retries through an election, clear errors). Sending again is
safe: every DML message carries a ``Nats-Msg-Id`` the stream dedupes.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from elanus.channels.syncnats import (
    Connection,
    ConnectionLost,
    Pieces,
    SyncRequester,
    header_block,
)

Wire = tuple[str, dict[str, str], bytes | Pieces]
"""A message as it goes out: subject, headers, payload (in pieces, or whole)."""

ACK_STALL_S = 3.0
"""No acknowledgement for this long: give the rest to the loop's publisher (as
``DmlPublisher`` does with its own sends)."""


@dataclass
class Sending:
    """A batch's messages on the wire, by the token each asked its answer on."""

    pending: dict[str, Wire]
    failed: list[Wire] = field(default_factory=list)


class ThreadPublisher:
    """One connection's pipelined publishes (used by one thread at a time)."""

    def __init__(self, requester: SyncRequester) -> None:
        self.requester = requester
        self.conn: Connection | None = requester.checkout()
        self._ids = itertools.count(1)
        self._answers: dict[str, bool] = {}
        """Tokens answered while waiting for another batch: acknowledged or not."""
        self._outstanding = 0

    def send(self, wire: list[Wire]) -> Sending:
        sending = Sending({})
        conn = self.conn
        for message in wire:
            subject, headers, payload = message
            if conn is None or not self._fits(conn, message):
                sending.failed.append(message)  # the loop's way: it knows what to say
                continue
            token = f"{conn.inbox}.p{next(self._ids)}"
            try:
                conn.publish(subject, token, payload, headers)
            except ConnectionLost:
                sending.failed.append(message)
                self._lost()
                conn = None
                continue
            sending.pending[token] = message
            self._outstanding += 1
        return sending

    def wait(self, sending: Sending) -> list[Wire]:
        """Read acknowledgements until each of ``sending``'s messages is answered; the
        messages that were refused, unanswered, or never sent."""
        failed = list(sending.failed)
        pending = sending.pending
        for token in [t for t in pending if t in self._answers]:
            if not self._answers.pop(token):
                failed.append(pending[token])
            del pending[token]
        last = time.monotonic()
        while pending and self.conn is not None:
            try:
                msg = self.conn.read(last + ACK_STALL_S)
            except ConnectionLost:
                self._lost()
                break
            if msg is None:
                break  # silence: the rest goes the loop's way
            last = time.monotonic()
            self._outstanding -= 1
            ok = msg.status is None and b'"error"' not in msg.data  # 503: no stream leader
            message = pending.pop(msg.subject, None)
            if message is None:
                self._answers[msg.subject] = ok  # a later batch's
            elif not ok:
                failed.append(message)
        failed += pending.values()
        pending.clear()
        return failed

    def close(self) -> None:
        """Give the connection back if nothing on it is unanswered, else close it."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self._outstanding == 0:
            self.requester.checkin(conn)
        else:
            conn.close()

    def _fits(self, conn: Connection, message: Wire) -> bool:
        """Whether the connection's server takes the message (headers count: the loop's
        publisher checked it against its own server, which may be another of a cluster)."""
        _, headers, payload = message
        return len(header_block(headers)) + len(payload) <= conn.max_payload

    def _lost(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
