"""The catalog's journal: the coord's DuckDB catalog made durable outside its machine.

Every change a catalog call makes (the SQL statements that succeeded, with their
parameters) is one entry of a replicated JetStream stream (``stream_replicas`` copies),
published before the call returns, so before any client hears of the change. Every
``SNAPSHOT_EVERY`` entries (or ``SNAPSHOT_S`` seconds) the catalog file is copied, in one
transaction, to ``<storage>/catalog/snapshots/`` (local or S3), named by the stream's
creation and the last entry it holds. A coord that starts (the same one, one on another
machine with an empty data dir, or a standby that took the lease) rebuilds its catalog:
the newest snapshot of this stream, then every later entry, in order.

The counters (TSO bound, ID high-water) write through their own cursor from any thread,
the event loop included, so their entries are queued without waiting; a rebuilt catalog
starts both a margin above what it read (``restored_margins``): at most the latest of
those writes can be missing, and the margin covers it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import orjson
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import APIError

from elanus import layout, objstore
from elanus.channels.bus import Bus
from elanus.channels.jsretry import LOG_RETRY_WINDOW_S, publish_acked
from elanus.channels.replicas import ensure_stream
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.db import migrate
from elanus.meta.recorder import Statement

log = logging.getLogger(__name__)

STREAM = "ELANUS_CATALOG"
SUBJECT = "elanus.catalog.journal"
SNAPSHOTS = "catalog/snapshots"
SNAPSHOT_EVERY = 200
SNAPSHOT_S = 30.0
PART_BYTES = 512 * 1024
"""Entries larger than this go as several messages (a stock nats-server takes 1 MB)."""
WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for a publish whose expected last sequence is not the stream's."""
PUBLISH_WAIT_MARGIN_S = 5.0
"""How much longer than the publish window a catalog call waits for its entry's ack (the
publish gives up before)."""
DOWN_S = 5.0
"""After an entry the log did not take within its window, later entries get one short
attempt each (``DOWN_WINDOW_S``) for this long: every catalog call waits on the one
database thread, so without it calls queued behind each other would each wait out a
whole window (a NATS cluster without a quorum), and clients time out instead of
hearing UNAVAILABLE."""
DOWN_WINDOW_S = 1.0


# -- encoding ----------------------------------------------------------------------------------
def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$b": base64.b64encode(bytes(value)).decode()}
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"catalog journal: cannot encode {type(value).__name__}")


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$b"}:
            return base64.b64decode(value["$b"])
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def encode(entry: list[Statement]) -> bytes:
    return orjson.dumps([[s, p, m] for s, p, m in entry], default=_default)


def decode(data: bytes) -> list[Statement]:
    return [(s, _restore(p), bool(m)) for s, p, m in orjson.loads(data)]


def apply(con: duckdb.DuckDBPyConnection, entry: list[Statement]) -> None:
    for sql, params, many in entry:
        if many:
            con.executemany(sql, params)
        elif params is None:
            con.execute(sql)
        else:
            con.execute(sql, params)


# -- the journal -------------------------------------------------------------------------------
class CatalogJournal:
    """Publishes catalog entries in order from one task on the bus's loop; ``append`` waits
    for its entry (the database thread), ``queue`` does not (the counters)."""

    def __init__(
        self,
        bus: Bus,
        storage: str,
        replicas: int = 1,
        retry_window_s: float = LOG_RETRY_WINDOW_S,
    ) -> None:
        self.bus, self.storage, self.replicas = bus, storage, replicas
        self.retry_window_s = retry_window_s
        """How long an entry the log did not take is sent again (``log_retry_window_s``)."""
        self.last_seq = 0
        self.writer = uuid.uuid4().hex[:12]
        """Marks this coord's entries (``Elanus-Writer``): after a refused publish, an entry
        of ours in the stream is a lost ack or a restarted log, another's a second writer."""
        self.created = ""
        """The stream's creation time: a snapshot is of one stream's history."""
        self._lock = threading.Lock()
        self._pending: asyncio.Queue[tuple[bytes, asyncio.Future[int] | None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._current: asyncio.Future[int] | None = None
        """The entry being published (failed by ``close`` if it is cut short)."""
        self._closed = False
        self._fenced = False
        self._resync = False
        """The log went back (``_went_back``): no change until a snapshot is stored."""
        self._down_until = 0.0
        self.on_fenced: Callable[[], None] | None = None
        """Called once (from the loop) when the journal finds another writer: the coord
        stops as if it had lost its lease. Each entry is published expecting the stream's
        last sequence to be the one this coord read or wrote last, so a coord that wakes
        up after a standby took over cannot add to the catalog."""
        self._since_snapshot = 0
        self._snapshot_at = time.monotonic()
        self.snapshot_due: Callable[[], object] | None = None
        """Called (from the loop) when a snapshot is due; the coord takes it."""

    # -- start -------------------------------------------------------------------------------
    async def open(self) -> None:
        config = StreamConfig(
            name=STREAM,
            subjects=[SUBJECT],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            discard=DiscardPolicy.NEW,
            num_replicas=self.replicas,
            duplicate_window=120.0,
        )
        await ensure_stream(self.bus.js, config)
        info = await self.bus.js.stream_info(STREAM)
        self.last_seq = int(info.state.last_seq or 0)
        self.created = _stamp(info)
        self._pending = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._publisher())

    async def close(self) -> None:
        """Stop publishing; a catalog call still waiting for its entry fails at once (the
        coord is stopping) instead of holding the database thread until its timeout."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
            self._task = None
        stopping = ElanusError(
            ErrorCode.UNAVAILABLE, "the coord is stopping: the catalog change was not journaled"
        )
        waiting: list[asyncio.Future[int] | None] = [self._current]
        while self._pending is not None and not self._pending.empty():
            waiting.append(self._pending.get_nowait()[1])
        for future in waiting:
            if future is not None and not future.done():
                future.set_exception(stopping)

    # -- writing -----------------------------------------------------------------------------
    def append(self, entry: list[Statement]) -> None:
        """Publish ``entry`` and wait for JetStream's ack (from a thread, not the loop)."""
        data = encode(entry)
        asyncio.run_coroutine_threadsafe(self._put(data, wait=True), self.bus.loop).result(
            self.retry_window_s + PUBLISH_WAIT_MARGIN_S + 5
        )

    def queue(self, entry: list[Statement]) -> None:
        """Publish ``entry`` after those before it, without waiting (any thread)."""
        data = encode(entry)
        loop = self.bus.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is loop:
            running.create_task(self._put(data, wait=False))
        else:
            asyncio.run_coroutine_threadsafe(self._put(data, wait=False), loop)

    async def _put(self, data: bytes, wait: bool) -> Any:
        assert self._pending is not None, "the journal is not open"
        if self._closed or self._fenced:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the coord is stopping: not journaled")
        if self._resync:
            raise self._resyncing()
        future: asyncio.Future[int] | None = None
        if wait:
            future = asyncio.get_running_loop().create_future()
        self._pending.put_nowait((data, future))
        return None if future is None else await future

    async def _publisher(self) -> None:
        assert self._pending is not None
        while True:
            data, future = await self._pending.get()
            self._current = future
            try:
                seq = await self._publish(data)
                self._down_until = 0.0
            except Exception as exc:  # noqa: BLE001 - the waiting call fails, naming why
                log.error("catalog journal: publish failed: %s", exc)
                self._down_until = time.monotonic() + DOWN_S
                if future is not None and not future.done():
                    future.set_exception(
                        exc
                        if isinstance(exc, ElanusError)
                        else ElanusError(
                            ErrorCode.UNAVAILABLE,
                            f"the catalog change could not be journaled (NATS): {exc}",
                        )
                    )
                continue
            self._current = None
            if future is not None and not future.done():
                future.set_result(seq)
            self._since_snapshot += 1
            due = self._since_snapshot >= SNAPSHOT_EVERY or (
                time.monotonic() - self._snapshot_at > SNAPSHOT_S
            )
            if due and self.snapshot_due is not None:
                self._since_snapshot = 0
                self._snapshot_at = time.monotonic()
                self.snapshot_due()

    async def _publish(self, data: bytes) -> int:
        """Each part sent until acknowledged, as DML is (``publish_acked``: through a stream
        leader's election; UNAVAILABLE naming the NATS quorum once the window is over)."""
        parts = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]
        for i, part in enumerate(parts):
            while True:
                msg_id = f"{self.created}-{self.last_seq + 1}"
                headers = {
                    "Nats-Msg-Id": msg_id,
                    "Elanus-Part": f"{i + 1}/{len(parts)}",
                    "Elanus-Writer": self.writer,
                    "Nats-Expected-Last-Sequence": str(self.last_seq),
                }
                try:
                    down = time.monotonic() < self._down_until
                    ack = await publish_acked(
                        self.bus.js, SUBJECT, part, headers, what="a catalog change",
                        window=min(DOWN_WINDOW_S, self.retry_window_s) if down
                        else self.retry_window_s,
                    )  # fmt: skip
                except APIError as exc:
                    if exc.err_code != WRONG_LAST_SEQUENCE:
                        raise
                    if await self._reconcile(msg_id):
                        break  # the part is in the stream: its ack was lost
                    continue  # the log went back: sent again after its last entry
                self.last_seq = int(ack.seq)
                break
        return self.last_seq

    async def _reconcile(self, msg_id: str) -> bool:
        """A publish refused for its expected last sequence: True when the entry after
        ours is the part just sent (NATS took it, and its ack was lost to a restart).
        Refused (UNAVAILABLE) when the log went back, fenced when another coord wrote."""
        last = int((await self.bus.js.stream_info(STREAM)).state.last_seq or 0)
        if last > self.last_seq:
            msg = await self.bus.js.get_msg(STREAM, self.last_seq + 1)
            if (msg.headers or {}).get("Nats-Msg-Id") == msg_id and self._ours(msg.headers):
                self.last_seq += 1
                return True
        elif last < self.last_seq and await self._ours_at(last):
            await self._went_back(last)
            raise self._resyncing()
        self.fenced()
        raise ElanusError(
            ErrorCode.UNAVAILABLE,
            "another coordinator changed the catalog: this one stops serving; retry",
        )

    def _ours(self, headers: dict[str, str] | None) -> bool:
        return (headers or {}).get("Elanus-Writer") == self.writer

    async def _ours_at(self, seq: int) -> bool:
        """The stream's entry ``seq`` is ours, or the stream is empty."""
        return seq == 0 or self._ours((await self.bus.js.get_msg(STREAM, seq)).headers)

    async def _went_back(self, last: int) -> None:
        """The log holds fewer entries than it acknowledged to us (restarted on a store
        that lost the newest, or made anew): the catalog still has them, the journal no
        longer. It goes on after the log's last entry once a snapshot holds the whole
        catalog again; until then every change is refused (``_resync``), and snapshots
        past that entry are dropped (they would pass for the catalog at a sequence the
        journal now reaches differently)."""
        log.error(
            "catalog journal: the log went back from entry %d to %d (restarted on an older "
            "store): changes wait for a snapshot of the catalog",
            self.last_seq,
            last,
        )
        self.last_seq = last
        self.created = _stamp(await self.bus.js.stream_info(STREAM))
        await asyncio.to_thread(self._drop_snapshots_after, last)
        self._resync = True
        if self.snapshot_due is not None:
            self.snapshot_due()

    @staticmethod
    def _resyncing() -> ElanusError:
        return ElanusError(
            ErrorCode.UNAVAILABLE,
            "the log lost catalog changes it had acknowledged: a snapshot of the catalog "
            "is being stored; retry",
        )

    def _drop_snapshots_after(self, seq: int) -> None:
        folder = layout.join(self.storage, SNAPSHOTS)
        if not objstore.exists(folder):
            return
        for name in objstore.list_dir(folder):
            created, _, at = Path(name).name.removesuffix(".duckdb").rpartition("-")
            if created == self.created and at.isdigit() and int(at) > seq:
                objstore.remove_file(layout.join(folder, Path(name).name))

    async def still_ours(self) -> bool:
        """After the coord's lease lapsed longer than its TTL: the stream holds nothing
        another coord wrote since our last entry. False fences the journal."""
        last = int((await self.bus.js.stream_info(STREAM)).state.last_seq or 0)
        if last < self.last_seq:
            ours = await self._ours_at(last)
            if ours:
                await self._went_back(last)
        else:  # entries after ours: ours too only when their acks were lost
            seqs = range(self.last_seq + 1, last + 1)
            ours = all([self._ours((await self.bus.js.get_msg(STREAM, q)).headers) for q in seqs])
            self.last_seq = last if ours else self.last_seq
        if not ours:
            self._fenced = True
            log.critical("catalog journal: another coordinator wrote to it; stopping")
        return ours

    def fenced(self) -> None:
        """The stream holds an entry this coord did not write (another coord took the
        lease while this one was paused): nothing more from here may be journaled."""
        if not self._fenced:
            self._fenced = True
            log.critical("catalog journal: another coordinator wrote to it; stopping")
            if self.on_fenced is not None:
                self.on_fenced()

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot(self, con: duckdb.DuckDBPyConnection, workdir: Path) -> str:
        """Copy the catalog (one transaction) and store it; on the database thread, so no
        change of a catalog call lands between the copy and ``last_seq``."""
        seq = self.last_seq
        name = f"{self.created}-{seq:012d}.duckdb"
        local = workdir / f".snapshot-{os.getpid()}.duckdb"
        local.unlink(missing_ok=True)
        db_name = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        con.execute(f"ATTACH '{local}' AS elanus_snapshot")
        try:
            con.execute(f'COPY FROM DATABASE "{db_name}" TO elanus_snapshot')
        finally:
            con.execute("DETACH elanus_snapshot")
        target = layout.join(self.storage, SNAPSHOTS, name)
        try:
            objstore.write_bytes(target, local.read_bytes())
        finally:
            local.unlink(missing_ok=True)
        self._resync = False  # the whole catalog is stored again: changes go on after it
        return target

    def snapshots(self) -> list[tuple[str, int]]:
        """This stream's snapshots in the storage, oldest first, each with the last entry
        it holds."""
        folder = layout.join(self.storage, SNAPSHOTS)
        if not objstore.exists(folder):
            return []
        found = []
        for name in objstore.list_dir(folder):
            stem = Path(name).name.removesuffix(".duckdb")
            created, _, seq = stem.rpartition("-")
            if created == self.created and seq.isdigit() and int(seq) <= self.last_seq:
                found.append((layout.join(folder, Path(name).name), int(seq)))
        return sorted(found, key=lambda snap: snap[1])

    async def prune(self) -> None:
        """Drop what no rebuild needs any more: the entries the next-to-newest snapshot
        holds, and the snapshots before it. One snapshot back is kept, with every entry
        after it, so an unreadable newest snapshot still leaves a way to rebuild."""
        found = await asyncio.to_thread(self.snapshots)
        if len(found) < 2:
            return
        kept_from = found[-2][1] + 1
        await self.bus.js.purge_stream(STREAM, seq=kept_from)
        for where, _ in found[:-2]:
            await asyncio.to_thread(objstore.remove_file, where)
        log.info("catalog journal: entries before %d and %d snapshot(s) pruned", kept_from,
                 len(found) - 2)  # fmt: skip

    # -- rebuilding --------------------------------------------------------------------------
    def _fetch_snapshot(self, staging: Path, first: int) -> int | None:
        """Copy the newest readable snapshot the journal's entries still continue to
        ``staging``; the last entry it holds (0: none needed, the journal is whole), or
        None when no snapshot can start a rebuild."""
        staging.unlink(missing_ok=True)
        for where, seq in reversed(self.snapshots()):
            if seq + 1 < first:
                break  # older ones are not continued either
            try:
                staging.write_bytes(objstore.read_bytes(where))
                duckdb.connect(str(staging), read_only=True).close()
                return seq
            except Exception as exc:  # noqa: BLE001 - one back was kept for this
                log.error("catalog snapshot %s unreadable (%s): trying the one before", where, exc)
                staging.unlink(missing_ok=True)
        return 0 if first <= 1 else None

    async def rebuild(self, path: Path) -> bool:
        """Make ``path`` the catalog this stream describes: the newest snapshot, then every
        later entry. False when the stream holds no entry (the local file, if any, is then
        the catalog: a first start, or a catalog from before the journal)."""
        if self.last_seq == 0:
            return False
        info = await self.bus.js.stream_info(STREAM)
        first = int(info.state.first_seq or 1)
        staging = path.with_name(path.name + ".rebuild")
        staging.parent.mkdir(parents=True, exist_ok=True)
        base = await asyncio.to_thread(self._fetch_snapshot, staging, first)
        if base is None:
            log.warning("catalog journal starts at %d and no snapshot holds before: kept", first)
            return False
        con = await asyncio.to_thread(duckdb.connect, str(staging))
        try:
            await asyncio.to_thread(migrate, con)
            entries = 0
            buffer = b""
            for seq in range(base + 1, self.last_seq + 1):
                msg = await self.bus.js.get_msg(STREAM, seq)
                part, _, total = (msg.headers or {}).get("Elanus-Part", "1/1").partition("/")
                buffer += msg.data or b""
                if part != total:
                    continue
                await asyncio.to_thread(apply, con, decode(buffer))
                buffer, entries = b"", entries + 1
            await asyncio.to_thread(con.execute, "CHECKPOINT")
        finally:
            await asyncio.to_thread(con.close)
        for suffix in ("", ".wal"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        os.replace(staging, path)
        Path(str(staging) + ".wal").unlink(missing_ok=True)
        log.info(
            "catalog rebuilt from %s and %d journal entries (up to %d)",
            f"the snapshot at {base}" if base else "nothing",
            entries,
            self.last_seq,
        )
        return True


def _stamp(info: Any) -> str:
    created = getattr(info, "created", None) or ""
    digits = "".join(ch for ch in str(created) if ch.isdigit())
    return digits[:20] or "0"
