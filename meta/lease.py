"""The active coordinator's lease: one coord serves, any other started waits (a standby).

The lease is a key of a replicated NATS KV bucket whose entries expire ``ttl`` seconds
after their last write (``coord_lease_ttl_s``). The holder renews it every third of that;
a standby retries creating the key, which succeeds once the holder's entry expired (it
died) or was deleted (it stopped cleanly).

A holder that cannot renew for two thirds of a TTL (NATS away, or restarting) *lapses*:
it hands out no timestamp (``check``), since a standby may take the lease once the TTL
is over. It is not lost yet: when NATS answers again the holder looks at the key. Its own
value, or no value at all (the entry expired while the log was down), and it takes the
lease again; another coord's value, and it is lost for good (``on_lost``: the coord
stops). A lapse longer than the TTL ends with ``on_retaken``, where the coord checks that
nobody wrote its catalog meanwhile (``meta/journal.py``'s fencing).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping

from nats.errors import Error as NatsError
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.errors import ElanusError, ErrorCode, coord_lapsed

log = logging.getLogger(__name__)

BUCKET, KEY = subjects.COORD_LEASE_BUCKET, subjects.COORD_LEASE_KEY
POLL_S = 0.2
"""How often a standby tries to take the lease, and a lapsed holder to take it again."""


class LeaseState(enum.StrEnum):
    WAITING = "waiting"
    """Not held yet: a standby, or a coord starting."""
    HELD = "held"
    LAPSED = "lapsed"
    """Not renewed for two thirds of a TTL: no timestamps until it is taken again."""
    LOST = "lost"
    """Another coord holds it: this one stops."""
    RELEASED = "released"


_W, _H, _L = LeaseState.WAITING, LeaseState.HELD, LeaseState.LAPSED
_X, _R = LeaseState.LOST, LeaseState.RELEASED
LEASE_TRANSITIONS: Mapping[LeaseState, frozenset[LeaseState]] = {
    _W: frozenset({_H, _R}),
    _H: frozenset({_L, _X, _R}),
    _L: frozenset({_H, _X, _R}),
    _X: frozenset({_R}),
    _R: frozenset(),
}


class _Taken(Exception):
    """The key holds another coord's value."""


class CoordLease:
    def __init__(
        self,
        bus: Bus,
        node_id: str,
        ttl_s: float,
        on_lost: Callable[[], None],
        on_retaken: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.bus, self.node_id, self.ttl_s, self.on_lost = bus, node_id, ttl_s, on_lost
        self.on_retaken = on_retaken
        """Awaited after a lapse longer than the TTL ended with the lease taken again:
        False when another coord wrote the catalog meanwhile (this one is then lost)."""
        self.revision = 0
        self.state = LeaseState.WAITING
        self.held_since = 0.0
        """When the lease was last taken (monotonic): services that count a peer's silence
        start counting there, the coord having refused everything while it lapsed."""
        self.holder = f"{node_id} {uuid.uuid4().hex[:8]}".encode()
        """The lease's value: new at every start, so a coord restarted under the same node
        id is still a new holder to the roles watching (``channels/coordwatch.py``)."""
        self._renewed = 0.0
        self._kv: KeyValue | None = None
        self._task: asyncio.Task[None] | None = None

    def _move(self, new: LeaseState) -> None:
        if new not in LEASE_TRANSITIONS[self.state]:
            raise ElanusError(
                ErrorCode.INTERNAL, f"illegal coordinator lease change: {self.state} -> {new}"
            )
        self.state = new
        if new is LeaseState.HELD:
            self.held_since = time.monotonic()

    def serving_since(self) -> float:
        """Since when the coord answers (monotonic; now while it does not): a peer's
        silence counts from there, its reports having been refused while the lease
        lapsed."""
        return self.held_since if self.state is LeaseState.HELD else time.monotonic()

    def check(self) -> None:
        """Refuse (UNAVAILABLE, retryable) while the lease is not surely held: a timestamp
        handed out then could be older than one a standby that took over gave out."""
        if self.state is not LeaseState.HELD:
            raise coord_lapsed(str(self.state))

    async def _bucket(self) -> KeyValue:
        try:
            return await self.bus.js.key_value(BUCKET)
        except BucketNotFoundError:
            pass
        config = KeyValueConfig(
            bucket=BUCKET,
            ttl=self.ttl_s,
            history=1,
            storage=StorageType.FILE,
            replicas=self.bus.stream_replicas,
        )
        try:
            return await self.bus.js.create_key_value(config)
        except Exception:  # noqa: BLE001 - another coord created it meanwhile
            return await self.bus.js.key_value(BUCKET)

    async def acquire(
        self,
        stop: threading.Event | None = None,
        on_waiting: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Hold the lease, waiting (as a standby) while another coord holds it;
        ``on_waiting`` is awaited once, when the wait begins."""
        waiting_since: float | None = None
        unanswered = 0
        while True:
            try:
                kv = self._kv = self._kv or await self._bucket()
                self.revision = await kv.create(KEY, self.holder)
                break
            except KeyWrongLastSequenceError:
                if waiting_since is None:
                    waiting_since = time.monotonic()
                    log.info(  # a standby is a normal state: ``elanus status`` lists it
                        "standby: coordinator %s holds the lease; taking over when it is gone",
                        await self._holder(kv),
                    )
                    if on_waiting is not None:
                        await on_waiting()
            except KeyNotFoundError:
                pass  # the holder's entry expired between the two requests of ``create``
            except NatsError as exc:  # the bucket's stream electing a leader, NATS away
                unanswered += 1
                (log.warning if unanswered == 1 else log.debug)(
                    "the coordinator lease's bucket did not answer (%r); retrying", exc
                )
            if stop is not None and stop.is_set():
                raise ElanusError(ErrorCode.UNAVAILABLE, "stopped while waiting as a standby")
            await asyncio.sleep(POLL_S)
        if waiting_since is not None:
            log.warning("took over as the active coordinator")
        self._renewed = time.monotonic()
        self._move(LeaseState.HELD)
        self._task = asyncio.get_running_loop().create_task(self._keep())

    @staticmethod
    async def _holder(kv: KeyValue) -> str:
        try:
            entry = await kv.get(KEY)
        except Exception:  # noqa: BLE001 - gone meanwhile: only a log line depends on it
            return "?"
        return (entry.value or b"?").decode(errors="replace")

    async def _renew(self) -> None:
        """One write of our value; the key changed under us is looked at (``_retake``)."""
        assert self._kv is not None
        try:
            self.revision = await self._kv.update(KEY, self.holder, last=self.revision)
        except KeyWrongLastSequenceError:
            await self._retake(self._kv)

    async def _retake(self, kv: KeyValue) -> None:
        """The key is not at our last revision: it expired (the log was down longer than
        the TTL), the log restarted on a store that lost our last write, or another coord
        took it. Only the last ends the lease (``_Taken``)."""
        try:
            entry = await kv.get(KEY)
        except KeyNotFoundError:
            try:
                self.revision = await kv.create(KEY, self.holder)
                return
            except KeyWrongLastSequenceError:
                entry = await kv.get(KEY)  # another coord created it first
        if entry.value != self.holder:
            raise _Taken((entry.value or b"?").decode(errors="replace"))
        self.revision = await kv.update(KEY, self.holder, last=entry.revision)

    async def _keep(self) -> None:
        """Renew every third of the TTL while held; every ``POLL_S`` while lapsed."""
        while True:
            held = self.state is LeaseState.HELD
            await asyncio.sleep(self.ttl_s / 3 if held else POLL_S)
            try:  # a request NATS buffers while reconnecting may wait long: not the lease
                await asyncio.wait_for(self._renew(), self.ttl_s / 3)
                if not held:
                    await self._end_lapse()
                self._renewed = time.monotonic()
            except _Taken as taken:
                log.critical("lost the coordinator lease (coordinator %s holds it): stopping",
                             taken)  # fmt: skip
                self._move(LeaseState.LOST)
                self.on_lost()
                return
            except Exception as exc:  # noqa: BLE001 - NATS away or restarting: retried
                unrenewed = time.monotonic() - self._renewed
                if held and unrenewed >= self.ttl_s * 2 / 3:
                    log.error(
                        "coordinator lease not renewed for %.1fs (%r): no timestamps until "
                        "it is taken again",
                        unrenewed,
                        exc,
                    )
                    self._move(LeaseState.LAPSED)

    async def _end_lapse(self) -> None:
        """Taken again after a lapse: held once nobody wrote the catalog meanwhile (only
        possible when the lapse outlasted the TTL)."""
        lapse = time.monotonic() - self._renewed
        retaken = self.on_retaken
        if lapse >= self.ttl_s and retaken is not None and not await retaken():
            raise _Taken("another one, which wrote the catalog meanwhile")
        log.warning("took the coordinator lease again after %.1fs", lapse)
        self._move(LeaseState.HELD)

    async def release(self) -> None:
        """Give the lease up at once (a clean stop): a standby need not wait for the TTL."""
        if self.state is not LeaseState.RELEASED:
            self._move(LeaseState.RELEASED)
        if self._task is not None:
            self._task.cancel()
            self._task = None
            if self._kv is not None:
                try:
                    await self._kv.delete(KEY, last=self.revision)
                except Exception:  # noqa: BLE001 - it expires by itself anyway
                    pass
