"""A read's timestamps, from its consistency options: how fresh the delegators' tsafe must
be before it reads (Milvus's guarantee timestamp), and at which timestamp it reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elanus import tsutil
from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.flight.metacache import CollectionInfo
from elanus.flight.search.check import check_issued
from elanus.ops.reads import ReadOptions

if TYPE_CHECKING:
    from elanus.api.coord import CoordAPI
    from elanus.flight import ports
    from elanus.settings import Settings


class ReadTimes:
    """The TSO and the coord's time ticks, as reads use them."""

    def __init__(
        self,
        *,
        loop: ports.LoopBridge,
        coord: CoordAPI,
        clock: ports.TsoClock,
        settings: Settings,
    ) -> None:
        self.loop = loop
        self.coord = coord
        self.clock = clock
        self.settings = settings

    def newest_ts(self) -> int:
        """A fresh TSO timestamp: above every one the cluster has handed out."""
        return self.loop.run(self.clock.alloc_ts())

    def strong_ts(self) -> int:
        """A fresh TSO timestamp, and a tick past it asked for now (not an interval later),
        so the delegators' tsafe reaches it at once."""
        ts = self.newest_ts()
        self.loop.run(self.coord.timeticks.now())
        return ts

    def read_at(
        self, info: CollectionInfo, request: ReadOptions, pinned: int = 0
    ) -> tuple[int, int]:
        """(guarantee timestamp, read timestamp; 0 = the delegator's tsafe).

        As in Milvus, the level only sets how far tsafe must have come before a read (the
        guarantee); the read itself is at the delegator's tsafe after that wait, so no level
        sees less than what is already safe there. Only ``as_of`` names the read timestamp;
        ``pinned``, a timestamp this proxy has just read at (hybrid search's later parts),
        is both.
        """
        if pinned:
            return pinned, pinned
        settings = self.settings
        as_of = request.as_of or 0
        if as_of:
            check_issued(self.newest_ts, as_of, "as_of")
        for key, ts in (  # refused at once, whatever the level
            ("guarantee_timestamp", request.guarantee_timestamp),
            ("session_ts", request.session_ts),
        ):
            if ts:
                check_issued(self.newest_ts, ts, key)
        if as_of:
            oldest = tsutil.compose(tsutil.now_ms() - int(settings.retention_s * 1000))
            if as_of < oldest:
                raise invalid(
                    f"as_of {as_of} is older than the time-travel retention "
                    f"({settings.retention_s:g} s)"
                )
            return as_of, as_of
        named = request.consistency_level
        level = ConsistencyLevel.parse(named or info.consistency_level)
        if level is ConsistencyLevel.STRONG:
            return self.strong_ts(), 0
        own = 0  # the caller's newest write, which it must see
        if level is ConsistencyLevel.SESSION:
            guarantee = own = request.guarantee_timestamp or 0
        elif level is ConsistencyLevel.BOUNDED:
            guarantee = tsutil.compose(tsutil.now_ms() - settings.bounded_staleness_ms)
        else:
            guarantee = 0
        if not named:  # the SDK's default: the collection's level, and the caller's writes
            own = max(own, request.session_ts or 0)
            guarantee = max(guarantee, own)
        if own and self._tick_may_trail(own):
            self.loop.run(self.coord.timeticks.now())
        return guarantee, 0

    def _tick_may_trail(self, ts: int) -> bool:
        """Whether the periodic ticks may not have passed ``ts`` yet: proxies report and
        the coord publishes once an interval each, so a tick passes a write within about
        two intervals. A read of the caller's own newer write then asks for a tick at once,
        as a Strong read does, instead of waiting up to two intervals (Milvus waits; its
        interval is the same 200 ms)."""
        window_ms = 2 * self.settings.timetick_interval_ms
        return tsutil.physical_ms(ts) > tsutil.now_ms() - window_ms
