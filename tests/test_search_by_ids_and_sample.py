"""Two Milvus 2.6 reads on one standalone, through pymilvus against the Milvus face and
through the Elanus SDK.

Search by primary keys (``search(ids=[...])``): the stored vectors of the keys are the
queries, so a search by ids answers what a search by those vectors answers, in the order
of the ids, alone and with a filter, in the partitions named. Errors as Milvus words them
(its tests, tests/python_client/milvus_client_v2/test_milvus_client_search_by_pk.py): a
missing key, the wrong key type; a key given twice is refused too.

``RANDOM_SAMPLE(p)`` in query filters: alone or as the last ``and`` term it keeps a
fraction of what the rest of the filter keeps, the same rows each time (before and after a
flush, a smaller factor a subset of a larger); misplaced, out of range or in a search it
is refused with 1100 naming it.

Milvus Lite 3.2 supports neither ("SearchRequest is missing placeholder_group", "unknown
function 'RANDOM_SAMPLE'"), so the expected answers are Elanus's own unsampled reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from conftest import StandaloneProcess
from pymilvus import AnnSearchRequest, DataType, MilvusClient, RRFRanker
from pymilvus.client import prepare
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen.milvus_pb2_grpc import MilvusServiceStub

from elanus import ElanusError, ErrorCode
from elanus.channels.nats_server import free_port
from elanus.client.client import Client

ROWS = [
    {
        "id": i,
        "v": [float(i), 1.0],
        "b": bytes([i * 7 % 256]),
        "h": np.array([i / 8, 1.0], np.float16),
        "s": {i % 5: 1.0 + i, 7: 0.5},
        "n": i % 3,
    }
    for i in range(30)
]
IN_P1 = range(20, 30)
"""Rows inserted into partition ``p1``; the rest are in ``_default``."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneProcess, int]]:
    """One standalone, its Flight port and its Milvus port (``free_port``)."""
    port = free_port()
    sp = StandaloneProcess(tmp_path_factory.mktemp("byids") / "data", "--milvus-port", str(port))
    try:
        sp.start().wait_ready()
        yield sp, port
    finally:
        sp.stop()


@pytest.fixture(scope="module")
def mc(server: tuple[StandaloneProcess, int]) -> Iterator[MilvusClient]:
    c = MilvusClient(uri=f"http://127.0.0.1:{server[1]}", timeout=60)
    schema = c.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=8)
    schema.add_field("h", DataType.FLOAT16_VECTOR, dim=2)
    schema.add_field("s", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("n", DataType.INT64)
    params = c.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2")
    params.add_index("b", index_type="BIN_FLAT", metric_type="HAMMING")
    params.add_index("h", index_type="FLAT", metric_type="L2")
    params.add_index("s", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    c.create_collection("items", schema=schema, index_params=params)
    c.create_partition("items", "p1")
    c.insert("items", [r for r in ROWS if r["id"] not in IN_P1])
    c.insert("items", [r for r in ROWS if r["id"] in IN_P1], partition_name="p1")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def sdk(server: tuple[StandaloneProcess, int], mc: MilvusClient) -> Iterator[Client]:
    with Client(server[0].uri, timeout=60) as c:
        yield c


def _hits(result: Any) -> list[list[tuple[Any, float]]]:
    return [[(h["id"], round(h["distance"], 4)) for h in q] for q in result]


def _by_vector(mc: MilvusClient, ids: list[int], **kw: Any) -> list[list[tuple[Any, float]]]:
    data = [ROWS[i]["v"] for i in ids]
    return _hits(mc.search("items", data=data, anns_field="v", consistency_level="Strong", **kw))


def test_ids_search_as_their_vectors_do(mc: MilvusClient, sdk: Client) -> None:
    for kw in ({"limit": 4}, {"limit": 3, "filter": "n == 1"}, {"limit": 2, "offset": 1}):
        got = mc.search("items", ids=[12, 5], anns_field="v", consistency_level="Strong", **kw)
        want = _by_vector(mc, [12, 5], **kw)
        assert _hits(got) == want and len(want) == 2, kw
        assert _hits(sdk.search("items", ids=[12, 5], anns_field="v", **kw)) == want
    first = mc.search("items", ids=[7], anns_field="v", limit=1, consistency_level="Strong")
    assert _hits(first) == [[(7, 0.0)]]  # the key's own row is its nearest
    # binary, float16 and sparse fields: the stored values are the queries
    bits = mc.search("items", ids=[3], anns_field="b", limit=3, output_fields=["n"])
    plain = mc.search("items", data=[ROWS[3]["b"]], anns_field="b", limit=3)
    assert _hits(bits) == _hits(plain) and bits[0][0]["id"] == 3
    assert bits[0][0]["entity"]["n"] == 0
    for field in ("h", "s"):
        keyed = mc.search("items", ids=[4, 9], anns_field=field, limit=3)
        data = [ROWS[4][field], ROWS[9][field]]
        assert _hits(keyed) == _hits(mc.search("items", data=data, anns_field=field, limit=3))
    # only the partitions searched hold the keys
    inside = mc.search("items", ids=[25], anns_field="v", limit=2, partition_names=["p1"])
    assert [h["id"] for h in inside[0]] == [25, 24] or [h["id"] for h in inside[0]] == [25, 26]
    with pytest.raises(MilvusException, match=r"missing IDs = \[5\]") as err:
        mc.search("items", ids=[25, 5], anns_field="v", partition_names=["p1"])
    assert err.value.code == 1100


def test_hybrid_sub_requests_take_ids(
    server: tuple[StandaloneProcess, int], mc: MilvusClient, sdk: Client
) -> None:
    """pymilvus 3.0.2's AnnSearchRequest has no ids, but the protocol's sub-requests carry
    them: sent raw here, and as the SDK's dict form."""
    keys = [12, 5]
    by_data = mc.hybrid_search(
        "items",
        [AnnSearchRequest([ROWS[k][f] for k in keys], f, {}, 3) for f in ("v", "h")],
        RRFRanker(),
        limit=3,
        consistency_level="Strong",
    )
    subs = [
        prepare.Prepare.search_requests_with_expr("items", f, {}, 3, ids=keys) for f in ("v", "h")
    ]
    raw = prepare.Prepare.hybrid_search_request_with_ranker("items", subs, RRFRanker(), 3)
    with grpc.insecure_channel(f"127.0.0.1:{server[1]}") as channel:
        reply = MilvusServiceStub(channel).HybridSearch(raw, timeout=30)
    assert reply.status.code == 0, reply.status.reason
    got = [list(reply.results.ids.int_id.data[i * 3 : i * 3 + 3]) for i in range(2)]
    assert got == [[h["id"] for h in q] for q in by_data]
    dicts = [{"ids": keys, "anns_field": f, "limit": 3} for f in ("v", "h")]
    assert _hits(sdk.hybrid_search("items", dicts, limit=3)) == _hits(by_data)


def test_bad_ids_are_refused_in_milvus_words(mc: MilvusClient, sdk: Client) -> None:
    cases: list[tuple[list[Any], str]] = [
        (
            [3, 99, 1000],
            r"some of the provided primary key IDs do not exist: missing IDs = \[99, 1000\]",
        ),
        (["3"], "primary key is int64, but IDs type mismatch"),
        ([3, 4, 3], r"'ids' holds \[3\] more than once"),
    ]
    for ids, words in cases:
        with pytest.raises(MilvusException, match=words) as err:
            mc.search("items", ids=ids, anns_field="v")
        assert err.value.code == 1100
    with pytest.raises(ElanusError, match="missing IDs") as sdk_err:
        sdk.search("items", ids=[99], anns_field="v")
    assert sdk_err.value.code == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(ElanusError, match="must be JSON integers"):
        sdk.search("items", ids=["3"], anns_field="v")
    # the action itself refuses both or neither (the SDK would not send them)
    base = {"collection": "items", "anns_field": "v"}
    for body, words in (
        ({**base, "ids": [1], "data": [[1.0, 1.0]]}, "either 'data' or 'ids', not both"),
        (base, "'data' or primary keys in 'ids'"),
        ({**base, "ids": []}, "'ids' holds no primary keys"),
    ):
        with pytest.raises(ElanusError, match=words):
            sdk._action("search", body)


# -- RANDOM_SAMPLE ---------------------------------------------------------------------------
MANY = 3000


@pytest.fixture(scope="module")
def many(mc: MilvusClient) -> str:
    """A collection of ``MANY`` rows over two shards, ``n`` cycling 0, 1, 2."""
    schema = mc.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("n", DataType.INT64)
    params = mc.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2")
    mc.create_collection("many", schema=schema, index_params=params, num_shards=2)
    mc.insert("many", [{"id": i, "v": [float(i), 0.0], "n": i % 3} for i in range(MANY)])
    return "many"


def _ids(mc: MilvusClient, filt: str) -> set[int]:
    rows = mc.query("many", filt, output_fields=["id", "n"], consistency_level="Strong")
    return {r["id"] for r in rows}


def test_random_sample_keeps_a_stable_fraction(mc: MilvusClient, sdk: Client, many: str) -> None:
    half = _ids(mc, "RANDOM_SAMPLE(0.5)")
    assert 0.4 * MANY < len(half) < 0.6 * MANY
    tenth = _ids(mc, "random_sample(0.1)")
    assert 0.05 * MANY < len(tenth) < 0.15 * MANY and tenth < half  # a subset, as drawn by key
    ones = _ids(mc, "n == 1 && RANDOM_SAMPLE(0.5)")
    assert ones and all(i % 3 == 1 for i in ones) and ones == {i for i in half if i % 3 == 1}
    nested = _ids(mc, "n == 1 and (id >= 0 and RANDOM_SAMPLE(0.5))")
    assert nested == ones
    counted = mc.query(many, "RANDOM_SAMPLE(0.5)", output_fields=["count(*)"])
    assert counted[0]["count(*)"] == len(half)
    mc.flush(many)  # sealed segments sample the same rows the growing ones did
    assert _ids(mc, "RANDOM_SAMPLE(0.5)") == half
    rows = sdk.query(many, filter="n == 1 and RANDOM_SAMPLE(0.5)", output_fields=["id"])
    assert {r["id"] for r in rows} == ones
    # pymilvus's query iterator reads "id > last and (filter)": its pages add up to the sample
    it = mc.query_iterator(many, batch_size=400, filter="RANDOM_SAMPLE(0.5)", output_fields=["id"])
    paged: list[int] = []
    while page := it.next():
        paged += [r["id"] for r in page]
    it.close()
    assert sorted(paged) == sorted(half)


def test_misplaced_random_sample_is_refused(mc: MilvusClient, sdk: Client, many: str) -> None:
    for filt, words in (
        ("RANDOM_SAMPLE(1.5)", "strictly between 0 and 1"),
        ("RANDOM_SAMPLE(0)", "strictly between 0 and 1"),
        ("RANDOM_SAMPLE(n)", "literal number"),
        ("RANDOM_SAMPLE(0.1) && n == 1", "last term of its top-level 'and'"),
        ("n == 1 || RANDOM_SAMPLE(0.1)", "last term of its top-level 'and'"),
        ("not RANDOM_SAMPLE(0.1)", "last term of its top-level 'and'"),
    ):
        with pytest.raises(MilvusException, match=words) as err:
            mc.query(many, filt, output_fields=["id"])
        assert err.value.code == 1100, filt
    with pytest.raises(MilvusException, match="a search cannot take it") as search_err:
        mc.search(many, data=[[1.0, 0.0]], filter="n == 1 && RANDOM_SAMPLE(0.5)", limit=3)
    assert search_err.value.code == 1100
    with pytest.raises(ElanusError, match="a search cannot take it") as sdk_err:
        sdk.search(many, [[1.0, 0.0]], filter="RANDOM_SAMPLE(0.5)", limit=3)
    assert sdk_err.value.code == ErrorCode.BAD_EXPRESSION
