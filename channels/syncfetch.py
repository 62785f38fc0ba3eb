"""A pull consumer's fetches on a raw NATS connection, in a thread of their own.

nats-py reads every delivery on the event loop: the asyncio transport, its stream reader
and the protocol parser each copy a megabyte DML message once more, and the loop is the
one a standalone's proxy, datanode and query node all share (py-spy, 1M-row insert: the
parser and the socket reads were over a quarter of the server's samples). Here a thread
reads the deliveries straight off a socket (``syncnats.Connection``, one copy per
message) while the loop only hands on the packs.

One fetch is the shape nats-py gives it: a ``no_wait`` pull of up to ``batch`` messages
(what the stream has now, ended by the server's 404/408 status when short), and if that
found nothing, a long poll for one message until ``timeout``. Each pull runs until the
server ended it, so no late delivery of one pull can be taken for the next one's. A pull
that the server leaves unanswered past its expiry, or a lost connection, closes the
connection (UNAVAILABLE; the next fetch connects again): the caller's gap check reads
again whatever a lost connection swallowed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from elanus.channels.syncnats import Connection, ConnectionLost, Pieces, SyncRequester
from elanus.errors import ElanusError, ErrorCode

NO_RESPONDERS = "503"
"""The status NATS ends a request with when nothing serves its subject."""


@dataclass(slots=True)
class Delivered:
    """A message as a consumer needs it: the payload, headers and positions."""

    headers: dict[str, str]
    data: bytes | Pieces
    """The payload (a handed-over one: ``channels/handoff.py``)."""
    seq: int
    """Stream sequence."""
    consumer_seq: int
    pending: int
    """Messages left for the consumer after this one."""


def positions(ack_subject: str) -> tuple[int, int, int]:
    """(stream seq, consumer seq, pending) from a delivery's ``$JS.ACK`` reply subject,
    in its old form (9 tokens) or with domain and account hash (11 or more)."""
    tokens = ack_subject.split(".")
    base = 5 if len(tokens) == 9 else 7
    if len(tokens) != 9 and len(tokens) < 11:
        raise ValueError(f"not a JetStream delivery: {ack_subject[:80]!r}")
    return int(tokens[base]), int(tokens[base + 1]), int(tokens[base + 3])


class ThreadFetcher:
    """Fetches of one durable pull consumer; ``fetch`` runs on this fetcher's thread."""

    def __init__(self, requester: SyncRequester, stream: str, durable: str, name: str) -> None:
        self.requester = requester
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.conn: Connection | None = None
        self._ids = itertools.count(1)
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)

    async def fetch(
        self,
        batch: int,
        timeout: float,
        then: Callable[[list[Delivered]], list[Delivered]] | None = None,
    ) -> list[Delivered]:
        """``batch`` messages at most; [] when none came in ``timeout``. ``then`` runs on
        the fetcher's thread too, on what was fetched."""

        def run() -> list[Delivered]:
            got = self.fetch_here(batch, timeout)
            return then(got) if then is not None else got

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, run)

    def fetch_here(self, batch: int, timeout: float) -> list[Delivered]:
        if self.conn is None:
            self.conn = self.requester.dedicated()  # Unusable when the servers need TLS
        try:
            got = self._pull(self.conn, {"batch": batch, "no_wait": True}, 0.0, timeout)
            if got:
                return got
            return self._pull(
                self.conn, {"batch": 1, "expires": int(timeout * 1e9)}, timeout, timeout, 1
            )
        except ConnectionLost as exc:
            self.drop()
            raise ElanusError(ErrorCode.UNAVAILABLE, f"fetch: {exc}") from None

    def _pull(
        self,
        conn: Connection,
        request: dict[str, object],
        expires: float,
        patience: float,
        wanted: int = 0,
    ) -> list[Delivered]:
        """One pull, read until the server ends it: the first answer may take until the
        pull ``expires``, each next one ``patience`` (a server that stops answering, such
        as a stream electing its leader, fails the fetch as nats-py's timeout would)."""
        token = f"{conn.inbox}.f{next(self._ids)}"
        conn.publish(self.subject, token, orjson.dumps(request))
        deadline = time.monotonic() + expires + patience
        wanted = wanted or int(request["batch"])  # type: ignore[call-overload]
        out: list[Delivered] = []
        while len(out) < wanted:
            msg = conn.read(deadline)
            if msg is None:
                raise ConnectionLost("the server did not end a pull in time")
            deadline = time.monotonic() + patience
            if not msg.reply.startswith("$JS.ACK."):
                if msg.subject == token:
                    if msg.headers.get("Status") == NO_RESPONDERS:
                        # no consumer answers (its servers elect a leader, or it is gone):
                        # a failed fetch, never "at the log's end"
                        raise ConnectionLost("no server answers the consumer's pull (503)")
                    break  # a status (404 no messages, 408 expired, 409 ...) ends the pull
                continue  # a late answer of an abandoned pull cannot be: dropped with it
            seq, consumer_seq, pending = positions(msg.reply)
            out.append(Delivered(msg.headers, msg.data, seq, consumer_seq, pending))
        return out

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        """Close the connection (a fetch in progress fails with it) and end the thread."""
        self.drop()
        self._thread.shutdown(wait=False, cancel_futures=True)
