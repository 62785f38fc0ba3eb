"""The proxy's cache of segment quotas from the coord (seed 000 §6.3).

Rows are placed in segments from quotas the coord granted in advance, so inserts rarely
wait on the coord. A quota is used only by tasks whose timestamp is below its expiry. When
the coord seals a segment it asks every proxy to ``release`` it: the quota is dropped and
the call returns once no task still publishing into that segment is in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from elanus.api.datacoord import Assigned, AssignSegment

Key = tuple[int, int, str]  # collection, partition, vchannel
RELEASED_TTL_S = 600.0


@dataclass
class Quota:
    segment_id: int
    remaining: int
    expire_ts: int


class SegmentAllocator:
    """Runs on the event loop only (no thread locks needed)."""

    def __init__(
        self, assign: Callable[[AssignSegment], Awaitable[Assigned]], proxy_id: str
    ) -> None:
        self._assign = assign
        self._proxy_id = proxy_id
        self._quotas: dict[Key, list[Quota]] = {}
        self._in_flight: Counter[int] = Counter()
        self._released: dict[int, float] = {}
        """Sealed segments, remembered a while so a late grant reply cannot revive them."""
        self._changed = asyncio.Condition()

    async def place(self, key: Key, rows: int, ts: int) -> list[tuple[int, int]]:
        """Segments for one message of ``rows`` rows at ``ts``: ``[(segment, rows), ...]``.

        Usually one segment; two or more only where the message crosses a segment's row
        limit (the caller then cuts it there). Call ``done`` with the segments after.
        """
        quotas = [
            q
            for q in self._quotas.get(key, [])
            if q.expire_ts > ts and q.segment_id not in self._released
        ]
        self._quotas[key] = quotas
        for q in quotas:
            if q.remaining >= rows:
                q.remaining -= rows
                self._in_flight[q.segment_id] += 1
                return [(q.segment_id, rows)]
        cid, pid, vchannel = key
        reply = await self._assign(
            AssignSegment(
                collection_id=cid,
                partition_id=pid,
                vchannel=vchannel,
                rows=rows,
                proxy_id=self._proxy_id,
            )
        )
        self._quotas[key] = []  # what is left of older quotas cannot hold whole messages
        placed = []
        for grant in reply.assignments:
            n = min(rows, grant.rows)
            rows -= n
            self._quotas[key].append(Quota(grant.segment_id, grant.rows - n, grant.expire_ts))
            if n:
                self._in_flight[grant.segment_id] += 1
                placed.append((grant.segment_id, n))
        return placed

    async def done(self, segment_ids: list[int]) -> None:
        for sid in segment_ids:
            self._in_flight[sid] -= 1
            if self._in_flight[sid] <= 0:
                del self._in_flight[sid]
        async with self._changed:
            self._changed.notify_all()

    async def release(self, segment_ids: list[int]) -> None:
        ids = set(segment_ids)
        now = time.monotonic()
        self._released = {s: t for s, t in self._released.items() if now - t < RELEASED_TTL_S}
        self._released.update((s, now) for s in ids)
        for key in list(self._quotas):
            self._quotas[key] = [q for q in self._quotas[key] if q.segment_id not in ids]
        async with self._changed:
            await self._changed.wait_for(lambda: not any(self._in_flight[s] for s in ids))
