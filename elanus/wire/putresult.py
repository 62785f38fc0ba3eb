"""The payload of each DoPut ``PutResult``: the written keys and the write timestamp.

A PutResult's ``app_metadata`` is an Arrow IPC stream holding one record batch with a
single column ``pk`` (the primary keys of that input batch, auto ids included) and schema
metadata ``ts`` (the hybrid timestamp of the write) and ``count``. Any Flight client can
decode it with its Arrow library. Imports only pyarrow: the SDK uses it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass
class PutAck:
    pks: pa.Array
    ts: int

    @property
    def count(self) -> int:
        return len(self.pks)

    def encode(self) -> pa.Buffer:
        batch = pa.record_batch([self.pks], names=["pk"])
        schema = batch.schema.with_metadata({"ts": str(self.ts), "count": str(len(self.pks))})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_batch(batch.replace_schema_metadata(schema.metadata))
        return sink.getvalue()

    @classmethod
    def decode(cls, buf: pa.Buffer | bytes) -> PutAck:
        reader = pa.ipc.open_stream(buf)
        table = reader.read_all()
        meta = reader.schema.metadata or {}
        return cls(table.column("pk").combine_chunks(), int(meta.get(b"ts", b"0")))
