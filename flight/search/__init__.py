"""The proxy's read side: search, query and count (``service``), what is checked of a body
beyond its record (``bodies``; the records are ``elanus/ops/search.py`` and ``reads.py``),
checks against the collection (``check``), reusable search plans (``plan``), query vectors
(``vectors``), query aggregation (``aggregate``), full-text search (``text``), hybrid
search (``hybrid``), results (``hits``; which outputs a read returns and how a row looks
is ``elanus/outputs.py``, shared with the SDK) and read plans for snapshot reads
(``readplan``).

The rest of the proxy uses what is exported here; the modules of this package call one
another's public names only (``tests/test_layout_rules.py`` checks it)."""

from elanus.flight.search.aggregate import AggregatePlan, aggregate_plan, is_aggregate
from elanus.flight.search.bodies import search_command
from elanus.flight.search.hits import hits_table
from elanus.flight.search.hybrid import fused_hits, hybrid_search, searched_as_hybrid
from elanus.flight.search.readplan import ReadPlan, ReadService, check_ticket
from elanus.flight.search.service import QueryService

__all__ = [
    "AggregatePlan",
    "QueryService",
    "aggregate_plan",
    "ReadPlan",
    "ReadService",
    "check_ticket",
    "fused_hits",
    "hits_table",
    "hybrid_search",
    "is_aggregate",
    "search_command",
    "searched_as_hybrid",
]
