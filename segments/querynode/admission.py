"""Load admission: a query node refuses a load whose segments would not fit in its memory,
with an error that says what to do, instead of being killed by the kernel part-way.

The estimate is what loading keeps in memory, from the sizes of the files: the
segment's data files, less the vector columns an index holds (they are not read,
``heldvectors``) and the fixed-width columns mapped (``mappedcolumns``;
a mapped text or JSON column still counts, an over-estimate), plus the index files not
mapped (``mmap.enabled`` ones are paged in from disk as searches touch them, and the
kernel can drop those pages again).
The budget is ``query_memory_limit_bytes`` less what the node holds already, or, unset,
90 % of the memory the system says is available now (Linux's MemAvailable).
"""

from __future__ import annotations

import json
import posixpath

import psutil
import pyarrow as pa

from elanus import layout, objstore
from elanus.api.querynode import SegmentSpec, ServedIndex
from elanus.errors import ElanusError, ErrorCode
from elanus.schema import Schema
from elanus.segments import storage

AVAILABLE_SHARE = 0.9
"""Of the memory available at a load, the share a load may take."""
_HOLDS_VECTORS = ("FLAT", "BIN_FLAT", "HNSW", "IVF_FLAT")  # elanus.index.engine.HOLDS_VECTORS


def _held_bytes(entry: ServedIndex) -> int:
    """Bytes of the vector column an index holds, which loading then does not read."""
    try:
        meta = json.loads(objstore.read_bytes(posixpath.join(entry.dir, "meta.json")))
    except (ElanusError, ValueError):
        return 0
    if meta.get("built_as") not in _HOLDS_VECTORS:
        return 0
    dim = int(entry.spec.get("dim") or 0)
    width = dim // 8 if entry.spec.get("field_kind") == "binary" else dim * 4
    return int(meta.get("num_rows", 0)) * width


def _width(t: pa.DataType) -> int:
    """Bytes a row of a fixed-width column takes (0: variable width)."""
    if pa.types.is_fixed_size_list(t):
        return int(t.list_size) * _width(t.value_type)
    if pa.types.is_fixed_size_binary(t):
        return int(t.byte_width)
    try:
        return max(int(t.bit_width) // 8, 0)
    except ValueError:
        return 0


def estimate(spec: SegmentSpec, schema: Schema) -> int:
    """Bytes loading ``spec`` would keep in memory (see the module's docstring)."""
    data = layout.data_path(layout.parent(spec.path))
    total = sum(objstore.list_tree(data).values())
    held: set[str] = set()
    for entry in spec.indexes:
        if not entry.mmap:
            total += sum(objstore.list_tree(entry.dir).values())
        if (size := _held_bytes(entry)) > 0:
            total, held = total - size, held | {entry.field}
    mapped = [schema.field(f).arrow_type() for f in spec.mmap_fields if f not in held]
    if any(_width(t) for t in mapped):
        total -= storage.dataset(data).count_rows() * sum(_width(t) for t in mapped)
    return max(total, 0)


def admit(specs: list[SegmentSpec], schema: Schema, limit: int, held: int, node: str) -> None:
    """Refuse (LIMIT_EXCEEDED) a load of ``specs`` past the budget: ``limit`` less the
    ``held`` bytes, or, with no limit, a share of the available memory."""
    if not specs:
        return
    needed = sum(estimate(s, schema) for s in specs)
    budget = limit - held if limit > 0 else int(psutil.virtual_memory().available * AVAILABLE_SHARE)
    if needed <= budget:
        return
    raise ElanusError(
        ErrorCode.LIMIT_EXCEEDED,
        f"query node {node}: loading {len(specs)} segment(s) needs about {_gb(needed)} of "
        f"memory and {_gb(max(budget, 0))} is free for it: set mmap.enabled on the "
        "collection or its indexes (alter_collection_properties, alter_index_properties; "
        "indexes then stay on disk, mapped), or add query nodes",
    )


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.2f} MB"
