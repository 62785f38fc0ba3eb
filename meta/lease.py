"""The active coordinator's lease: one coord serves, any other started waits (a standby).

The lease is a key of a replicated NATS KV bucket whose entries expire ``ttl`` seconds
after their last write (``coord_lease_ttl_s``). The holder renews it every third of that;
a standby retries creating the key, which succeeds once the holder's entry expired (it
died) or was deleted (it stopped cleanly). A holder that cannot renew for most of a TTL
stops serving (``on_lost``): by then a standby may hold the lease.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable

from nats.errors import Error as NatsError
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)

BUCKET, KEY = subjects.COORD_LEASE_BUCKET, subjects.COORD_LEASE_KEY
POLL_S = 0.2


class CoordLease:
    def __init__(self, bus: Bus, node_id: str, ttl_s: float, on_lost: Callable[[], None]) -> None:
        self.bus, self.node_id, self.ttl_s, self.on_lost = bus, node_id, ttl_s, on_lost
        self.revision = 0
        self.holder = f"{node_id} {uuid.uuid4().hex[:8]}".encode()
        """The lease's value: new at every start, so a coord restarted under the same node
        id is still a new holder to the roles watching (``channels/coordwatch.py``)."""
        self._kv: KeyValue | None = None
        self._task: asyncio.Task[None] | None = None

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

    async def acquire(self, stop: threading.Event | None = None) -> None:
        """Hold the lease, waiting (as a standby) while another coord holds it."""
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
                    log.warning(
                        "standby: coordinator %s holds the lease; taking over when it is gone",
                        await self._holder(kv),
                    )
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
        self._task = asyncio.get_running_loop().create_task(self._renew())

    @staticmethod
    async def _holder(kv: KeyValue) -> str:
        try:
            entry = await kv.get(KEY)
        except Exception:  # noqa: BLE001 - gone meanwhile: only a log line depends on it
            return "?"
        return (entry.value or b"?").decode(errors="replace")

    async def _renew(self) -> None:
        assert self._kv is not None
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                self.revision = await self._kv.update(KEY, self.holder, last=self.revision)
                renewed = time.monotonic()
                continue
            except KeyWrongLastSequenceError:
                lost = "another coordinator holds it"
            except Exception as exc:  # noqa: BLE001 - NATS unreachable: retried below
                if time.monotonic() - renewed < self.ttl_s * 2 / 3:
                    continue
                lost = f"not renewed for {time.monotonic() - renewed:.1f}s ({exc})"
            log.critical("lost the coordinator lease (%s): stopping", lost)
            self.on_lost()
            return

    async def release(self) -> None:
        """Give the lease up at once (a clean stop): a standby need not wait for the TTL."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
            if self._kv is not None:
                try:
                    await self._kv.delete(KEY, last=self.revision)
                except Exception:  # noqa: BLE001 - it expires by itself anyway
                    pass
