"""``BodyAligner``'s padding lands a DoPut batch's body 8-aligned in a real Flight server.

The server here is a plain pyarrow Flight server on loopback: it reports where each
batch's buffers sit as it reads them. Messages of a few dozen KiB and up are the ones
that matter (and the ones whose place gRPC fixes); without padding, those with a body of
2 MiB or more land at 1 mod 8, as every 8 MiB batch of the SDK did."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from elanus.client.bodyalign import BodyAligner


class _Recorder(flight.FlightServerBase):
    """Keeps, per batch received, whether every buffer of it starts 8-aligned."""

    def __init__(self) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.aligned: list[bool] = []

    def do_put(self, context, descriptor, reader, writer):  # type: ignore[no-untyped-def]
        for chunk in reader:
            batch = chunk.data
            self.aligned.append(
                all(
                    b.address % 8 == 0
                    for col in batch.columns
                    for b in col.buffers()
                    if b is not None and b.size
                )
            )


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    server = _Recorder()
    try:
        yield server
    finally:
        server.shutdown()


def batches() -> Iterator[pa.RecordBatch]:
    """Vectors of several widths, alone and with strings, nulls, JSON text and doubles;
    bodies from about 100 KiB to 90 MiB (varint lengths of 3 and 4 bytes)."""
    rng = np.random.default_rng(7)
    for dim, rows in ((8, 30_000), (128, 3_000), (128, 30_000), (768, 300), (768, 30_000)):
        ids = pa.array(np.arange(rows, dtype=np.int64))
        flat = pa.array(rng.random(rows * dim, dtype=np.float32))
        vectors = pa.FixedSizeListArray.from_arrays(flat, dim)
        yield pa.record_batch([ids, vectors], names=["id", "vector"])
        text = pa.array([("x" * (i % 37)) if i % 5 else None for i in range(rows)])
        meta = pa.array([f'{{"k": {i}}}' for i in range(rows)])
        extra = [text, meta, pa.array(rng.random(rows))]
        yield pa.record_batch([ids, vectors, *extra], names=["id", "vector", "t", "m", "f"])


def put(server: _Recorder, batch: pa.RecordBatch, pad: pa.Buffer | None) -> bool:
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as conn:
        writer, _ = conn.do_put(flight.FlightDescriptor.for_path("t"), batch.schema)
        if pad is None:
            writer.write_batch(batch)
        else:
            writer.write_with_metadata(batch, pad)
        writer.close()
    return server.aligned[-1]


def test_padded_batches_land_aligned_and_unpadded_large_ones_do_not(recorder: _Recorder) -> None:
    aligner = BodyAligner()
    unpadded_off = 0
    for batch in batches():
        assert put(recorder, batch, aligner.padding(batch)), (batch.schema.names, batch.nbytes)
        unpadded_off += not put(recorder, batch, None)
    assert unpadded_off >= 4  # what the padding is for: the large ones land at 1 mod 8


def test_the_padding_is_at_most_eight_zero_bytes() -> None:
    aligner = BodyAligner()
    for batch in batches():
        pad = aligner.padding(batch)
        assert pad is None or (1 <= pad.size <= 8 and pad.to_pybytes() == bytes(pad.size))
