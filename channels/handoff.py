"""DML payloads handed from a proxy to consumers in the same process, past the log.

In a standalone, every DML byte the proxy publishes used to come straight back from
nats-server to the datanode (and to a loaded collection's delegator) in the same process:
the server sent each megabyte a second time and the consumer's thread read it off a
socket again (py-spy, 200k x 768-d insert: a third of the server's samples in that read).
Consumers of a process that hosts a proxy now read the log *headers only* (JetStream
``headers_only``: the headers, positions and ``Nats-Msg-Size``, no payload) and take each
payload by its ``Nats-Msg-Id`` from this process's ``Handoff``, where the proxy put it
before publishing it.

The log stays the source of truth: a consumer takes a payload only for a message the log
delivered (its order, position and timestamp), and the payload under a msg id is the one
JetStream stored under it (a retry repeats the same bytes; a proxy's ids hold its random
node id). What is not here (another process's write, an import, a payload read once
already, or one evicted because its consumers fell far behind) the consumer reads from
the log itself (``ChannelConsumer``: it reads the whole messages from there on, until it
has caught up).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import psutil

from elanus.channels.dml import H_MSG_ID, H_VCHANNEL
from elanus.channels.syncnats import Pieces

Payload: TypeAlias = bytes | Pieces

CAP_BYTES = min(1 << 30, psutil.virtual_memory().total // 16)
"""Payloads held at most; the oldest are dropped first (their consumers read the log).

A dropped payload costs more than its memory: the consumer that missed it reads whole
messages for a while, nats-server sends it every byte again, and on 2 cores that slows
the consumer further, so more is dropped. Two clients inserting 1M x 128-d (512 MB) put
the datanode 256 MB behind: at a 256 MB cap insert+flush took 2.27-2.66 s (median 2.35),
at 1 GiB 1.93-2.72 s (median 2.02), alternating, 9 runs each. A sixteenth of the
machine's memory bounds it on small machines; flow control's tick lag bounds the lag."""
H_MSG_SIZE = "Nats-Msg-Size"
"""The payload size a headers-only delivery states in place of the payload."""


@dataclass(slots=True)
class Held:
    """A payload waiting for the consumers of its vchannel."""

    vchannel: str
    payload: Payload
    takers: int
    """Consumers of the message's vchannel in this process that have not taken it yet."""


class Handoff:
    """Payloads by msg id, for the consumers of this process that watch their vchannel."""

    def __init__(self, cap_bytes: int = CAP_BYTES) -> None:
        self.cap_bytes = cap_bytes
        self._lock = threading.Lock()
        self._watchers: Counter[str] = Counter()
        self._held: OrderedDict[str, Held] = OrderedDict()
        self._bytes = 0
        self.publishers = 0
        """Proxies of this process offering payloads: without one, consumers read the log."""
        self.dropped = 0
        """Payloads dropped for room before every consumer took them."""
        self.handed = 0
        """Payloads consumers took from here."""

    def watch(self, vchannel: str) -> None:
        """A consumer of ``vchannel`` takes payloads from here from now on."""
        with self._lock:
            self._watchers[vchannel] += 1

    def unwatch(self, vchannel: str) -> None:
        """One consumer fewer; with the last, what it would have taken goes too."""
        with self._lock:
            self._watchers[vchannel] -= 1
            if self._watchers[vchannel] > 0:
                return
            del self._watchers[vchannel]
            for msg_id in [k for k, h in self._held.items() if h.vchannel == vchannel]:
                self._bytes -= len(self._held.pop(msg_id).payload)

    def offer(self, wire: Sequence[tuple[str, dict[str, str], Payload]]) -> None:
        """Hold the payloads of messages about to be published whose vchannel is watched
        here (any thread; before the publish, so no consumer can see a message first)."""
        if not self._watchers:
            return
        with self._lock:
            for _, headers, payload in wire:
                vchannel = headers.get(H_VCHANNEL, "")
                takers = self._watchers.get(vchannel, 0)
                msg_id = headers.get(H_MSG_ID)
                if not takers or not msg_id or not payload:
                    continue
                old = self._held.pop(msg_id, None)
                if old is not None:  # sent again (a retry): the same bytes
                    self._bytes -= len(old.payload)
                self._held[msg_id] = Held(vchannel, payload, takers)
                self._bytes += len(payload)
            while self._bytes > self.cap_bytes and self._held:
                _, held = self._held.popitem(last=False)
                self._bytes -= len(held.payload)
                self.dropped += 1

    def peek(self, msg_id: str | None) -> Payload | None:
        """The payload of ``msg_id``, left here (a fetch may yet be dropped unread)."""
        if msg_id is None:
            return None
        with self._lock:
            held = self._held.get(msg_id)
            return held.payload if held is not None else None

    def take(self, msg_id: str | None) -> Payload | None:
        """The payload of ``msg_id`` for one of its consumers (None: read the log); the
        last of them removes it."""
        if msg_id is None:
            return None
        with self._lock:
            held = self._held.get(msg_id)
            if held is None:
                return None
            held.takers -= 1
            self.handed += 1
            if held.takers <= 0:
                del self._held[msg_id]
                self._bytes -= len(held.payload)
            return held.payload

    @property
    def held_bytes(self) -> int:
        return self._bytes


_BY_URL: dict[str, Handoff] = {}
_BY_URL_LOCK = threading.Lock()


def handoff_for(url: str) -> Handoff:
    """The handoff of everything in this process connected to the NATS at ``url``."""
    with _BY_URL_LOCK:
        found = _BY_URL.get(url)
        if found is None:
            found = _BY_URL[url] = Handoff()
        return found


def payload_size(headers: dict[str, str]) -> int:
    """The payload size stated by a headers-only delivery (0: none, or a whole message)."""
    try:
        return int(headers.get(H_MSG_SIZE, 0))
    except ValueError:
        return 0
