"""Test helpers that read what the write path left behind, without going through Elanus:
the Lance segments and delta logs on disk, and the DML streams in JetStream.

Everything here reads the real artefacts (``lance.dataset``, Arrow IPC files, a JetStream
consumer), so a test can compare them with what the client was told was acknowledged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from elanus.channels.dml import (
    SUBJECT_ROOT,
    TICK,
    DmlMessage,
    MsgType,
    stream_name,
)

SEGMENT_COLUMN = "_segment"


# The documented layout (DESIGN "Write path", the layout module's docstring), spelt out here
# so the tests check the files where they are promised to be:
#   <storage>/collections/<collection>/<partition>/<segment>/data.lance   rows + _ts
#   <storage>/collections/<collection>/<partition>/<segment>/delta/*.arrow  (pk, ts)
def _data_path(seg_dir: Path) -> Path:
    return seg_dir / "data.lance"


def _delta_dir(seg_dir: Path) -> Path:
    return seg_dir / "delta"


# -- segments on disk ---------------------------------------------------------------------------


def segment_dir(storage: Path, seg: dict[str, Any]) -> Path:
    return (
        Path(storage)
        / "collections"
        / str(int(seg["collection_id"]))
        / str(int(seg["partition_id"]))
        / str(int(seg["segment_id"]))
    )


def read_segment_rows(storage: Path, seg: dict[str, Any]) -> pa.Table:
    """The rows of one flushed segment, read straight from its ``data.lance``."""
    path = _data_path(segment_dir(storage, seg))
    assert path.exists(), f"segment {seg['segment_id']} has no data at {path}"
    if seg.get("path"):
        assert Path(seg["path"]).resolve() == path.resolve(), (seg["path"], path)
    return lance.dataset(str(path)).to_table()


def read_rows(storage: Path, segs: list[dict[str, Any]]) -> pa.Table:
    """Rows of all given segments, with the segment id as an extra column ``_segment``."""
    tables = []
    for seg in segs:
        t = read_segment_rows(storage, seg)
        sid = pa.array([int(seg["segment_id"])] * t.num_rows, pa.int64())
        tables.append(t.append_column(SEGMENT_COLUMN, sid))
    if not tables:
        raise AssertionError("no segments to read")
    return pa.concat_tables(tables, promote_options="default")


def read_deltas(storage: Path, segs: list[dict[str, Any]]) -> pa.Table:
    """All delta-log records (pk, ts) of the given segments, plus ``_segment``."""
    tables = []
    for seg in segs:
        d = _delta_dir(segment_dir(storage, seg))
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.arrow")):
            with pa.memory_map(str(f)) as source:
                t = pa.ipc.open_file(source).read_all()
            sid = pa.array([int(seg["segment_id"])] * t.num_rows, pa.int64())
            tables.append(t.append_column(SEGMENT_COLUMN, sid))
    if not tables:
        return pa.table(
            {
                "pk": pa.array([], pa.int64()),
                "ts": pa.array([], pa.uint64()),
                SEGMENT_COLUMN: pa.array([], pa.int64()),
            }
        )
    return pa.concat_tables(tables, promote_options="default")


def read_pk_stats_meta(storage: Path, seg: dict[str, Any]) -> dict[str, Any]:
    """The JSON summary (min, max, num_keys, num_bits) stored with a segment's bloom filter."""
    path = segment_dir(storage, seg) / "pk_stats.arrow"
    assert path.exists(), f"segment {seg['segment_id']} has no pk stats at {path}"
    with pa.memory_map(str(path)) as source:
        schema = pa.ipc.open_file(source).schema
    return dict(json.loads((schema.metadata or {})[b"elanus.pkstats"]))


# -- streams --------------------------------------------------------------------------------------


@dataclass
class StreamMsg:
    seq: int
    subject: str
    msg: DmlMessage

    @property
    def is_tick(self) -> bool:
        return self.msg.type is MsgType.TICK

    @property
    def rows(self) -> int:
        return self.msg.batch.num_rows if self.msg.batch is not None else 0


async def read_stream(
    js: JetStreamContext, pchannel: str, subject: str | None = None, timeout: float = 5.0
) -> list[StreamMsg]:
    """Every message of the pchannel's stream (or of ``subject`` in it), in stream order,
    through an ephemeral pull consumer that is deleted afterwards."""
    stream = stream_name(pchannel)
    info = await js.stream_info(stream)
    if info.state.messages == 0:
        return []
    last = info.state.last_seq
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        inactive_threshold=30.0,
    )
    sub = await js.pull_subscribe(
        subject or f"{SUBJECT_ROOT}.{pchannel}.>", stream=stream, config=config
    )
    out: list[StreamMsg] = []
    try:
        while True:
            try:
                msgs = await sub.fetch(512, timeout=timeout)
            except NatsTimeout:
                break  # nothing (more) matches the filter
            done = False
            for m in msgs:
                meta = m.metadata
                seq = meta.sequence.stream
                out.append(StreamMsg(seq, m.subject, DmlMessage.decode(m.headers, m.data, seq)))
                if seq >= last or meta.num_pending == 0:
                    done = True
            if done:
                break
    finally:
        name = (await sub.consumer_info()).name
        await sub.unsubscribe()
        try:
            await js.delete_consumer(stream, name)
        except Exception:  # noqa: BLE001 - ephemeral: it goes away by itself anyway
            pass
    return out


async def subject_counts(js: JetStreamContext, pchannel: str) -> dict[str, int]:
    """Messages per subject currently held by the pchannel's stream."""
    info = await js.stream_info(stream_name(pchannel), subjects_filter=">")
    return dict(info.state.subjects or {})


def data_counts(counts: dict[str, int]) -> dict[str, int]:
    """The data subjects (not the tick subject) of a ``subject_counts`` result."""
    return {s: n for s, n in counts.items() if not s.endswith("." + TICK)}


async def stream_state(js: JetStreamContext, pchannel: str) -> tuple[int, int, int]:
    """(first_seq, last_seq, messages) of the pchannel's stream."""
    st = (await js.stream_info(stream_name(pchannel))).state
    return st.first_seq, st.last_seq, st.messages
