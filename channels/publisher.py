"""The one way DML reaches the log, for the proxy (insert, upsert, delete) and import jobs.

Rows are routed by primary key to vchannels (``elanus.pkhash``), cut into pieces whose whole
message — Arrow IPC payload *and* NATS headers — stays below the connected server's
``max_payload`` (from its INFO: a stock ``nats-server`` allows 1 MB, and refuses a larger
message by closing the connection), and each piece is encoded once. Every message carries a
``Nats-Msg-Id``: JetStream drops a repeated id within the stream's duplicate window, so a
retry never writes twice. ``publish`` returns only once JetStream acknowledged every
message, so a write the caller acknowledges survives kill -9.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from elanus.channels.dml import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DmlMessage,
    IpcPayload,
    MsgType,
    delete_batch,
    ipc_bytes,
    ipc_payload,
    pchannel_of,
)
from elanus.channels.jsretry import LOG_RETRY_WINDOW_S, QUORUM_HINT, publish_acked
from elanus.channels.syncnats import Pieces, header_block
from elanus.channels.syncpublish import Wire
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.pkhash import shard_of

log = logging.getLogger(__name__)

HEADER_RESERVE = 1024
"""Bytes of every message kept for its NATS headers (``publish`` checks the real ones)."""
SAFETY_MARGIN = 8 * 1024
"""Bytes kept below the server's limit besides the headers, for what we did not count."""
ACK_STALL_S = 3.0
"""Acknowledgements stopped coming this long: send the rest again (a stream leader may be
gone; its successor is elected in 4-9 s, which ``publish_acked`` waits out)."""
ACK_POLL_S = 0.1


@dataclass
class Piece:
    """One message's rows: its vchannel, kind and encoded payload."""

    kind: MsgType
    vchannel: str
    rows: int
    payload: IpcPayload
    batch: pa.RecordBatch | None = None
    """Kept for inserts, to cut the message where it crosses a segment boundary."""

    def cut(self, sizes: list[int]) -> list[Piece]:
        """Pieces of ``sizes`` rows each; parts of a piece are smaller, so they fit too."""
        if len(sizes) == 1:
            return [self]
        assert self.batch is not None
        out, offset = [], 0
        for n in sizes:
            part = self.batch.slice(offset, n)
            out.append(Piece(self.kind, self.vchannel, n, ipc_payload(part), part))
            offset += n
        return out


def route(
    pks: pa.Array, vchannels: Sequence[str], table: pa.Table | None = None
) -> list[tuple[str, pa.Table | None, pa.Array]]:
    """Each vchannel's rows (and keys), by key hash; vchannels without rows are left out."""
    if len(vchannels) == 1:
        return [(vchannels[0], table, pks)] if len(pks) else []
    shard = shard_of(pks, len(vchannels))
    order = pa.array(np.argsort(shard, kind="stable"))
    counts = np.bincount(shard, minlength=len(vchannels))
    rows = table.take(order) if table is not None else None
    keys = pks.take(order)
    groups, offset = [], 0
    for s, n in enumerate(counts.tolist()):
        if n:
            part = rows.slice(offset, n) if rows is not None else None
            groups.append((vchannels[s], part, keys.slice(offset, n)))
        offset += n
    return groups


def header_bytes(headers: dict[str, str]) -> int:
    """The size of ``headers`` on the wire (``NATS/1.0`` and a CRLF-ended line per header)."""
    return len(header_block(headers))


def encode_pieces(
    batch: pa.RecordBatch, target: int, limit: int
) -> list[tuple[pa.RecordBatch, IpcPayload]]:
    """``batch`` cut into slices whose IPC encoding is at most ``target`` bytes, each
    encoded once (a slice the estimate made too large is halved and encoded again). A
    single row may take up to ``limit``; a larger one is refused, naming the limit."""
    if batch.num_rows == 0:
        return []
    empty = pa.RecordBatch.from_pylist([], schema=batch.schema)
    overhead = len(ipc_bytes(empty))
    per_row = max(1.0, batch.nbytes / batch.num_rows)
    step = max(1, int((target - overhead) * 0.97 / per_row))
    todo = [batch.slice(i, step) for i in range(0, batch.num_rows, step)][::-1]  # pop: first
    out: list[tuple[pa.RecordBatch, IpcPayload]] = []
    while todo:
        part = todo.pop()
        payload = ipc_payload(part)
        if len(payload) <= target or (part.num_rows == 1 and len(payload) <= limit):
            out.append((part, payload))
        elif part.num_rows == 1:
            raise invalid(
                f"a row takes {len(payload)} bytes encoded, more than a DML message may "
                f"carry: {limit} bytes (the NATS server's max_payload of "
                f"{limit + HEADER_RESERVE + SAFETY_MARGIN} bytes, less "
                f"{HEADER_RESERVE + SAFETY_MARGIN} for headers and margin); store less in one row"
            )
        else:
            half = part.num_rows // 2
            todo += [part.slice(half), part.slice(0, half)]
    return out


class DmlPublisher:
    """Cuts, encodes and publishes DML messages on one NATS connection (``nc``/``js``).

    ``preferred_bytes`` is the payload size pieces are cut near when the server allows
    more (messages of a few MB would make consumers' batches coarse); the server's limit
    is read at each call, as a reconnect may reach a server with another.
    """

    def __init__(
        self,
        nc: NatsClient,
        js: JetStreamContext,
        *,
        preferred_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        retry_window_s: float = LOG_RETRY_WINDOW_S,
    ) -> None:
        self.nc = nc
        self.js = js
        self.preferred_bytes = preferred_bytes
        self.retry_window_s = retry_window_s
        """How long a message the log did not take is sent again before UNAVAILABLE."""

    @property
    def server_max_payload(self) -> int:
        """What the server accepts per message, headers and payload together."""
        return int(self.nc.max_payload)

    @property
    def payload_limit(self) -> int:
        """The largest payload a message may have (a single row can take this much)."""
        return self.server_max_payload - HEADER_RESERVE - SAFETY_MARGIN

    @property
    def target_bytes(self) -> int:
        return min(self.preferred_bytes, self.payload_limit)

    # -- cutting (any thread) --------------------------------------------------------------
    def pieces(
        self,
        kind: MsgType,
        vchannels: Sequence[str],
        pks: pa.Array,
        table: pa.Table | None = None,
    ) -> list[Piece]:
        """Route ``table``'s rows (INSERT) or the keys ``pks`` (DELETE) to ``vchannels``
        and cut and encode them; raises INVALID_ARGUMENT, before anything is published,
        when one row alone is over the limit."""
        if kind not in (MsgType.INSERT, MsgType.DELETE):
            raise ValueError(f"{kind} messages carry no rows")
        if kind is MsgType.INSERT and table is None:
            raise ValueError("an INSERT needs its rows")
        target, limit = self.target_bytes, self.payload_limit
        out: list[Piece] = []
        for vchannel, rows, keys in route(
            pks, vchannels, table if kind is MsgType.INSERT else None
        ):
            if kind is MsgType.DELETE:
                batches = [delete_batch(keys)]
            else:
                assert rows is not None
                batches = rows.combine_chunks().to_batches()
            keep = kind is MsgType.INSERT
            out += [
                Piece(kind, vchannel, part.num_rows, payload, part if keep else None)
                for b in batches
                for part, payload in encode_pieces(b, target, limit)
            ]
        return out

    # -- publishing (the event loop) ---------------------------------------------------------
    async def publish(self, sends: Sequence[tuple[DmlMessage, bytes | Pieces]], what: str) -> None:
        """Publish each (message headers, payload) and wait for every acknowledgement,
        sending again what failed or went unanswered (``channels/jsretry.py``); UNAVAILABLE
        names ``what`` if JetStream still did not take all of it. Every message needs a
        ``msg_id``."""
        await self.publish_wire([self.wire(m, payload) for m, payload in sends], what)

    async def publish_wire(self, wire: Sequence[Wire], what: str) -> None:
        """``publish`` of messages already checked (``wire``)."""
        # nats-py takes a payload whole: join the pieces (this path is the fallback)
        joined = [(s, h, bytes(p) if isinstance(p, Pieces) else p) for s, h, p in wire]
        again: list[tuple[str, dict[str, str], bytes]] = []
        futures: list[tuple[tuple[str, dict[str, str], bytes], asyncio.Future[Any]]] = []
        for w in joined:
            subject, headers, payload = w
            try:
                futures.append((w, await self.js.publish_async(subject, payload, headers=headers)))
            except Exception:  # noqa: BLE001 - sent again below; the msg id dedupes
                again.append(w)
        await self._acks({f for _, f in futures})
        for w, future in futures:
            if not future.done():
                future.cancel()
                again.append(w)
            elif future.cancelled() or future.exception() is not None:
                again.append(w)
        if not again:
            return
        log.warning("%d of %d DML messages of %s unacknowledged; sending again", len(again),
                    len(wire), what)  # fmt: skip
        naming = f"{what} ({len(again)} of {len(wire)} messages)"
        outcomes = await asyncio.gather(
            *(
                publish_acked(self.js, s, p, h, window=self.retry_window_s, what=naming)
                for s, h, p in again
            ),
            return_exceptions=True,
        )
        failed = [r for r in outcomes if isinstance(r, BaseException)]
        if failed:
            first = failed[0]
            if isinstance(first, ElanusError):
                raise first
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"the log (NATS JetStream) did not accept {naming}: {first!r}. {QUORUM_HINT}",
            ) from first

    async def _acks(self, pending: set[asyncio.Future[Any]]) -> None:
        """Wait for acknowledgements while they keep coming; stop early when the connection
        moved to another server (what was in flight on the old one is never answered)."""
        reconnects = self.nc.stats["reconnects"]
        last = time.monotonic()
        while pending:
            done, pending = await asyncio.wait(
                pending, timeout=ACK_POLL_S, return_when=asyncio.FIRST_COMPLETED
            )
            now = time.monotonic()
            if done:
                last = now
                continue
            moved = self.nc.stats["reconnects"] != reconnects and self.nc.is_connected
            if moved or now - last > ACK_STALL_S:  # a large write may take long: only
                return  # silence ends the wait

    def wire(self, msg: DmlMessage, payload: bytes | Pieces) -> Wire:
        """The message as it goes out; checked (a msg id, headers and payload that fit)."""
        if not msg.msg_id:
            raise ValueError("a DML message needs a msg_id: JetStream dedupes retries by it")
        if msg.batch is not None:
            raise ValueError("pass the encoded payload, not the batch: it is encoded once")
        subject, headers, _ = msg.encode(pchannel_of(msg.vchannel))
        size = header_bytes(headers)
        if size > HEADER_RESERVE or len(payload) > self.payload_limit:
            raise ElanusError(
                ErrorCode.INTERNAL,
                f"a DML message for {msg.vchannel} has {size} bytes of headers and "
                f"{len(payload)} of payload; the server takes {self.server_max_payload} "
                f"bytes per message ({HEADER_RESERVE} kept for headers)",
            )
        return subject, headers, payload
