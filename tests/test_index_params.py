"""Index specs and the validation of build and search params (index/params.py)."""

from __future__ import annotations

import json

import pytest

from elanus.errors import ElanusError, ErrorCode
from elanus.indexparams import IndexSpec, default_pq_m, make_index_spec, search_params
from elanus.schema import DataType

FV, BV = DataType.FLOAT_VECTOR, DataType.BINARY_VECTOR


# (dtype, dim, index_type, metric, params, words the message must contain)
BAD_SPECS = [
    (FV, 128, "IVF_FLAT", None, {"nlist": 0}, ["nlist", "[1, 65536]", "0"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": 65537}, ["nlist", "[1, 65536]"]),
    (FV, 128, "IVF_SQ8", None, {"nlist": -3}, ["nlist", "[1, 65536]"]),
    (BV, 64, "BIN_IVF_FLAT", None, {"nlist": 70000}, ["nlist", "[1, 65536]"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": 12.5}, ["nlist", "integer"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": True}, ["nlist", "integer"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": "lots"}, ["nlist", "integer"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": [8]}, ["nlist", "integer"]),
    (FV, 128, "IVF_FLAT", None, {"nlist": 8, "nprobe": 4}, ["unknown", "nprobe", "IVF_FLAT"]),
    (FV, 128, "IVF_PQ", None, {"m": 3}, ["m", "divide", "128"]),
    (FV, 128, "IVF_PQ", None, {"m": 0}, ["m", "[1, 32768]"]),
    (FV, 128, "IVF_PQ", None, {"m": 8, "nbits": 0}, ["nbits", "[1, 16]"]),
    (FV, 128, "IVF_PQ", None, {"m": 8, "nbits": 17}, ["nbits", "[1, 16]"]),
    (FV, 128, "HNSW", None, {"M": 1}, ["M", "[2, 2048]"]),
    (FV, 128, "HNSW", None, {"M": 4096}, ["M", "[2, 2048]"]),
    (FV, 128, "HNSW", None, {"efConstruction": 0}, ["efConstruction", "[1, 2147483646]"]),
    (FV, 128, "HNSW", None, {"efConstruction": 2**31}, ["efConstruction"]),
    (FV, 128, "HNSW", None, {"M": "16.5"}, ["M", "integer"]),
    (FV, 128, "HNSW", None, {"m": 16}, ["unknown", "m", "HNSW", "M, efConstruction"]),
    (FV, 128, "FLAT", None, {"nlist": 8}, ["unknown", "nlist", "FLAT", "none"]),
    (FV, 128, "AUTOINDEX", None, {"M": 8}, ["unknown", "M", "AUTOINDEX"]),
    (FV, 128, "HNSW", None, ["M", 8], ["JSON object"]),
    (FV, 128, "IVF_HNSW", None, {}, ["unknown index type", "IVF_HNSW"]),
    (FV, 128, 7, None, {}, ["index_type", "string"]),
    (FV, 128, "BIN_FLAT", None, {}, ["BIN_FLAT", "FloatVector"]),
    (FV, 128, "BIN_IVF_FLAT", None, {}, ["BIN_IVF_FLAT", "FloatVector"]),
    (BV, 64, "HNSW", None, {}, ["HNSW", "BinaryVector"]),
    (BV, 64, "IVF_PQ", None, {}, ["IVF_PQ", "BinaryVector"]),
    (FV, 128, "HNSW", "HAMMING", {}, ["HAMMING", "float"]),
    (BV, 64, "BIN_FLAT", "L2", {}, ["L2", "binary"]),
    (BV, 64, "BIN_IVF_FLAT", "JACCARD", {}, ["JACCARD", "BIN_IVF_FLAT", "BIN_FLAT"]),
    (FV, 128, "FLAT", "EUCLID", {}, ["unknown metric", "EUCLID"]),
    (FV, 128, "FLAT", 3, {}, ["metric_type", "string"]),
    (BV, 60, "BIN_FLAT", None, {}, ["multiple of 8", "60"]),
    (FV, 0, "FLAT", None, {}, ["dim", "[1, 32768]"]),
    (DataType.INT64, 1, "FLAT", None, {}, ["Int64"]),
    (DataType.SPARSE_FLOAT_VECTOR, 1, "FLAT", None, {}, ["SparseFloatVector"]),
]


@pytest.mark.parametrize(
    "dtype,dim,itype,metric,params,words",
    BAD_SPECS,
    ids=[f"{c[2]}-{c[3]}-{c[4]}" for c in BAD_SPECS],
)
def test_bad_index_specs_name_the_problem(dtype, dim, itype, metric, params, words):
    with pytest.raises(ElanusError) as err:
        make_index_spec(dtype, dim, itype, metric, params)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    for w in words:
        assert w in err.value.message, (w, err.value.message)


def test_defaults_metrics_and_case():
    s = make_index_spec("FloatVector", 128, "ivf_flat", None, None)
    assert (s.index_type, s.metric, dict(s.params)) == ("IVF_FLAT", "COSINE", {"nlist": 128})
    assert s.field_kind == "float" and s.dim == 128 and s.is_ivf and not s.is_exact
    s = make_index_spec(FV, 128, "Hnsw", "l2", {"M": "32"})
    assert (s.metric, dict(s.params)) == ("L2", {"M": 32, "efConstruction": 128})
    s = make_index_spec(FV, 96, "IVF_PQ", "IP", {"nlist": 64})
    assert dict(s.params) == {"nlist": 64, "m": 24, "nbits": 8}
    s = make_index_spec(BV, 256, "bin_ivf_flat", None, {"nlist": 32})
    assert (s.metric, s.field_kind, dict(s.params)) == ("HAMMING", "binary", {"nlist": 32})
    s = make_index_spec(BV, 64, "BIN_FLAT", "jaccard", {})
    assert s.metric == "JACCARD" and s.is_exact
    s = make_index_spec(DataType.FLOAT16_VECTOR, 16, "FLAT", "IP")
    assert s.field_kind == "float"


def test_autoindex_choices():
    f = make_index_spec(FV, 64, "AUTOINDEX")
    assert (f.index_type, f.metric, dict(f.params)) == (
        "HNSW",
        "COSINE",
        {"M": 16, "efConstruction": 128},
    )
    assert make_index_spec(FV, 64, "autoindex", "L2").metric == "L2"
    b = make_index_spec(BV, 64, "AUTOINDEX")
    assert (b.index_type, b.metric, dict(b.params)) == ("BIN_FLAT", "HAMMING", {})
    assert make_index_spec(BV, 64, "AUTOINDEX", "JACCARD").metric == "JACCARD"


def test_default_pq_m():
    assert [default_pq_m(d) for d in (1, 3, 4, 6, 10, 128, 100, 17)] == [1, 1, 1, 1, 2, 32, 25, 1]
    for d in (1, 3, 6, 10, 17, 100, 128, 768):
        assert d % default_pq_m(d) == 0


def test_spec_round_trips_through_json_and_revalidates():
    s = make_index_spec(FV, 64, "IVF_PQ", "L2", {"nlist": 16, "m": 8, "nbits": 4})
    again = IndexSpec.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s
    bad = {**s.to_dict(), "params": {"nlist": 16, "m": 7, "nbits": 4}}
    with pytest.raises(ElanusError, match="param m must divide"):
        IndexSpec.from_dict(bad)
    with pytest.raises(ElanusError, match="field_kind, dim and index_type"):
        IndexSpec.from_dict({"metric": "L2"})


# -- search params ----------------------------------------------------------------------------

IVF = make_index_spec(FV, 32, "IVF_FLAT", "L2", {"nlist": 64})
HNSW = make_index_spec(FV, 32, "HNSW", "L2", {})
FLAT = make_index_spec(FV, 32, "FLAT", "L2", {})
BIVF = make_index_spec(BV, 64, "BIN_IVF_FLAT", None, {"nlist": 8})


def test_search_param_defaults_and_ignored_keys():
    assert search_params(IVF, {}, 10) == {"nprobe": 16}
    assert search_params(BIVF, None, 10) == {"nprobe": 8}  # capped at nlist
    assert search_params(HNSW, {}, 10) == {"ef": 64}
    assert search_params(HNSW, {}, 100) == {"ef": 100}
    assert search_params(FLAT, {"nprobe": 0, "ef": -1}, 10) == {}
    extra = {"metric_type": "L2", "radius": 1.0, "range_filter": 0.1, "offset": 3, "ef": 5}
    assert search_params(IVF, {**extra, "nprobe": "12"}, 10) == {"nprobe": 12}
    # Milvus-style nesting
    assert search_params(IVF, {"metric_type": "L2", "params": {"nprobe": 64}}, 10) == {"nprobe": 64}
    assert search_params(HNSW, {"params": {"ef": 200}}, 10) == {"ef": 200}


BAD_SEARCH = [
    (IVF, {"nprobe": 0}, 10, ["nprobe", "[1, 64]"]),
    (IVF, {"nprobe": 65}, 10, ["nprobe", "[1, 64]"]),
    (IVF, {"nprobe": 2.5}, 10, ["nprobe", "integer"]),
    (HNSW, {"ef": 5}, 10, ["ef", ">= limit", "10"]),
    (HNSW, {"ef": 40000}, 10, ["ef", "32768"]),
    (HNSW, {"ef": "x"}, 10, ["ef", "integer"]),
    (HNSW, {}, 40000, ["limit", "32768"]),
    (IVF, {}, 0, ["limit", "positive"]),
    (IVF, "nprobe=3", 10, ["JSON object"]),
]


@pytest.mark.parametrize("spec,params,k,words", BAD_SEARCH)
def test_bad_search_params(spec, params, k, words):
    with pytest.raises(ElanusError) as err:
        search_params(spec, params, k)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    for w in words:
        assert w in err.value.message, (w, err.value.message)
