"""What the requests that carry a collection's data and shape honour (``fields.py``
applies it): the schema of ``CreateCollection`` and ``AddCollectionField`` (fields,
functions, default values, collection properties) and the columns of ``Insert`` and
``Upsert`` (``FieldData``), with ``Delete``."""

from __future__ import annotations

from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from elanus import dbproperties
from elanus.milvus.fields import (
    NAME,
    Rule,
    Table,
    harmless,
    keys,
    nested,
    refused,
    refused_as_read,
    use,
    with_db,
)
from elanus.milvus.honoured_reads import TEMPLATES, leaf
from elanus.milvus.schemas import IGNORED_PARAMS
from elanus.properties import MMAP_KEYS, TTL_KEY

SERVER_SETS = harmless("assigned by the server")
_NAMESPACE = refused("namespaces")
_STRUCTS = refused("ARRAY of STRUCT fields")
_EXTERNAL = refused("external collections")

# -- schemas --------------------------------------------------------------------------------
VALUE_FIELD = Table(
    schema_pb2.ValueField,
    {
        "bool_data": use(),
        "int_data": use(),
        "long_data": use(),
        "float_data": use(),
        "double_data": use(),
        "string_data": use(),
        "bytes_data": refused("bytes default values"),
        "timestamptz_data": refused("Timestamptz fields"),
        "date_data": refused("Date fields"),
        "time_data": refused("Time fields"),
    },
)
FIELD_SCHEMA = Table(
    schema_pb2.FieldSchema,
    {
        "fieldID": SERVER_SETS,
        "name": use(),
        "is_primary_key": use(),
        "description": use(),
        "data_type": use(),
        "type_params": keys(
            {}, use("dim, max_length, max_capacity, analyzers; memory keys have no effect")
        ),
        "index_params": refused("index parameters in a field's schema; create the index"),
        "autoID": use(),
        "state": harmless("set by the server"),
        "element_type": use(),
        "default_value": nested(VALUE_FIELD),
        "is_dynamic": refused("a field marked dynamic; set enable_dynamic_field"),
        "is_partition_key": use(),
        "is_clustering_key": use("one scalar field; clustering compaction orders rows by it"),
        "nullable": use(),
        "is_function_output": harmless("the schema's functions name their output fields"),
        "external_field": _EXTERNAL,
    },
)
"""A field of a schema (``CreateCollection``) or one added (``AddCollectionField``),
checked where ``ddl.py`` parses it."""

FUNCTION_SCHEMA = Table(
    schema_pb2.FunctionSchema,
    {
        "name": use(),
        "id": SERVER_SETS,
        "description": use(),
        "type": use("BM25; other functions are refused"),
        "input_field_names": use(),
        "input_field_ids": harmless("the fields are named"),
        "output_field_names": use(),
        "output_field_ids": harmless("the fields are named"),
        "params": keys({}, use("checked by the function (BM25 takes none)")),
    },
)
COLLECTION_SCHEMA = Table(
    schema_pb2.CollectionSchema,
    {
        "name": harmless("collection_name names the collection (Milvus also wants them equal)"),
        "description": use(),
        "autoID": harmless("each field's autoID is read"),
        "fields": nested(FIELD_SCHEMA),
        "enable_dynamic_field": use(),
        "properties": refused("properties in the schema; give them in the request"),
        "functions": nested(FUNCTION_SCHEMA),
        "dbName": harmless("the request's database"),
        "struct_array_fields": _STRUCTS,
        "version": SERVER_SETS,
        "external_source": _EXTERNAL,
        "external_spec": _EXTERNAL,
        "do_physical_backfill": _EXTERNAL,
        "file_resource_ids": refused("file resources"),
        "enable_namespace": _NAMESPACE,
    },
)


_MEMORY = harmless("no effect: Elanus does not lazy-load nor warm what it loads")
_MMAP = use("its indexes load mapped from disk (elanus.mmapsettings); raw columns do not")
_NOT_ENFORCED = refused("this property: Milvus acts on it, Elanus would only store it")
COLLECTION_PROPERTIES: dict[str, Rule] = {
    TTL_KEY: use(
        "enforced: an entity inserted more than this many seconds before a read is not "
        "seen by it (search, query, get, count) and compaction removes it; -1 or 0: none"
    ),
    **{key: _MMAP if key in MMAP_KEYS else _MEMORY for key in IGNORED_PARAMS},
    **{
        key: _NOT_ENFORCED
        for key in (
            "collection.autocompaction.enabled",
            "collection.function.allowInsertNonBM25FunctionOutputs",
            "collection.insertRate.max.mb",
            "collection.insertRate.min.mb",
            "collection.upsertRate.max.mb",
            "collection.upsertRate.min.mb",
            "collection.deleteRate.max.mb",
            "collection.deleteRate.min.mb",
            "collection.bulkLoadRate.max.mb",
            "collection.bulkLoadRate.min.mb",
            "collection.queryRate.max.qps",
            "collection.queryRate.min.qps",
            "collection.searchRate.max.vps",
            "collection.searchRate.min.vps",
            "collection.diskProtection.diskQuota.mb",
            "partition.diskProtection.diskQuota.mb",
            "collection.replica.number",
            "collection.resource_groups",
            "partitionkey.isolation",
            "field.skipLoad",
            "dynamicfield.enabled",
            "namespace.enabled",
            "allow_insert_auto_id",
            "timezone",
            "query_mode",
            "disable_func_runtime_check",
            "cipher.enabled",
            "cipher.key",
            "cipher.ezID",
            "rls.enabled",
            "rls.force",
            "rls.principal_name",
            "replicate.id",
            "replicate.endTS",
        )
    },
}
"""The collection properties Milvus acts on: refused where Elanus would store them without
effect; the TTL is enforced. Other keys are stored and described back, as Milvus stores a
key it does not know."""

DATABASE_PROPERTIES: dict[str, Rule] = {
    **{key: use(what) for key, what in dbproperties.HONOURED.items()},
    **{key: _NOT_ENFORCED for key in dbproperties.REFUSED},
}
"""The database properties Milvus acts on (``elanus.dbproperties``): enforced, or refused
where Elanus would store them without effect. Other keys are stored and described back."""

# -- writes ---------------------------------------------------------------------------------
_SCALARS = {
    "bool_data": schema_pb2.BoolArray,
    "int_data": schema_pb2.IntArray,
    "long_data": schema_pb2.LongArray,
    "float_data": schema_pb2.FloatArray,
    "double_data": schema_pb2.DoubleArray,
    "string_data": schema_pb2.StringArray,
    "json_data": schema_pb2.JSONArray,
}
_UNTYPED = {
    "bytes_data": "bytes values",
    "geometry_data": "Geometry fields",
    "geometry_wkt_data": "Geometry fields",
    "timestamptz_data": "Timestamptz fields",
    "mol_data": "Mol fields",
    "mol_smiles_data": "Mol fields",
    "date_data": "Date fields",
    "time_data": "Time fields",
}
"""``ScalarField`` members of types Elanus does not have."""
ARRAY_CELL = Table(
    schema_pb2.ScalarField,
    {name: nested(leaf(cls)) for name, cls in _SCALARS.items()}
    | {name: refused_as_read(why) for name, why in _UNTYPED.items()}
    | {"array_data": refused_as_read("arrays of arrays")},
)
"""One cell of an Array column (a row's values): its member must be the element type's."""
SCALAR_FIELD = Table(
    schema_pb2.ScalarField,
    {name: nested(leaf(cls)) for name, cls in _SCALARS.items()}
    | {name: refused(why) for name, why in _UNTYPED.items()}
    | {
        "array_data": nested(
            Table(
                schema_pb2.ArrayArray,
                {"data": nested(ARRAY_CELL), "element_type": use("must be the field's")},
            )
        ),
    },
)
VECTOR_FIELD = Table(
    schema_pb2.VectorField,
    {
        "dim": use("must be the field's"),
        "float_vector": nested(leaf(schema_pb2.FloatArray)),
        "binary_vector": use(),
        "float16_vector": use(),
        "bfloat16_vector": use(),
        "sparse_float_vector": nested(
            Table(
                schema_pb2.SparseFloatArray,
                {"contents": use(), "dim": harmless("each row carries its own indices")},
            )
        ),
        "int8_vector": refused("Int8 vectors"),
        "vector_array": _STRUCTS,
    },
)
FIELD_DATA = Table(
    schema_pb2.FieldData,
    {
        "type": harmless("the schema gives the type; values must sit in its member"),
        "field_name": use(),
        "scalars": nested(SCALAR_FIELD),
        "vectors": nested(VECTOR_FIELD),
        "struct_arrays": _STRUCTS,
        "field_id": harmless("columns are matched by field_name"),
        "is_dynamic": use(),
        "valid_data": use(),
    },
)
_HASH_KEYS = harmless("Milvus's proxy hashes the primary keys itself")
_WRITE = with_db(
    collection_name=NAME,
    partition_name=use(),
    fields_data=nested(FIELD_DATA),
    hash_keys=_HASH_KEYS,
    num_rows=use(),
    schema_timestamp=harmless("every write is checked against the current schema"),
    namespace=_NAMESPACE,
)
WRITES = {
    "Insert": Table(milvus_pb2.InsertRequest, _WRITE),
    "Upsert": Table(
        milvus_pb2.UpsertRequest,
        _WRITE
        | {
            "partial_update": use("the stored rows fill in the fields left out"),
            "field_ops": nested(
                Table(
                    schema_pb2.FieldPartialUpdateOp,
                    {
                        "field_name": use(),
                        "op": use("REPLACE, and ARRAY_APPEND and ARRAY_REMOVE on Array fields"),
                    },
                )
            ),
        },
    ),
    "Delete": Table(
        milvus_pb2.DeleteRequest,
        with_db(
            collection_name=NAME,
            partition_name=use(),
            expr=use(),
            hash_keys=_HASH_KEYS,
            consistency_level=harmless("the filter is matched at Strong, which meets any level"),
            expr_template_values=TEMPLATES,
            namespace=_NAMESPACE,
        ),
    ),
}
