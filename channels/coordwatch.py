"""Requests in flight to a coordinator that died fail when its successor takes the lease.

A request the coordinator received and then died with gets no reply: without this the
caller waits out its whole timeout (30 s), holding a Flight thread, a time-tick report or
a Strong read meanwhile. Every other role reads the coordinator's lease
(``meta/lease.py``) a few times a second; when its value changes from one holder to
another (a standby took over, or a restarted coordinator took it again), the requests still
waiting on ``elanus.coord.*`` fail at once with ``UNAVAILABLE`` (retryable). The new
holder only serves after taking the lease, so none of them can be waiting on it.
"""

from __future__ import annotations

import logging

from nats.errors import Error as NatsError
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

INTERVAL_S = 0.25


class CoordWatch:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.holder: bytes | None = None
        self._kv: KeyValue | None = None

    async def check(self) -> None:
        """One look at the lease (a ``Periodic``'s round)."""
        try:
            if self._kv is None:
                self._kv = await self.bus.js.key_value(subjects.COORD_LEASE_BUCKET)
            holder = (await self._kv.get(subjects.COORD_LEASE_KEY)).value
        except (BucketNotFoundError, KeyNotFoundError):
            return  # no lease yet, or it expired: whoever takes it next is compared
        except NatsError as exc:  # NATS away: requests fall back on their own timeouts
            log.debug("coordinator lease not read: %r", exc)
            return
        if holder and self.holder is not None and holder != self.holder:
            self.replaced()
        if holder:
            self.holder = holder

    def replaced(self) -> None:
        error = ElanusError(
            ErrorCode.UNAVAILABLE,
            "the coordinator that took this request is gone (another took over); retry",
        )
        failed = self.bus.transport.abandon(f"{subjects.COORD}.", error)
        log.warning("a new coordinator holds the lease: %d waiting request(s) failed", failed)
