"""Search by primary keys (Milvus 2.6: ``search(ids=[...])``): the stored vectors of the
given keys, in the searched field, are the query vectors.

The proxy reads them as a query by ``ids`` does, in the partitions the search names and at
its consistency level; the search then runs pinned to the timestamp that read saw, so the
queries and the rows they are compared with come from one snapshot. Query ``i`` is the
vector of ``ids[i]``. As Milvus, a key that is not there (deleted, another partition) is
an error naming it, and so is a key given twice (Milvus refuses it too, in words that name
no key: milvus-io/milvus#46740).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.errors import ErrorCode, invalid
from elanus.flight.search.bodies import check_query_ids
from elanus.ops.reads import Query
from elanus.schema import DataType

if TYPE_CHECKING:
    from elanus.flight.search.plan import SearchPlan
    from elanus.flight.search.searcher import Searcher

_SHOWN = 10
"""Keys an error lists at most."""


def keyed_queries(service: Searcher, plan: SearchPlan, ids: list[Any]) -> tuple[SearchPlan, Any]:
    """(the plan pinned to the lookup's timestamp, the vectors of ``ids`` as
    ``search_data`` shapes them)."""
    info, field = plan.info, plan.field
    if plan.text_fn is not None:
        raise invalid(
            f"search: {field.name!r} is the output of BM25 function {plan.text_fn.name!r}; "
            "its vectors are not stored, so it cannot be searched by primary keys"
        )
    pk = info.schema.primary
    ids = check_query_ids(list(ids), pk, "search", ErrorCode.INVALID_ARGUMENT)
    keys = pa.array(ids, pk.arrow_type())
    counts = pc.value_counts(keys)
    twice = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(twice):
        raise invalid(f"search: 'ids' holds {_listed(twice.to_pylist())} more than once")
    reads = plan.request
    table, _, ts = service.query_table(
        info,
        Query(
            db=info.db,
            collection=info.name,
            ids=ids,
            output_fields=[field.name],
            consistency_level=reads.consistency_level,
            guarantee_timestamp=reads.guarantee_timestamp,
            session_ts=reads.session_ts,
            as_of=reads.as_of,
            partition_names=reads.partition_names,
        ),
        plan.read_ts,
    )
    rows = pc.index_in(keys, table.column(pk.name))
    if rows.null_count:
        missing = pc.filter(keys, pc.is_null(rows)).to_pylist()
        raise invalid(
            "search: some of the provided primary key IDs do not exist: missing IDs = "
            f"{_listed(missing)}"
        )
    column = table.column(field.name).take(rows).combine_chunks()
    if column.null_count:
        empty = pc.filter(keys, pc.is_null(column)).to_pylist()
        raise invalid(f"search: the rows of ids {_listed(empty)} hold no {field.name!r} vector")
    data: Any = column
    if field.dtype is DataType.BINARY_VECTOR:
        data = np.frombuffer(b"".join(column.to_pylist()), np.uint8).reshape(len(column), -1)
    pinned = dataclasses.replace(plan, read_ts=ts)
    return pinned, service.search_data(pinned, data)


def _listed(keys: list[Any]) -> str:
    shown = ", ".join(map(repr, keys[:_SHOWN]))
    return f"[{shown}{', ...' if len(keys) > _SHOWN else ''}]"
