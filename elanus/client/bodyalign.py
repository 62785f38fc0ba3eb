"""The padding that lands a DoPut batch's body on an 8-byte boundary in the server.

A Flight server reads a record batch where gRPC leaves its ``FlightData`` message: a
message of more than a few dozen KiB arrives in several pieces that Flight joins into one
8-aligned buffer, so each body buffer sits at that message's offset of the body, mod 8
(a smaller one stays wherever gRPC's read buffer has it: copying it costs little).
That offset is the protobuf framing before the body: the IPC header (field 2), the
``app_metadata`` (field 3) when there is any, and the body's own tag and length. With no
metadata, a body of 2 MiB or more (the SDK sends 8 MiB batches) starts at 1 mod 8: every
buffer of the batch is then off alignment in the server, and a consumer must copy the
whole batch before Lance will take it (``channels/dml.py``, ``aligned``).

``BodyAligner`` picks the ``app_metadata`` (0-8 zero bytes) that moves the body onto a
boundary; the proxy ignores a data message's metadata on DoPut. Only speed depends on it:
a server that lays messages out otherwise still reads every row, and copies as before.
``tests/test_bodyalign.py`` checks the arithmetic against a real Flight server.
"""

from __future__ import annotations

import pyarrow as pa

_PADS: list[pa.Buffer | None] = [None] + [pa.py_buffer(bytes(n)) for n in range(1, 9)]
_PREFIX = 8  # an IPC message's continuation marker and metadata length, not in FlightData
_BODY_TAG = 2  # field 1000, length-delimited: a two-byte varint key
_SMALL = 64 << 10
"""Batches under this many bytes go unpadded: gRPC places them as it likes, and the sums
(a one-row encoding per call) would cost a single-row insert about 50 µs."""


def _varint_len(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


class BodyAligner:
    """The metadata to send each batch of one schema with (the IPC header's length is
    fixed by the schema: measured once, on one row)."""

    def __init__(self) -> None:
        self._header: dict[pa.Schema, int] = {}

    def padding(self, batch: pa.RecordBatch) -> pa.Buffer | None:
        """``app_metadata`` for ``batch``: None when its body lands aligned without any, or
        when the batch is too small for its place to be known."""
        if batch.nbytes < _SMALL:
            return None
        header = self._header.get(batch.schema)
        if header is None:
            one = batch.slice(0, 1)
            header = pa.ipc.get_record_batch_size(one) - _PREFIX - _body_len(one)
            self._header[batch.schema] = header
        body = pa.ipc.get_record_batch_size(batch) - _PREFIX - header
        start = 1 + _varint_len(header) + header + _BODY_TAG + _varint_len(body)
        if start % 8 == 0:
            return None
        pad = -(start + 2) % 8 or 8  # the metadata's tag and one-byte length come first
        return _PADS[pad]


def _body_len(batch: pa.RecordBatch) -> int:
    """The IPC body length of ``batch`` (read back from its own encoding)."""
    message = pa.ipc.read_message(batch.serialize())
    return message.body.size if message.body is not None else 0
