"""Stable 64-bit hashes of primary keys, vectorised: vchannel routing and bloom filters.

The values are persisted (bloom filters) and shared by every process (routing), so the
functions are fixed here: splitmix64 for Int64 keys, FNV-1a for VarChar keys. No per-row
Python loop: strings are hashed one byte position at a time across all rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def splitmix64(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def _fnv1a_strings(arr: pa.Array) -> np.ndarray:
    arr = arr.cast(pa.large_string()) if arr.type != pa.large_string() else arr
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = arr.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    longest = int(lengths.max()) if n else 0
    with np.errstate(over="ignore"):
        for j in range(longest):
            active = np.nonzero(lengths > j)[0]
            byte = raw[starts[active] + j].astype(np.uint64)
            h[active] = (h[active] ^ byte) * _FNV_PRIME
    return h


def hash_pks(pks: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """uint64 hash of each key; Int64 and VarChar keys only (the allowed primary keys)."""
    if isinstance(pks, np.ndarray):
        return splitmix64(pks.astype(np.int64).view(np.uint64))
    if isinstance(pks, pa.ChunkedArray):
        pks = pks.combine_chunks()
    if pa.types.is_integer(pks.type):
        return splitmix64(pks.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64))
    if pa.types.is_string(pks.type) or pa.types.is_large_string(pks.type):
        return _fnv1a_strings(pks)
    raise TypeError(f"primary keys must be Int64 or VarChar, not {pks.type}")


def shard_of(pks: pa.Array | np.ndarray, num_shards: int) -> np.ndarray:
    """The vchannel index of each key (``hash % num_shards``)."""
    return (hash_pks(pks) % np.uint64(num_shards)).astype(np.int64)
