"""Zero-copy NumPy views of the vectors a FAISS index stores: what lets a segment drop its
own column when its index holds the vectors (``segments/heldvectors.py``) and the exact
kernel scan them in place (``SegmentIndex._exact_kernel``)."""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np


def float_view(flat: Any) -> np.ndarray:
    """(ntotal, d) float32 view of an ``IndexFlat``'s vectors (no copy)."""
    n, d = flat.ntotal, flat.d
    if n == 0:
        return np.empty((0, d), np.float32)
    return faiss.rev_swig_ptr(flat.get_xb(), n * d).reshape(n, d)


def binary_view(flat: Any) -> np.ndarray:
    """(ntotal, code_size) uint8 view of an ``IndexBinaryFlat``'s codes (no copy)."""
    n, cs = flat.ntotal, flat.code_size
    if n == 0:
        return np.empty((0, cs), np.uint8)
    return faiss.rev_swig_ptr(flat.xb.data(), n * cs).reshape(n, cs)


def ivf_codes_in_order(ivf: Any) -> np.ndarray:
    """Codes of an (inner) binary IVF index in insertion order: a copy, made once."""
    cs = ivf.code_size
    out = np.empty((ivf.ntotal, cs), np.uint8)
    lists = ivf.invlists
    for li in range(ivf.nlist):
        size = lists.list_size(li)
        if size:
            ids = faiss.rev_swig_ptr(lists.get_ids(li), size)
            out[ids] = faiss.rev_swig_ptr(lists.get_codes(li), size * cs).reshape(size, cs)
    return out
