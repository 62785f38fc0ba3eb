"""Nothing a Milvus request sets is silently ignored (issue 36): every field of every served
RPC's request, and every nested message a handler reads, is classified in
``milvus/honoured*.py`` (walked in pymilvus's own descriptors, so a field a future
pymilvus adds fails here); so is every ``search_params`` / ``query_params`` /
``rank_params`` key pymilvus's request builders write. Through pymilvus, what Elanus does
not do is refused at once with code 1100 naming the field, and changes nothing. What it
does with ``Upsert``'s ``partial_update`` and ``field_ops`` (partial upserts) is checked
here too, against Milvus Lite and through the SDK."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pytest
from conftest import StandaloneProcess
from lite_oracle import lite_answers
from pymilvus import (
    DataType,
    FieldOp,
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

import elanus
from elanus import ElanusError, ErrorCode
from elanus.channels.nats_server import free_port
from elanus.flight.partial import _appended, _removed
from elanus.flight.putcommand import check_put
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
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneProcess, str]]:
    """One standalone serving Milvus's protocol for the module's tests (and Flight, for
    the SDK's partial upserts): the process and its Milvus URI."""
    port = free_port()
    server = StandaloneProcess(
        tmp_path_factory.mktemp("fields") / "data", "--milvus-port", str(port)
    )
    try:
        server.start().wait_ready()
        yield server, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def uri(standalone: tuple[StandaloneProcess, str]) -> str:
    return standalone[1]


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
    with pytest.raises(MilvusException) as info:  # "items" has no clustering key
        client.compact("items", is_clustering=True)
    assert info.value.code == 1100 and "clustering key" in info.value.message
    _refused(lambda: client.load_collection("items", load_fields=["id", "vec"]), "load_fields")
    assert _rows(client) == before


def test_schemas_with_what_elanus_lacks_are_not_created(client: MilvusClient) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    client.create_collection("ttl", schema=schema, properties={"collection.ttl.seconds": 60})
    assert client.describe_collection("ttl")["properties"]["collection.ttl.seconds"] == "60"
    client.create_collection("no_ttl", schema=schema, properties={"collection.ttl.seconds": -1})
    point = client.create_struct_field_schema()
    point.add_field("x", DataType.FLOAT)
    schema.add_field(
        "points", DataType.ARRAY, element_type=DataType.STRUCT, struct_schema=point, max_capacity=4
    )
    _refused(lambda: client.create_collection("structs", schema=schema), "struct_array_fields")
    assert not client.has_collection("structs")


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


# -- partial upserts: partial_update and field_ops (Milvus 2.6) -------------------------------
PARTIAL_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "INT64", "is_primary": True},
    {"name": "vec", "type": "FLOAT_VECTOR", "dim": 2},
    {"name": "n", "type": "INT64"},
    {"name": "note", "type": "VARCHAR", "max_length": 20, "nullable": True},
    {"name": "score", "type": "FLOAT", "default_value": 0.5},
    {"name": "tags", "type": "ARRAY", "element_type": "INT64", "max_capacity": 4},
]
PARTIAL_ROWS = [
    {"id": i, "vec": [i, 1.0], "n": i, "note": f"x{i}", "score": 1.0, "tags": [i], "a": i, "b": "k"}
    for i in range(3)
]
PARTIAL_STEPS: list[list[dict[str, Any]]] = [
    [{"id": 0, "n": 100, "a": 9, "c": 1}, {"id": 1, "n": 101, "c": 2}],  # dynamic keys merged
    [{"id": 2, "note": None}],  # a null given is a null
    [{"id": 5, "vec": [5.0, 1.0], "n": 5, "tags": [5]}],  # new: note null, score its default
    [{"id": 0, "n": 7}, {"id": 6, "n": 6}],  # 6 is new and lacks vec: all of it refused
    [{"id": 1, "vec": [9.0, 9.0]}],  # the vector replaced, the rest kept
]


def _partial_collection(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    for f in PARTIAL_FIELDS:
        kw = {k: v for k, v in f.items() if k not in ("name", "type")}
        if "element_type" in kw:
            kw["element_type"] = getattr(DataType, kw["element_type"])
        schema.add_field(f["name"], getattr(DataType, f["type"]), **kw)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    client.insert(name, PARTIAL_ROWS)
    client.load_collection(name)


def _all(client: MilvusClient, name: str) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in client.query(name, "id >= 0", output_fields=["*"])}


def test_partial_upserts_keep_what_the_rows_leave_out_as_milvus_lite_does(
    client: MilvusClient, tmp_path: Path
) -> None:
    _partial_collection(client, "partial")
    answers: list[Any] = []
    for rows in PARTIAL_STEPS:
        try:
            client.upsert("partial", rows, partial_update=True)
            answers.append("ok")
        except MilvusException as exc:
            answers.append({"error": exc.message})
    got = _all(client, "partial")
    reads = [*(("partial", rows) for rows in PARTIAL_STEPS), ("query", ["*"])]
    lite = lite_answers(tmp_path, PARTIAL_FIELDS, PARTIAL_ROWS, reads)
    assert [a == "ok" for a in answers] == [a == "ok" for a in lite[:-1]], (answers, lite)
    assert sorted(got.values(), key=lambda r: r["id"]) == lite[-1]
    # What that is, spelt out: omitted fields (the vector too) and dynamic keys kept.
    assert got[0] == {
        "id": 0, "vec": [0.0, 1.0], "n": 100, "note": "x0", "score": 1.0, "tags": [0],
        "a": 9, "b": "k", "c": 1,
    }  # fmt: skip
    assert got[1]["vec"] == [9.0, 9.0] and got[1]["n"] == 101 and got[1]["note"] == "x1"
    assert got[2]["note"] is None and got[2]["n"] == 2
    assert got[5] == {"id": 5, "vec": [5.0, 1.0], "n": 5, "note": None, "score": 0.5, "tags": [5]}
    refusal = answers[3]["error"]
    assert "primary key 6" in refusal and "'vec'" in refusal, refusal
    assert 6 not in got and got[0]["n"] == 100  # the refused request changed nothing


def test_field_ops_append_and_remove_array_elements(client: MilvusClient) -> None:
    """Milvus 2.6.17's array operators (Milvus Lite 3.2 ignores ``field_ops`` and replaces
    the array: Elanus follows Milvus's design, milvus-io/milvus#49241)."""
    name = "partial_ops"
    _partial_collection(client, name)
    append, remove = {"tags": FieldOp.array_append()}, {"tags": "array_remove"}
    client.upsert(name, [{"id": 0, "tags": [7, 0]}, {"id": 1, "tags": [1]}], field_ops=append)
    client.upsert(name, [{"id": 0, "tags": [0]}, {"id": 1, "tags": [9]}], field_ops=remove)
    client.upsert(name, [{"id": 9, "vec": [9.0, 1.0], "n": 9, "tags": [3]}], field_ops=append)
    before = _all(client, name)
    assert before[0]["tags"] == [7] and before[1]["tags"] == [1, 1] and before[9]["tags"] == [3]
    assert before[0]["n"] == 0 and before[0]["vec"] == [0.0, 1.0] and before[0]["a"] == 0
    for rows, ops, words in [
        ([{"id": 1, "tags": [2, 3, 4]}], append, "max_capacity"),
        ([{"id": 1, "n": 5}], {"n": "array_append"}, "needs an Array field"),
        ([{"id": 1, "n": 5}], append, "do not give it"),
        ([{"id": 1, "tags": [1]}], {"id": "array_remove"}, "primary key"),
        ([{"id": 1, "tags": [1]}], {"nope": "array_remove"}, "not in the schema"),
    ]:
        with pytest.raises(MilvusException) as info:
            client.upsert(name, rows, field_ops=ops)
        assert info.value.code == 1100 and words in info.value.message, info.value.message
    assert _all(client, name) == before


def test_doput_commands_of_partial_upserts() -> None:
    """What DoPut's command takes (``flight/putcommand.py``): an array operator makes an
    upsert partial; a partial insert, a partial staged write or an unknown operator is
    refused before a byte is read."""
    command = {"op": "upsert", "collection": "c"}
    assert check_put(json.dumps(command).encode())["partial"] is None
    ops = {"t": "array_append", "u": "replace"}
    assert check_put(json.dumps({**command, "field_ops": ops}).encode())["partial"] == {
        "t": "array_append"
    }
    for bad, words in [
        ({"op": "insert", "partial_update": True}, "for op upsert"),
        ({"partial_update": True, "stage": "w1"}, "staged write"),
        ({"field_ops": {"t": "array_pop"}}, "'array_pop'"),
        ({"field_ops": ["t"]}, "must be a JSON object"),
    ]:
        with pytest.raises(ElanusError, match=words):
            check_put(json.dumps({**command, **bad}).encode())


def test_array_operators_follow_milvus_design() -> None:
    """milvus-io/milvus#49241's table: append keeps order and repeats, remove takes every
    match; a null payload changes nothing, a null stored array takes what is appended."""
    stored = pa.array([["a", "b"], ["a", "b", "a", "c", "b"], None, ["x"]])
    payload = pa.array([["c", "a"], ["a", "b"], ["y"], None])
    assert _appended(stored, payload).to_pylist() == [
        ["a", "b", "c", "a"], ["a", "b", "a", "c", "b", "a", "b"], ["y"], ["x"],
    ]  # fmt: skip
    assert _removed(stored, payload).to_pylist() == [["b"], ["c"], None, ["x"]]


def test_partial_upserts_through_the_sdk(standalone: tuple[StandaloneProcess, str]) -> None:
    """The same merge behind the Elanus SDK's ``upsert(partial_update=..., field_ops=...)``
    (DoPut's ``partial_update`` and ``field_ops``)."""
    server, uri = standalone
    name = "partial_sdk"
    m = MilvusClient(uri=uri, timeout=30)
    try:
        _partial_collection(m, name)
    finally:
        m.close()
    client = elanus.connect(server.uri)
    try:
        client.upsert(name, [{"id": 0, "n": 50, "d": 1}, {"id": 1, "n": 51}], partial_update=True)
        client.upsert(name, [{"id": 2, "tags": [8]}], field_ops={"tags": "array_append"})
        with pytest.raises(ElanusError, match="every row must give the same fields"):
            client.upsert(name, [{"id": 0, "n": 1}, {"id": 1, "note": "y"}], partial_update=True)
        with pytest.raises(ElanusError, match="lacks field 'vec'") as info:
            client.upsert(name, [{"id": 1, "n": 1}, {"id": 7, "n": 7}], partial_update=True)
        assert info.value.code == ErrorCode.SCHEMA_MISMATCH
        with pytest.raises(ElanusError, match="'tags' the operator 'array_pop'"):
            client.upsert(name, [{"id": 2, "tags": [8]}], field_ops={"tags": "array_pop"})
        client.release_collection(name)  # the stored rows cannot be read: nothing written
        with pytest.raises(ElanusError, match="a partial upsert reads the stored rows") as info:
            client.upsert(name, [{"id": 0, "n": 0}], partial_update=True)
        assert info.value.code == ErrorCode.COLLECTION_NOT_LOADED
        client.load_collection(name)
        rows = {r["id"]: r for r in client.query(name, "id >= 0", output_fields=["*"])}
    finally:
        client.close()
    assert rows[0]["n"] == 50 and rows[0]["note"] == "x0" and rows[0]["a"] == 0
    assert rows[0]["d"] == 1 and rows[0]["vec"] == pytest.approx([0.0, 1.0])
    assert rows[1]["n"] == 51 and rows[1]["tags"] == [1] and 7 not in rows
    assert rows[2]["tags"] == [2, 8] and rows[2]["n"] == 2
