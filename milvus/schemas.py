"""Milvus's ``CollectionSchema`` as an Elanus schema (its JSON form) and back, with the
``DescribeCollection`` answer built from Elanus's description of a collection."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import DecodeError
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus.errors import invalid
from elanus.milvus.fielddata import PROTO_TYPES, elanus_type
from elanus.milvus.params import json_param
from elanus.ops.replies import CollectionDescription
from elanus.properties import check_property
from elanus.schema import DYNAMIC_FIELD, DataType, Field, Schema
from elanus.tsutil import physical_ms

_INT_PARAMS = ("dim", "max_length", "max_capacity")
_BOOL_PARAMS = ("enable_analyzer", "enable_match")
_FLAGS = (
    ("is_primary_key", "is_primary"),
    ("autoID", "auto_id"),
    ("is_partition_key", "is_partition_key"),
    ("is_clustering_key", "is_clustering_key"),
    ("nullable", "nullable"),
)
"""A ``FieldSchema``'s boolean flags and the keys of an Elanus field (JSON form) they set."""
IGNORED_PARAMS = frozenset(
    {
        "mmap_enabled",
        "mmap.enabled",
        "lazyload.enabled",
        "warmup",
        "warmup.scalarField",
        "warmup.scalarIndex",
        "warmup.vectorField",
        "warmup.vectorIndex",
    }
)
"""Keys of how Milvus maps and warms what it loads, accepted as properties, field type
parameters and index parameters. Only ``mmap.enabled`` has an effect, and only as a
collection property or set by the alter calls (``milvus/alter.py``); as a type or index
parameter at creation it is checked and not kept."""


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes", "on")


def kv_dict(pairs: Any) -> dict[str, str]:
    return {p.key: p.value for p in pairs}


def kv_pairs(doc: dict[str, Any]) -> list[common_pb2.KeyValuePair]:
    return [
        common_pb2.KeyValuePair(
            key=str(k), value=v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
        )
        for k, v in doc.items()
    ]


# -- Milvus -> Elanus ------------------------------------------------------------------------
def parse_message(cls: Any, raw: bytes, what: str) -> Any:
    """The ``cls`` message serialized in a request's bytes field ``what`` (a schema)."""
    proto = cls()
    try:
        proto.ParseFromString(raw)
    except DecodeError:
        raise invalid(f"{what} is not a serialized {cls.DESCRIPTOR.name}") from None
    return proto


def schema_doc(proto: Any) -> dict[str, Any]:
    """A Milvus ``CollectionSchema`` as the ``schema`` of a ``create_collection`` body."""
    fields = [field_doc(f) for f in proto.fields]
    doc: dict[str, Any] = {
        "fields": fields,
        "enable_dynamic_field": bool(proto.enable_dynamic_field),
        "description": proto.description,
    }
    if proto.functions:
        doc["functions"] = [function_doc(fn) for fn in proto.functions]
    return doc


def field_doc(f: Any) -> dict[str, Any]:
    """A Milvus ``FieldSchema`` as an Elanus field (JSON form)."""
    d: dict[str, Any] = {"name": f.name, "type": elanus_type(f.data_type).value}
    for flag, key in _FLAGS:
        if getattr(f, flag):
            d[key] = True
    if f.description:
        d["description"] = f.description
    if f.data_type == schema_pb2.Array:
        if f.element_type == schema_pb2.DataType.Value("None"):
            raise invalid(f"array field {f.name!r} needs an element_type")
        d["element_type"] = elanus_type(f.element_type).value
    if f.HasField("default_value"):
        d["default_value"] = _value(f.default_value)
    for key, value in kv_dict(f.type_params).items():
        if key in _INT_PARAMS:
            d[key] = _int_value(value, f"field {f.name!r}: {key}")
        elif key in _BOOL_PARAMS:
            d[key] = _truthy(value)
        elif key == "analyzer_params":
            d[key] = json_param(value, f"field {f.name!r}: analyzer_params")
        elif key in IGNORED_PARAMS:
            check_property(key, value, f"field {f.name!r}")
        else:
            raise invalid(f"field {f.name!r}: type parameter {key!r} is not supported by Elanus")
    return d


_INT64 = 2**63


def _int_value(text: str, what: str) -> int:
    """An integer type parameter (Milvus sends them as text) within int64."""
    digits = text.strip()
    if not digits.lstrip("+-").isdigit() or not -_INT64 <= int(digits) < _INT64:
        raise invalid(f"{what} must be an integer, got {text[:40]!r}")
    return int(digits)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("data")
    return getattr(v, kind) if kind else None


def function_doc(fn: Any) -> dict[str, Any]:
    if fn.type not in schema_pb2.FunctionType.values():
        raise invalid(f"function {fn.name!r}: type {fn.type} is not a Milvus function type")
    doc: dict[str, Any] = {
        "name": fn.name,
        "type": schema_pb2.FunctionType.Name(fn.type),
        "input_field_names": list(fn.input_field_names),
        "output_field_names": list(fn.output_field_names),
    }
    if fn.description:
        doc["description"] = fn.description
    if fn.params:
        doc["params"] = kv_dict(fn.params)
    return doc


# -- Elanus -> Milvus ------------------------------------------------------------------------
def field_proto(
    f: Field, function_outputs: set[str], settings: dict[str, str] | None = None
) -> Any:
    p = schema_pb2.FieldSchema(
        name=f.name,
        data_type=PROTO_TYPES[f.dtype],
        is_primary_key=f.is_primary,
        autoID=f.auto_id,
        description=f.description,
        nullable=f.nullable,
        is_partition_key=f.is_partition_key,
        is_clustering_key=f.is_clustering_key,
        is_function_output=f.name in function_outputs,
    )
    if f.field_id is not None:
        p.fieldID = f.field_id
    if f.element_type is not None:
        p.element_type = PROTO_TYPES[f.element_type]
    params: dict[str, Any] = {k: getattr(f, k) for k in _INT_PARAMS if getattr(f, k) is not None}
    for key in _BOOL_PARAMS:
        if getattr(f, key):
            params[key] = "true"
    if f.analyzer_params is not None:
        params["analyzer_params"] = f.analyzer_params
    params.update(settings or {})  # mmap.enabled, warm-up: among type params, as Milvus
    p.type_params.extend(
        kv_pairs({k: str(v) if isinstance(v, int) else v for k, v in params.items()})
    )
    if f.default_value is not None:
        _set_default(p.default_value, f)
    return p


def _set_default(target: Any, f: Field) -> None:
    v, dt = f.default_value, f.dtype
    if dt == DataType.BOOL:
        target.bool_data = bool(v)
    elif dt in (DataType.INT8, DataType.INT16, DataType.INT32):
        target.int_data = int(v)
    elif dt == DataType.INT64:
        target.long_data = int(v)
    elif dt == DataType.FLOAT:
        target.float_data = float(v)
    elif dt == DataType.DOUBLE:
        target.double_data = float(v)
    else:
        target.string_data = str(v)


def schema_proto(
    schema: Schema,
    name: str,
    with_dynamic: bool = True,
    settings: dict[str, dict[str, str]] | None = None,
) -> Any:
    """``settings``: each field's stored settings (``elanus.fieldprops``), by name."""
    outputs = {n for fn in schema.functions for n in fn.output_field_names}
    p = schema_pb2.CollectionSchema(
        name=name,
        description=schema.description,
        enable_dynamic_field=schema.enable_dynamic_field,
        fields=[field_proto(f, outputs, (settings or {}).get(f.name)) for f in schema.fields],
    )
    p.autoID = any(f.auto_id for f in schema.fields)
    if with_dynamic and schema.enable_dynamic_field:
        p.fields.append(
            schema_pb2.FieldSchema(
                name=DYNAMIC_FIELD,
                data_type=schema_pb2.JSON,
                is_dynamic=True,
                fieldID=_next_id(schema),
            )
        )
    ids = {f.name: f.field_id or 0 for f in schema.fields}
    for fn in schema.functions:
        p.functions.append(
            schema_pb2.FunctionSchema(
                name=fn.name,
                type=schema_pb2.FunctionType.Value(fn.function_type.value),
                description=fn.description,
                input_field_names=fn.input_field_names,
                output_field_names=fn.output_field_names,
                input_field_ids=[ids.get(n, 0) for n in fn.input_field_names],
                output_field_ids=[ids.get(n, 0) for n in fn.output_field_names],
                params=kv_pairs(fn.params),
            )
        )
    return p


def _next_id(schema: Schema) -> int:
    return max((f.field_id or 0 for f in schema.fields), default=99) + 1


def describe_reply(doc: CollectionDescription) -> Any:
    """``DescribeCollectionResponse`` from Elanus's ``describe_collection`` result."""
    schema = Schema.from_dict(doc["schema"])
    level = str(doc.get("consistency_level") or "Bounded")
    created = int(doc.get("created_ts") or 0)
    props = {k: v for k, v in (doc.get("properties") or {}).items() if k != "metric_type"}
    return milvus_pb2.DescribeCollectionResponse(
        schema=schema_proto(
            schema, doc["name"], with_dynamic=False, settings=doc.get("field_properties")
        ),
        collectionID=int(doc["collection_id"]),
        virtual_channel_names=doc.get("vchannels") or [],
        physical_channel_names=doc.get("pchannels") or [],
        created_timestamp=created,
        created_utc_timestamp=physical_ms(created) if created else 0,
        shards_num=int(doc.get("num_shards") or 1),
        aliases=doc.get("aliases") or [],
        consistency_level=common_pb2.ConsistencyLevel.Value(level)
        if level in common_pb2.ConsistencyLevel.keys()  # noqa: SIM118 - a protobuf enum
        else common_pb2.Bounded,
        collection_name=doc["name"],
        properties=kv_pairs(props),
        db_name=doc.get("db") or "default",
        num_partitions=len(doc.get("partitions") or []),
    )
