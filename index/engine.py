"""In-memory FAISS indexes over one sealed segment's vector column: build, persist, load,
search.

Index builders make a :class:`SegmentIndex` (``elanus.index.build``) and call
:meth:`SegmentIndex.write`; workers and the coord's report check call :func:`load_index`,
workers then :meth:`SegmentIndex.search`. Nothing here talks to the network or the
metadata store.

Past 600 lines: one concept, a FAISS index over a segment, with the two things only it
uses: zero-copy NumPy views of what FAISS stores, and FAISS's range-search hits shaped as a
k-NN result. A quarter of the module is this docstring's measurements behind its choices.

Conventions are those of the exact kernel (``elanus.index.kernels``), so a caller can
use either for a segment: rows returned are row positions in the segment (the order the
vectors were given in), results come best first as ``(distances (nq, k') float32, rows
(nq, k') int64)`` with ``k' = min(k, visible rows)``, and empty slots hold row -1 and the
worst distance (+inf, or -inf for IP/COSINE). L2 is the squared distance, IP and COSINE are
similarities, HAMMING a bit count. COSINE indexes store unit vectors and search them by
inner product with unit queries. Null vectors (``valid=False`` at build) are not stored
(the index then maps its entries to row positions) and never come back.

Which search runs (measured on 2 shared cores, 128-d clustered float32, k=10, one query;
single runs, the machine was shared with other jobs, so only ratios are meaningful):

* FLAT and BIN_FLAT are searched by the exact kernel over the index's own storage
  (zero-copy), which beats ``IndexFlat.search`` (see ``index/kernels.py``) and supports
  JACCARD.
* HNSW loses recall when few rows pass the filter, because the graph walk must cross
  filtered-out nodes (200k rows, M=16, efConstruction=128, ef=64)::

      visible   HNSW ef=64        HNSW ef=256      exact scan of the visible rows
        1 %     0.22  0.13 ms     0.48  0.55 ms    1.00  0.14 ms
        5 %     0.63  0.13 ms     0.81  0.51 ms    1.00  0.9 ms
       10 %     0.89  0.12 ms     0.96  0.50 ms    1.00  2.2 ms
       20 %     0.996 0.14 ms     0.998 0.52 ms    1.00  4.6 ms

  So below ``EXACT_BELOW`` (10 %) visible rows :meth:`SegmentIndex.search` scans the
  visible rows exactly (the HNSW storage is a flat array, used zero-copy), and between
  10 % and 20 % it widens ``ef`` by ``(0.2 / fraction)²`` (at most 4x).
* IVF types lose recall under a filter because the probed lists hold fewer visible rows.
  Scanning ``nprobe / fraction`` lists (capped at nlist) keeps the number of visible
  candidates of an unfiltered search: FAISS tests the filter before computing a distance,
  so the distance work stays about the same and only cheap bitmap tests grow; at low
  fractions it becomes an exhaustive (exact) scan of the visible rows. Recall@10 and time
  (100k rows, 512 lists, nprobe=16; unfiltered 0.929)::

      visible   nprobe 16         nprobe / fraction       exact scan
       90 %     0.928  0.23 ms    0.934  0.29 ms (18)
       50 %     0.916  0.19 ms    0.956  0.37 ms (32)
       20 %     0.836  0.10 ms    0.953  0.39 ms (80)
       10 %     0.633  0.07 ms    0.960  0.44 ms (160)     1.16 ms
        5 %     0.450  0.05 ms    0.999  0.38 ms (320)     0.24 ms

  Lists much smaller than FAISS's ideal (e.g. 20k rows in 512 lists) recover less: 0.71
  at 50 % visible for an unfiltered 0.80; a larger ``nprobe`` is the remedy there.
* FAISS's binary IVF takes no ``IDSelector``: filtered and range searches on BIN_IVF_FLAT
  scan the visible codes exactly (a row-order copy, ``n * dim / 8`` bytes, is made on first
  use). A Hamming scan costs ~0.2 ms per query over 200k 256-bit rows.

:meth:`SegmentIndex.prefers_exact` exposes the 10 % threshold to callers that hold the
raw vectors (e.g. to get exact distances rather than IVF_SQ8/IVF_PQ's approximations).

Range search (``radius``, optional ``range_filter``) returns the best ``k`` rows inside the
range, as the exact kernel does; HNSW and IVF answer it with FAISS's own (approximate)
range search, the others exactly.

Threads: searches run FAISS on the calling thread (one OpenMP thread). Many Flight
threads search concurrently on 2 cores, and FAISS's OpenMP workers keep spinning after
each call and slow the BLAS of the exact kernel (see ``index/kernels.py``). Measured,
queries/s with 1 vs 2 OpenMP threads per call (100k rows): HNSW single queries 7985 vs
8267 with one caller, 10411 vs 9816 with four; IVF_FLAT single queries 5216 vs 4098,
batches of 100 3798 vs 4009; HNSW batches of 100 from four callers 5466 vs 4956. Only a
lone HNSW batch gains from a second thread, and only when the other core is idle: 7761 vs
14711 on a quiet machine, but 10422 vs 5193 (medians of 6) when another job held one
core. So one thread, always. FAISS releases the GIL while it searches; no Python lock is
held around a FAISS call.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np
from faiss import swig_ptr

from elanus.errors import invalid
from elanus.index.files import FORMAT_VERSION, META_FILE
from elanus.index.kernels import VectorIndexExact, check_range, topk, use_faiss_threads
from elanus.indexparams import IndexSpec, search_params
from elanus.reduce import LARGER_IS_BETTER

if TYPE_CHECKING:
    from elanus.index.sparse import SparseIndex

F32 = np.float32
I64 = np.int64

INDEX_FILE = "index.faiss"

HOLDS_VECTORS = ("FLAT", "BIN_FLAT", "HNSW", "IVF_FLAT")
"""Structures that keep every vector as given (see :attr:`SegmentIndex.holds_vectors`)."""
EXACT_BELOW = 0.1  # visible fraction under which HNSW search scans the visible rows exactly
WIDEN_BELOW = 0.2  # visible fraction under which HNSW widens ef
MAX_EF = 32768
MAX_CACHED = 64  # search-parameter objects kept per index


PARALLEL_MIN_QUERIES = 32
"""A batch at least this big, when no other search runs, uses every OpenMP thread: a lone
HNSW batch of 100 ran 1.9x faster on 2 threads, while with four concurrent callers one
thread each was faster (see the module docstring)."""
ALL_THREADS = faiss.omp_get_max_threads()


class _InFlight:
    """How many FAISS searches run right now (across threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def enter(self) -> int:
        with self._lock:
            self.count += 1
            return self.count

    def leave(self) -> None:
        with self._lock:
            self.count -= 1


IN_FLIGHT = _InFlight()


class SegmentIndex:
    """One segment's vector index, held in memory.

    ``spec`` is the requested :class:`IndexSpec`; ``built_as`` the structure actually
    built (``"FLAT"``/``"BIN_FLAT"`` for segments under ``SMALL_SEGMENT_ROWS`` vectors, or
    too small to train IVF_PQ's codebooks); ``nlist`` the IVF list count used (fewer than
    requested on small segments, at least ``MIN_POINTS_PER_LIST`` vectors a list; both
    constants are ``elanus.index.build``'s);
    ``num_rows`` the segment's rows, null ones included; ``num_vectors`` those indexed.
    """

    serves_range = False
    """Segments answer range searches with the exact kernel rather than FAISS's
    approximate range search."""

    def __init__(
        self,
        spec: IndexSpec,
        index: Any,
        num_rows: int,
        built_as: str,
        nlist: int | None,
    ) -> None:
        self.spec = spec
        self.num_rows = num_rows
        self.built_as = built_as
        self.nlist = nlist
        self._binary = spec.field_kind == "binary"
        self._owner = index  # the wrapper that owns the C++ object; downcasts only borrow it
        index = _downcast(index, self._binary)
        self._index = index
        # Row position of each stored vector, when some rows are null (an IndexIDMap).
        self._ids: np.ndarray | None = None
        self._present: np.ndarray | None = None
        if isinstance(index, faiss.IndexIDMap | faiss.IndexBinaryIDMap):
            self._ids = faiss.vector_to_array(index.id_map).astype(I64, copy=False)
            self._present = np.zeros(num_rows, bool)
            self._present[self._ids] = True
            index = _downcast(index.index, self._binary)
        self._inner = index
        self.num_vectors = int(index.ntotal)
        if self._ids is None and self.num_vectors != num_rows:
            raise invalid(f"index holds {self.num_vectors} vectors for a {num_rows}-row segment")
        self._exact: VectorIndexExact | None = None
        self._map_lock = threading.Lock()
        self._params: dict[tuple[Any, ...], Any] = {}
        self._checked: dict[tuple[int, str], dict[str, int]] = {}
        self._metric_exact = "IP" if spec.metric == "COSINE" else spec.metric
        self.mapped = False
        """Whether the vectors or codes are mapped from the index file (``load_index``)."""

    # -- properties ------------------------------------------------------------------------
    @property
    def faiss_structure(self) -> Any:
        """The FAISS index holding the vectors (inside an id map, if there is one): what a
        verifier compares with the spec (``d``, ``metric_type``, its class)."""
        return self._inner

    @property
    def nbytes(self) -> int:
        """Bytes held by the index structures (vectors or codes, ids, graph links,
        centroids), mapped ones included; excludes Python object overhead."""
        ix = self._inner
        total = 0 if self._ids is None else self._ids.nbytes + self.num_rows
        if isinstance(ix, faiss.IndexHNSW):
            hnsw: Any = ix.hnsw  # faiss's stub lacks HNSW.neighbors and .offsets
            total += hnsw.neighbors.size() * 4 + hnsw.levels.size() * 4 + hnsw.offsets.size() * 8
        elif isinstance(ix, faiss.IndexIVF | faiss.IndexBinaryIVF):
            q = ix.quantizer
            total += q.ntotal * (q.code_size if isinstance(q, faiss.IndexBinary) else q.d * 4)
        return int(total + self._bulk_nbytes())

    @property
    def mapped_nbytes(self) -> int:
        """Of :attr:`nbytes`, those read from the mapped index file on demand rather than
        held (:func:`load_index` with ``mmap``): the vectors or codes."""
        return self._bulk_nbytes() if self.mapped else 0

    def _bulk_nbytes(self) -> int:
        """The vectors or codes: HNSW's flat storage, IVF's lists (codes and ids), FLAT's."""
        ix, n = self._inner, self.num_vectors
        if isinstance(ix, faiss.IndexHNSW):
            return int(float_view(faiss.downcast_index(ix.storage)).nbytes)
        if isinstance(ix, faiss.IndexIVF | faiss.IndexBinaryIVF):
            return int(n * (ix.code_size + 8))
        return int(n * (ix.code_size if self._binary else ix.d * 4))

    @property
    def holds_vectors(self) -> bool:
        """Whether the index keeps every vector it was given uncompressed, in row order or
        findable by row (FLAT, BIN_FLAT, HNSW's flat storage, IVF_FLAT's lists), so that
        a segment needs no copy of its own: :meth:`exact_search` scans them and, unless
        they are COSINE's unit vectors, :meth:`vectors` gives them back."""
        return self.built_as in HOLDS_VECTORS

    @property
    def gives_back_vectors(self) -> bool:
        """Whether :meth:`vectors` returns the vectors exactly as given: held, not
        normalised (COSINE), and every row has one (no id map)."""
        return self.holds_vectors and self.spec.metric != "COSINE" and self._ids is None

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The stored vectors of segment rows ``rows`` (float32 rows, or uint8 codes), a
        copy; IVF_FLAT finds them through a direct map (8 bytes a row) made on first use.
        Measured against ``LanceDataset.take`` of the same rows (200k x 128-d): 4 us
        against 0.4 ms for 10 rows, 0.36 against 46 ms for 10,000."""
        if not self.gives_back_vectors:
            raise invalid(f"a {self.built_as} {self.spec.metric} index does not give back vectors")
        ix, rows = self._inner, np.asarray(rows, I64)
        if isinstance(ix, faiss.IndexIVF):
            with self._map_lock:  # made once; FAISS reads it without locking afterwards
                if ix.direct_map.type == faiss.DirectMap.NoMap:  # type: ignore[attr-defined]
                    ix.make_direct_map()
            return ix.reconstruct_batch(rows) if len(rows) else np.empty((0, ix.d), F32)
        if isinstance(ix, faiss.IndexHNSW):
            return float_view(faiss.downcast_index(ix.storage))[rows]
        return (binary_view(ix) if self._binary else float_view(ix))[rows]

    def prefers_exact(self, visible_fraction: float) -> bool:
        """Whether a brute-force scan of the visible rows is the better answer at this
        visible fraction (true for exact index types, and under ``EXACT_BELOW`` for the
        others). ``search`` already acts on it where the index holds the raw vectors
        (FLAT, BIN_FLAT, HNSW); it is a hint for callers holding the raw column."""
        return self.built_as in ("FLAT", "BIN_FLAT") or visible_fraction < EXACT_BELOW

    # -- search ----------------------------------------------------------------------------
    def search(
        self,
        queries: Any,
        k: int,
        params: dict[str, Any] | None = None,
        valid: np.ndarray | None = None,
        radius: float | None = None,
        range_filter: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows per query, best first (see the module docstring).

        ``params`` are the request's search params (``nprobe``, ``ef``; validated by
        :func:`search_params`); ``valid`` is a bool (or 0/1) per segment row: rows visible
        at the read timestamp and passing the filter. ``radius`` / ``range_filter`` keep
        ``range_filter <= d < radius`` for L2/HAMMING and ``radius < d <= range_filter``
        for IP/COSINE.
        """
        sp = self._search_params(params, k)
        Q, mask, count, kk, empty = self._prepare(
            queries, k, self.spec.metric, valid, radius, range_filter
        )
        if empty is not None:
            return empty
        fraction = count / self.num_vectors
        if self._searches_exactly(fraction, radius):
            return self._exact_search(Q, kk, mask, radius, range_filter)
        if count == self.num_vectors:
            mask = None  # everything visible: no selector
        return self._faiss_search(Q, kk, sp, mask, fraction, radius, range_filter)

    def exact_search(
        self,
        queries: Any,
        k: int,
        metric: str,
        valid: np.ndarray | None = None,
        radius: float | None = None,
        range_filter: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The exact top ``k`` rows in ``metric`` from the vectors the index holds (see
        :attr:`holds_vectors`), as the exact kernel over the segment's column gives them:
        a scan of FLAT's or HNSW's storage, an exhaustive IVF_FLAT search (every list
        probed). ``None`` where the stored vectors cannot answer ``metric``: an IVF_FLAT
        index in another metric than its own, or a COSINE index (it holds unit vectors)
        in another than COSINE."""
        if not self.holds_vectors:
            return None
        if self.spec.metric == "COSINE" or self.built_as == "IVF_FLAT":
            if metric != self.spec.metric:
                return None
            metric = self._metric_exact  # unit vectors: COSINE is their inner product
        Q, mask, count, kk, empty = self._prepare(queries, k, metric, valid, radius, range_filter)
        if empty is not None:
            return empty
        if self.built_as == "IVF_FLAT":  # every list probed: every visible row compared
            full = {"nprobe": self.nlist or 1}
            mask = None if count == self.num_vectors else mask
            return self._faiss_search(Q, kk, full, mask, 1.0, radius, range_filter)
        return self._exact_search(Q, kk, mask, radius, range_filter, metric)

    def _prepare(
        self,
        queries: Any,
        k: int,
        metric: str,
        valid: np.ndarray | None,
        radius: float | None,
        range_filter: float | None,
    ) -> tuple[np.ndarray, np.ndarray | None, int, int, tuple[np.ndarray, np.ndarray] | None]:
        """(queries, visible stored rows, their count, k', the empty answer when there is
        nothing to search), after checking the range."""
        check_range(metric, radius, range_filter)
        if radius is None and range_filter is not None:
            raise invalid("range_filter needs a radius")
        Q = self._queries(queries)
        nq = Q.shape[0]
        mask = self._visible(valid)
        count = self.num_vectors if mask is None else int(np.count_nonzero(mask))
        kk = min(k, count)
        if kk == 0 or nq == 0:
            worst = -np.inf if metric in LARGER_IS_BETTER else np.inf
            return Q, mask, count, kk, (np.full((nq, kk), worst, F32), np.full((nq, kk), -1, I64))
        return Q, mask, count, kk, None

    def _search_params(self, params: dict[str, Any] | None, k: int) -> dict[str, int]:
        """:func:`search_params`, remembered for the request shapes seen (a single-query
        search is short enough for the check to show)."""
        key = (k, repr(params))  # JSON-made values: equal reprs are equal values
        sp = self._checked.get(key)
        if sp is None:
            sp = search_params(self.spec, params, k)
            if len(self._checked) >= MAX_CACHED:
                self._checked.clear()
            self._checked[key] = sp
        return sp

    def _searches_exactly(self, fraction: float, radius: float | None) -> bool:
        if self.built_as in ("FLAT", "BIN_FLAT"):
            return True
        if self.built_as == "HNSW":
            return fraction < EXACT_BELOW
        if self.built_as == "BIN_IVF_FLAT":  # no IDSelector, no range search in FAISS
            return fraction < 1.0 or radius is not None
        return False

    def _queries(self, queries: Any) -> np.ndarray:
        Q: np.ndarray  # uint8 codes or float32 vectors
        if self._binary:
            if isinstance(queries, bytes | bytearray):
                queries = [queries]
            if isinstance(queries, list | tuple) and queries and isinstance(queries[0], bytes):
                queries = np.frombuffer(b"".join(queries), np.uint8).reshape(len(queries), -1)
            Q = np.ascontiguousarray(queries, dtype=np.uint8)
            width = self.spec.dim // 8
        else:
            try:  # a copy only where it is changed in place (COSINE normalises it)
                copy = True if self.spec.metric == "COSINE" else None
                Q = np.array(queries, dtype=F32, order="C", copy=copy)
            except (TypeError, ValueError) as e:
                raise invalid(f"query vectors must be numeric: {e}") from None
            width = self.spec.dim
        if Q.ndim == 1:
            Q = Q.reshape(1, -1)
        if Q.ndim != 2 or Q.shape[1] != width:
            raise invalid(f"query vectors have shape {Q.shape}, expected (nq, {width})")
        if not self._binary:
            if not np.isfinite(Q).all():
                raise invalid("query vectors contain NaN or infinite values")
            if self.spec.metric == "COSINE":
                faiss.normalize_L2(Q)  # in place, on our copy; zero vectors stay zero
        return Q

    def _visible(self, valid: np.ndarray | None) -> np.ndarray | None:
        """Bool per segment row (visible, passing the filter, and not null), or None."""
        if valid is None:
            return None
        v = np.asarray(valid)
        if v.shape != (self.num_rows,):
            raise invalid(
                f"the visibility bitset has {v.shape} entries, the segment {self.num_rows} rows"
            )
        v = v.astype(bool, copy=False)
        return v if self._present is None else v & self._present

    # -- exact scans -------------------------------------------------------------------------
    def _exact_kernel(self) -> VectorIndexExact:
        if self._exact is None:  # racing threads build equal kernels; either one is kept
            ix = self._inner
            if isinstance(ix, faiss.IndexHNSW):
                X = float_view(faiss.downcast_index(ix.storage))
            elif isinstance(ix, faiss.IndexBinaryIVF):
                X = ivf_codes_in_order(ix)
            elif self._binary:
                X = binary_view(ix)
            else:
                X = float_view(ix)
            self._exact = VectorIndexExact(X, self._metric_exact)
        return self._exact

    def _exact_search(
        self,
        Q: np.ndarray,
        kk: int,
        mask: np.ndarray | None,
        radius: float | None,
        range_filter: float | None,
        metric: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        if mask is not None and self._ids is not None:
            mask = mask[self._ids]  # the kernel's rows are the stored vectors
        D, rows = self._exact_kernel().search(
            Q,
            kk,
            metric or self._metric_exact,
            valid=mask,
            radius=radius,
            range_filter=range_filter,
        )
        if self._ids is not None:
            rows = np.where(rows >= 0, self._ids[np.maximum(rows, 0)], -1)
        return D, rows

    # -- FAISS searches ----------------------------------------------------------------------
    def _faiss_search(
        self,
        Q: np.ndarray,
        kk: int,
        sp: dict[str, int],
        mask: np.ndarray | None,
        fraction: float,
        radius: float | None,
        range_filter: float | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        larger = self.spec.metric in LARGER_IS_BETTER
        bitmap = None if mask is None else np.packbits(mask, bitorder="little")
        sel = None if bitmap is None else faiss.IDSelectorBitmap(len(bitmap), swig_ptr(bitmap))
        params = self._faiss_params(sp, kk, fraction, sel)
        nq = Q.shape[0]
        running = IN_FLIGHT.enter()
        try:
            use_faiss_threads(ALL_THREADS if running == 1 and nq >= PARALLEL_MIN_QUERIES else 1)
            if radius is not None:
                lims, Dr, Ir = self._index.range_search(Q, float(radius), params=params)
            elif self._binary:
                D, rows = self._index.search(Q, kk, params=params)
            else:  # FAISS's own call, without its Python wrapper's checks (Q is ours)
                D = np.empty((nq, kk), F32)
                rows = np.empty((nq, kk), I64)
                self._index.search_c(nq, swig_ptr(Q), kk, swig_ptr(D), swig_ptr(rows), params)
        finally:
            IN_FLIGHT.leave()
        del bitmap, sel  # alive until FAISS returned
        worst = -np.inf if larger else np.inf
        if radius is not None:
            return ranged_topk(lims, Dr, Ir, nq, kk, larger, range_filter)
        D = D.astype(F32, copy=False)
        if nq == 1 and rows[0, -1] >= 0:
            return D, rows  # one full row (FAISS pads a row with -1 at its end)
        missing = rows < 0
        if missing.any():
            D[missing] = worst
        return D, rows.astype(I64, copy=False)

    def _faiss_params(self, sp: dict[str, int], kk: int, fraction: float, sel: Any) -> Any:
        """FAISS search parameters; unfiltered ones are made once per value and shared
        (FAISS only reads them)."""
        key = None
        if sel is None:
            key = (sp.get("ef"), sp.get("nprobe"), kk)
            cached = self._params.get(key)
            if cached is not None:
                return cached
        kwargs: dict[str, Any] = {} if sel is None else {"sel": sel}
        # The ignores: faiss's stub omits SearchParametersHNSW and the keyword constructors
        # its Python wrapper gives every SearchParameters class.
        if "ef" in sp:
            ef = sp["ef"]
            if fraction < WIDEN_BELOW:
                ef = math.ceil(ef * (WIDEN_BELOW / fraction) ** 2)
            ef = min(max(ef, kk), MAX_EF)
            params: Any = faiss.SearchParametersHNSW(efSearch=ef, **kwargs)  # type: ignore[attr-defined]
        elif "nprobe" in sp:
            nlist = self.nlist or 1
            nprobe = min(nlist, math.ceil(min(sp["nprobe"], nlist) / max(fraction, 1e-9)))
            params = faiss.SearchParametersIVF(nprobe=nprobe, **kwargs)  # type: ignore[call-arg]
        else:
            params = faiss.SearchParameters(**kwargs)
        if key is not None:
            if len(self._params) >= MAX_CACHED:
                self._params.clear()
            self._params[key] = params
        return params

    # -- persistence -----------------------------------------------------------------------
    def write(self, directory: Path | str) -> list[str]:
        """Write the index into ``directory`` (created if needed); returns the file keys."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self._binary:
            faiss.write_index_binary(self._index, str(directory / INDEX_FILE))
        else:
            faiss.write_index(self._index, str(directory / INDEX_FILE))
        meta = {
            "format": FORMAT_VERSION,
            "spec": self.spec.to_dict(),
            "num_rows": self.num_rows,
            "num_vectors": self.num_vectors,
            "built_as": self.built_as,
            "nlist": self.nlist,
            "faiss_version": faiss.__version__,
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=1))
        return [INDEX_FILE, META_FILE]


# -- FAISS's storage seen as NumPy, and its range-search hits as a k-NN result ---------------
# Zero-copy views of the vectors an index stores are what let a segment drop its own column
# when its index holds the vectors (``segments/querynode/heldvectors.py``) and the exact kernel scan
# them in place (``SegmentIndex._exact_kernel``). FAISS's range search gives each query a
# variable number of hits (``lims``); the engine answers with the best ``k`` of them per
# query, padded as its k-NN searches are.


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


def ranged_topk(
    lims: np.ndarray,
    dist: np.ndarray,
    rows: np.ndarray,
    nq: int,
    kk: int,
    larger: bool,
    range_filter: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``kk`` of each query's range-search hits (FAISS already applied the radius),
    after dropping those beyond ``range_filter``; padded like a k-NN result."""
    worst = -np.inf if larger else np.inf
    per_query: np.ndarray = np.diff(lims.astype(I64))
    qi = np.repeat(np.arange(nq), per_query)
    if range_filter is not None:
        keep = (dist <= range_filter) if larger else (dist >= range_filter)
        qi, dist, rows = qi[keep], dist[keep], rows[keep]
    counts = np.bincount(qi, minlength=nq)
    width = int(counts.max()) if len(counts) else 0
    outD = np.full((nq, kk), worst, F32)
    outR = np.full((nq, kk), -1, I64)
    if width == 0:
        return outD, outR
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(qi)) - starts[qi]
    M = np.full((nq, width), worst, F32)
    R = np.full((nq, width), -1, I64)
    M[qi, pos], R[qi, pos] = dist, rows
    d, j = topk(M, kk, larger)
    outD[:, : d.shape[1]] = d
    outR[:, : d.shape[1]] = np.where(j >= 0, np.take_along_axis(R, np.maximum(j, 0), 1), -1)
    return outD, outR


def _downcast(index: Any, binary: bool) -> Any:
    """The FAISS object as its concrete class (SWIG hands back base-class proxies); Any,
    since the callers branch on that class."""
    return faiss.downcast_IndexBinary(index) if binary else faiss.downcast_index(index)


def load_index(directory: Path | str, mmap: bool = False) -> SegmentIndex | SparseIndex:
    """Load an index written by :meth:`SegmentIndex.write` (or a sparse field's
    :meth:`~elanus.index.sparse.SparseIndex.write`): read fully into memory, or with
    ``mmap`` its vectors or codes mapped from the file, which must then stay in place
    while the index is used (Milvus's ``mmap.enabled``): IVF's lists through FAISS's
    ``IO_FLAG_MMAP`` (``OnDiskInvertedLists``), FLAT's and HNSW's flat storage through
    ``IO_FLAG_MMAP_IFC`` (zero-copy). FAISS 1.15 refuses both flags on one IVF file.
    Sparse indexes are always read whole.

    Measured (100k x 128-d): HNSW 63 MB loads in 38 ms, IVF_FLAT 50 MB in 30 ms.
    ``IO_FLAG_MMAP`` loads IVF_FLAT in 7 ms but then searches it 3.6x slower (15k vs 54k
    single queries/s), and does not speed up HNSW loading: mapping is for collections
    larger than memory, not for speed."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError) as e:
        raise invalid(f"no readable index metadata in {directory}: {e}") from None
    if meta.get("format") != FORMAT_VERSION:
        raise invalid(f"index format {meta.get('format')!r} is not {FORMAT_VERSION}")
    spec = IndexSpec.from_dict(meta["spec"])
    if spec.field_kind == "sparse":  # inverted lists, not FAISS: elanus.index.sparse
        from elanus.index.sparse import load_sparse_index

        return load_sparse_index(directory, spec, int(meta["num_rows"]))
    path = str(directory / INDEX_FILE)
    flags = 0
    if mmap:
        flags = faiss.IO_FLAG_MMAP if "IVF" in meta["built_as"] else faiss.IO_FLAG_MMAP_IFC
    index: faiss.Index | faiss.IndexBinary
    try:
        if spec.field_kind == "binary":
            index = faiss.read_index_binary(path, flags)
        else:
            index = faiss.read_index(path, flags)
    except RuntimeError as e:
        raise invalid(f"cannot read index file {path}: {e}") from None
    loaded = SegmentIndex(spec, index, int(meta["num_rows"]), meta["built_as"], meta["nlist"])
    loaded.mapped = mmap
    return loaded
