"""DML channels on JetStream: one stream per pchannel, messages as Arrow IPC with headers.

Subjects inside the stream of pchannel ``P``:
- ``elanus.dml.P.<vchannel>`` carries inserts and deletes of one vchannel;
- ``elanus.dml.P._tick`` carries the coord's time ticks, read by every vchannel on ``P``.
A vchannel's consumer filters on both subjects, so it sees its own data and every tick in
stream order: when it reads tick ``T`` it has read every message with a timestamp ``<= T``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from elanus.channels.replicas import ensure_stream
from elanus.channels.syncnats import Pieces
from elanus.schema import PK_COLUMN

SUBJECT_ROOT = "elanus.dml"
TICK = "_tick"
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
"""The payload size DML messages are cut near (``channels/publisher.py``), when the NATS
server allows that much."""

H_TYPE = "Elanus-Type"
H_COLLECTION = "Elanus-Collection"
H_PARTITION = "Elanus-Partition"
H_SEGMENT = "Elanus-Segment"
H_VCHANNEL = "Elanus-VChannel"
H_TS = "Elanus-Ts"
H_SOURCE = "Elanus-Source"
H_MSG_ID = "Nats-Msg-Id"


class MsgType(enum.StrEnum):
    INSERT = "insert"
    DELETE = "delete"
    TICK = "tick"
    IMPORT = "import"
    """A segment written outside the log (bulk import) joins the vchannel at this ts."""


def stream_name(pchannel: str) -> str:
    return "ELANUS_" + pchannel.upper()


def data_subject(pchannel: str, vchannel: str) -> str:
    return f"{SUBJECT_ROOT}.{pchannel}.{vchannel}"


def tick_subject(pchannel: str) -> str:
    return f"{SUBJECT_ROOT}.{pchannel}.{TICK}"


def pchannel_name(index: int) -> str:
    """The ``index``-th physical channel (one JetStream stream each)."""
    return f"dml_{index}"


def vchannel_name(pchannel: str, collection_id: int, shard: int) -> str:
    """Shard ``shard`` of a collection, on ``pchannel``: ``dml_3_1001v0``."""
    return f"{pchannel}_{collection_id}v{shard}"


def pchannel_of(vchannel: str) -> str:
    """``dml_3_1001v0`` lives on ``dml_3`` (the inverse of ``vchannel_name``)."""
    head, _, _ = vchannel.rpartition("_")
    return head


@dataclass
class DmlMessage:
    type: MsgType
    ts: int
    vchannel: str = ""
    collection_id: int = 0
    partition_id: int = 0
    segment_id: int = 0
    source: str = ""
    batch: pa.RecordBatch | None = None
    msg_id: str | None = None
    seq: int = 0
    """The stream sequence, set when the message is read back."""

    def encode(self, pchannel: str) -> tuple[str, dict[str, str], bytes]:
        headers = {H_TYPE: self.type.value, H_TS: str(self.ts), H_SOURCE: self.source}
        if self.type is MsgType.TICK:
            return tick_subject(pchannel), headers, b""
        headers.update(
            {
                H_VCHANNEL: self.vchannel,
                H_COLLECTION: str(self.collection_id),
                H_PARTITION: str(self.partition_id),
                H_SEGMENT: str(self.segment_id),
            }
        )
        if self.msg_id:
            headers[H_MSG_ID] = self.msg_id
        payload = ipc_bytes(self.batch) if self.batch is not None else b""
        return data_subject(pchannel, self.vchannel), headers, payload

    @classmethod
    def decode(
        cls, headers: dict[str, str] | None, payload: bytes | Pieces, seq: int = 0
    ) -> DmlMessage:
        h = headers or {}
        kind = MsgType(h.get(H_TYPE, "tick"))
        if isinstance(payload, IpcPayload) and payload.batch is not None:  # handed over
            batch: pa.RecordBatch | None = payload.batch
        else:
            whole = bytes(payload) if isinstance(payload, Pieces) else payload
            batch = read_ipc(whole) if whole else None
        return cls(
            type=kind,
            ts=int(h.get(H_TS, 0)),
            vchannel=h.get(H_VCHANNEL, ""),
            collection_id=int(h.get(H_COLLECTION, 0)),
            partition_id=int(h.get(H_PARTITION, 0)),
            segment_id=int(h.get(H_SEGMENT, 0)),
            source=h.get(H_SOURCE, ""),
            batch=batch,
            msg_id=h.get(H_MSG_ID),
            seq=seq,
        )


def ipc_bytes(batch: pa.RecordBatch) -> pa.Buffer:
    """The batch as one Arrow IPC stream in one buffer (DML on the wire is
    ``ipc_payload``'s: the same bytes, its body not copied)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


class IpcPayload(Pieces):
    """A batch as an Arrow IPC stream whose body is the batch's own buffers, not a copy:
    the socket gathers the pieces, and a consumer in the same process takes ``batch``, the
    rows the stream encodes (None when a buffer of it is not 8-aligned, as a client's can
    be: Lance refuses those, and decoding the joined stream aligns them)."""

    __slots__ = ("batch",)

    def __init__(self, parts: list[bytes | memoryview], batch: pa.RecordBatch | None) -> None:
        super().__init__(parts)
        self.batch = batch


class _Gather:
    """An IPC writer's sink that keeps what it is given (Arrow hands the body buffers over
    as they are)."""

    closed = False

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []

    def write(self, data: bytes | memoryview) -> int:
        self.parts.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


def ipc_payload(batch: pa.RecordBatch) -> IpcPayload:
    """``batch`` as one IPC stream message, in pieces: the encoding copies only its few
    hundred bytes of metadata (``ipc_bytes`` copied every megabyte of a message once more
    on the proxy's one thread per write)."""
    sink = _Gather()
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), batch.schema) as writer:
        writer.write_batch(batch)
    return IpcPayload(sink.parts, batch if aligned(batch) else None)


def aligned(batch: pa.RecordBatch) -> bool:
    """Whether every buffer of ``batch`` starts on an 8-byte boundary."""
    return all(b is None or b.address % 8 == 0 for col in batch.columns for b in col.buffers())


def read_ipc(payload: bytes) -> pa.RecordBatch:
    reader = pa.ipc.open_stream(pa.py_buffer(payload))
    batches = list(reader)
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, reader.schema).combine_chunks().to_batches()[0]


def delete_batch(pks: pa.Array) -> pa.RecordBatch:
    return pa.record_batch([pks], names=[PK_COLUMN])


async def ensure_streams(
    js: JetStreamContext, pchannels: list[str], *, max_bytes: int = -1, replicas: int = 1
) -> None:
    """Create the file-backed stream of every pchannel, at ``replicas`` copies (setting
    ``stream_replicas``); an existing one is left as it is but for too few replicas."""
    for p in pchannels:
        config = StreamConfig(
            name=stream_name(p),
            subjects=[f"{SUBJECT_ROOT}.{p}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            discard=DiscardPolicy.NEW,
            max_bytes=max_bytes,
            duplicate_window=120.0,
            num_replicas=replicas,
        )
        await ensure_stream(js, config)


def headers_of(msg: Any) -> dict[str, str]:
    return dict(msg.headers or {})
