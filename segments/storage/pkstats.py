"""Per-segment primary-key statistics: a bloom filter and the min/max key.

The delegator's PK oracle (seed 001) and the datanode use them to find the segments that
may hold a deleted key without reading the segments. Hashes come from ``elanus.pkhash``
(stable across processes and versions), probes by double hashing.

A filter has a power-of-two number of bits, 10-20 per key (Milvus's default false-positive
rate of 0.001 needs 14.4): a probe then masks instead of dividing, and a filter built for
more keys than it got folds down to its final size without its keys (bit ``i`` of the
small one is the OR of the big one's bits ``i + k * size``). That is how a growing segment
builds its stats while it spills (``PkStats.sized_for``, ``add`` on each spill's worker
thread), so its flush only folds them instead of hashing a million keys on the way to
Flushed. Filters written before (any number of bits) read and probe as they did.
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
ADD_CHUNK = 1 << 14
"""Keys ``add`` sets at once. It used to scatter a spill's keys into an unpacked copy of
the whole filter (a byte a bit: 16-32 MB for a growing segment's) and pack that, which in
a standalone during an insert faulted in fresh zeroed pages for every copy and for the
probes of a whole spill (``perf``: page clearing under these was ~7 % of the process's
CPU). OR-ing 16k keys' probes into the packed filter at a time costs the same CPU alone
(1M keys: 104-112 ms against 90-145) and faults in no pages."""


def bloom_bits(keys: int) -> int:
    """The filter size for ``keys`` keys: the power of two at or above ``BITS_PER_KEY`` each."""
    return max(1024, 1 << (max(1, keys * BITS_PER_KEY) - 1).bit_length())


def _positions(hashes: np.ndarray, num_bits: int) -> np.ndarray:
    h1 = hashes & np.uint64(0xFFFFFFFF)
    h2 = (hashes >> np.uint64(32)) | np.uint64(1)
    probes = np.arange(NUM_PROBES, dtype=np.uint64)[:, None]
    pos = h1[None, :] + probes * h2[None, :]  # < 2**35: no overflow
    if num_bits & (num_bits - 1) == 0:
        pos &= np.uint64(num_bits - 1)
    else:  # a filter written before sizes were powers of two
        pos %= np.uint64(num_bits)
    return pos.astype(np.int64)


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
        stats = cls.sized_for(len(pks))
        stats.add(pks)
        return stats

    @classmethod
    def sized_for(cls, keys: int) -> PkStats:
        """Empty stats with room for ``keys`` keys, to ``add`` to and then ``fold``."""
        num_bits = bloom_bits(keys)
        return cls(num_bits, np.zeros(num_bits // 8, dtype=np.uint8))

    def has_room(self, keys: int) -> bool:
        """Whether ``keys`` keys in all get ``BITS_PER_KEY`` bits each."""
        return keys * BITS_PER_KEY <= self.num_bits

    def fold(self) -> PkStats:
        """The same stats in a filter sized for the keys they hold (self when it is, or
        when its size is not a power of two)."""
        size = bloom_bits(self.num_keys)
        if size >= self.num_bits or self.num_bits & (self.num_bits - 1):
            return self
        bits = np.bitwise_or.reduce(self.bits.reshape(-1, size // 8), axis=0)
        return PkStats(size, bits, self.min_pk, self.max_pk, self.num_keys)

    def add(self, pks: pa.Array) -> None:
        """Set the keys' bits in the packed filter, ``ADD_CHUNK`` keys at a time: no
        unpacked copy of the filter per call, temporaries that stay in the cache."""
        if len(pks) == 0:
            return
        hashes = hash_pks(pks)
        for lo in range(0, len(hashes), ADD_CHUNK):
            pos = _positions(hashes[lo : lo + ADD_CHUNK], self.num_bits)
            np.bitwise_or.at(self.bits, pos >> 3, np.left_shift(1, pos & 7).astype(np.uint8))
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
