"""Query aggregation: ``group_by_fields`` with ``count(*)``, ``sum``, ``avg``, ``min`` and
``max`` output fields (Milvus 2.6's aggregating query).

The proxy reads each shard's matching rows (only the grouped and aggregated columns) and
aggregates them once over all shards, so an average is the sum over all rows divided by
their count, never an average of per-shard averages. A result row is one group, ordered by
its keys; a query's limit and offset page over groups.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from elanus.datatypes import DataType
from elanus.errors import invalid
from elanus.flight.metacache import CollectionInfo
from elanus.flight.search.check import group_field
from elanus.outputs import AGGREGATE_CALL, COUNT, is_aggregate
from elanus.schema import Field

_ARROW = {"count": "count", "sum": "sum", "avg": "mean", "min": "min", "max": "max"}


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """One aggregate output: ``func`` over ``field`` (None for ``count(*)``), as ``name``."""

    func: str
    field: Field | None
    name: str

    def result_field(self) -> Field:
        """The reply column's type: counts and integer sums Int64, averages and float
        sums Double, min and max their field's own type."""
        if self.func == "count":
            return Field(self.name, DataType.INT64)
        assert self.field is not None
        dtype = self.field.dtype
        if self.func == "avg" or (self.func == "sum" and not _is_int(dtype)):
            dtype = DataType.DOUBLE
        elif self.func == "sum":
            dtype = DataType.INT64
        return Field(self.name, dtype, max_length=self.field.max_length, nullable=True)


@dataclasses.dataclass(frozen=True)
class AggregatePlan:
    keys: list[str]
    aggregates: list[Aggregate]
    outputs: list[str]

    @property
    def columns(self) -> list[str]:
        """The stored columns a shard must return for this aggregation."""
        names = [*self.keys, *(a.field.name for a in self.aggregates if a.field)]
        return list(dict.fromkeys(names))


def _is_int(dtype: DataType) -> bool:
    return dtype.is_scalar_number and dtype not in (DataType.FLOAT, DataType.DOUBLE)


def aggregate_plan(
    info: CollectionInfo, outputs: list[str], group_by: list[str]
) -> AggregatePlan | None:
    """The aggregation a query asks for, checked; None for a plain query (``count(*)``
    alone and no grouping keeps the plain counting path)."""
    calls = [n for n in outputs if is_aggregate(n)]
    if not group_by and calls in ([], [COUNT]):
        return None
    names = {f.name: f for f in info.schema.fields}
    keys: list[str] = []
    for key in group_by:
        group_field(info, key)  # a scalar field Milvus groups by, as for search
        if key in keys:
            raise invalid(f"query: group_by field {key!r} is given twice")
        keys.append(key)
    aggregates = [_aggregate(names, info.name, n) for n in calls]
    for name in outputs:
        if not is_aggregate(name) and name not in keys:
            raise invalid(
                f"query: output field {name!r} is neither a group_by field nor an aggregate "
                "(count(*), sum, avg, min, max) in an aggregating query"
            )
    if not aggregates and not keys:
        raise invalid("query: an aggregating query needs group_by fields or aggregates")
    return AggregatePlan(keys, aggregates, list(dict.fromkeys([*outputs] or keys)))


def _aggregate(names: dict[str, Field], collection: str, text: str) -> Aggregate:
    m = AGGREGATE_CALL.match(text)
    assert m is not None
    func, arg = m.group(1).lower(), m.group(2)
    if func == "count":
        if arg != "*":
            raise invalid(f"query: {text!r}: only count(*) is supported")
        return Aggregate("count", None, text)
    field = names.get(arg)
    if field is None:
        raise invalid(f"query: {text!r}: {arg!r} is not a field of {collection!r}")
    numeric = field.dtype.is_scalar_number
    if func in ("sum", "avg") and not numeric:
        raise invalid(
            f"query: {text!r}: {func} needs a numeric field, {arg!r} is {field.dtype.value}"
        )
    if not numeric and field.dtype != DataType.VARCHAR:
        raise invalid(
            f"query: {text!r}: {func} needs a numeric or VarChar field, "
            f"{arg!r} is {field.dtype.value}"
        )
    return Aggregate(func, field, text)


def aggregate(table: pa.Table, plan: AggregatePlan, offset: int, limit: int | None) -> pa.Table:
    """The groups of ``table`` (all shards' rows) with each aggregate, ordered by key."""
    specs: list[tuple[str, str] | tuple[str, str, pc.CountOptions]] = []
    source = table
    if any(a.func == "count" for a in plan.aggregates):
        source = table.append_column("__rows", pa.array([1] * table.num_rows, pa.int8()))
    out_names = []
    for a in plan.aggregates:
        if a.field is None:
            specs.append(("__rows", "count", pc.CountOptions(mode="all")))
            out_names.append("__rows_count")
        else:
            specs.append((a.field.name, _ARROW[a.func]))
            out_names.append(f"{a.field.name}_{_ARROW[a.func]}")
    grouped = source.group_by(plan.keys, use_threads=False).aggregate(specs)
    if plan.keys:
        grouped = grouped.sort_by([(k, "ascending") for k in plan.keys])
    columns: dict[str, pa.ChunkedArray] = {}
    for a, name in zip(plan.aggregates, out_names, strict=True):
        columns[a.name] = grouped.column(name).cast(a.result_field().arrow_type())
    for k in plan.keys:
        columns[k] = grouped.column(k)
    result = pa.table({n: columns[n] for n in plan.outputs})
    return result.slice(offset, limit)
