"""Per-segment primary-key statistics: a bloom filter and the min/max key.

The delegator's PK oracle (seed 001) and the datanode use them to find the segments that
may hold a deleted key without reading the segments. Hashes come from ``elanus.pkhash``
(stable across processes and versions), probes by double hashing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus import objstore
from elanus.pkhash import hash_pks

BITS_PER_KEY = 10
NUM_PROBES = 7


def _positions(hashes: np.ndarray, num_bits: int) -> np.ndarray:
    h1 = hashes & np.uint64(0xFFFFFFFF)
    h2 = (hashes >> np.uint64(32)) | np.uint64(1)
    probes = np.arange(NUM_PROBES, dtype=np.uint64)[:, None]
    with np.errstate(over="ignore"):
        return ((h1[None, :] + probes * h2[None, :]) % np.uint64(num_bits)).astype(np.int64)


@dataclass
class PkStats:
    num_bits: int
    bits: np.ndarray  # uint8 bitmap
    min_pk: Any = None
    max_pk: Any = None
    num_keys: int = 0

    @classmethod
    def build(cls, pks: pa.Array | pa.ChunkedArray) -> PkStats:
        if isinstance(pks, pa.ChunkedArray):
            pks = pks.combine_chunks()
        num_bits = max(1024, len(pks) * BITS_PER_KEY)
        stats = cls(num_bits, np.zeros((num_bits + 7) // 8, dtype=np.uint8))
        stats.add(pks)
        return stats

    def add(self, pks: pa.Array) -> None:
        if len(pks) == 0:
            return
        mask = np.zeros(self.num_bits, dtype=bool)
        for probe in _positions(hash_pks(pks), self.num_bits):  # one scatter per probe
            mask[probe] = True
        bits = np.packbits(mask, bitorder="little")
        self.bits[: len(bits)] |= bits
        mm = pc.min_max(pks)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        self.min_pk = lo if self.min_pk is None else min(self.min_pk, lo)
        self.max_pk = hi if self.max_pk is None else max(self.max_pk, hi)
        self.num_keys += len(pks)

    def may_contain(self, pks: pa.Array) -> np.ndarray:
        """A boolean mask: False means the key is certainly not in the segment."""
        if len(pks) == 0 or self.num_keys == 0:
            return np.zeros(len(pks), dtype=bool)
        mask = self.bloom_hits(hash_pks(pks))
        in_range = pc.and_(pc.greater_equal(pks, self.min_pk), pc.less_equal(pks, self.max_pk))
        return mask & in_range.to_numpy(zero_copy_only=False)

    def bloom_hits(self, hashes: np.ndarray) -> np.ndarray:
        """The bloom filter's answer for keys hashed already (``hash_pks``): callers that
        ask many segments about the same keys hash them once."""
        pos = _positions(hashes, self.num_bits)
        hit = (self.bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return np.asarray(hit.all(axis=0), dtype=bool)

    def save(self, path: str | Path) -> None:
        meta = {
            "num_bits": self.num_bits,
            "min": self.min_pk,
            "max": self.max_pk,
            "num_keys": self.num_keys,
        }
        table = pa.table({"bits": pa.array([self.bits.tobytes()], pa.large_binary())})
        table = table.replace_schema_metadata({"elanus.pkstats": json.dumps(meta)})
        objstore.write_ipc(path, table)

    @classmethod
    def load(cls, path: str | Path) -> PkStats:
        table = objstore.read_ipc(path)
        meta = json.loads(table.schema.metadata[b"elanus.pkstats"])
        bits = np.frombuffer(table.column("bits")[0].as_py(), dtype=np.uint8).copy()
        return cls(meta["num_bits"], bits, meta["min"], meta["max"], meta["num_keys"])
