"""Nothing a Milvus request sets is silently ignored (issue 36): every field of every served
RPC's request, and every nested message a handler reads, is classified in
``milvus/honoured*.py`` (walked in pymilvus's own descriptors, so a field a future
pymilvus adds fails here); so is every ``search_params`` / ``query_params`` /
``rank_params`` key pymilvus's request builders write. Through pymilvus, what Elanus does
not do is refused at once with code 1100 naming the field, and changes nothing."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import StandaloneProcess
from pymilvus import (
    DataType,
    Function,
    FunctionType,
    MilvusClient,
    RRFRanker,
    SearchAggregation,
    SemanticHighlighter,
    WeightedRanker,
)
from pymilvus.client import prepare
from pymilvus.client.types import SegmentState
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from elanus.channels.nats_server import free_port
from elanus.milvus.fields import Rule, Table, Use
from elanus.milvus.honoured import REQUESTS, refusals_markdown
from elanus.milvus.honoured_reads import QUERY_KEYS, RANK_KEYS, SEARCH_KEYS
from elanus.milvus.servicer import SERVICE

DOCS = Path(__file__).resolve().parent.parent / "docs" / "milvus-compat.md"
KV = "milvus.proto.common.KeyValuePair"


def served() -> list[str]:
    from elanus.milvus.server import MilvusServicer

    return [
        m.name
        for m in SERVICE.methods
        if getattr(getattr(MilvusServicer, m.name), "_milvus_served", False)
    ]


# -- the tables against pymilvus's descriptors ----------------------------------------------
def test_every_field_of_every_served_request_is_classified() -> None:
    flaws: list[str] = []
    for rpc in served():
        table = REQUESTS.get(rpc)
        wanted = SERVICE.methods_by_name[rpc].input_type
        if table is None:
            flaws.append(f"{rpc}: no table")
        elif table.message.DESCRIPTOR is not wanted:
            flaws.append(f"{rpc}: the table is {table.name}'s, the request is {wanted.name}")
        else:
            flaws.extend(_walk(table, rpc, set()))
    assert flaws == []
    assert set(REQUESTS) == set(served())  # no table for an RPC not served


def _walk(table: Table, path: str, seen: set[int]) -> Iterator[str]:
    """What is wrong with ``table`` and the tables below it (a field unclassified, a
    message read whose fields are not, a rule on a field of the wrong kind)."""
    if id(table) in seen:
        return
    seen.add(id(table))
    fields = table.message.DESCRIPTOR.fields_by_name
    for name in sorted(set(fields) - set(table.rules)):
        yield f"{path}.{name}: not classified"
    for name in sorted(set(table.rules) - set(fields)):
        yield f"{path}.{name}: no such field in {table.name}"
    for name in sorted(set(fields) & set(table.rules)):
        yield from _walk_rule(table.rules[name], fields[name], f"{path}.{name}", seen)


def _walk_rule(rule: Rule, fd: Any, path: str, seen: set[int]) -> Iterator[str]:
    if rule.use is not Use.HONOURED and not rule.why:
        yield f"{path}: {rule.use.value} without a reason"
    message = fd.message_type
    is_map = message is not None and message.GetOptions().map_entry
    value = message.fields_by_name["value"].message_type if is_map else message
    if rule.keys is not None:
        strings = is_map and value is None
        if not (strings or (fd.is_repeated and message is not None and message.full_name == KV)):
            yield f"{path}: keys for a field that is no key-value list"
    elif rule.serialized is not None:
        if fd.type != fd.TYPE_BYTES:
            yield f"{path}: serialized in a field that is not bytes"
        yield from _walk(rule.serialized, path, seen)
    elif rule.nested is not None:
        if value is None or rule.nested.message.DESCRIPTOR is not value:
            yield f"{path}: nested table of {rule.nested.name} for another type"
        else:
            yield from _walk(rule.nested, path, seen)
    elif value is not None and rule.use is Use.HONOURED:
        yield f"{path}: a message read, its fields not classified"


def _written_keys(function: Any, holder: str) -> set[str]:
    """The keys a pymilvus request builder writes: stores into its dict ``holder``
    (``search_params["x"] = ...``, the dict literal it starts as), ``KeyValuePair(key=...)``
    and key tuples looped over; names resolved against ``prepare``'s constants."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found: set[str] = set()

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return getattr(prepare, node.id, None)
        return None

    def holds(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == holder

    for node in ast.walk(tree):
        keys: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            if isinstance(target, ast.Subscript) and holds(target.value):
                keys.append(target.slice)
            if holds(target) and isinstance(node.value, ast.Dict):
                keys.extend(k for k in node.value.keys if k is not None)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "KeyValuePair":
            keys.extend(k.value for k in node.keywords if k.arg == "key")
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
            keys.extend(node.iter.elts)
        found.update(v for v in map(value, keys) if isinstance(v, str))
    return found


@pytest.mark.parametrize(
    ("builder", "holder", "table", "must"),
    [
        ("search_requests_with_expr", "search_params", SEARCH_KEYS, {"topk", "order_by_fields"}),
        ("query_request", "", QUERY_KEYS, {"limit", "reduce_stop_for_best", "order_by_fields"}),
        ("hybrid_search_request_with_ranker", "rerank_param", RANK_KEYS, {"rank_group_scorer"}),
    ],
)
def test_every_key_pymilvus_writes_is_classified(
    builder: str, holder: str, table: dict[str, Rule], must: set[str]
) -> None:
    written = _written_keys(getattr(prepare.Prepare, builder), holder)
    assert must <= written  # the reading of pymilvus's source still finds its keys
    if holder == "rerank_param":  # and what a ranker object adds
        written |= set(RRFRanker().dict()) | set(WeightedRanker(0.5, 0.5).dict())
    assert sorted(written - set(table)) == []


def test_the_docs_list_every_refusal() -> None:
    text = DOCS.read_text()
    begin, end = "<!-- refused fields: begin -->\n", "<!-- refused fields: end -->"
    listed = text[text.index(begin) + len(begin) : text.index(end)]
    assert listed == refusals_markdown(), (
        "docs/milvus-compat.md is out of step with milvus/honoured*.py: paste "
        "elanus.milvus.honoured.refusals_markdown() between its markers"
    )


# -- through pymilvus -----------------------------------------------------------------------
ROWS = 20


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One standalone serving Milvus's protocol for the module's tests."""
    port = free_port()
    server = StandaloneProcess(
        tmp_path_factory.mktemp("fields") / "data", "--milvus-port", str(port)
    )
    try:
        server.start().wait_ready()
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(uri: str) -> Iterator[MilvusClient]:
    c = MilvusClient(uri=uri, timeout=30)
    schema = c.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("n", DataType.INT64)
    schema.add_field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4)
    c.create_collection("items", schema=schema, consistency_level="Strong")
    index = c.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    c.create_index("items", index)
    c.insert(
        "items", [{"id": i, "vec": [i, 1.0, 0.0, 0.0], "n": i, "tags": [i]} for i in range(ROWS)]
    )
    c.load_collection("items")
    try:
        yield c
    finally:
        c.close()


def _refused(call: Any, field: str) -> None:
    with pytest.raises(MilvusException) as info:
        call()
    assert info.value.code == 1100, info.value
    assert f"'{field}'" in info.value.message, info.value.message
    assert "is refused: Elanus does not" in info.value.message


def _rows(client: MilvusClient) -> list[dict[str, Any]]:
    return client.query("items", "id >= 0", output_fields=["n"], limit=100)


def test_what_elanus_does_not_do_is_refused_and_changes_nothing(client: MilvusClient) -> None:
    before = _rows(client)
    q = [[1.0, 1.0, 0.0, 0.0]]
    model = Function(
        name="model",
        input_field_names=["n"],
        function_type=FunctionType.RERANK,
        params={"reranker": "model", "provider": "tei", "queries": ["q"]},
    )
    with pytest.raises(MilvusException, match="unsupported reranker 'model'"):
        client.search("items", q, limit=3, ranker=model)
    semantic = SemanticHighlighter(queries=["q"], input_fields=["n"])
    _refused(lambda: client.search("items", q, highlighter=semantic), "highlighter.type")
    agg = SearchAggregation(fields=["n"], size=2)
    _refused(lambda: client.search("items", q, search_aggregation=agg), "search_aggregation")
    _refused(
        lambda: client.search("items", q, search_params={"hints": "iterative_filter"}), "hints"
    )
    _refused(
        lambda: client.upsert("items", [{"id": 1, "n": 99}], partial_update=True), "partial_update"
    )
    _refused(lambda: client.compact("items", is_clustering=True), "majorCompaction")
    _refused(lambda: client.load_collection("items", load_fields=["id", "vec"]), "load_fields")
    assert _rows(client) == before


def test_schemas_with_what_elanus_lacks_are_not_created(client: MilvusClient) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    _refused(
        lambda: client.create_collection(
            "ttl", schema=schema, properties={"collection.ttl.seconds": 60}
        ),
        "collection.ttl.seconds",
    )
    client.create_collection("no_ttl", schema=schema, properties={"collection.ttl.seconds": -1})
    point = client.create_struct_field_schema()
    point.add_field("x", DataType.FLOAT)
    schema.add_field(
        "points", DataType.ARRAY, element_type=DataType.STRUCT, struct_schema=point, max_capacity=4
    )
    _refused(lambda: client.create_collection("structs", schema=schema), "struct_array_fields")
    assert not client.has_collection("ttl") and not client.has_collection("structs")


def test_honoured_options(client: MilvusClient) -> None:
    """What an iterator sends is read: a ``collection_id`` that is not the collection's
    is refused, as Milvus refuses it; segments are listed by the states asked for."""
    cid = client.describe_collection("items")["collection_id"]
    assert len(client.query("items", "id < 3", collection_id=cid)) == 3
    with pytest.raises(MilvusException) as info:
        client.query("items", "id < 3", collection_id=cid + 1)
    assert info.value.code == 1100 and "collection_id" in info.value.message
    client.flush("items")
    flushed = client.list_persistent_segments("items", states=[SegmentState.Flushed])
    assert flushed and {s.state for s in flushed} == {SegmentState.Flushed}
    assert client.list_persistent_segments("items", states=[SegmentState.Growing]) == []


def _raw(uri: str, rpc: str, raw: bytes, reply: Any) -> Any:
    with grpc.insecure_channel(uri.removeprefix("http://")) as channel:
        call = channel.unary_unary(
            f"/{SERVICE.full_name}/{rpc}",
            request_serializer=lambda b: b,
            response_deserializer=reply.FromString,
        )
        return call(raw, timeout=10)


def test_a_field_of_a_newer_protocol_is_refused(uri: str, client: MilvusClient) -> None:
    """Bytes of a field pymilvus 3.0.2's descriptors lack (number 900) are not dropped."""
    raw = milvus_pb2.QueryRequest(collection_name="items", expr="id < 3").SerializeToString()
    raw += b"\xa0\x38\x01"  # field 900, varint 1
    reply = _raw(uri, "Query", raw, milvus_pb2.QueryResults)
    assert reply.status.code == 1100 and "field number 900" in reply.status.reason


def test_array_cells_in_another_member_are_refused(uri: str, client: MilvusClient) -> None:
    """An Array of Int64 whose cell holds strings used to read as an empty array."""
    before = _rows(client)
    column = schema_pb2.FieldData(field_name="tags", type=schema_pb2.Array)
    cell = column.scalars.array_data.data.add()
    cell.string_data.data.append("x")
    vec = schema_pb2.FieldData(field_name="vec", type=schema_pb2.FloatVector)
    vec.vectors.dim = 4
    vec.vectors.float_vector.data.extend([0.0] * 4)
    insert = milvus_pb2.InsertRequest(
        collection_name="items",
        num_rows=1,
        fields_data=[
            schema_pb2.FieldData(
                field_name="id", scalars=schema_pb2.ScalarField(long_data={"data": [100]})
            ),
            schema_pb2.FieldData(
                field_name="n", scalars=schema_pb2.ScalarField(long_data={"data": [1]})
            ),
            vec,
            column,
        ],
    )
    reply = _raw(uri, "Insert", insert.SerializeToString(), milvus_pb2.MutationResult)
    assert reply.status.code == 1100 and "string_data" in reply.status.reason
    assert _rows(client) == before
