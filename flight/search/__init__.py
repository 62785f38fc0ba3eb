"""The proxy's read side: search, query and count (``service``), request-body checks
(``bodies``), checks against the collection (``check``), reusable search plans (``plan``),
query vectors (``vectors``), query aggregation (``aggregate``), full-text search
(``text``), hybrid search (``hybrid``), results (``hits``; which outputs a read returns and
how a row looks is ``elanus/outputs.py``, shared with the SDK) and read plans for snapshot
reads (``readplan``).

The rest of the proxy uses what is exported here; the modules of this package call one
another's public names only (``tests/test_layout_rules.py`` checks it)."""

from elanus.flight.search.aggregate import AggregatePlan, aggregate_plan, is_aggregate
from elanus.flight.search.bodies import (
    GROUP_KEYS,
    MAX_NQ,
    MAX_TOPK,
    READ_KEYS,
    check_search_stream,
    partition_names,
    read_options,
    search_data,
    search_options,
    search_queries,
)
from elanus.flight.search.hits import hits_table
from elanus.flight.search.hybrid import (
    check_hybrid,
    hybrid_search,
    search_as_hybrid,
    searched_as_hybrid,
)
from elanus.flight.search.readplan import ReadPlan, ReadService, check_ticket
from elanus.flight.search.service import QueryService

__all__ = [
    "AggregatePlan",
    "GROUP_KEYS",
    "MAX_NQ",
    "MAX_TOPK",
    "READ_KEYS",
    "QueryService",
    "aggregate_plan",
    "ReadPlan",
    "ReadService",
    "check_hybrid",
    "check_search_stream",
    "check_ticket",
    "hits_table",
    "hybrid_search",
    "is_aggregate",
    "partition_names",
    "read_options",
    "search_as_hybrid",
    "search_data",
    "searched_as_hybrid",
    "search_options",
    "search_queries",
]
