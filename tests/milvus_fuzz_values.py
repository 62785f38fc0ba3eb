"""Bad values in well-formed Milvus requests, for the Milvus-port malformed-request suite
(tests/test_milvus_fuzz.py): inserts whose rows and columns disagree, searches past
Milvus's limits, schemas and properties Milvus refuses, timestamps from the future.

Every case here is refused, and with ParameterInvalid (1100) unless it says otherwise,
with a message naming the field. Where Milvus Lite (the conformance reference) takes what
Milvus's server refuses, the case follows Milvus and says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from milvus_fuzz_cases import (
    BIG,
    INVALID,
    MAIN,
    NEVER,
    Case,
    b64,
    collection_schema,
    field_schema,
    float_column,
    hybrid_request,
    insert_columns,
    json_column,
    kv,
    long_column,
    placeholder,
    search_request,
    string_column,
)
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

M = milvus_pb2
RATE = frozenset({8})
"""Rate limited: the only refusal a request Milvus takes may meet."""
FUTURE = 2**64 - 1
"""A guarantee timestamp no TSO hands out: Milvus's clients send ones it handed out."""


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _case(group: str, label: str, rpc: str, message: Any, *words: str, **kw: Any) -> Case:
    kw.setdefault("codes", INVALID)
    return Case(f"{group}/{label}", rpc, message.SerializeToString(), words=words, **kw)


# -- inserts and upserts --------------------------------------------------------------------
def _insert(columns: list[Any], num_rows: int, **kw: Any) -> Any:
    return M.InsertRequest(collection_name=MAIN, fields_data=columns, num_rows=num_rows, **kw)


def _columns(ids: list[int], **replace: Any) -> list[Any]:
    cols = {c.field_name: c for c in insert_columns(ids)}
    for name, column in replace.items():
        if column is None:
            del cols[name]
        else:
            cols[name] = column
    return list(cols.values())


def _vectors(**vf: Any) -> Any:
    return schema_pb2.FieldData(
        type=schema_pb2.FloatVector, field_name="vec", vectors=schema_pb2.VectorField(**vf)
    )


IDS = [3000, 3001]


def insert_cases() -> list[Case]:
    out = []
    bad: list[tuple[str, list[Any], int, tuple[str, ...]]] = [
        ("num-rows-more", _columns(IDS), 3, ("num_rows",)),
        ("num-rows-fewer", _columns(IDS), 1, ("num_rows",)),
        ("num-rows-zero", _columns(IDS), 0, ("num_rows",)),
        ("num-rows-huge", _columns(IDS), 2**32 - 1, ("num_rows",)),
        ("columns-differ", _columns([3000, 3001, 3002], vec=float_column("vec", 2)), 3, ("vec",)),
        ("vector-dim-0", _columns(IDS, vec=float_column("vec", 2, dim=0)), 2, ("dim", "vec")),
        ("vector-dim-3", _columns(IDS, vec=_vectors(
            dim=3, float_vector=schema_pb2.FloatArray(data=[0.5] * 6))), 2, ("dim", "vec")),
        ("vector-not-whole", _columns(IDS, vec=_vectors(
            dim=4, float_vector=schema_pb2.FloatArray(data=[0.5] * 7))), 2, ("vec",)),
        ("vector-none", _columns(IDS, vec=_vectors(dim=4)), 2, ("vec",)),
        ("vector-bytes", _columns(IDS, vec=_vectors(dim=4, binary_vector=b"\x01" * 32)), 2,
         ("vec",)),
        ("vector-nan", _columns(IDS, vec=_vectors(
            dim=4, float_vector=schema_pb2.FloatArray(data=[float("nan")] * 8))), 2, ("vec",)),
        ("id-as-text", _columns(IDS, id=string_column("id", ["a", "b"])), 2, ("id",)),
        ("id-missing", _columns(IDS, id=None), 2, ("id",)),
        ("title-too-long", _columns(IDS, title=string_column("title", ["x" * 17] * 2)), 2,
         ("title",)),
        ("title-no-data", _columns(IDS, title=schema_pb2.FieldData(
            type=schema_pb2.VarChar, field_name="title")), 2, ("title",)),
        ("unknown-field", [*_columns(IDS), long_column("nope", [1, 2])], 2, ("nope",)),
        ("field-twice", [*_columns(IDS), long_column("id", [5, 6])], 2, ("id",)),
        ("no-name", [*_columns(IDS), long_column("", [5, 6])], 2, ()),
        ("json-not-json", _columns(IDS, doc=json_column("doc", [b"{bad", b"{}"])), 2, ("doc",)),
        ("json-deep", _columns(IDS, doc=json_column("doc", [_deep(100_000).encode()] * 2)), 2,
         ("doc",)),
        ("json-deep-short", _columns(IDS, doc=json_column("doc", [_deep(5000).encode()] * 2)),
         2, ("doc",)),
        ("json-too-long", _columns(IDS, doc=json_column("doc", [b'"' + b"x" * 70_000 + b'"'] * 2)),
         2, ("doc",)),
        ("valid-data-short", _columns(IDS, doc=schema_pb2.FieldData(
            type=schema_pb2.JSON, field_name="doc", valid_data=[True],
            scalars=schema_pb2.ScalarField(json_data=schema_pb2.JSONArray(data=[b"1"])))), 2,
         ("valid_data",)),
        ("valid-data-not-nullable", _columns(IDS, title=schema_pb2.FieldData(
            type=schema_pb2.VarChar, field_name="title", valid_data=[True, False],
            scalars=schema_pb2.ScalarField(string_data=schema_pb2.StringArray(data=["a"])))), 2,
         ("title",)),
        ("no-columns", [], 1, ()),
    ]  # fmt: skip
    for label, columns, n, words in bad:
        out.append(_case("insert", label, "Insert", _insert(columns, n), *words))
        if label in ("num-rows-more", "columns-differ", "vector-dim-0", "json-deep"):
            upsert = M.UpsertRequest(collection_name=MAIN, fields_data=columns, num_rows=n)
            out.append(_case("upsert", label, "Upsert", upsert, *words))
    out.append(
        _case(
            "insert", "partition-absent", "Insert",
            _insert(_columns(IDS), 2, partition_name="nope"), codes=frozenset({200}),
        )
    )  # fmt: skip
    return out


def delete_cases() -> list[Case]:
    def delete(expr: str, **kw: Any) -> Any:
        return M.DeleteRequest(collection_name=MAIN, expr=expr, **kw)

    empty = {"ids": schema_pb2.TemplateValue()}
    deep = schema_pb2.TemplateArrayValue(long_data=schema_pb2.LongArray(data=[1]))
    for _ in range(40):  # protobuf itself refuses messages nested past 100 levels
        deep = schema_pb2.TemplateArrayValue(
            array_data=schema_pb2.TemplateArrayValueArray(data=[deep])
        )
    return [
        _case("delete", "expr-empty", "Delete", delete(""), "expr"),
        _case("delete", "expr-bad", "Delete", delete("id >>> 3")),
        _case("delete", "expr-deep", "Delete", delete("(" * 5000 + "id < -5" + ")" * 5000),
              ok=True),  # as the Flight suite: deep but valid; it matches no row
        _case("delete", "expr-not-bool", "Delete", delete("id + 1")),
        _case("delete", "template-empty", "Delete",
              delete("id in {ids}", expr_template_values=empty), "template"),
        _case("delete", "template-missing", "Delete", delete("id in {ids}"), "ids"),
        _case("delete", "template-deep", "Delete", delete(
            "id in {ids}", expr_template_values={"ids": schema_pb2.TemplateValue(
                array_val=deep)}), ok=True, codes=frozenset()),
        _case("delete", "partition-absent", "Delete", delete("id in [1]", partition_name="nope"),
              codes=frozenset({200})),
    ]  # fmt: skip


# -- searches and queries -------------------------------------------------------------------
def _params(**over: Any) -> list[Any]:
    params: dict[str, Any] = {"anns_field": "vec", "topk": 3, "metric_type": "L2", "params": "{}"}
    params.update(over)
    return kv(**{k: v for k, v in params.items() if v is not None})


def _group(kind: int, values: list[bytes], n: int = 1) -> bytes:
    one = common_pb2.PlaceholderValue(tag="$0", type=kind, values=values)
    return common_pb2.PlaceholderGroup(placeholders=[one] * n).SerializeToString()


_F32 = np.asarray([0.1, 0.2, 0.3, 0.4], "<f4").tobytes()
_LEVELS = {"session": 1, "strong": 0, "customized": 4}


def search_cases() -> list[Case]:
    many = placeholder(raw=[v.tobytes() for v in np.zeros((16_385, 4), "<f4")])
    bad: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("nq-16385", {"placeholder_group": many, "nq": 16_385}, ("nq",)),
        ("nq-declared-huge", {"nq": 100_000}, ("nq",)),
        ("nq-declared-differs", {"nq": 5}, ("nq",)),
        ("topk-16385", {"search_params": _params(topk=16_385)}, ("limit",)),
        ("topk-0", {"search_params": _params(topk=0)}, ("limit",)),
        ("topk-negative", {"search_params": _params(topk=-1)}, ("limit",)),
        ("topk-text", {"search_params": _params(topk="abc")}, ("topk",)),
        ("topk-float", {"search_params": _params(topk=2.5)}, ("topk",)),
        ("offset-limit", {"search_params": _params(topk=10_000, offset=7_000)}, ("offset",)),
        ("offset-negative", {"search_params": _params(offset=-1)}, ("offset",)),
        ("params-not-json", {"search_params": _params(params="{nprobe")}, ("params",)),
        ("params-array", {"search_params": _params(params=[1, 2])}, ("params",)),
        ("params-deep", {"search_params": _params(params=_deep(100_000))}, ("params",)),
        ("params-deep-object", {"search_params": _params(
            params='{"a":' * 2000 + "1" + "}" * 2000)}, ("params",)),
        ("metric-unknown", {"search_params": _params(metric_type="FOO")}, ("FOO",)),
        ("round-decimal-text", {"search_params": _params(round_decimal="x")}, ("round_decimal",)),
        ("round-decimal-7", {"search_params": _params(round_decimal=7)}, ("round_decimal",)),
        ("group-size-text", {"search_params": _params(group_by_field="title", group_size="abc")},
         ("group_size",)),
        ("group-by-absent", {"search_params": _params(group_by_field="nope")}, ("nope",)),
        ("anns-absent", {"search_params": _params(anns_field="nope")}, ("nope",)),
        ("anns-scalar", {"search_params": _params(anns_field="title")}, ("title",)),
        ("iterator-bound-text", {"search_params": _params(
            search_iter_v2=True, search_iter_batch_size=3, iterator=True,
            search_iter_last_bound="abc")}, ("search_iter_last_bound",)),
        ("placeholder-short", {"placeholder_group": _group(101, [b"\x00\x00\x00"])},
         ("vector",)),
        ("placeholder-ragged", {"placeholder_group": _group(101, [_F32, _F32[:12]]), "nq": 2},
         ("vector",)),
        ("placeholder-garbage", {"placeholder_group": b"\xff\xff\xff"}, ("placeholder",)),
        ("placeholder-empty", {"placeholder_group": b""}, ("placeholder",)),
        ("placeholder-two", {"placeholder_group": _group(101, [_F32], n=2)}, ("placeholder",)),
        ("placeholder-no-values", {"placeholder_group": _group(101, [])}, ("vector",)),
        ("placeholder-dim-3", {"placeholder_group": _group(101, [_F32[:12]])}, ("dim",)),
        ("placeholder-binary", {"placeholder_group": _group(100, [b"\x01"])}, ()),
        ("placeholder-type-99", {"placeholder_group": _group(99, [_F32])}, ()),
        ("consistency-99", {"consistency_level": 99}, ("consistency",)),
        ("output-absent", {"output_fields": ["nope"]}, ("nope",)),
        ("filter-bad", {"dsl": "id >>> 3"}, ()),
        ("filter-template-empty", {"dsl": "id in {x}", "expr_template_values": {
            "x": schema_pb2.TemplateValue()}}, ("template",)),
    ]  # fmt: skip
    for level, number in _LEVELS.items():
        bad.append(
            (f"guarantee-future-{level}",
             {"guarantee_timestamp": FUTURE, "consistency_level": number},
             ("guarantee_timestamp",))
        )  # fmt: skip
    out = [_case("search", label, "Search", search_request(**f), *w) for label, f, w in bad]
    deep = search_request(dsl="(" * 5000 + "id < 3" + ")" * 5000)
    out.append(_case("search", "filter-deep", "Search", deep, ok=True, codes=INVALID))
    out.append(
        _case("search", "partition-absent", "Search", search_request(partition_names=["nope"]),
              codes=frozenset({200}))
    )  # fmt: skip
    out.append(
        _case("search", "by-primary-keys", "Search", search_request(search_by_primary_keys=True))
    )
    return out


def hybrid_cases() -> list[Case]:
    def subs(**over: Any) -> list[Any]:
        return [search_request(**over), search_request()]

    bad: list[tuple[str, Any, tuple[str, ...]]] = [
        ("no-requests", hybrid_request(0), ("ann search requests",)),
        ("1025-requests", hybrid_request(1025), ("ann search requests",)),
        ("rank-limit-text", hybrid_request(rank_params=kv(strategy="rrf", limit="x")), ("limit",)),
        ("rank-limit-0", hybrid_request(rank_params=kv(strategy="rrf", limit=0)), ("limit",)),
        ("rank-limit-16385", hybrid_request(rank_params=kv(strategy="rrf", limit=16_385)),
         ("limit",)),
        ("rank-offset-negative", hybrid_request(rank_params=kv(strategy="rrf", offset=-3)),
         ("offset",)),
        ("rank-strategy-unknown", hybrid_request(rank_params=kv(strategy="borda")), ("borda",)),
        ("rank-weights-count", hybrid_request(
            rank_params=kv(strategy="weighted", params={"weights": [0.5]})), ("weights",)),
        ("rank-params-not-json", hybrid_request(rank_params=kv(strategy="rrf", params="{k")),
         ("params",)),
        ("rank-params-deep", hybrid_request(rank_params=kv(strategy="rrf", params=_deep(50_000))),
         ("params",)),
        ("sub-placeholder-garbage", hybrid_request(requests=subs(placeholder_group=b"\xff")),
         ("placeholder",)),
        ("sub-topk-text", hybrid_request(requests=subs(search_params=_params(topk="x"))),
         ("topk",)),
        ("sub-params-not-json", hybrid_request(requests=subs(
            search_params=_params(params="{x"))), ("params",)),
        ("sub-nq-differs", hybrid_request(requests=subs(
            placeholder_group=placeholder([[0.1] * 4, [0.2] * 4]), nq=2)), ("query vectors",)),
        ("consistency-99", hybrid_request(consistency_level=99), ("consistency",)),
        ("guarantee-future", hybrid_request(guarantee_timestamp=FUTURE, consistency_level=1),
         ("guarantee_timestamp",)),
    ]  # fmt: skip
    out = [_case("hybrid", label, "HybridSearch", m, *w) for label, m, w in bad]
    # Milvus takes up to 1024 sub-requests (proxy's defaultMaxSearchRequest): so does Elanus
    most = hybrid_request(1024)
    out.append(_case("hybrid", "1024-requests", "HybridSearch", most, ok=True, codes=RATE))
    return out


def query_cases() -> list[Case]:
    def query(expr: str = "id < 3", **kw: Any) -> Any:
        return M.QueryRequest(collection_name=MAIN, expr=expr, **kw)

    bad: list[tuple[str, Any, tuple[str, ...]]] = [
        ("limit-text", query(query_params=kv(limit="x")), ("limit",)),
        ("limit-negative", query(query_params=kv(limit=-1)), ("limit",)),
        ("limit-float", query(query_params=kv(limit=2.5)), ("limit",)),
        ("limit-16385", query(query_params=kv(limit=16_385)), ("limit",)),
        ("offset-limit", query(query_params=kv(limit=10_000, offset=7_000)), ("offset",)),
        ("offset-negative", query(query_params=kv(limit=3, offset=-1)), ("offset",)),
        ("expr-empty-no-limit", query(""), ("limit",)),
        ("expr-bad", query("id >>> 3"), ()),
        ("output-absent", query(output_fields=["nope"]), ("nope",)),
        ("consistency-99", query(consistency_level=99), ("consistency",)),
        ("template-empty", query("id in {x}", expr_template_values={
            "x": schema_pb2.TemplateValue()}), ("template",)),
    ]  # fmt: skip
    for level, number in _LEVELS.items():
        bad.append(
            (f"guarantee-future-{level}",
             query(guarantee_timestamp=FUTURE, consistency_level=number),
             ("guarantee_timestamp",))
        )  # fmt: skip
    out = [_case("query", label, "Query", m, *w) for label, m, w in bad]
    deep = query("not " * 5000 + "id > 3")
    out.append(_case("query", "expr-deep", "Query", deep, ok=True, codes=INVALID))
    out.append(
        _case("query", "partition-absent", "Query", query(partition_names=["nope"]),
              codes=frozenset({200}))
    )  # fmt: skip
    return out


# -- collections, properties and indexes ----------------------------------------------------
def _create(schema: bytes = b"", **kw: Any) -> Any:
    return M.CreateCollectionRequest(
        collection_name=NEVER, schema=schema or collection_schema(), **kw
    )


def _schema(*fields: Any) -> bytes:
    return schema_pb2.CollectionSchema(name="s", fields=list(fields)).SerializeToString()


PK = field_schema("id", schema_pb2.Int64, is_primary_key=True)
VEC = field_schema("vec", schema_pb2.FloatVector, dim=4)
TTL = "collection.ttl.seconds"
MMAP = "mmap.enabled"


def _function(kind: int) -> bytes:
    fn = schema_pb2.FunctionSchema(
        name="f", type=kind, input_field_names=["t"], output_field_names=["s"]
    )
    proto = schema_pb2.CollectionSchema(
        name="s",
        fields=[
            PK,
            field_schema("t", schema_pb2.VarChar, max_length=64, enable_analyzer="true"),
            schema_pb2.FieldSchema(name="s", data_type=schema_pb2.SparseFloatVector),
        ],
        functions=[fn],
    )
    return proto.SerializeToString()


def collection_cases() -> list[Case]:
    str_field = schema_pb2.VarChar
    bad: list[tuple[str, Any, tuple[str, ...]]] = [
        ("dim-text", _create(collection_schema(dim="abc")), ("dim",)),
        ("dim-empty", _create(collection_schema(dim="")), ("dim",)),
        ("dim-0", _create(collection_schema(dim=0)), ("dim",)),
        ("dim-1", _create(collection_schema(dim=1)), ("dim",)),  # Milvus: 2 to 32768
        ("dim-32769", _create(collection_schema(dim=32_769)), ("dim",)),
        ("dim-negative", _create(collection_schema(dim=-4)), ("dim",)),
        ("dim-huge", _create(collection_schema(dim=2**70)), ("dim",)),
        ("binary-dim-9", _create(_schema(PK, field_schema("b", schema_pb2.BinaryVector, dim=9))),
         ("dim",)),
        ("schema-garbage", _create(b"\xff\xff\xff"), ("schema",)),
        ("no-primary", _create(_schema(VEC, field_schema("x", schema_pb2.Int64))), ("primary",)),
        ("two-primary", _create(_schema(PK, VEC, field_schema(
            "id2", schema_pb2.Int64, is_primary_key=True))), ("primary",)),
        ("same-field-twice", _create(_schema(PK, VEC, VEC)), ("vec",)),
        ("max-length-text", _create(collection_schema(field_schema(
            "s", str_field, max_length="abc"))), ("max_length",)),
        ("max-length-0", _create(collection_schema(field_schema("s", str_field, max_length=0))),
         ("max_length",)),
        ("max-length-65536", _create(collection_schema(field_schema(
            "s", str_field, max_length=65_536))), ("max_length",)),
        ("type-999", _create(collection_schema(schema_pb2.FieldSchema(
            name="x", data_type=999))), ("999",)),
        ("array-no-element", _create(collection_schema(field_schema(
            "a", schema_pb2.Array, max_capacity=4))), ("a",)),
        ("type-param-unknown", _create(collection_schema(field_schema(
            "x", schema_pb2.Int64, frobnicate="yes"))), ("frobnicate",)),
        ("analyzer-not-json", _create(collection_schema(field_schema(
            "t", str_field, max_length=64, enable_analyzer="true", analyzer_params="{bad"))),
         ("analyzer_params",)),
        ("analyzer-deep", _create(collection_schema(field_schema(
            "t", str_field, max_length=64, enable_analyzer="true",
            analyzer_params=_deep(100_000)))), ("analyzer_params",)),
        ("function-type-99", _create(_function(99)), ("function",)),
        # Milvus Lite 3.2 stores any property text; Milvus's proxy checks these two (its
        # validateCollectionTTL and the mmap check), and so does Elanus, on both faces
        ("ttl-text", _create(properties=kv(**{TTL: "abc"})), (TTL,)),
        ("ttl-minus-2", _create(properties=kv(**{TTL: "-2"})), (TTL,)),
        ("ttl-huge", _create(properties=kv(**{TTL: "3155760001"})), (TTL,)),
        ("mmap-maybe", _create(properties=kv(**{MMAP: "maybe"})), (MMAP,)),
        ("consistency-99", _create(consistency_level=99), ("consistency",)),
        ("shards-1000", _create(shards_num=1000), ("num_shards",)),
        ("shards-negative", _create(shards_num=-2), ("num_shards",)),
        ("description-huge", _create(schema_pb2.CollectionSchema(
            name="s", description="d" * 100_000, fields=[PK, VEC]).SerializeToString()),
         ("description",)),
    ]  # fmt: skip
    out = [_case("create", label, "CreateCollection", m, *w) for label, m, w in bad]
    alter = [
        ("ttl-text", M.AlterCollectionRequest(collection_name=MAIN, properties=kv(**{TTL: "x"}))),
        ("ttl-minus-2", M.AlterCollectionRequest(
            collection_name=MAIN, properties=kv(**{TTL: "-2"}))),
        ("mmap-maybe", M.AlterCollectionRequest(
            collection_name=MAIN, properties=kv(**{MMAP: "maybe"}))),
        ("field-mmap-maybe", M.AlterCollectionFieldRequest(
            collection_name=MAIN, field_name="title", properties=kv(**{MMAP: "maybe"}))),
        ("index-mmap-maybe", M.AlterIndexRequest(
            collection_name=MAIN, extra_params=kv(**{MMAP: "maybe"}))),
    ]  # fmt: skip
    for label, message in alter:
        rpc = type(message).__name__.removesuffix("Request")
        out.append(_case("alter", label, rpc, message, MMAP if "mmap" in label else TTL))
    # a field's and an index's keys as Milvus's proxy checks them (elanus.fieldprops,
    # elanus.indexprops): nothing changes, the key is named
    field_props = [
        ("max-length-0", {"max_length": "0"}, "max_length"),
        ("max-length-text", {"max_length": "ten"}, "max_length"),
        ("max-capacity-on-varchar", {"max_capacity": "3"}, "maxcapacity"),
        ("unknown-key", {"nullable": "true"}, "nullable"),
        ("warmup-eager", {"warmup": "eager"}, "warmup"),
    ]
    for label, props, word in field_props:
        message = M.AlterCollectionFieldRequest(
            collection_name=MAIN, field_name="title", properties=kv(**props)
        )
        out.append(_case("alter-field", label, "AlterCollectionField", message, word))
    for label, props, word in (
        ("unknown-key", {"nlist": "8"}, "nlist"),
        ("warmup-eager", {"warmup": "eager"}, "warmup"),
    ):
        message = M.AlterIndexRequest(collection_name=MAIN, extra_params=kv(**props))
        out.append(_case("alter-index", label, "AlterIndex", message, word))
    drop = M.AlterIndexRequest(collection_name=MAIN, delete_keys=["metric_type"])
    out.append(_case("alter-index", "drop-metric-type", "AlterIndex", drop, "metric_type"))
    # Milvus takes -1 ("no TTL") as a TTL, and so does Elanus (stored, no entity expires)
    minus_one = M.AlterCollectionRequest(collection_name=MAIN, properties=kv(**{TTL: "-1"}))
    out.append(
        _case("alter", "ttl-minus-1", "AlterCollection", minus_one, ok=True, codes=frozenset())
    )
    return out


def index_cases() -> list[Case]:
    def create(field: str = "vec", **extra: Any) -> Any:
        return M.CreateIndexRequest(collection_name=BIG, field_name=field, extra_params=kv(**extra))

    return [
        # Milvus refuses it with code 65535, Milvus Lite with 6: both mean "release first"
        _case("index", "drop-loaded", "DropIndex",
              M.DropIndexRequest(collection_name=MAIN, field_name="vec"), "release"),
        _case("index", "type-unknown", "CreateIndex", create(index_type="FOO", metric_type="L2"),
              "FOO"),
        _case("index", "metric-unknown", "CreateIndex",
              create(index_type="FLAT", metric_type="BAR"), "BAR"),
        _case("index", "nlist-text", "CreateIndex",
              create(index_type="IVF_FLAT", metric_type="L2", params={"nlist": "abc"}), "nlist"),
        _case("index", "params-not-json", "CreateIndex",
              create(index_type="FLAT", metric_type="L2", params="{x"), "params"),
        _case("index", "params-deep", "CreateIndex",
              create(index_type="FLAT", metric_type="L2", params=_deep(100_000)), "params"),
        _case("index", "field-absent", "CreateIndex", create("nope", index_type="FLAT"), "nope"),
    ]  # fmt: skip


# -- the other RPCs ----------------------------------------------------------------------
def other_cases() -> list[Case]:
    grant = milvus_pb2.GrantEntity(
        role=milvus_pb2.RoleEntity(name="public"),
        object=milvus_pb2.ObjectEntity(name="Collection"),
        object_name=MAIN,
        grantor=milvus_pb2.GrantorEntity(privilege=milvus_pb2.PrivilegeEntity(name="NoSuch")),
    )
    bad: list[tuple[str, str, Any, tuple[str, ...], frozenset[int]]] = [
        ("load", "replica-negative", M.LoadCollectionRequest(
            collection_name=MAIN, replica_number=-1), ("replica",), INVALID),
        ("import", "task-negative", M.GetImportStateRequest(task=-1), (), INVALID | {1100}),
        ("import", "traversal", M.ImportRequest(collection_name=BIG, files=["../../etc/passwd"]),
         (), INVALID),
        ("import", "no-files", M.ImportRequest(collection_name=BIG), ("files",), INVALID),
        ("import", "option-unknown", M.ImportRequest(
            collection_name=BIG, files=["a.parquet"], options=kv(frob="1")), ("frob",), INVALID),
        ("credential", "not-base64", M.CreateCredentialRequest(
            username="mfz_u2", password="%%%"), ("password",), INVALID),
        ("credential", "update-not-base64", M.UpdateCredentialRequest(
            username="root", oldPassword="%%%", newPassword=b64("fz-pw-789")), ("Password",),
         INVALID),
        ("privilege", "unknown", M.OperatePrivilegeRequest(entity=grant), ("NoSuch",), INVALID),
        ("privilege", "type-99", M.OperatePrivilegeRequest(
            entity=grant, type=99), (), INVALID),
        ("user-role", "type-99", M.OperateUserRoleRequest(
            username="root", role_name="public", type=99), (), INVALID),
        ("privilege-group", "type-99", M.OperatePrivilegeGroupRequest(
            group_name="mfz_group", type=99,
            privileges=[milvus_pb2.PrivilegeEntity(name="Query")]), (), INVALID),
        ("analyzer", "params-not-json", M.RunAnalyzerRequest(
            analyzer_params="{bad", placeholder=[b"x"]), ("analyzer_params",), INVALID),
        ("analyzer", "params-deep", M.RunAnalyzerRequest(
            analyzer_params=_deep(100_000), placeholder=[b"x"]), ("analyzer_params",), INVALID),
        ("rename", "to-bad-name", M.RenameCollectionRequest(oldName=BIG, newName="1 bad"),
         (), INVALID),
        ("describe", "by-id", M.DescribeCollectionRequest(collectionID=12345), (), INVALID),
    ]  # fmt: skip
    out = []
    for group, label, message, words, codes in bad:
        rpc = type(message).__name__.removesuffix("Request")
        out.append(_case(group, label, rpc, message, *words, codes=codes))
    return out


def value_cases() -> list[Case]:
    return [
        *insert_cases(),
        *delete_cases(),
        *search_cases(),
        *hybrid_cases(),
        *query_cases(),
        *collection_cases(),
        *index_cases(),
        *other_cases(),
    ]
