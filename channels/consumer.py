"""Consuming one vchannel in packs between time ticks (seed 003): what datanodes and
query-node delegators both do.

A durable pull consumer reads the vchannel's data and its pchannel's ticks in stream
order. Messages are collected until a tick; the pack is then handed on sorted by
timestamp (deletes before inserts at one timestamp: an upsert deletes the older row, not
its own), so the result never depends on how publishes from several proxies interleaved.

Delivery is unacknowledged (nothing to redeliver, nothing to track per message); a gap in
the consumer sequence — messages dropped on the way under load — makes the consumer read
again from the last position it handed on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from elanus.channels.bus import Bus
from elanus.channels.dml import (
    H_MSG_ID,
    DmlMessage,
    IpcPayload,
    MsgType,
    data_subject,
    read_ipc,
    stream_name,
    tick_subject,
)
from elanus.channels.handoff import Handoff, handoff_for, payload_size
from elanus.channels.runtime import metrics
from elanus.channels.runtime.loop import cancel_and_wait
from elanus.channels.runtime.supervisor import OnFailure, Supervisor, describe
from elanus.channels.syncfetch import Delivered, ThreadFetcher
from elanus.channels.transport import Unusable
from elanus.tsutil import now_ms, physical_ms

log = logging.getLogger(__name__)

FETCH_BATCH = 16
"""~16 MB of ~1 MB messages per fetch: many vchannels on one connection must stay under
the server's per-client pending limit, or it drops deliveries (slow consumer)."""
HEADERS_BATCH = 64
"""Messages per fetch while reading headers only (a few hundred bytes each)."""
WHOLE_AFTER_MISS_S = 2.0
"""After a payload was not handed over, read whole messages at least this long: writes of
other processes' proxies would otherwise flip the mode (a new consumer) every pack."""
STUCK_AFTER_S = 2.0
"""Fetches that found nothing for this long, while the stream holds messages past this
consumer's position, mean the server side of its durable consumer is gone or stale (a
nats-server died under it): pulls end with a status, no error says so, and tsafe would not
move again. Ticks come several times a second, so a live consumer is never this idle."""
PackHandler = Callable[[list[DmlMessage], int, int], Awaitable[None]]
"""``on_pack(messages, tick_ts, tick_seq)``: the messages before a tick, timestamp order."""


def querynode_durable(node_id: str, vchannel: str) -> str:
    """A query node's delegator consumer: its node id in the name, so the coord can tell a
    dead node's consumers (``meta/housekeeping.py``)."""
    return f"qn_{node_id}_{vchannel}"


def datanode_durable(vchannel: str) -> str:
    """The datanode consumer of a vchannel: one name whichever datanode watches it (the
    next one replaces it at the checkpoint)."""
    return f"dn_{vchannel}"


def durable_owner(name: str, pchannel: str) -> tuple[str, str | None, str] | None:
    """``(role, node id or None, vchannel)`` of a consumer on ``pchannel``'s stream, read
    from its name; None for a name no role makes. The vchannel ends the name, so a node id
    may hold underscores."""
    vchannel = rf"{re.escape(pchannel)}_[0-9]+v[0-9]+"
    found = re.fullmatch(rf"(?:qn_(?P<node>.+)|dn)_(?P<v>{vchannel})", name)
    if found is None:
        return None
    node = found.group("node")
    return ("datanode" if node is None else "querynode", node, found.group("v"))


def pack_order(m: DmlMessage) -> tuple[int, int]:
    return (m.ts, 0 if m.type is MsgType.DELETE else 1)


class ChannelConsumer:
    def __init__(
        self,
        bus: Bus,
        pchannel: str,
        vchannel: str,
        durable: str,
        on_pack: PackHandler,
        *,
        supervisor: Supervisor,
        on_failure: OnFailure | None = None,
        start_seq: int | None = None,
        start_ts: int = 0,
    ) -> None:
        self.bus = bus
        self.supervisor = supervisor
        self.on_failure = on_failure
        self.failure: str | None = None
        """Why the consuming task died (``Type: message``); None while it runs."""
        self.pchannel = pchannel
        self.vchannel = vchannel
        self.durable = durable
        self.on_pack = on_pack
        self.start_seq = start_seq
        self.tick_ts = start_ts
        """The last tick handed on: this consumer's tsafe."""
        self.next_seq = start_seq or 1
        """The stream position after the last message handed on (or collected)."""
        self.pending = 0
        """Messages of the stream left to fetch, as the last one fetched said."""
        self.consumed = 0
        """Rows (inserted or deleted) handed on so far: flow control measures how fast this
        consumer takes the log in from it (``channels/flow.py``)."""
        self._reading_since_ms: int | None = None
        """When the consumer last started reading from a position behind the log's end;
        None once it has caught up (``flow_lag_s``)."""
        self._pack: list[DmlMessage] = []
        self._pack_start: int | None = None
        self._sub: Any = None
        self._fetcher: ThreadFetcher | None = None
        self._consumer_seq = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._going = asyncio.Event()
        self._going.set()
        """Cleared while the consumer is held (``hold``): it fetches nothing meanwhile."""
        self._tick = asyncio.Condition()
        self._tick_for_threads = threading.Condition()
        self.handoff: Handoff | None = handoff_for(bus.url) if bus.in_process else None
        """Payloads this process's proxies publish (``channels/handoff.py``)."""
        self.headers_only = False
        """Reading the log's headers only, the payloads from ``handoff``."""
        self._missed_at = 0.0
        self._watched_after: int | None = None
        self._empty_since: float | None = None
        """When fetches started finding nothing (``_stuck``); None while they deliver."""
        self._watching = False
        self.whole_reads = 0
        """Times a payload was not handed over and whole messages were read instead."""
        self.realigned = 0
        """Handed-over batches copied because a buffer was off 8-byte alignment (a client
        that does not pad its DoPut batches: ``elanus/client/bodyalign.py``)."""

    async def start(self) -> None:
        if self.handoff is not None and not self._watching:
            self.handoff.watch(self.vchannel)
            self._watching = True
        if self.handoff is not None and self.handoff.publishers > 0:
            self._watched_after = await self._last_seq()
        self.headers_only = False  # whole messages until a tick past what came before
        await self._subscribe(self.start_seq)
        requester = self.bus.sync
        if self._fetcher is None and requester is not None and requester.usable:
            self._fetcher = ThreadFetcher(
                requester, stream_name(self.pchannel), self.durable, f"fetch-{self.vchannel}"
            )
        self.failure = None
        self.supervisor.recover(self.task_name)
        self._task = self.supervisor.spawn(
            self.task_name, self._run, vital=True, on_failure=self._failed
        )
        metrics.report(self)

    @property
    def task_name(self) -> str:
        return f"channel {self.vchannel}"

    def _failed(self, exc: BaseException) -> None:
        """The task died mid-pack: nothing is consumed any more (a restart would apply part
        of a pack twice); the owner decides (the datanode has the channel reassigned)."""
        self.failure = describe(exc)
        if self.on_failure is not None:
            self.on_failure(exc)

    @property
    def running(self) -> bool:
        """Consuming: started, not stopped, its task alive (no failure)."""
        return self._task is not None and not self._task.done() and not self._stopping

    @property
    def stopped(self) -> bool:
        """Stopped (the channel was released): tsafe will not move again."""
        return self._stopping

    def hold(self) -> None:
        """Fetch nothing until ``resume`` (the owner lost NATS and waits to hear from the
        coord whether the channel is still its own); a fetch under way finishes. The time
        held is not a backlog writers make: flow control counts the lag from the hold, and
        from the resume until the consumer has caught up (``flow_lag_s``)."""
        self._going.clear()
        self._reading_since_ms = now_ms()

    def resume(self) -> None:
        self._reading_since_ms = now_ms()
        self._going.set()

    @property
    def held(self) -> bool:
        return not self._going.is_set()

    async def stop(self) -> None:
        self._stopping = True
        self._going.set()
        metrics.unreport(self)
        await self._wake_waiters()  # reads waiting for a tick that will never come
        await cancel_and_wait(self._task)
        self._task = None
        if self._fetcher is not None:
            self._fetcher.close()
            self._fetcher = None
        self.supervisor.recover(self.task_name)  # not ours any more, failed or not
        await self._unsubscribe()
        if self.handoff is not None and self._watching:
            self.handoff.unwatch(self.vchannel)
            self._watching = False

    @property
    def tick_lag_s(self) -> float | None:
        """How far tsafe is behind the wall clock; None before the first tick."""
        return max(0.0, (now_ms() - physical_ms(self.tick_ts)) / 1000) if self.tick_ts else None

    @property
    def flow_lag_s(self) -> float | None:
        """The tick lag flow control counts: until a (re)started consumer has caught up
        with the log, from when it started reading, not from its old tsafe. The time no
        consumer read the channel (NATS failing over, the channel between datanodes) is
        not a backlog writers are making now; refusing them does not shorten it, and a
        consumer that cannot catch up still passes the limit on its own clock."""
        lag = self.tick_lag_s
        since = self._reading_since_ms
        if lag is None or since is None:
            return lag
        return min(lag, max(0.0, (now_ms() - since) / 1000))

    def metric_samples(self) -> list[metrics.Sample]:
        role, _, node = self.supervisor.owner.partition(" ")
        labels = (role, node, self.vchannel)
        lag = self.tick_lag_s
        ticks = [] if lag is None else [(metrics.TICK_LAG, labels, lag)]
        return [
            *ticks,
            (metrics.CONSUMER_PENDING, labels, float(self.pending)),
            (metrics.CONSUMER_HEADERS_ONLY, labels, float(self.headers_only)),
        ]

    async def wait_tick(self, ts: int, timeout: float) -> bool:
        """Wait until a tick at or past ``ts`` was handed on (tsafe >= ts); False after
        ``timeout``, or as soon as the consumer stops."""
        async with self._tick:
            try:
                await asyncio.wait_for(
                    self._tick.wait_for(lambda: self.tick_ts >= ts or self._stopping), timeout
                )
            except TimeoutError:
                return False
        return self.tick_ts >= ts

    def wait_tick_in_thread(self, ts: int, timeout: float) -> bool:
        """``wait_tick`` for a thread other than the loop's (a Flight handler)."""
        with self._tick_for_threads:
            self._tick_for_threads.wait_for(lambda: self.tick_ts >= ts or self._stopping, timeout)
        return self.tick_ts >= ts

    async def _wake_waiters(self) -> None:
        async with self._tick:
            self._tick.notify_all()
        with self._tick_for_threads:
            self._tick_for_threads.notify_all()

    async def _unsubscribe(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # noqa: BLE001 - the inbox may be gone already
                pass
            self._sub = None

    async def _subscribe(self, from_seq: int | None) -> None:
        """(Re)create the durable pull consumer at a stream position."""
        js = self.bus.js
        stream = stream_name(self.pchannel)
        await self._unsubscribe()
        self._reading_since_ms = now_ms()
        try:
            await js.delete_consumer(stream, self.durable)
        except NotFoundError:
            pass
        config = ConsumerConfig(
            durable_name=self.durable,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if from_seq else DeliverPolicy.ALL,
            opt_start_seq=from_seq,
            ack_policy=AckPolicy.NONE,
            headers_only=self.headers_only or None,
            filter_subjects=[
                data_subject(self.pchannel, self.vchannel),
                tick_subject(self.pchannel),
            ],
        )
        await js.add_consumer(stream, config)
        self._sub = await js.pull_subscribe_bind(durable=self.durable, stream=stream)
        self._consumer_seq = 0

    async def _resubscribe(self, from_seq: int) -> None:
        """``_subscribe`` until it works. The JetStream API does not answer while a stream
        elects a leader (a NATS server died, which is also when deliveries skip): a task
        that failed here consumed its channel no more, and every Strong read through it
        waited out its 30 s before the proxy tried another replica."""
        delay = 0.2
        while not self._stopping:
            try:
                await self._subscribe(from_seq)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS electing or reconnecting; retry
                log.warning("%s: re-reading from %d failed: %r", self.vchannel, from_seq, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _run(self) -> None:
        while not self._stopping:
            await self._going.wait()
            if self._stopping:
                return
            try:
                msgs = await self._fetch()
            except NatsTimeout:
                msgs = []
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS reconnecting; retry
                log.warning("%s: fetch failed: %r", self.vchannel, exc)
                self._reading_since_ms = now_ms()  # the lag counts from a fetch that works
                await asyncio.sleep(0.5)
                await self._unstick()  # a consumer the server no longer knows fails so
                continue
            if not msgs:  # the pull found nothing: at the log's end, or stuck
                self._reading_since_ms = None
                await self._unstick()
                continue
            self._empty_since = None
            for m in msgs:
                if not await self._receive(m):
                    break

    async def _fetch(self) -> list[Delivered]:
        """The next messages: off the loop on a connection of this consumer's own
        (``channels/syncfetch.py``), or nats-py's way where that cannot be (TLS)."""
        batch = HEADERS_BATCH if self.headers_only else FETCH_BATCH
        if self._fetcher is not None:
            try:
                return await self._fetcher.fetch(batch, 1.0, self._handed)
            except Unusable:
                log.info("%s: fetching on the loop (the NATS servers need TLS)", self.vchannel)
                self._fetcher.close()
                self._fetcher = None
        msgs = await self._sub.fetch(batch, timeout=1.0)
        return self._handed(
            [
                Delivered(
                    m.headers or {},
                    m.data,
                    m.metadata.sequence.stream,
                    m.metadata.sequence.consumer,
                    m.metadata.num_pending,
                )
                for m in msgs
            ]
        )

    def _handed(self, got: list[Delivered]) -> list[Delivered]:
        """Fill in headers-only deliveries with the payloads this process's proxies handed
        over, decoded (on the fetcher's thread: joining a megabyte is no work for the
        loop); one not handed over keeps its empty payload, and ``_receive`` reads whole
        messages from there. The payloads stay in the handoff until ``_receive`` takes
        each message: the rest of a fetch is dropped when the consumer is made anew."""
        handoff = self.handoff
        if handoff is None:
            return got
        for m in got:
            if m.data or not payload_size(m.headers):
                continue
            held = handoff.peek(m.headers.get(H_MSG_ID))
            if held is None:
                continue
            if isinstance(held, IpcPayload) and held.batch is None:  # off alignment
                held = IpcPayload(held.parts, read_ipc(bytes(held)))
                self.realigned += 1
            m.data = held
        return got

    async def _receive(self, m: Delivered) -> bool:
        seq, consumer_seq = m.seq, m.consumer_seq
        if consumer_seq != self._consumer_seq + 1:
            # Messages were lost on the way and nothing redelivers them: read again
            # from the start of the pack being collected.
            restart = self._pack_start if self._pack_start is not None else self.next_seq
            log.warning(
                "%s: delivery gap (consumer seq %d after %d); re-reading from %d",
                self.vchannel,
                consumer_seq,
                self._consumer_seq,
                restart,
            )
            self._pack, self._pack_start = [], None
            self.next_seq = restart
            await self._resubscribe(restart)
            return False
        if not m.data and payload_size(m.headers):  # headers only, and not handed over
            await self._read_whole(seq)
            return False
        if self.handoff is not None and H_MSG_ID in m.headers:
            self.handoff.take(m.headers[H_MSG_ID])  # read: whole, or handed over
        self._consumer_seq = consumer_seq
        self.pending = m.pending
        if m.pending == 0:
            self._reading_since_ms = None
        dm = DmlMessage.decode(m.headers, m.data, seq)
        self.next_seq = seq + 1
        if dm.type is not MsgType.TICK:
            if self._pack_start is None:
                self._pack_start = seq
            self._pack.append(dm)
            return True
        if dm.ts > self.tick_ts:
            pack, self._pack, self._pack_start = self._pack, [], None
            pack.sort(key=pack_order)
            await self.on_pack(pack, dm.ts, seq)
            self.consumed += sum(m.batch.num_rows for m in pack if m.batch is not None)
            async with self._tick:
                self.tick_ts = dm.ts
                self._tick.notify_all()
            with self._tick_for_threads:
                self._tick_for_threads.notify_all()
        past = m.pending == 0 or (self._watched_after is not None and seq > self._watched_after)
        if past and self._may_read_headers_only():
            self.headers_only = True  # this process's proxies hand the payloads over now
            await self._resubscribe(self.next_seq)
            return False
        return True

    async def _unstick(self) -> None:
        """After ``STUCK_AFTER_S`` of empty fetches, make the durable consumer anew from
        this consumer's position if the stream has moved past it (``STUCK_AFTER_S``)."""
        now = time.monotonic()
        if self._empty_since is None:
            self._empty_since = now
            return
        if now - self._empty_since < STUCK_AFTER_S:
            return
        self._empty_since = now
        last = await self._last_seq()
        if last is None or last < self.next_seq:
            return  # at the log's end, truly: nothing was published
        log.warning(
            "%s: nothing delivered for %.0f s with the stream at %d; reading again from %d",
            self.vchannel, STUCK_AFTER_S, last, self.next_seq,
        )  # fmt: skip
        await self._resubscribe(self.next_seq)

    async def _last_seq(self) -> int | None:
        """The stream's last position now (None if JetStream does not say): what comes
        after it was published while this consumer watched, so its payload was handed
        over unless another process wrote it."""
        try:
            info = await self.bus.js.stream_info(stream_name(self.pchannel))
        except Exception:  # noqa: BLE001 - only when to read headers only depends on it
            return None
        return int(info.state.last_seq)

    async def _read_whole(self, seq: int) -> None:
        """A payload was not handed over (another process wrote it, or it was read or
        dropped already): read whole messages from the log from ``seq`` on."""
        log.info("%s: reading whole messages from %d (payload not in this process)",
                 self.vchannel, seq)  # fmt: skip
        self.headers_only = False
        self.whole_reads += 1
        self._missed_at = time.monotonic()
        await self._resubscribe(seq)

    def _may_read_headers_only(self) -> bool:
        h = self.handoff
        return (
            h is not None
            and not self.headers_only
            and h.publishers > 0
            and time.monotonic() - self._missed_at > WHOLE_AFTER_MISS_S
        )
