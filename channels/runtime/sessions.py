"""Service discovery as etcd leases, on a NATS KV bucket whose entries expire (seed 000 §6.0).

Each role puts ``<role>.<node_id>`` into the bucket and refreshes it every TTL/3; the bucket's
max age is the TTL, so a process that stops refreshing (crashed, frozen, partitioned)
disappears from the bucket. ``SessionWatcher`` lists the bucket periodically and reports
joins and leaves to the coord.

The bucket lives in the nats-server's memory: one that restarts comes back without it (and
without the sessions of a standalone killed with it, which is right). A keepalive then
makes the bucket again, and the watcher, seeing a new bucket (or having been unable to
list one for a while), waits for every live role's keepalive before it believes any role
left (``LEAVE_GRACE``): else every role "left" at once, and the coord placed their
channels and replicas again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import (
    APIError,
    BucketNotFoundError,
    KeyNotFoundError,
    NoStreamResponseError,
)
from nats.js.kv import KeyValue

from elanus.channels.bus import Bus
from elanus.channels.jsretry import is_transient
from elanus.channels.replicas import raise_replicas, replica_error
from elanus.channels.runtime.loop import Periodic
from elanus.channels.subjects import SESSIONS_BUCKET

log = logging.getLogger(__name__)

LEAVE_GRACE = 0.5
"""After a watcher could not list the bucket for a while (NATS away), it reports no leave
for this share of the TTL: every live role's keepalive (each third of it) is back by then."""


@dataclass
class SessionInfo:
    role: str
    node_id: str
    address: str = ""
    started_at: float = field(default_factory=time.time)
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.role}.{self.node_id}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["uptime_s"] = round(time.time() - self.started_at, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionInfo:
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**d)


async def sessions_bucket(bus: Bus, ttl_s: float) -> KeyValue:
    """Open the sessions bucket, creating it (memory storage, max age = TTL, the bus's
    ``stream_replicas`` copies) if missing."""
    try:
        return await bus.js.key_value(SESSIONS_BUCKET)
    except BucketNotFoundError:
        pass
    config = KeyValueConfig(
        bucket=SESSIONS_BUCKET,
        ttl=ttl_s,
        history=1,
        storage=StorageType.MEMORY,
        replicas=bus.stream_replicas,
    )
    try:
        return await bus.js.create_key_value(config)
    except Exception as exc:  # noqa: BLE001 - another process may have created it meanwhile
        try:
            return await bus.js.key_value(SESSIONS_BUCKET)
        except BucketNotFoundError:
            if isinstance(exc, APIError):
                raise replica_error(f"KV_{SESSIONS_BUCKET}", bus.stream_replicas, exc) from None
            raise exc from None


class Session:
    """One role's registration, kept alive until ``stop`` (or until the process dies)."""

    def __init__(
        self,
        bus: Bus,
        info: SessionInfo,
        ttl_s: float = 6.0,
        refresh: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.bus = bus
        self.info = info
        self.ttl_s = ttl_s
        self.refresh = refresh
        """Figures that change (memory, channel lag): merged into ``info.meta`` at each put."""
        self._kv: KeyValue | None = None
        self._puts = 0
        """Puts under way. ``stop`` lets them land before it purges: a put that a role's own
        task (a memory update) started as the role stopped must not land after the purge
        (the key would live on for a TTL, and a coord starting then would place on a role
        gone). Puts do not wait for each other: one held up by a NATS election must not
        hold the next keepalive back."""
        self._landed = asyncio.Event()
        self._landed.set()
        self._keepalive = Periodic(self._put, ttl_s / 3, f"session {info.key} keepalive")

    async def start(self) -> Session:
        self._kv = await sessions_bucket(self.bus, self.ttl_s)
        await raise_replicas(self.bus.js, f"KV_{SESSIONS_BUCKET}", self.bus.stream_replicas)
        await self._put()
        self._keepalive.start()
        return self

    async def publish(self) -> None:
        """Publish ``info`` now (its meta changed), not at the next keepalive."""
        await self._put()

    async def _put(self) -> None:
        kv = self._kv
        if kv is None:  # stopping, or stopped
            return
        self._puts += 1
        self._landed.clear()
        try:
            await self._put_now(kv)
        finally:
            self._puts -= 1
            if not self._puts:
                self._landed.set()

    async def _put_now(self, kv: KeyValue) -> None:
        if self.refresh is not None:
            self.info.meta.update(self.refresh())
        value = json.dumps(asdict(self.info)).encode()
        try:
            try:
                await kv.put(self.info.key, value)
            except NoStreamResponseError:  # the bucket is gone (a log restarted empty)
                kv = await sessions_bucket(self.bus, self.ttl_s)
                if self._kv is not None:  # not stopping meanwhile
                    self._kv = kv
                await kv.put(self.info.key, value)
        except Exception as exc:
            if not is_transient(exc):
                raise
            # the bucket's stream is electing a leader (a NATS server died): the next
            # keepalive tries again, well within the TTL unless the election outlasts it
            log.warning("session %s keepalive not stored: %r", self.info.key, exc)

    async def stop(self) -> None:
        """Purge the key, waiting for it no longer than its TTL: the key is gone by then
        anyway (a NATS cluster without a quorum never answers; the default JetStream
        timeout would hold every role's stop for it)."""
        await self._keepalive.stop()
        kv, self._kv = self._kv, None  # no put starts after this
        try:
            await asyncio.wait_for(self._landed.wait(), self.ttl_s)
        except TimeoutError:
            pass  # a put stuck on a NATS without quorum: the key expires by itself
        if kv is not None and self.bus.connected:  # else it expires by itself
            try:
                await asyncio.wait_for(kv.purge(self.info.key), self.ttl_s)
            except Exception:  # noqa: BLE001 - NATS may already be gone
                pass


async def list_sessions(bus: Bus, ttl_s: float = 6.0) -> list[SessionInfo]:
    """Live sessions. The key list comes from one stream-info request (an expired key is
    simply absent), not from a KV watcher, which can wait forever on a key that expires
    while it is being listed."""
    return (await _listed(bus, ttl_s))[0]


async def purge_sessions_of(bus: Bus, pid: int, ttl_s: float = 6.0) -> list[str]:
    """Purge the sessions of process ``pid`` of this host, known dead (its parent saw it
    exit): the coord sees its roles leave at its next poll rather than a TTL later, and
    stops waiting for their time ticks. The keys purged."""
    kv = await sessions_bucket(bus, ttl_s)
    here = socket.gethostname()
    gone = [s.key for s in await list_sessions(bus, ttl_s) if s.pid == pid and s.host == here]
    for key in gone:
        await kv.purge(key)
    return gone


async def _listed(bus: Bus, ttl_s: float) -> tuple[list[SessionInfo], str]:
    """Live sessions, and when their bucket was made (a new one: the log restarted)."""
    kv = await sessions_bucket(bus, ttl_s)
    info = await bus.js.stream_info(f"KV_{SESSIONS_BUCKET}", subjects_filter=">")
    prefix = f"$KV.{SESSIONS_BUCKET}."
    keys = [s[len(prefix) :] for s in (info.state.subjects or {}) if s.startswith(prefix)]
    out = []
    for key in keys:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            continue
        if entry.value:
            out.append(SessionInfo.from_dict(json.loads(entry.value)))
    out.sort(key=lambda s: (s.role, s.node_id))
    return out, str(getattr(info, "created", ""))


Listener = Callable[[str, SessionInfo], Awaitable[None]]


class SessionWatcher:
    """Polls the bucket and calls ``listener("join"|"leave", info)`` on changes."""

    def __init__(
        self,
        bus: Bus,
        listener: Listener | None = None,
        ttl_s: float = 6.0,
        interval_s: float | None = None,
    ) -> None:
        self.bus = bus
        self.listener = listener
        self.ttl_s = ttl_s
        self.interval_s = interval_s or max(0.1, ttl_s / 6)
        self.live: dict[str, SessionInfo] = {}
        self._listed_at = time.monotonic()
        self._bucket = ""
        self._grace_until = 0.0
        self._periodic = Periodic(self.poll, self.interval_s, "session watch")

    async def start(self) -> SessionWatcher:
        await self.poll()
        self._periodic.start()
        return self

    async def poll(self) -> None:
        try:
            listed, bucket = await _listed(self.bus, self.ttl_s)
        except Exception:
            self._listed_at = 0.0
            raise
        current = {s.key: s for s in listed}
        now = time.monotonic()
        new_bucket, self._bucket = self._bucket not in ("", bucket), bucket
        if new_bucket or now - self._listed_at > 3 * self.interval_s:  # blind for a while
            self._grace_until = now + LEAVE_GRACE * self.ttl_s
        self._listed_at = now
        joined = [s for k, s in current.items() if k not in self.live]
        left = [s for k, s in self.live.items() if k not in current]
        if left and now < self._grace_until:  # their keepalives may not be back yet
            current.update({s.key: s for s in left})
            left = []
        self.live = current
        if self.listener is not None:
            for s in joined:
                await self.listener("join", s)
            for s in left:
                await self.listener("leave", s)

    def of_role(self, role: str) -> list[SessionInfo]:
        return [s for s in self.live.values() if s.role == role]

    async def stop(self) -> None:
        await self._periodic.stop()
