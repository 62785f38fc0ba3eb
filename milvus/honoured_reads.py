"""What Search, HybridSearch and Query honour of their requests (``fields.py`` applies it):
the fields, the keys of ``search_params`` / ``query_params`` / ``rank_params`` that
pymilvus 3.0.2 sends (``client/prepare.py``), the placeholder group and filter templates.
Keys and fields Milvus reads but Elanus does not act on are refused, naming them."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from elanus.milvus.fields import (
    BASE,
    DB,
    NAME,
    Rule,
    Table,
    harmless,
    keys,
    nested,
    refused,
    serialized,
    truthy,
    use,
)


def leaf(message: Any) -> Table:
    """A list message whose one field, ``data``, holds the values."""
    return Table(message, {"data": use()})


# -- filters --------------------------------------------------------------------------------
_TEMPLATE_ARRAY_RULES: dict[str, Rule] = {}
TEMPLATE_ARRAY = Table(schema_pb2.TemplateArrayValue, _TEMPLATE_ARRAY_RULES)
_TEMPLATE_ARRAY_RULES.update(
    {
        "bool_data": nested(leaf(schema_pb2.BoolArray)),
        "long_data": nested(leaf(schema_pb2.LongArray)),
        "double_data": nested(leaf(schema_pb2.DoubleArray)),
        "string_data": nested(leaf(schema_pb2.StringArray)),
        "array_data": nested(
            Table(schema_pb2.TemplateArrayValueArray, {"data": nested(TEMPLATE_ARRAY)})
        ),
        "json_data": nested(leaf(schema_pb2.JSONArray)),
    }
)
TEMPLATE_VALUE = Table(
    schema_pb2.TemplateValue,
    {
        "bool_val": use(),
        "int64_val": use(),
        "float_val": use(),
        "string_val": use(),
        "array_val": nested(TEMPLATE_ARRAY),
        "bytes_val": refused("bytes values in filter templates"),
    },
)
TEMPLATES = nested(TEMPLATE_VALUE, "the filter's template values")

PLACEHOLDER_GROUP = Table(
    common_pb2.PlaceholderGroup,
    {
        "placeholders": nested(
            Table(
                common_pb2.PlaceholderValue,
                {
                    "tag": harmless("the placeholder's name ($0); there is one placeholder"),
                    "type": use("float, float16, bfloat16, binary, sparse vectors or texts"),
                    "values": use(),
                    "element_level": refused("element-level search of ARRAY of STRUCT vectors"),
                },
            )
        )
    },
)
"""The query vectors of a search (checked where ``read.query_data`` parses them)."""

# -- the keys -------------------------------------------------------------------------------
_GROWING = refused("searching sealed segments only", truthy)
_CLUSTER = refused("reads across replicated clusters")
_TIME = refused("Timestamptz fields")
_COLLECTION_ID = use("refused when not the collection's id (its name now names another)")
_ITERATOR = use("an iterator's pages read at its first page's timestamp")
_WHERE = {"timezone": _TIME, "time_fields": _TIME, "cluster_id": _CLUSTER}

SEARCH_KEYS: dict[str, Rule] = {
    "topk": use(),
    "offset": use(),
    "round_decimal": use(),
    "params": use("the index's search parameters (nprobe, ef, radius, range_filter, ...)"),
    "metric_type": use(),
    "anns_field": use(),
    "ignore_growing": _GROWING,
    "iterator": _ITERATOR,
    "collection_id": _COLLECTION_ID,
    "search_iter_v2": use(),
    "search_iter_id": use(),
    "search_iter_last_bound": use(),
    "search_iter_batch_size": use("the page size of an iterator v2's page, as Milvus takes it"),
    "group_by_field": use(),
    "group_size": use(),
    "strict_group_size": use(),
    "group_by_fields": refused("grouping a search by several fields"),
    "order_by_fields": refused("sorting search results by fields"),
    "json_path": refused("grouping by a JSON path"),
    "json_type": refused("grouping by a JSON path"),
    "strict_cast": refused("grouping by a JSON path"),
    "hints": refused("index search hints such as iterative_filter"),
    "analyzer_name": refused("choosing one of a field's analyzers"),
    **_WHERE,
}
_SUB_ONLY = harmless("Milvus reads it from the hybrid search's rank_params only")
SUB_KEYS: dict[str, Rule] = {
    "topk": use(),
    "params": use("the index's search parameters"),
    "metric_type": use(),
    "anns_field": use(),
    "offset": _SUB_ONLY,
    "round_decimal": harmless("pymilvus sends the hybrid search's own; rank_params' is applied"),
    "group_by_field": _SUB_ONLY,
    "group_size": _SUB_ONLY,
    "strict_group_size": _SUB_ONLY,
    "ignore_growing": _GROWING,
    "hints": SEARCH_KEYS["hints"],
    "analyzer_name": SEARCH_KEYS["analyzer_name"],
    "group_by_fields": SEARCH_KEYS["group_by_fields"],
    "order_by_fields": SEARCH_KEYS["order_by_fields"],
    **_WHERE,
}
RANK_KEYS: dict[str, Rule] = {
    "strategy": use("rrf or weighted"),
    "params": use("the ranker's parameters (k, weights, norm_score)"),
    "limit": use(),
    "offset": use(),
    "round_decimal": use(),
    "group_by_field": use(),
    "group_size": use(),
    "strict_group_size": use(),
    "iterator": _ITERATOR,
    "rank_group_scorer": refused("choosing how a group's score is computed"),
    "cluster_id": _CLUSTER,
}
QUERY_KEYS: dict[str, Rule] = {
    "limit": use(),
    "offset": use(),
    "iterator": _ITERATOR,
    "collection_id": _COLLECTION_ID,
    "reduce_stop_for_best": harmless("rows come in primary-key order, what an iterator needs"),
    "ignore_growing": refused("querying sealed segments only", truthy),
    "query_iter_last_pk": refused("element-level query iterators over ARRAY of STRUCT fields"),
    "query_iter_last_element_offset": refused(
        "element-level query iterators over ARRAY of STRUCT fields"
    ),
    "order_by_fields": use(),
    "group_by_fields": use(),
    **_WHERE,
}

# -- the requests ---------------------------------------------------------------------------
_TRAVEL = harmless("Milvus's proxy no longer reads it (time travel ended in Milvus 2.3)")
_META = harmless("Milvus only passes it on to its own re-queries; no result changes")
_NAMESPACE = refused("namespaces")
_IDS = nested(
    Table(
        schema_pb2.IDs,
        {
            "int_id": nested(leaf(schema_pb2.LongArray)),
            "str_id": nested(leaf(schema_pb2.StringArray)),
        },
    ),
    "the primary keys whose stored vectors are the query vectors",
)
_BY_KEYS = use("deprecated flag; true without ids is refused")
_RERANK_FUNCTION = Table(
    schema_pb2.FunctionSchema,
    {
        "name": harmless("only names the function in Milvus's errors"),
        "id": harmless("Milvus assigns function ids; a request's is not read"),
        "description": harmless("a note for people"),
        "type": use("must be Rerank"),
        "input_field_names": use("decay's one numeric field; none for rrf, weighted, boost"),
        "input_field_ids": refused("input fields by id; name them"),
        "output_field_names": refused("output fields of a rerank function"),
        "output_field_ids": refused("output fields of a rerank function"),
        "params": keys({}, use("reranker decay|rrf|weighted|boost and its params (model refused)")),
    },
)
_RERANK = nested(
    Table(
        schema_pb2.FunctionScore,
        {
            "functions": nested(
                _RERANK_FUNCTION,
                "one rerank function, or several boost functions (elanus/rerankers.py)",
            ),
            "params": keys(
                {
                    "boost_mode": use("multiply | sum, of boost functions (elanus/boost.py)"),
                    "function_mode": use("multiply | sum, of boost functions"),
                }
            ),
        },
    )
)
_HIGHLIGHT = nested(
    Table(
        common_pb2.Highlighter,
        {
            "type": refused(
                "SemanticHighlighter: a model picks its passages and Elanus reaches no model "
                "service; LexicalHighlighter is honoured"
            ),
            "params": keys(
                {
                    k: use("elanus/highlight.py")
                    for k in (
                        "pre_tags",
                        "post_tags",
                        "fragment_offset",
                        "fragment_size",
                        "num_of_fragments",
                        "highlight_search_text",
                        "highlight_query",
                    )
                }
            ),
        },
    ),
    "LexicalHighlighter on a search's BM25 text and TEXT_MATCH terms (milvus/highlight.py)",
)
_AGGREGATION = refused("search aggregation")
_CHAINS = refused("function chains")
_SUB_REQS = refused("several searches in one Search request; use HybridSearch")
_HYBRID = harmless("Milvus takes the hybrid search's own")


def _search(**own: Rule) -> dict[str, Rule]:
    """The rules of a ``SearchRequest`` (a Search, or a hybrid search's sub-request)."""
    return {
        "base": BASE,
        "dsl": use("the filter expression"),
        "placeholder_group": serialized(PLACEHOLDER_GROUP, "the query vectors or texts"),
        "dsl_type": use("a boolean expression (BoolExprV1), as pymilvus sends"),
        "travel_timestamp": _TRAVEL,
        "nq": use("must match the query vectors"),
        "not_return_all_meta": _META,
        "sub_reqs": _SUB_REQS,
        "expr_template_values": TEMPLATES,
        "function_score": _RERANK,
        "namespace": _NAMESPACE,
        "highlighter": _HIGHLIGHT,
        "search_aggregation": _AGGREGATION,
        "function_chains": _CHAINS,
        **own,
    }


SEARCH = Table(
    milvus_pb2.SearchRequest,
    _search(
        db_name=DB,
        collection_name=NAME,
        partition_names=use(),
        output_fields=use(),
        search_params=keys(SEARCH_KEYS),
        guarantee_timestamp=use(),
        consistency_level=use(),
        use_default_consistency=use(),
        ids=_IDS,
        search_by_primary_keys=_BY_KEYS,
    ),
)
SUB_SEARCH = Table(
    milvus_pb2.SearchRequest,
    _search(
        db_name=_HYBRID,
        collection_name=_HYBRID,
        partition_names=_HYBRID,
        output_fields=_HYBRID,
        search_params=keys(SUB_KEYS),
        guarantee_timestamp=_HYBRID,
        consistency_level=_HYBRID,
        use_default_consistency=_HYBRID,
        ids=_IDS,
        search_by_primary_keys=_BY_KEYS,
        function_score=refused("rerank functions on one request of a hybrid search"),
        highlighter=refused(
            "highlighting one request of a hybrid search, which Milvus does not do either"
        ),
    ),
)
"""A hybrid search's sub-request: Milvus reads its filter, vectors and search parameters
and takes the rest from the hybrid search."""

HYBRID_SEARCH = Table(
    milvus_pb2.HybridSearchRequest,
    {
        "base": BASE,
        "db_name": DB,
        "collection_name": NAME,
        "partition_names": use(),
        "requests": nested(SUB_SEARCH),
        "rank_params": keys(RANK_KEYS),
        "travel_timestamp": _TRAVEL,
        "guarantee_timestamp": use(),
        "not_return_all_meta": _META,
        "output_fields": use(),
        "consistency_level": use(),
        "use_default_consistency": use(),
        "function_score": _RERANK,
        "namespace": _NAMESPACE,
        "function_chains": _CHAINS,
    },
)
QUERY = Table(
    milvus_pb2.QueryRequest,
    {
        "base": BASE,
        "db_name": DB,
        "collection_name": NAME,
        "expr": use(),
        "output_fields": use(),
        "partition_names": use(),
        "travel_timestamp": _TRAVEL,
        "guarantee_timestamp": use(),
        "query_params": keys(QUERY_KEYS),
        "not_return_all_meta": _META,
        "consistency_level": use(),
        "use_default_consistency": use(),
        "expr_template_values": TEMPLATES,
        "namespace": _NAMESPACE,
    },
)
READS = {"Search": SEARCH, "HybridSearch": HYBRID_SEARCH, "Query": QUERY}
