"""Building a segment's FAISS index: the builders' half of ``elanus.index.engine``.

Index nodes and Spark executors call :func:`build_segment_index` (through
``elanus.index.buildtask``); tests and benchmarks call :func:`build_index` on arrays.
Which structure is built for a segment's size is :func:`_plan`'s choice (see
:class:`~elanus.index.engine.SegmentIndex` for what each holds).

Builds default to one thread, as searches do (``elanus.index.engine``): with other jobs
on the 2 cores, 50k x 128-d builds took (1 vs 2 threads) IVF_FLAT 0.44 vs 2.6 s, IVF_SQ8
0.47 vs 2.7 s, IVF_PQ (m=32) 3.3 vs 17.5 s, HNSW (efConstruction=64) 4.1 vs 5.9 s; FAISS's
k-means barriers stall whenever a core is taken. Parallel builds come from building several
segments at once (one Spark task each); ``threads`` raises it for a builder with idle cores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import faiss
import numpy as np
import pyarrow as pa

from elanus import objstore
from elanus.errors import ElanusError, invalid
from elanus.index.engine import F32, I64, SegmentIndex
from elanus.index.kernels import binary_matrix, float_matrix, is_float_column, use_faiss_threads
from elanus.index.sparse import SparseIndex, build_sparse_index
from elanus.indexparams import IndexSpec

SMALL_SEGMENT_ROWS = 2048  # below this many vectors every index type is stored flat (exact)
MIN_POINTS_PER_LIST = 39  # FAISS's own minimum of training points per IVF centroid


def _as_matrix(spec: IndexSpec, vectors: Any) -> np.ndarray:
    if spec.field_kind == "binary":
        X = np.ascontiguousarray(vectors)
        if X.dtype != np.uint8:
            raise invalid(f"binary vectors must be uint8 (packed bits), got {X.dtype}")
        width = spec.dim // 8
    else:
        X = np.ascontiguousarray(vectors, dtype=F32)
        width = spec.dim
    if X.ndim != 2 or X.shape[1] != width:
        raise invalid(f"vectors have shape {X.shape}, expected (n, {width})")
    return X


def _faiss_metric(metric: str) -> int:
    return faiss.METRIC_L2 if metric == "L2" else faiss.METRIC_INNER_PRODUCT


def _plan(spec: IndexSpec, n: int) -> tuple[str, int | None]:
    """(structure to build, IVF list count) for ``n`` vectors."""
    itype = spec.index_type
    flat = "BIN_FLAT" if spec.field_kind == "binary" else "FLAT"
    if itype in ("FLAT", "BIN_FLAT") or n < SMALL_SEGMENT_ROWS:
        return flat, None
    if itype == "IVF_PQ" and n < 2 ** spec.params["nbits"]:
        return flat, None  # PQ codebooks need a training point per centroid
    if spec.is_ivf:
        return itype, max(1, min(spec.params["nlist"], n // MIN_POINTS_PER_LIST))
    return itype, None


def _new_index(spec: IndexSpec, built_as: str, nlist: int | None) -> Any:
    d, p = spec.dim, spec.params
    if built_as == "BIN_FLAT":
        return faiss.IndexBinaryFlat(d)
    if built_as == "BIN_IVF_FLAT":
        return faiss.index_binary_factory(d, f"BIVF{nlist}")
    desc = {
        "FLAT": "Flat",
        "IVF_FLAT": f"IVF{nlist},Flat",
        "IVF_SQ8": f"IVF{nlist},SQ8",
        "IVF_PQ": f"IVF{nlist},PQ{p.get('m')}x{p.get('nbits')}np",  # np: no polysemous training
        "HNSW": f"HNSW{p.get('M')},Flat",
    }[built_as]
    index = faiss.index_factory(d, desc, _faiss_metric(spec.metric))
    if built_as == "HNSW":
        assert isinstance(index, faiss.IndexHNSW)  # the factory hands back the concrete class
        index.hnsw.efConstruction = p["efConstruction"]
    return index


def build_index(
    spec: IndexSpec,
    vectors: Any,
    valid: np.ndarray | None = None,
    threads: int = 1,
    *,
    scratch: bool = False,
) -> SegmentIndex:
    """Build ``spec``'s index over ``vectors``: float32 ``(n, dim)`` or uint8 ``(n, dim/8)``
    packed bits. ``valid`` (bool per row) marks rows that have a vector; the others are
    left out and never returned. Search results are positions in ``vectors``.

    IVF training samples at most 256 points per list (FAISS's default); small segments
    get fewer lists or a flat index (see :class:`SegmentIndex`). ``threads`` OpenMP
    threads train and add (one by default: see the module docstring; a dedicated builder
    on idle cores may pass more). ``scratch``: ``vectors`` may be changed in place (COSINE
    normalises them) rather than copied.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise invalid(f"threads must be a positive integer, got {threads!r}")
    X = _as_matrix(spec, vectors)
    n = X.shape[0]
    ids: np.ndarray | None = None
    if valid is not None:
        v = np.asarray(valid)
        if v.shape != (n,):
            raise invalid(f"valid has {v.shape} entries for {n} vectors")
        v = v.astype(bool, copy=False)
        if not v.all():
            ids = np.flatnonzero(v).astype(I64)
            X = X[ids]
    if spec.field_kind == "float":
        if not np.isfinite(X).all():
            raise invalid("vectors contain NaN or infinite values")
        if spec.metric == "COSINE":
            X = X if scratch and ids is None and X is vectors else X.copy()
            faiss.normalize_L2(X)
    built_as, nlist = _plan(spec, X.shape[0])
    index = _new_index(spec, built_as, nlist)
    use_faiss_threads(threads)
    try:
        if not index.is_trained:
            index.train(X)
        if ids is None:
            index.add(X)
        else:
            wrap = faiss.IndexBinaryIDMap if spec.field_kind == "binary" else faiss.IndexIDMap
            outer = wrap(index)  # the wrapper keeps a reference to the inner index
            outer.add_with_ids(X, ids)
            index = outer
    except RuntimeError as e:  # a FAISS constraint the params check did not foresee
        raise ElanusError("INTERNAL", f"building {built_as} failed: {e}") from None
    return SegmentIndex(spec, index, n, built_as, nlist)


def build_segment_index(
    lance_path: str, field: str, spec: IndexSpec, threads: int = 1
) -> SegmentIndex | SparseIndex:
    """Build ``spec``'s index over column ``field`` of the Lance dataset at ``lance_path``,
    reading only that column; null vectors are skipped. Sparse fields get an inverted
    index (``elanus.index.sparse``), the others a FAISS one."""
    import lance

    try:
        opts = objstore.lance_options(lance_path)
        ds = lance.dataset(lance_path, storage_options=opts)
        t = ds.schema.field(field).type
    except (ValueError, OSError, KeyError) as e:
        raise invalid(f"cannot read field {field!r} from {lance_path}: {e}") from None
    if spec.field_kind == "sparse":
        if not pa.types.is_map(t):
            raise invalid(f"field {field!r} has type {t}, expected map<uint32, float>")
        column = _read(lambda: ds.to_table(columns=[field]), field, lance_path).column(0)
        return build_sparse_index(spec, column.combine_chunks())
    if spec.field_kind == "binary":
        if not pa.types.is_fixed_size_binary(t) or t.byte_width * 8 != spec.dim:
            want = f"fixed_size_binary({spec.dim // 8})"
            raise invalid(f"field {field!r} has type {t}, expected {want}")
    elif not (pa.types.is_fixed_size_list(t) and t.list_size == spec.dim and is_float_column(t)):
        raise invalid(
            f"field {field!r} has type {t}, expected fixed_size_list<float32>[{spec.dim}]"
        )
    X, valid = _read(lambda: _read_matrix(ds, field, spec), field, lance_path)
    return build_index(spec, X, valid, threads, scratch=True)


R = TypeVar("R")


def _read(read: Callable[[], R], field: str, lance_path: str) -> R:
    try:
        return read()
    except (ValueError, OSError) as e:
        raise invalid(f"cannot read field {field!r} from {lance_path}: {e}") from None


def _read_matrix(ds: Any, field: str, spec: IndexSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """The column as one matrix (float32, or uint8 codes) and its validity (``None``: no
    nulls), filled batch by batch: the read never holds the column twice (reading it
    whole and then combining its chunks held 2x, plus Lance's buffers)."""
    binary = spec.field_kind == "binary"
    width = spec.dim // 8 if binary else spec.dim
    X = np.empty((ds.count_rows(), width), np.uint8 if binary else F32)
    valid = np.ones(len(X), bool)
    at = 0
    for batch in ds.to_batches(columns=[field]):
        arr = batch.column(0)
        part = binary_matrix(arr) if binary else float_matrix(arr)
        X[at : at + len(part)] = part
        if arr.null_count:
            valid[at : at + len(part)] = arr.is_valid().to_numpy(zero_copy_only=False)
        at += len(part)
    if at != len(X):
        raise invalid(f"field {field!r}: read {at} rows of {len(X)}")
    return X, None if valid.all() else valid
