"""The bus's message format: a small JSON header beside binary frames.

A message body is a tree of dicts, lists and JSON scalars whose leaves may also be numpy
arrays and Arrow arrays, record batches or tables. Encoding lifts every such leaf out of
the tree into a frame of its own (numpy: the raw buffer, its dtype and shape in the
header; Arrow: an IPC stream) and leaves a small reference in its place, so vectors,
primary keys and result tables never become JSON number lists or base64 text, and
decoding hands them back as the same types (Arrow values over the message's bytes; numpy
arrays as writable copies, since a receiver may normalise vectors in place).

One encoded message::

    b"EF1" | u32 header length | header (JSON) | frame 0 | frame 1 | ...

The header is ``{"b": <tree>, "f": [<frame length>, ...]}``; each frame starts at an
8-byte boundary so numpy and Arrow can read it in place. A reference in the tree is
``{"\\u0000f": <index>, "k": <kind>, ...}``; a wire type (``elanus/wiretypes.py``) is
``{"\\u0000t": <class name>, "v": <fields>}``.

A message larger than what one NATS message may carry is cut into parts by
:func:`split` and joined by :func:`join`; how the parts travel is the transport's
business (``channels/transport.py``).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from elanus.errors import ElanusError, ErrorCode
from elanus.wiretypes import is_wire_type, lookup, type_name

MAGIC = b"EF1"
REF = "\u0000f"
"""The key that marks a frame reference; no JSON body a role sends starts a key with NUL."""
TYPE = "\u0000t"
"""The key that marks a wire type (``elanus/wiretypes.py``): its class name."""
_HEAD = struct.Struct("<3sI")
_ALIGN = 8


def encode(body: Any) -> bytes:
    """One message: the header with frame references, then the frames."""
    frames: list[Any] = []
    tree = _lift(body, frames)
    sizes = [len(f) if isinstance(f, bytes) else f.nbytes for f in frames]
    header = orjson.dumps(
        {"b": tree, "f": sizes}, default=_json_default, option=orjson.OPT_NON_STR_KEYS
    )
    parts: list[Any] = [_HEAD.pack(MAGIC, len(header)), header]
    offset = _HEAD.size + len(header)
    for frame, size in zip(frames, sizes, strict=True):
        pad = -offset % _ALIGN
        if pad:
            parts.append(b"\0" * pad)
        parts.append(frame)
        offset += pad + size
    return b"".join(parts)


def decode(data: bytes | bytearray | memoryview) -> Any:
    """The body of one message, its frames as numpy/Arrow values over ``data``'s bytes."""
    view = memoryview(data)
    if len(view) < _HEAD.size:
        raise _malformed("shorter than its header")
    magic, header_len = _HEAD.unpack_from(view)
    if magic != MAGIC:
        raise _malformed("not an Elanus frame message")
    offset = _HEAD.size + header_len
    try:
        header = orjson.loads(view[_HEAD.size : offset])
    except orjson.JSONDecodeError as exc:
        raise _malformed(f"unreadable header: {exc}") from None
    frames: list[memoryview] = []
    for size in header["f"]:
        offset += -offset % _ALIGN
        frames.append(view[offset : offset + size])
        offset += size
    if offset > len(view):
        raise _malformed("truncated")
    return _lower(header["b"], frames)


def _malformed(why: str) -> ElanusError:
    return ElanusError(ErrorCode.INVALID_ARGUMENT, f"malformed bus message: {why}")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"cannot put {type(obj).__name__} on the bus")


def _lift(value: Any, frames: list[Any]) -> Any:
    """The tree with every array replaced by a reference to its frame."""
    if isinstance(value, dict):
        return {k: _lift(v, frames) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lift(v, frames) for v in value]
    if isinstance(value, np.ndarray):
        array = value if value.flags.c_contiguous else value.copy(order="C")
        if array.dtype.hasobject:
            return _lift(array.tolist(), frames)
        frames.append(array.reshape(-1).view(np.uint8).data if array.size else b"")
        return {REF: len(frames) - 1, "k": "nd", "t": array.dtype.str, "s": list(array.shape)}
    if is_wire_type(value):
        fields = {
            f.name: _lift(getattr(value, f.name), frames)
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")  # private: derived state, rebuilt on arrival
        }
        return {TYPE: type_name(type(value)), "v": fields}
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        frames.append(_ipc(pa.record_batch([value], names=["v"])))
        return {REF: len(frames) - 1, "k": "arr"}
    if isinstance(value, pa.RecordBatch):
        frames.append(_ipc(value))
        return {REF: len(frames) - 1, "k": "rb"}
    if isinstance(value, pa.Table):
        frames.append(_ipc(value))
        return {REF: len(frames) - 1, "k": "tbl"}
    return value


def _lower(value: Any, frames: list[memoryview]) -> Any:
    if isinstance(value, dict):
        if REF in value:
            return _frame_value(value, frames[value[REF]])
        if TYPE in value:
            cls = lookup(value[TYPE])
            if cls is None:
                raise _malformed(f"unknown type {value[TYPE]!r}")
            return cls(**_lower(value["v"], frames))
        return {k: _lower(v, frames) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower(v, frames) for v in value]
    return value


def _frame_value(ref: dict[str, Any], frame: memoryview) -> Any:
    kind = ref["k"]
    if kind == "nd":
        # A copy: message bytes are read-only, and handlers may work on arrays in place.
        return np.frombuffer(frame, dtype=np.dtype(ref["t"])).reshape(ref["s"]).copy()
    table = pa.ipc.open_stream(pa.py_buffer(frame)).read_all()
    if kind == "tbl":
        return table
    batch = table.combine_chunks().to_batches()
    if kind == "rb":
        return batch[0] if batch else pa.RecordBatch.from_pylist([], schema=table.schema)
    return table.column(0).combine_chunks()


def _ipc(data: pa.Table | pa.RecordBatch) -> Any:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write(data)
    return memoryview(sink.getvalue())


# -- messages larger than one NATS message ----------------------------------------------------
def split(data: bytes, limit: int) -> list[bytes]:
    """``data`` in parts of at most ``limit`` bytes (one part when it fits)."""
    if limit <= 0:
        raise ValueError("part limit must be positive")
    return [data[i : i + limit] for i in range(0, max(len(data), 1), limit)]


def join(parts: list[bytes]) -> bytes:
    return parts[0] if len(parts) == 1 else b"".join(parts)
