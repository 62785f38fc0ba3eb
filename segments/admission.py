"""Load admission: a query node refuses a load whose segments would not fit in its memory,
with an error that says what to do, instead of being killed by the kernel part-way.

The estimate is what loading reads into memory, from the sizes of the files: the
segment's data files, less the vector columns an index holds (they are not read,
``segments/heldvectors``), plus the index files not mapped (``mmap.enabled`` ones are
paged in from disk as searches touch them, and the kernel can drop those pages again).
The budget is ``query_memory_limit_bytes`` less what the node holds already, or, unset,
90 % of the memory the system says is available now (Linux's MemAvailable).
"""

from __future__ import annotations

import json
import posixpath

import psutil

from elanus import layout, objstore
from elanus.api.querynode import SegmentSpec, ServedIndex
from elanus.errors import ElanusError, ErrorCode

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


def estimate(spec: SegmentSpec) -> int:
    """Bytes loading ``spec`` would take in memory (see the module's docstring)."""
    total = sum(objstore.list_tree(layout.data_path(layout.parent(spec.path))).values())
    for entry in spec.indexes:
        if not entry.mmap:
            total += sum(objstore.list_tree(entry.dir).values())
        total -= _held_bytes(entry)
    return max(total, 0)


def admit(specs: list[SegmentSpec], limit: int, held: int, node: str) -> None:
    """Refuse (LIMIT_EXCEEDED) a load of ``specs`` past the budget: ``limit`` less the
    ``held`` bytes, or, with no limit, a share of the available memory."""
    if not specs:
        return
    needed = sum(estimate(s) for s in specs)
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
