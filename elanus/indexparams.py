"""Index specifications: which FAISS structure a vector field gets, and the validation of
its build parameters and of per-request search parameters.

Pure and I/O-free, so the proxy can reject a bad ``create_index`` or search request
before anything is recorded, and the index builders and workers read the same normalised
spec (``IndexSpec.to_dict()`` is what gets stored next to the index files).

Names follow Milvus: index types FLAT, IVF_FLAT, IVF_SQ8, IVF_PQ, HNSW (float vectors),
BIN_FLAT, BIN_IVF_FLAT (binary vectors), SPARSE_INVERTED_INDEX, SPARSE_WAND (sparse
vectors) and AUTOINDEX; build params ``nlist``, ``m``, ``nbits``, ``M``,
``efConstruction``; search params ``nprobe`` and ``ef``. Integer params may also be given
as decimal strings (the Milvus SDKs send key-value strings). The sparse types' params are
in ``SPARSE_BUILD`` (``drop_ratio_build``, ``inverted_index_algo``, and BM25's
``bm25_k1`` / ``bm25_b``) and ``drop_ratio_search`` at search time.

AUTOINDEX resolves to HNSW (M=16, efConstruction=128) for float vectors: the best
recall/latency trade-off of the supported types for in-memory segments (measured in
``engine.py``). For binary vectors it resolves to BIN_FLAT: a Hamming scan is cheap
enough to be exact (measured 0.16 ms per query over 200k 256-bit rows, 0.9 ms at 1024
bits, one core), it supports JACCARD and filters, and BIN_IVF_FLAT's recall loss buys
little at segment sizes. For sparse vectors it resolves to SPARSE_INVERTED_INDEX (the only
sparse type Milvus 2.5 keeps developing; SPARSE_WAND is the same index searched with
DAAT_WAND) and, unlike the dense case, takes that type's params: Milvus's full-text
examples give ``bm25_k1`` / ``bm25_b`` with AUTOINDEX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from elanus.errors import invalid
from elanus.reduce import KIND_METRICS, METRICS
from elanus.schema import DataType

FLOAT_TYPES = ("FLAT", "IVF_FLAT", "IVF_SQ8", "IVF_PQ", "HNSW")
BINARY_TYPES = ("BIN_FLAT", "BIN_IVF_FLAT")
SPARSE_TYPES = ("SPARSE_INVERTED_INDEX", "SPARSE_WAND")
INDEX_TYPES = (*FLOAT_TYPES, *BINARY_TYPES, *SPARSE_TYPES, "AUTOINDEX")
IVF_TYPES = frozenset({"IVF_FLAT", "IVF_SQ8", "IVF_PQ", "BIN_IVF_FLAT"})
EXACT_TYPES = frozenset({"FLAT", "BIN_FLAT"})

DEFAULT_METRIC = {"float": "COSINE", "binary": "HAMMING", "sparse": "IP"}
VECTOR_KIND = {
    DataType.FLOAT_VECTOR: "float",
    DataType.FLOAT16_VECTOR: "float",
    DataType.BFLOAT16_VECTOR: "float",
    DataType.BINARY_VECTOR: "binary",
    DataType.SPARSE_FLOAT_VECTOR: "sparse",
}
KIND_TYPES = {"float": FLOAT_TYPES, "binary": BINARY_TYPES, "sparse": SPARSE_TYPES}
KIND_NAMES = {"float": "FloatVector", "binary": "BinaryVector", "sparse": "SparseFloatVector"}

SPARSE_METRICS = ("IP", "BM25")
SPARSE_ALGOS = ("DAAT_MAXSCORE", "DAAT_WAND", "TAAT_NAIVE")
"""Milvus 2.5's ``inverted_index_algo``: document-at-a-time with MaxScore or WAND pruning,
or term-at-a-time accumulation of every posting (see ``elanus.index.sparse``)."""
DEFAULT_ALGO = {"SPARSE_INVERTED_INDEX": "DAAT_MAXSCORE", "SPARSE_WAND": "DAAT_WAND"}
BM25_K1 = (1.2, 2.0, 1.2)  # Milvus's accepted range and default for bm25_k1
BM25_B = (0.0, 1.0, 0.75)  # ... and for bm25_b

INT32_MAX = 2**31 - 1
MAX_DIM = 32768
MAX_EF = 32768
DEFAULT_NLIST = 128
DEFAULT_NPROBE = 16
DEFAULT_EF = 64
AUTO_HNSW = {"M": 16, "efConstruction": 128}


@dataclasses.dataclass(frozen=True)
class _Param:
    lo: int
    hi: int
    default: int | None  # None: derived from the other params / dim


# Build params per index type (ranges are inclusive).
_BUILD: dict[str, dict[str, _Param]] = {
    "FLAT": {},
    "BIN_FLAT": {},
    "IVF_FLAT": {"nlist": _Param(1, 65536, DEFAULT_NLIST)},
    "IVF_SQ8": {"nlist": _Param(1, 65536, DEFAULT_NLIST)},
    "BIN_IVF_FLAT": {"nlist": _Param(1, 65536, DEFAULT_NLIST)},
    "IVF_PQ": {
        "nlist": _Param(1, 65536, DEFAULT_NLIST),
        "m": _Param(1, MAX_DIM, None),
        "nbits": _Param(1, 16, 8),
    },
    "HNSW": {"M": _Param(2, 2048, 16), "efConstruction": _Param(1, INT32_MAX - 1, 128)},
}


@dataclasses.dataclass(frozen=True)
class IndexSpec:
    """A validated index definition for one vector field.

    ``params`` holds every build param of ``index_type`` with defaults filled in;
    ``metric`` is upper case; ``field_kind`` is ``"float"``, ``"binary"`` or ``"sparse"``;
    ``dim`` is the vector dimension (bits for binary vectors, 0 for sparse ones).
    """

    index_type: str
    metric: str
    params: Mapping[str, Any]
    field_kind: str
    dim: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "index_type": self.index_type,
            "metric": self.metric,
            "params": dict(self.params),
            "field_kind": self.field_kind,
            "dim": self.dim,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IndexSpec:
        """Rebuild (and re-validate) a spec stored with :meth:`to_dict`."""
        try:
            kind, dim, itype = d["field_kind"], d["dim"], d["index_type"]
        except (KeyError, TypeError) as e:
            raise invalid(f"an index spec needs field_kind, dim and index_type: {e}") from None
        return _make(kind, dim, itype, d.get("metric"), d.get("params"))

    @property
    def is_ivf(self) -> bool:
        return self.index_type in IVF_TYPES

    @property
    def is_exact(self) -> bool:
        return self.index_type in EXACT_TYPES


def make_index_spec(
    dtype: DataType | str,
    dim: int,
    index_type: str,
    metric: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> IndexSpec:
    """Validate an index request on a field of type ``dtype`` and dimension ``dim``.

    Raises ``ElanusError(INVALID_ARGUMENT)`` naming the offending type, metric or param.
    """
    dt = DataType.parse(dtype)
    if dt not in VECTOR_KIND:
        raise invalid(f"cannot build a vector index on a {dt.value} field")
    return _make(VECTOR_KIND[dt], dim, index_type, metric, params)


def _make(
    kind: str, dim: Any, index_type: Any, metric: Any, params: Mapping[str, Any] | None
) -> IndexSpec:
    if kind not in DEFAULT_METRIC:
        raise invalid(f"field_kind must be 'float', 'binary' or 'sparse', got {kind!r}")
    if kind == "sparse":
        dim = 0  # a sparse vector has no fixed dimension
    elif isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM:
        raise invalid(f"dim must be an integer in [1, {MAX_DIM}], got {dim!r}")
    if kind == "binary" and dim % 8:
        raise invalid(f"a binary vector's dim must be a multiple of 8, got {dim}")
    if not isinstance(index_type, str):
        raise invalid(f"index_type must be a string, got {index_type!r}")
    itype = index_type.strip().upper()
    if itype not in INDEX_TYPES:
        expected = ", ".join(INDEX_TYPES)
        raise invalid(f"unknown index type {index_type!r}; expected one of {expected}")
    allowed_types = KIND_TYPES[kind]
    if itype != "AUTOINDEX" and itype not in allowed_types:
        raise invalid(
            f"index type {itype} does not apply to {KIND_NAMES[kind]} fields; "
            f"use one of {', '.join((*allowed_types, 'AUTOINDEX'))}"
        )
    m = _sparse_metric(metric) if kind == "sparse" else _metric(kind, itype, metric)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise invalid(f"index params must be a JSON object, got {type(params).__name__}")
    if kind == "sparse":
        itype = "SPARSE_INVERTED_INDEX" if itype == "AUTOINDEX" else itype
        return IndexSpec(itype, m, _sparse_build_params(itype, m, params), kind, 0)
    if itype == "AUTOINDEX":
        # AUTOINDEX takes no tuning params: they belong to the type it resolves to.
        _reject_unknown("AUTOINDEX", params, {})
        if kind == "float":
            itype, params = "HNSW", AUTO_HNSW
        else:
            itype = "BIN_FLAT"
    built = _build_params(itype, dim, params)
    return IndexSpec(itype, m, built, kind, dim)


def _metric(kind: str, itype: str, metric: Any) -> str:
    if metric is None or metric == "":
        return DEFAULT_METRIC[kind]
    if not isinstance(metric, str):
        raise invalid(f"metric_type must be a string, got {metric!r}")
    m = metric.strip().upper()
    if m not in METRICS:
        raise invalid(f"unknown metric type {metric!r}; expected one of {', '.join(METRICS)}")
    if m not in KIND_METRICS[kind]:
        ok = ", ".join(sorted(KIND_METRICS[kind]))
        raise invalid(f"metric {m} does not apply to {kind} vectors; use one of {ok}")
    if itype == "BIN_IVF_FLAT" and m == "JACCARD":
        raise invalid(
            "metric JACCARD is not supported by BIN_IVF_FLAT (its clustering is by Hamming "
            "distance); use BIN_FLAT for JACCARD"
        )
    return m


def _sparse_metric(metric: Any) -> str:
    if metric is None or metric == "":
        return DEFAULT_METRIC["sparse"]
    if not isinstance(metric, str):
        raise invalid(f"metric_type must be a string, got {metric!r}")
    m = metric.strip().upper()
    if m not in SPARSE_METRICS:
        raise invalid(
            f"metric type {m} is not supported for sparse index; SparseFloatVector fields "
            f"are searched with {' or '.join(SPARSE_METRICS)}"
        )
    return m


def _sparse_build_params(itype: str, metric: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """``drop_ratio_build`` in [0, 1), ``inverted_index_algo``, and for BM25 ``bm25_k1``
    in [1.2, 2] and ``bm25_b`` in [0, 1] (Milvus's ranges), defaults filled in."""
    known = ["drop_ratio_build", "inverted_index_algo"]
    if metric == "BM25":
        known += ["bm25_k1", "bm25_b"]
    unknown = sorted(str(k) for k in given if k not in known)
    if unknown:
        raise invalid(
            f"unknown index param(s) {', '.join(unknown)} for {itype} with metric {metric} "
            f"(accepted: {', '.join(known)})"
        )
    out: dict[str, Any] = {"drop_ratio_build": 0.0}
    if "drop_ratio_build" in given:
        out["drop_ratio_build"] = drop_ratio("drop_ratio_build", given["drop_ratio_build"])
    algo = given.get("inverted_index_algo", DEFAULT_ALGO[itype])
    if not isinstance(algo, str) or algo.strip().upper() not in SPARSE_ALGOS:
        raise invalid(
            f"param inverted_index_algo must be one of {', '.join(SPARSE_ALGOS)}, got {algo!r}"
        )
    out["inverted_index_algo"] = algo.strip().upper()
    if itype == "SPARSE_WAND" and out["inverted_index_algo"] != "DAAT_WAND":
        raise invalid(
            "SPARSE_WAND is searched with DAAT_WAND; for another inverted_index_algo "
            "use SPARSE_INVERTED_INDEX"
        )
    if metric == "BM25":
        for name, (lo, hi, default) in (("bm25_k1", BM25_K1), ("bm25_b", BM25_B)):
            value = _as_float(name, given[name]) if name in given else default
            if not lo <= value <= hi:
                raise invalid(f"param {name} must be in [{lo}, {hi}], got {value}")
            out[name] = value
    return out


def _as_float(name: str, value: Any) -> float:
    """A finite number, also accepted as a decimal string; bools are refused."""
    if isinstance(value, bool):
        raise invalid(f"param {name} must be a number, got {value!r}")
    try:
        number = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise invalid(f"param {name} must be a finite number, got {value!r}")
    return number


def drop_ratio(name: str, value: Any) -> float:
    """``drop_ratio_build`` / ``drop_ratio_search``: the share of smallest values left out,
    in [0, 1) (dropping every value would leave nothing to score)."""
    ratio = _as_float(name, value)
    if not 0.0 <= ratio < 1.0:
        raise invalid(f"param {name} must be in [0, 1), got {ratio}")
    return ratio


def _reject_unknown(itype: str, given: Mapping[str, Any], known: Mapping[str, _Param]) -> None:
    unknown = sorted(str(k) for k in given if k not in known)
    if unknown:
        accepted = ", ".join(known) if known else "none"
        raise invalid(
            f"unknown index param(s) {', '.join(unknown)} for {itype} (accepted: {accepted})"
        )


def _as_int(name: str, value: Any) -> int:
    """An integer param, also accepted as a decimal string; bools and floats are refused."""
    if isinstance(value, bool):
        raise invalid(f"param {name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise invalid(f"param {name} must be an integer, got {value!r}")


def _check_range(name: str, value: int, lo: int, hi: int) -> int:
    if not lo <= value <= hi:
        raise invalid(f"param {name} must be in [{lo}, {hi}], got {value}")
    return value


def _build_params(itype: str, dim: int, given: Mapping[str, Any]) -> dict[str, int]:
    known = _BUILD[itype]
    _reject_unknown(itype, given, known)
    out: dict[str, int] = {}
    for name, p in known.items():
        if name in given:
            out[name] = _check_range(name, _as_int(name, given[name]), p.lo, p.hi)
        elif p.default is not None:
            out[name] = p.default
    if itype == "IVF_PQ":
        if "m" not in out:
            out["m"] = default_pq_m(dim)
        elif dim % out["m"]:
            raise invalid(f"param m must divide the vector dim {dim}, got m={out['m']}")
    return out


def default_pq_m(dim: int) -> int:
    """Sub-quantizers for IVF_PQ when ``m`` is not given: 4 dims per code byte when the
    dim allows (a 16x compression of float32 at nbits=8), else the largest divisor
    leaving at least 4 dims each, else 1."""
    if dim % 4 == 0:
        return dim // 4
    return max(d for d in range(1, dim // 4 + 1) if dim % d == 0) if dim >= 4 else 1


def search_params(spec: IndexSpec, params: Mapping[str, Any] | None, k: int) -> dict[str, Any]:
    """Validate per-request search params for ``spec`` and fill in defaults.

    Returns ``{"nprobe": n}`` for IVF types, ``{"ef": e}`` for HNSW,
    ``{"drop_ratio_search": r}`` for the sparse types, ``{}`` otherwise.
    A nested Milvus-style ``{"params": {...}}`` is flattened; keys that are not search
    params of the index (``metric_type``, ``radius``, ``range_filter``, ``offset``, params
    of other index types, ...) are ignored, as Milvus does.
    """
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise invalid(f"search params must be a JSON object, got {type(params).__name__}")
    inner = params.get("params")
    if isinstance(inner, Mapping):
        params = {**{k_: v for k_, v in params.items() if k_ != "params"}, **inner}
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise invalid(f"limit (top k) must be a positive integer, got {k!r}")
    if spec.field_kind == "sparse":
        ratio = params.get("drop_ratio_search", 0.0)
        return {"drop_ratio_search": drop_ratio("drop_ratio_search", ratio)}
    if spec.is_ivf:
        nlist = spec.params["nlist"]
        nprobe = params.get("nprobe")
        if nprobe is None:
            return {"nprobe": min(DEFAULT_NPROBE, nlist)}
        return {"nprobe": _check_range("nprobe", _as_int("nprobe", nprobe), 1, nlist)}
    if spec.index_type == "HNSW":
        ef = params.get("ef")
        if ef is None:
            if k > MAX_EF:
                raise invalid(f"limit (top k) must be at most {MAX_EF} for HNSW, got {k}")
            return {"ef": max(k, DEFAULT_EF)}
        ef = _as_int("ef", ef)
        if ef < k:
            raise invalid(f"param ef must be >= limit (top k) {k}, got {ef}")
        return {"ef": _check_range("ef", ef, k, MAX_EF)}
    return {}
