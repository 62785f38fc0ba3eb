"""A collection's change stream, read from the log: every insert, upsert and delete.

The log is the collection's JetStream DML streams (one per pchannel; each vchannel's
messages on a subject of their own, the pchannel's time ticks on another). The proxy
only says where they are (the ``watch_collection`` action, which needs the Query
privilege); the rows come from the NATS servers, so a watcher costs writes and searches
nothing. One reader for the SDK's ``Client.watch``, ``elanus watch`` and the Spark
streaming source (``elanus/spark/stream.py``).

Positions. A vchannel's position is a ``Position``: the stream sequence to read from and
the timestamp every row read must be above. Reads end just after a time tick: when the
log has tick ``T`` every write with a timestamp up to ``T`` is in it, and none above it
is before it, so a read between two ticks holds whole writes and its rows sorted by
timestamp are in timestamp order for good (several proxies' publishes interleave in
sequence order, never across a tick).

Rows: ``_op`` (``insert``, ``upsert`` or ``delete``), ``_ts`` (the write's hybrid
timestamp), then the collection's fields (``$meta`` too when dynamic); a delete has only
its primary key. The log carries an upsert as a delete and an insert of the same keys at
one timestamp: the reader shows each such key once, as ``upsert`` (an upsert of a new
key too). Rows of a bulk import never pass through the log and are not in the stream.

The log keeps what the datanodes have not flushed yet and purges the rest
(``meta/datacoord.py``): reading from a position the log no longer keeps fails with
INVALID_ARGUMENT, naming the vchannel and what the log still has.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from elanus.client.base import ClientBase
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.ops import imports as ops
from elanus.ops.replies import ChannelCoordinates, WatchCoordinates
from elanus.schema import PK_COLUMN, Schema
from elanus.tsutil import compose, now_ms, physical_ms

OP = "_op"
TS = "_ts"
STARTS = ("earliest", "latest")
FETCH = 32
"""Messages per fetch (DML messages are cut near 1 MiB; ticks are empty)."""
BACKTRACK_MS = 10_000
"""How far before a starting timestamp the search for the tick before it begins."""
ENV_USER, ENV_PASSWORD = "ELANUS_NATS_USER", "ELANUS_NATS_PASSWORD"


@dataclass(frozen=True)
class Position:
    """A vchannel's place in its log: the changes from stream sequence ``seq`` on with a
    timestamp above ``ts``. A position a read ends at also has ``upto``, the sequence of
    the tick it ends at; it starts the next read (``upto`` is then unused)."""

    seq: int
    ts: int = 0
    upto: int = 0

    def to_json(self) -> list[int]:
        return [self.seq, self.ts, self.upto]

    @classmethod
    def from_json(cls, value: Any, vchannel: str) -> Position:
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not all(isinstance(v, int) and v >= 0 for v in value)
        ):
            raise invalid(
                f"position of {vchannel!r} must be [sequence, timestamp, tick], got {value!r}"
            )
        return cls(*value)


@dataclass(frozen=True)
class Channel:
    vchannel: str
    stream: str
    data_subject: str
    tick_subject: str


@dataclass(frozen=True)
class LogCoordinates:
    """The ``watch_collection`` answer: what reading a collection's log needs."""

    collection: str
    collection_id: int
    schema: Schema
    servers: str
    type_header: str
    ts_header: str
    channels: tuple[Channel, ...]

    @classmethod
    def from_body(cls, body: WatchCoordinates) -> LogCoordinates:
        return cls(
            body["collection"],
            int(body["collection_id"]),
            Schema.from_dict(body["schema"]),
            str(body["servers"]),
            str(body["type_header"]),
            str(body["ts_header"]),
            tuple(
                Channel(c["vchannel"], c["stream"], c["data_subject"], c["tick_subject"])
                for c in body["vchannels"]
            ),
        )

    def to_body(self) -> WatchCoordinates:
        return WatchCoordinates(
            collection=self.collection,
            collection_id=self.collection_id,
            schema=self.schema.to_dict(),
            servers=self.servers,
            type_header=self.type_header,
            ts_header=self.ts_header,
            vchannels=[
                ChannelCoordinates(
                    vchannel=c.vchannel,
                    stream=c.stream,
                    data_subject=c.data_subject,
                    tick_subject=c.tick_subject,
                )
                for c in self.channels
            ],
        )

    def channel(self, vchannel: str) -> Channel:
        for c in self.channels:
            if c.vchannel == vchannel:
                return c
        raise invalid(f"{vchannel!r} is not a vchannel of collection {self.collection!r}")

    def out_schema(self) -> pa.Schema:
        """``_op``, ``_ts``, then the collection's fields, all nullable (deletes)."""
        fields = [f.with_nullable(True) for f in self.schema.to_arrow()]
        return pa.schema(
            [pa.field(OP, pa.string(), False), pa.field(TS, pa.int64(), False), *fields]
        )


class ChangeLog:
    """A connection to the log's NATS servers (nats-py, on an event loop of its own, so
    the calls are plain blocking ones). Credentials: ``user``/``password``, else
    ``ELANUS_NATS_USER``/``ELANUS_NATS_PASSWORD``, as the roles take theirs."""

    def __init__(
        self,
        coords: LogCoordinates,
        *,
        user: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.coords = coords
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._nc: Any = None
        self._js: Any = None
        self._user = user or os.environ.get(ENV_USER)
        self._password = password or os.environ.get(ENV_PASSWORD)

    def _run(self, coro: Any) -> Any:
        """Run one nats-py call; losing the log's servers mid-way is UNAVAILABLE."""
        from nats.errors import ConnectionClosedError, NoServersError

        try:
            return self._loop.run_until_complete(coro)
        except (ConnectionClosedError, NoServersError) as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE, f"lost the log at {self.coords.servers}: {exc}"
            ) from None

    def _connect(self) -> Any:
        if self._js is None:
            import nats  # the SDK's import stays light: only a watcher needs nats-py

            try:
                self._nc = self._run(
                    nats.connect(
                        servers=self.coords.servers.split(","),
                        user=self._user,
                        password=self._password,
                        connect_timeout=self.timeout,
                        max_reconnect_attempts=1,
                        allow_reconnect=False,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - any connect failure is UNAVAILABLE
                raise ElanusError(
                    ErrorCode.UNAVAILABLE,
                    f"cannot read the log at {self.coords.servers}: {type(exc).__name__} "
                    f"{exc} (credentials: {ENV_USER} / {ENV_PASSWORD})",
                ) from None
            self._js = self._nc.jetstream(timeout=self.timeout)
        return self._js

    def close(self) -> None:
        if self._nc is not None:
            self._run(self._nc.close())
            self._nc = self._js = None
        self._loop.close()

    def __enter__(self) -> ChangeLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- positions ----------------------------------------------------------------------------
    def first_seq(self, ch: Channel) -> int:
        info = self._run(self._connect().stream_info(ch.stream))
        return int(info.state.first_seq or 1)

    def last_tick(self, ch: Channel) -> tuple[int, int]:
        """(sequence, timestamp) of the pchannel's newest tick; (0, 0) before the first."""
        from nats.js.errors import NotFoundError

        try:
            msg = self._run(self._connect().get_last_msg(ch.stream, ch.tick_subject))
        except NotFoundError:
            return 0, 0
        return int(msg.seq), self._ts(msg.headers)

    def end(self, vchannel: str, start: Position, tick: tuple[int, int] | None = None) -> Position:
        """Where a read from ``start`` ends: at the newest tick ``T`` (or ``tick``, as
        ``last_tick`` gave it), so it holds every change up to ``T`` (all of them are before
        that tick in the log). Changes above ``T`` may be before it too (a write stamped
        early, published late): the next read starts at the first of them, and skips what
        this one took by ``ts``."""
        ch = self.coords.channel(vchannel)
        tick_seq, tick_ts = tick or self.last_tick(ch)
        if tick_ts <= start.ts or tick_seq < start.seq:
            return start
        from nats.js.api import DeliverPolicy

        resume = tick_seq + 1
        found = self._messages(
            ch, DeliverPolicy.BY_START_SEQUENCE, start.seq, tick_seq, headers_only=True
        )
        for seq, headers, _ in found:
            if self._ts(headers) > tick_ts:
                resume = seq
                break
        found.close()
        return Position(resume, tick_ts, tick_seq)

    def ends(self, starts: dict[str, Position], past: int = 0) -> dict[str, Position]:
        """``end`` of every vchannel; with ``past``, at ticks at or past that timestamp
        (the log then holds every write acknowledged before it)."""
        deadline = time.monotonic() + self.timeout
        while True:
            ticks = {v: self.last_tick(self.coords.channel(v)) for v in starts}
            if all(ts >= past for _, ts in ticks.values()):
                return {v: self.end(v, p, ticks[v]) for v, p in starts.items()}
            if time.monotonic() > deadline:
                raise ElanusError(
                    ErrorCode.UNAVAILABLE,
                    f"the log's time ticks did not reach {past} in {self.timeout} s",
                )
            time.sleep(0.05)

    def starts(self, since: str | int) -> dict[str, Position]:
        """Every vchannel's position for ``since``: ``earliest`` (the oldest change the log
        keeps), ``latest`` (changes after the newest tick) or a hybrid timestamp (changes
        above it)."""
        if isinstance(since, str) and since not in STARTS:
            try:
                since = int(since)
            except ValueError:
                raise invalid(
                    f"since must be earliest, latest or a timestamp, got {since!r}"
                ) from None
        if isinstance(since, int) and since < 0:
            raise invalid(f"since must be a timestamp >= 0, got {since}")
        out = {}
        for c in self.coords.channels:
            if since == "earliest":
                out[c.vchannel] = Position(self.first_seq(c), 0)
            else:
                ts = self.last_tick(c)[1] if since == "latest" else since
                assert isinstance(ts, int)
                out[c.vchannel] = self._at_ts(c, ts, purged_is_error=since != "latest")
        return out

    def _at_ts(self, ch: Channel, ts: int, *, purged_is_error: bool = True) -> Position:
        """The changes above ``ts``: a write is published after its timestamp is taken, so
        none of them is stored before ``ts``'s wall-clock time (less ``BACKTRACK_MS`` for
        the clocks of the coord and NATS)."""
        from nats.js.api import DeliverPolicy

        first = self.first_seq(ch)
        if purged_is_error and first > 1 and self._oldest_kept_ts(ch, first) > ts:
            raise invalid(
                f"the log of {ch.vchannel!r} no longer keeps changes at timestamp {ts} "
                "(flushed changes are purged); start from 'earliest' or a later timestamp"
            )
        when = physical_ms(ts) - BACKTRACK_MS
        found = self._messages(ch, DeliverPolicy.BY_START_TIME, when, 0, headers_only=True)
        seq = next((s for s, _, _ in found), None)
        found.close()
        if seq is None:  # nothing stored since: from the log's end
            seq = self.last_tick(ch)[0] + 1 if first > 1 else first
        return Position(seq, ts)

    def _oldest_kept_ts(self, ch: Channel, first: int) -> int:
        """The timestamp of the oldest message the stream keeps (a tick or a change of any
        vchannel of the pchannel): past ``ts``, changes after ``ts`` may have been purged
        with the ones before it. (The vchannel's own changes cannot tell: a purge can leave
        it none at all, only ticks.)"""
        from nats.js.errors import NotFoundError

        for _ in range(3):
            try:
                msg = self._run(self._connect().get_msg(ch.stream, seq=first))
            except NotFoundError:  # purged further meanwhile
                first = self.first_seq(ch)
                continue
            return self._ts(msg.headers)
        return compose(now_ms())  # purging as fast as we look: surely past ``ts``

    # -- reading ------------------------------------------------------------------------------
    def read(self, vchannel: str, start: Position, end: Position) -> pa.Table:
        """The changes of ``vchannel`` after ``start`` up to ``end`` (an ``end``'s answer),
        in timestamp order."""
        ch = self.coords.channel(vchannel)
        out = self.coords.out_schema()
        if end.ts <= start.ts:
            return out.empty_table()
        first = self.first_seq(ch)
        if start.seq < first and start.ts == 0:
            start = Position(first)  # ``earliest``, nothing read yet: what is kept now
        if start.seq < first:
            raise invalid(
                f"the log of {vchannel!r} no longer keeps position {start.seq} (it starts "
                f"at {first}: flushed changes are purged); restart the stream from "
                "'earliest' or a timestamp"
            )
        from nats.js.api import DeliverPolicy

        inserts: list[pa.RecordBatch] = []
        deletes: list[pa.RecordBatch] = []
        found = self._messages(ch, DeliverPolicy.BY_START_SEQUENCE, start.seq, end.upto)
        for _, headers, data in found:
            kind = headers.get(self.coords.type_header)
            ts = self._ts(headers)
            if kind not in ("insert", "delete") or not start.ts < ts <= end.ts or not data:
                continue  # a tick, an import marker (its rows are not in the log), or
                # a change the read before took or the next one takes
            batch = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
            stamped = batch.append_column(TS, pa.array(np.full(batch.num_rows, ts)))
            (inserts if kind == "insert" else deletes).extend(stamped.to_batches())
        return changes_table(self.coords.schema, out, inserts, deletes)

    def _messages(
        self, ch: Channel, policy: Any, start: int, upto: int, *, headers_only: bool = False
    ) -> Generator[tuple[int, dict[str, str], bytes], None, None]:
        """(seq, headers, payload) of the vchannel's data from ``start`` (a sequence, or
        epoch ms for BY_START_TIME) to sequence ``upto`` (0: to the log's end now)."""
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = self._connect()
        config = ConsumerConfig(
            deliver_policy=policy,
            ack_policy=AckPolicy.NONE,
            filter_subject=ch.data_subject,
            inactive_threshold=30.0,
            mem_storage=True,
            headers_only=headers_only or None,
        )
        if policy is DeliverPolicy.BY_START_SEQUENCE:
            config.opt_start_seq = start
        elif policy is DeliverPolicy.BY_START_TIME:
            config.opt_start_time = datetime.fromtimestamp(max(start, 0) / 1000, UTC)
        info = self._run(js.add_consumer(ch.stream, config))
        sub = self._run(js.pull_subscribe_bind(durable=info.name, stream=ch.stream))
        try:
            left = int(info.num_pending)
            while left > 0:
                try:
                    got = self._run(sub.fetch(min(FETCH, left), timeout=self.timeout))
                except NatsTimeout:
                    raise ElanusError(
                        ErrorCode.UNAVAILABLE,
                        f"the log of {ch.vchannel!r} did not deliver in {self.timeout} s",
                    ) from None
                for m in got:
                    seq, left = int(m.metadata.sequence.stream), int(m.metadata.num_pending)
                    if upto and seq > upto:
                        return
                    yield seq, dict(m.headers or {}), m.data
        finally:
            if not self._nc.is_closed:  # else the server drops the consumer when inactive
                self._run(sub.unsubscribe())
                self._run(js.delete_consumer(ch.stream, info.name))

    def _ts(self, headers: dict[str, str] | None) -> int:
        return int((headers or {}).get(self.coords.ts_header, 0))


def changes_table(
    schema: Schema, out: pa.Schema, inserts: list[pa.RecordBatch], deletes: list[pa.RecordBatch]
) -> pa.Table:
    """Inserts and deletes (each with ``_ts``) as change rows sorted by timestamp; a key
    deleted and inserted at one timestamp is one ``upsert`` row."""
    import pyarrow.compute as pc  # the SDK's import stays light: only a watch computes

    pk = schema.primary.name
    ins = _table(inserts, out.remove(0), {})
    dels = _table(deletes, pa.schema([out.field(TS), out.field(pk)]), {pk: PK_COLUMN})
    upserted = pc.is_in(_keys(ins, pk), value_set=_keys(dels, pk))
    ins = ins.add_column(0, out.field(OP), pc.if_else(upserted, "upsert", "insert"))
    dels = dels.filter(pc.invert(pc.is_in(_keys(dels, pk), value_set=_keys(ins, pk))))
    n = dels.num_rows
    columns = [dels.column(f.name) if f.name in (TS, pk) else pa.nulls(n, f.type) for f in out]
    columns[0] = pa.array(["delete"] * n, pa.string())
    both = pa.concat_tables([ins, pa.table(columns, schema=out)])
    return both.take(pc.sort_indices(both, [(TS, "ascending")]))  # stable: log order kept


def _table(batches: list[pa.RecordBatch], schema: pa.Schema, names: dict[str, str]) -> pa.Table:
    """The batches as one table of ``schema``'s columns (``names``: a column's name in the
    batches where it differs); a column they lack is null."""
    if not batches:
        return schema.empty_table()
    table = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
    )
    columns = []
    for f in schema:
        name = names.get(f.name, f.name)
        present = name in table.column_names
        columns.append(table.column(name).cast(f.type) if present else pa.nulls(len(table), f.type))
    return pa.table(columns, schema=schema)


def _keys(table: pa.Table, pk: str) -> pa.ChunkedArray:
    """``ts:pk`` per row, the key an upsert's delete and insert share."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(
        pc.cast(table.column(TS), pa.string()), pc.cast(table.column(pk), pa.string()), ":"
    )


class WatchAPI(ClientBase):
    def watch_coordinates(self, collection_name: str, *, db: str | None = None) -> LogCoordinates:
        """Where ``collection_name``'s log is (needs the Query privilege on it)."""
        op = ops.WatchCollection(db=self._db_or_own(db), collection=collection_name)
        return LogCoordinates.from_body(self._reply(op, WatchCoordinates))

    def watch(
        self,
        collection_name: str,
        since: str | int = "latest",
        *,
        db: str | None = None,
        follow: bool = True,
        poll_s: float = 0.5,
        nats_user: str | None = None,
        nats_password: str | None = None,
    ) -> Iterator[pa.Table]:
        """The collection's changes from ``since`` (``earliest``, ``latest`` or a hybrid
        timestamp: changes above it), one table per vchannel and read (columns ``_op``,
        ``_ts``, then the fields; see ``elanus.client.changes``), empty ones skipped. With
        ``follow`` it waits for new changes every ``poll_s`` seconds until closed; without,
        it ends at the log's end as of the call."""
        if poll_s <= 0:
            raise invalid(f"poll_s must be positive, got {poll_s}")
        coords = self.watch_coordinates(collection_name, db=db)
        with ChangeLog(coords, user=nats_user, password=nats_password) as log:
            positions = log.starts(since)
            now = compose(now_ms())
            while True:
                ends = log.ends(positions, 0 if follow else now)
                for vchannel, start in positions.items():
                    table = log.read(vchannel, start, ends[vchannel])
                    if table.num_rows:
                        yield table
                positions = ends
                if not follow:
                    return
                time.sleep(poll_s)
